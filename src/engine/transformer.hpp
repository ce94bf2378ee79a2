#pragma once
// The fp32 reference forward pass of a Llama-family model, one token at a time with a KV
// cache, written in the order of llama2.c's run.c so that greedy output matches it; and
// the same pass batched over positions (transformer_block.cpp).
#include <functional>
#include <span>
#include <vector>

#include "model/model.hpp"

namespace engine {

// Positions per forward_block() call where perplexity and the prompt of generate run blocks:
// OpenBLAS packs every weight matrix once per call, so longer blocks read the weights less
// often (stories110m, one thread: 128 positions ran at 220 tokens per CPU second, 256 at
// 260-290, 512 no faster); the logits of a block take kBlockPositions x vocab floats.
inline constexpr int kBlockPositions = 256;

// One matrix-vector product of the forward pass: y[rows] = W[rows][cols] x[cols].
struct LinearCall {
  int layer;            // block index; -1 for the classifier
  model::Linear which;
  const float* x;
  float* y;
  int rows;
  int cols;
  int pos;              // position of the token being processed
};

// The same products for n positions at once: y[i] = W x[i], rows of x ldx floats apart and
// of y ldy apart (x [n][cols], y [n][rows]); pos0 is the first row's position.
struct LinearRows {
  int layer;            // block index; -1 for the classifier
  model::Linear which;
  const float* x;
  int ldx;
  float* y;
  int ldy;
  int n;
  int rows;
  int cols;
  int pos0;
};

class Transformer {
 public:
  // Keeps a reference to `m`, which must outlive the Transformer.
  explicit Transformer(const model::Model& m);
  virtual ~Transformer() = default;

  // Runs token at position pos (0-based, < seq_len) and returns the logits [vocab_size],
  // valid until the next call.
  // Virtual so that the accelerator backend (accel.hpp) replaces the whole pass.
  virtual const float* forward(int token, int pos);

  // Runs tokens[0..n) of one sequence at positions pos0..pos0+n-1 (pos0 + n <= seq_len),
  // writing the KV cache of all of them, attention causal within the block. Returns the
  // logits of rows logits_from..n-1 only, [n - logits_from][vocab] (row i for position
  // pos0+logits_from+i; logits_from = n-1: the last row alone); valid until the next call.
  // Where block_batched(), the products are matrix-matrix (OpenBLAS) and the logits equal
  // n forward() calls within fp32 reordering; elsewhere it makes those n forward() calls.
  const float* forward_block(std::span<const int> tokens, int pos0, int logits_from = 0);
  // The residual stream x [n][dim] entering block `layer` of a batched pass (layer =
  // n_layers: entering the final norm).
  using BlockInputFn = std::function<void(int layer, const float* x)>;
  // forward_block() (batched only, all rows' logits) from block first_layer on, x [n][dim]
  // being the residual stream entering it (first_layer = n_layers: the final norm's input;
  // 0 and null x: the embeddings). The blocks before are not run and their KV cache is not
  // written. Given x as a forward_block() of the same tokens has it there, the logits equal
  // that forward_block()'s bit for bit. `block_input` receives the stream entering each block
  // run (and the final norm).
  const float* forward_block_from(int first_layer, const float* x, std::span<const int> tokens, int pos0,
                                  const BlockInputFn& block_input = {});
  // Whether forward_block() runs batched: the plain fp32 reference (this class itself), and
  // a subclass that says so by overriding this (unless set_batched(false)). The batched pass
  // calls linear_rows() instead of linear() and on_kv_stored() for each row, so a subclass
  // that overrides linear() keeps the per-token pass unless it overrides linear_rows() too.
  virtual bool supports_block() const;
  bool block_batched() const { return batched_ && supports_block(); }
  // Whether the batched pass keeps forward()'s bits: attention with attention_head()'s
  // operations in its order for every output (several outputs side by side, head size a
  // multiple of 16; else row by row) instead of two GEMMs per head, for a subclass whose linear_rows() gives linear()'s
  // bits (simulated quantization, where a last-bit difference can move an int8 code).
  virtual bool block_keeps_token_bits() const { return false; }
  // false forces the per-token pass (eval --no-batch, for comparison).
  void set_batched(bool on) { batched_ = on; }

  // One position of each of several sequences, transformers[i] (each its own KV cache, all
  // of the same model) running tokens[i] at positions[i], as matrix-matrix products where
  // every one is a plain fp32 reference with block_batched() (else one forward() each).
  // Logits of sequence i are
  // transformers[i]'s, as forward() returns them, valid until its next call. Equal to a
  // forward() of each within fp32 reordering. A transformer appears at most once.
  static void forward_batch(std::span<Transformer* const> transformers, std::span<const int> tokens,
                            std::span<const int> positions, std::vector<const float*>& logits);

  // `windows` sequences of `length` tokens each (tokens [windows][length]), every one from
  // position 0, in one batched pass: its products matrix-matrix over all windows' rows,
  // attention causal within each window (window w's keys in this transformer's cache at
  // positions w x length ..; windows x length <= seq_len). Returns the logits of rows
  // logits_from..length-1 of each window, [windows][length - logits_from][vocab], valid
  // until the next call: each window's as a forward_block() of it alone, within fp32
  // reordering. Only where plain_batched().
  const float* forward_windows(std::span<const int> tokens, int windows, int length, int logits_from);
  // The plain fp32 reference running batched: what forward_windows and forward_batch run
  // (a subclass's products, KV hook or per-token bits are not run there).
  bool plain_batched() const;

  const model::Config& config() const { return model_.config; }
  const model::Model& model() const { return model_; }

 protected:
  // The matrix products; the reference multiplies by the model's fp32 weights. Simulated
  // quantization and the calibration pass override this.
  virtual void linear(const LinearCall& call);
  // The batched pass's products (forward_block): the reference multiplies by the fp32
  // weights in one GEMM (matmul_rows).
  virtual void linear_rows(const LinearRows& call);
  // Called after key and value of `layer` at `pos` are written to the cache (kv_dim each);
  // a KV-cache quantizer rounds them in place.
  virtual void on_kv_stored(int layer, int pos, float* k, float* v);

  const float* weight_of(int layer, model::Linear which) const;

 private:
  const float* run_block(std::span<const int> tokens, int pos0, int logits_from, int first_layer, const float* x_in,
                         const BlockInputFn* block_input);
  void ensure_cache();
  void check_input(int token, int pos) const;

  const model::Model& model_;
  bool batched_ = true;
  std::vector<float> x_, xb_, xb2_, hb_, hb2_, q_, att_, logits_;
  std::vector<float> key_cache_, value_cache_;  // [layer][seq_len][kv_dim]
  std::vector<float> block_logits_;             // forward_block's [n][vocab]
};

// y[rows] = W[rows][cols] x[cols] in fp32, rows split over threads; each row's sum is
// formed in a fixed order (independent of the thread count).
void matvec(const float* w, const float* x, float* y, int rows, int cols);
// matvec() of n inputs (rows ldx apart) into y (rows ldy apart), each output with matvec()'s
// bits; each group of four weight rows is read once for all n inputs.
void matvec_rows(const float* x, int ldx, int n, const float* w, int rows, int cols, float* y, int ldy);
// y[i][rows] (rows ldy apart) = W[rows][cols] x[i] (rows ldx apart) for i < n: one GEMM
// (OpenBLAS), on one thread for the matrices matvec keeps on one; one row is matvec itself
// (the same bits).
void matmul_rows(const float* x, int ldx, int n, const float* w, int rows, int cols, float* y, int ldy);

void rmsnorm(float* out, const float* x, const float* weight, int n, float eps);
void softmax(float* x, int n);
// The rest of the forward pass's vector work, in the order Transformer::forward runs it
// (the Python bindings reuse these for a torch model with the engine's numerics).
// Rotary embedding at `pos` on interleaved (even, odd) pairs of each head of q [q_dim] and,
// unless k is null, of k [kv_dim]. freq_factors [head_size/2], when given, divide each
// pair's frequency (Llama 3 RoPE scaling).
void rope(float* q, int q_dim, float* k, int kv_dim, int head_size, int pos, float theta,
          const float* freq_factors = nullptr);
// One head: scores of q against keys[t] (t < n_keys, rows `stride` floats apart) over
// sqrt(head_size), softmax into att [n_keys], out [head_size] = sum_t att[t] values[t].
void attention_head(const float* q, const float* keys, const float* values, std::size_t stride, int n_keys,
                    int head_size, float* att, float* out);
// gate[i] = silu(gate[i]) * up[i]
void swiglu(float* gate, const float* up, int n);

}  // namespace engine
