// Instantiates every kernel template with a representative shape so that the compiler
// sees all of src/kernels under -Wall -Wextra -Werror -pedantic.
#include "kernels/attention.hpp"
#include "kernels/matrix_unit.hpp"
#include "kernels/numerics.hpp"
#include "kernels/vector_unit.hpp"

namespace {
using V = kernels::VectorUnitConfig<16, 8, 4096>;
using M = kernels::MatrixUnitConfig<32, 32, 128, 256, 4, 4096, 4096>;
using A = kernels::AttentionConfig<V, 128, 64, 4, 1024, 64>;
}  // namespace

void fpgallm_kernels_instantiate_all(float* x, const float* g, kernels::i8* q, const kernels::i8* w, const float* ws,
                                     float* y, kernels::i32* acc, const kernels::u8* p, const std::uint16_t* s4,
                                     kernels::KvCache<8> c8, kernels::KvCache<16> c16, kernels::KvCache<32> c32);
void fpgallm_kernels_instantiate_all(float* x, const float* g, kernels::i8* q, const kernels::i8* w, const float* ws,
                                     float* y, kernels::i32* acc, const kernels::u8* p, const std::uint16_t* s4,
                                     kernels::KvCache<8> c8, kernels::KvCache<16> c16, kernels::KvCache<32> c32) {
  // The arguments that are off-chip memory in a design (the tiled matrix unit's weights and
  // scales), declared as the emitted top declares its ports, so that the checker's burst
  // rule (--top) follows them into the kernels; the other pointers stand for on-chip arrays.
#pragma HLS INTERFACE m_axi port=w bundle=gmem_w
#pragma HLS INTERFACE m_axi port=ws bundle=gmem_ws
#pragma HLS INTERFACE m_axi port=p bundle=gmem_p
#pragma HLS INTERFACE m_axi port=s4 bundle=gmem_s4
  kernels::rmsnorm<V>(x, x, g, 100, 1e-5f);
  kernels::layernorm<V>(x, x, g, g, 100, 1e-5f);
  kernels::head_rmsnorm<V, 8>(x, g, 4, 32, 1e-6f);
  float sx = kernels::quantize_dynamic<V>(q, x, 100);
  kernels::quantize_static<V>(q, x, 0.5f, 100);
  kernels::softmax<V>(x, 100);
  kernels::swiglu<V>(x, g, 100);
  kernels::gelu<V>(x, 100);
  kernels::rope<V>(x, g, 100);
  kernels::residual_add<V>(x, g, 100);
  x[0] = static_cast<float>(kernels::argmax<V>(x, 100));
  kernels::matmul_w8a8<M>(w, ws, q, &sx, y, acc, 1, 100, 100, 100);
  kernels::matmul_w8a8<M>(w, ws, q, &sx, y, acc, 1, 100, 100, 100, g);
  kernels::matmul_w4a8<M>(p, s4, 32, q, &sx, y, 1, 100, 100, 100);
  kernels::matmul_w4a8<M>(p, s4, 32, q, &sx, y, 1, 100, 100, 100, g);
  kernels::requantize_i8<4096>(q, acc, ws, sx, 0.25f, 100);
  kernels::kv_store<A, 8>(c8, x, x, 1, 0, 8);
  kernels::attention<A, 8>(y, x, c8, 1, 0, 8, 8, 0, 8);
  kernels::kv_store<A, 16>(c16, x, x, 1, 0, 8);
  kernels::attention<A, 16>(y, x, c16, 1, 0, 8, 8, 0, 8);
  kernels::kv_store<A, 32>(c32, x, x, 1, 0, 8);
  kernels::attention<A, 32>(y, x, c32, 1, 0, 8, 8, 0, 8);
}

namespace {
using MV = kernels::MatrixVectorConfig<32, 32, 16, 4096, 4096>;
}  // namespace

void fpgallm_kernels_instantiate_stream(const kernels::PackedWord* w0, const kernels::i8* x, int rows, int cols);
void fpgallm_kernels_instantiate_stream(const kernels::PackedWord* w0, const kernels::i8* x, int rows, int cols) {
#pragma HLS INTERFACE m_axi port=w0 bundle=gmem_w0
  const kernels::MatrixWords m = kernels::matrix_words<MV>(rows, cols);
  kernels::Fifo<kernels::PackedWord> channel[MV::channels];
  kernels::Fifo<kernels::WeightStep<MV::step_words>> steps;
  kernels::Fifo<kernels::AccWord<MV::pe>> acc;
  for (int c = 0; c < MV::channels; ++c) kernels::read_weight_channel<MV>(w0, c * m.beats, m.beats, channel[c]);
  kernels::gather_weight_steps<MV>(channel, steps, m.groups, m.steps);
  kernels::matrix_vector_w8a8<MV>(steps, x, acc, rows, cols);
}
