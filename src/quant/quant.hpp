#pragma once
// Quantized formats and quantizers: int8 per-channel and int4 per-group weights, int8
// dynamic/static activations, int8 KV cache, SmoothQuant, the per-layer Plan, and the
// QuantModel with its GGUF file. The arithmetic is specified in docs/quantization.md;
// the accelerator kernels implement the same, bit for bit on the integer paths.
// No dependency on the engine (the engine and calib use this).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/model.hpp"

namespace quant {

inline constexpr int kInt8Max = 127;  // int8 codes are -127..127
inline constexpr int kInt4Max = 7;    // int4 codes are -7..7

// ---- scalar semantics (docs/quantization.md section 1) ----

// Round to nearest integer, ties to even, then saturate to [-qmax, qmax].
std::int32_t round_saturate(float v, int qmax);
// The quantizer of one value with an fp32 scale: 0 when scale == 0, else
// round_saturate(v * (1.0f / scale), qmax).
std::int32_t quantize_value(float v, float scale, int qmax);
// amax / 127.0f (0 when amax == 0): activations.
float int8_scale(float amax);
// The int8 weight scale: the smallest fp16 value >= amax / 127.0f (capped at 65504; 0 when
// amax == 0), so that ggml's Q8_0 blocks hold it exactly and no code exceeds 127.
float int8_weight_scale(float amax);
// fp16 bits of amax / 7.0f, rounded ties to even, capped at 65504.
std::uint16_t int4_scale_f16(float amax);
float max_abs(std::span<const float> x);

// FNV-1a 64-bit hash of bytes (identifies the calibration text).
std::uint64_t fnv1a64(std::string_view bytes);

// ---- weights ----

enum class WeightFormat { f32, f16, int8, int4 };
enum class ActFormat { f32, f16, int8_dynamic, int8_static };
const char* to_string(WeightFormat f);
const char* to_string(ActFormat f);
WeightFormat weight_format_from_string(const std::string& s);  // throws std::invalid_argument
ActFormat act_format_from_string(const std::string& s);

// int8 codes [rows][cols] with one fp32 scale per row.
struct Int8Matrix {
  int rows = 0, cols = 0;
  std::vector<std::int8_t> q;
  std::vector<float> scale;  // [rows]
};
// int4 codes packed as in docs/quantization.md 2.2: rows padded to a multiple of 32
// columns, chunk byte b holds element b (low nibble) and b+16 (high nibble), nibble = q+8.
struct Int4Matrix {
  int rows = 0, cols = 0, group = 32;
  std::vector<std::uint8_t> packed;   // [rows][row_bytes()]
  std::vector<std::uint16_t> scale;   // fp16 bits [rows][groups()]
  int groups() const { return (cols + group - 1) / group; }
  int row_bytes() const { return (cols + 31) / 32 * 16; }
  int code(int r, int c) const;  // -7..7
  void set_code(int r, int c, int q);  // q in -7..7
};

// Throws std::invalid_argument on a non-finite weight or a bad group size.
Int8Matrix quantize_int8(std::span<const float> w, int rows, int cols);
Int4Matrix quantize_int4(std::span<const float> w, int rows, int cols, int group);
void dequantize(const Int8Matrix& m, std::span<float> out);
void dequantize(const Int4Matrix& m, std::span<float> out);

// The fp16 scale of one int4 group of n weights w, searched over clip ratios 1, 0.975, ...,
// 0.525 of max |w| (AWQ's clip grid): the one minimizing e^T H e, with H the group's
// [n][n] block of the layer's Hessian (row stride ld), or e^T e when h is null; e the
// round-trip error w - code * scale. Ties keep the larger ratio (ratio 1 is RTN's scale).
std::uint16_t search_int4_scale(const double* w, int n, const double* h, std::size_t ld);
// quantize_int4 with each group's scale from search_int4_scale; h is the layer's Hessian
// [cols][cols] or empty (unweighted error).
Int4Matrix quantize_int4_searched(std::span<const float> w, int rows, int cols, int group, std::span<const double> h);

// How int4 codes are chosen (docs/quantization.md section 11): round to nearest (rtn); AWQ
// (Lin et al., MLSys'24) per-input-channel scales folded into the preceding norm or linear,
// then rtn; GPTQ (Frantar et al., ICLR'23) second-order error compensation; AWQ then GPTQ.
enum class Method { rtn, awq, gptq, awq_gptq };
const char* to_string(Method m);  // "rtn", "awq", "gptq", "awq+gptq"
// Throws fpgallm::InputError("--method", ...) for an unknown name.
Method method_from_string(const std::string& s);

struct GptqOptions {
  double damp = 0.01;      // added to H's diagonal: damp * mean(diag H)
  bool act_order = false;  // columns in order of decreasing diag H
  bool search_scales = false;  // group scales by search_int4_scale (unweighted) instead of max |w| / 7
};
// GPTQ of one layer w [rows][cols] with h = sum over the calibration inputs of x x^T
// ([cols][cols], symmetric), into the layout of quantize_int4. A group's scales are fixed
// when the sweep first reaches one of its columns, from the error-updated weights (as the
// reference code with its block size equal to the group). Throws std::invalid_argument on
// a bad shape, a Hessian of the wrong size, or one not positive definite after dampening.
Int4Matrix gptq_int4(std::span<const float> w, int rows, int cols, int group, std::span<const double> h,
                     const GptqOptions& opt = {});
std::vector<std::uint16_t> to_f16(std::span<const float> w);

// ---- activations and the integer products (section 3-4) ----

// sum a[j] * b[j] over j < n in int32 (exact): the integer products' dot, vectorized for
// AVX2 where the CPU has it.
std::int32_t dot_int8(const std::int8_t* a, const std::int8_t* b, int n);
// The kernels of dot_int8_rows: the best this CPU has, or one named (for the tests).
//   vnni:  AVX-512 VNNI, 64 columns of 4 weight rows against 4 inputs per step;
//   avx2:  16 columns of 2 weight rows against 4 inputs per step (int16 widening, vpmaddwd);
//   plain: one dot_int8 per output.
enum class Int8Rows { best, vnni, avx2, plain };
bool int8_rows_supported(Int8Rows kernel);
// acc[i * rows + r] = dot_int8(w + r * cols, x + i * cols, cols) for r < rows, i < n (rows
// of w [rows][cols] against rows of x [n][cols]), exact with every kernel. Every weight and
// input load feeds several products. A kernel this CPU lacks throws std::invalid_argument.
void dot_int8_rows(const std::int8_t* w, int rows, const std::int8_t* x, int n, int cols, std::int32_t* acc,
                   Int8Rows kernel = Int8Rows::best);
// Dynamic per-token int8: writes codes, returns s_x.
float quantize_activation_dynamic(std::span<const float> x, std::span<std::int8_t> q);
// Static: codes for a fixed s_x (saturating).
void quantize_activation_static(std::span<const float> x, float s_x, std::span<std::int8_t> q);
// y[r] = (float(acc[r]) * s_w[r]) * s_x, acc in int32.
void linear_w8a8(const Int8Matrix& w, const std::int8_t* qx, float s_x, float* y);
// y[r] = (sum_k float(acc[r][k]) * s_w[r][k]) * s_x, groups in order, fp32.
void linear_w4a8(const Int4Matrix& w, const std::int8_t* qx, float s_x, float* y);
// The same products for n inputs at once (rows of qx [n][cols], their scales s_x[n]),
// writing y[i][r] at y + i * ldy + r: each weight row is read once for all n inputs, and
// every output has exactly the bits of the one-input call.
void linear_w8a8_rows(const Int8Matrix& w, const std::int8_t* qx, const float* s_x, int n, float* y, int ldy);
void linear_w4a8_rows(const Int4Matrix& w, const std::int8_t* qx, const float* s_x, int n, float* y, int ldy);
// In-place int8 round trip of one KV head vector (section 5).
void fake_quantize_int8(std::span<float> x);

// ---- plans ----

enum class Scheme { fp32, w8a8, w8a8_static, w8a8_smooth, w4a16, w4a8, mixed };
const char* to_string(Scheme s);
// Throws fpgallm::InputError("--scheme", ...) for an unknown name.
Scheme scheme_from_string(const std::string& s);

struct LayerPlan {
  int layer = 0;  // -1 for the classifier
  model::Linear which = model::Linear::wq;
  WeightFormat weight = WeightFormat::f32;
  ActFormat act = ActFormat::f32;
  float act_scale = 0;  // static s_x; 0 otherwise
};

struct Plan {
  Scheme scheme = Scheme::fp32;
  int group = 32;             // int4 group size
  bool kv8 = false;
  float smooth_alpha = -1;    // -1: no SmoothQuant
  std::vector<LayerPlan> layers;  // 7 per block in kBlockLinears order, then the classifier

  // Index of (layer, which) in `layers`.
  static std::size_t index(int n_layers, int layer, model::Linear which);
  LayerPlan& at(int layer, model::Linear which);
  const LayerPlan& at(int layer, model::Linear which) const;
};

// The uniform plan of a scheme (mixed: every layer fp16, to be refined by calib).
// act_scale stays 0; static schemes get it from calibration.
Plan uniform_plan(const model::Config& c, Scheme s, int group);
void to_json(nlohmann::json& j, const Plan& p);
Plan plan_from_json(const nlohmann::json& j, const model::Config& c);  // throws std::invalid_argument

// Bytes the layer's stored weights take in format f (codes plus scales).
std::uint64_t weight_bytes(const model::Config& c, model::Linear which, WeightFormat f, int group);
std::uint64_t linear_weight_bytes(const model::Config& c, const Plan& p);

// ---- calibration statistics and SmoothQuant ----

// Per-channel max |x| at each linear input site, over the calibration tokens.
struct ActStats {
  std::vector<std::vector<float>> attn_in;   // [layer][dim]: input of wq, wk, wv
  std::vector<std::vector<float>> attn_out;  // [layer][q_dim]: input of wo
  std::vector<std::vector<float>> ffn_in;    // [layer][dim]: input of w1, w3
  std::vector<std::vector<float>> ffn_hidden;  // [layer][hidden]: input of w2
  std::vector<float> final_in;               // [dim]: input of the classifier
  std::size_t tokens = 0;

  static ActStats zeros(const model::Config& c);
  const std::vector<float>& channel_max(int layer, model::Linear which) const;
  float amax(int layer, model::Linear which) const;
};

// SmoothQuant (section 6): scales wq/wk/wv and w1/w3 columns by s_j and divides the
// preceding norm weights by s_j, in place; rescales `stats` (attn_in, ffn_in) to the
// smoothed activations. The classifier is not touched.
void smooth(model::Model& m, ActStats& stats, float alpha);

// Sums of x x^T (double, [cols][cols] row-major) at each linear input site over the
// calibration tokens; a site not recorded is empty.
struct Hessians {
  enum Site { attn_in, attn_out, ffn_in, ffn_hidden };  // wq/wk/wv, wo, w1/w3, w2
  std::vector<std::vector<std::vector<double>>> block;  // [layer][Site]
  std::vector<double> final_in;                         // the classifier's input
  std::size_t tokens = 0;

  static Hessians empty(const model::Config& c);
  static Site site_of(model::Linear which);
  std::vector<double>& of(int layer, model::Linear which);
  const std::vector<double>& of(int layer, model::Linear which) const;
};

// What AWQ chose at one site: the exponent of s_j = a_j^ratio (a_j the RMS input of
// channel j) and the Hessian-weighted output error of its linears before and after.
struct AwqSite {
  int layer;
  std::string site;  // "attn_in" (wq,wk,wv), "v->o", "ffn_in" (w1,w3), "up->down" (w3 rows, w2 columns)
  double ratio, error_rtn, error_awq;
};
// AWQ (Lin et al.): per block, per-input-channel scales searched on a grid of ratios to
// minimize sum_r e_r^T H e_r (e the int4 round-trip error of a scaled row, in the
// original coordinates), folded into attn_norm / ffn_norm, into wv rows for wo (per
// key/value head, shared by the query heads that read it) and into w3 rows for w2.
// `h` from the fp32 model; m changed in place. The classifier is not touched.
std::vector<AwqSite> awq(model::Model& m, const Hessians& h, int group);

// ---- the quantized model ----

struct QuantLinear {
  WeightFormat format = WeightFormat::f32;
  int rows = 0, cols = 0;
  std::vector<float> f32;          // format f32
  std::vector<std::uint16_t> f16;  // format f16
  Int8Matrix int8;
  Int4Matrix int4;

  // The weights as fp32 (quantize-dequantize), [rows][cols].
  std::vector<float> dequantized() const;
  std::uint64_t bytes() const;
};

struct QuantModel {
  model::Config config;
  Plan plan;
  std::vector<float> token_embedding;                  // fp32 [vocab][dim]
  std::vector<std::vector<float>> attn_norm, ffn_norm;  // fp32, folded if smoothed
  std::vector<float> final_norm;
  // Per block, fp32 as in model::LayerWeights, empty when the config has none: the q/k/v
  // biases (qkv_bias) and the per-head q/k norm gains (qk_norm).
  std::vector<std::vector<float>> bq, bk, bv, q_norm, k_norm;
  std::vector<QuantLinear> linears;  // Plan::layers order
  // The calibration text (file name and FNV-1a 64 of its bytes), so that evaluating on
  // the same file can report the held-out half only.
  std::string calibration_file;
  std::uint64_t calibration_fnv1a = 0;

  const QuantLinear& linear(int layer, model::Linear which) const;
  std::uint64_t linear_weight_bytes() const;
  // An fp32 model whose weights are the dequantized ones (for the reference engine).
  model::Model dequantized_model() const;
};

// One layer's weights [rows][cols] in format f.
QuantLinear quantize_linear(std::span<const float> w, int rows, int cols, WeightFormat f, int group);

// Quantizes m's weights by plan (m already smoothed when plan.smooth_alpha >= 0).
QuantModel quantize_model(const model::Model& m, const Plan& plan);

// GGUF file, docs/quantization.md section 8: llama.cpp loads it as a llama, qwen2 or qwen3
// model (with the metadata of the llama2.c tokenizer or else the byte-level BPE vocabulary
// given); fpgallm reads the plan's exact codes and scales
// back. save is atomic; load throws InputError.
void save_gguf(const QuantModel& qm, const std::string& path, const model::Tokenizer* tokenizer = nullptr,
               const model::BpeTokenizer* bpe = nullptr);
QuantModel load_gguf(const std::string& path);
// Whether path is a GGUF file that save_gguf wrote (it has fpgallm.quant.* keys).
bool is_quantized_gguf(const std::string& path);

}  // namespace quant
