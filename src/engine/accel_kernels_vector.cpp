// Vector-unit and attention instances: every lane count of kUnitSizes with every exp table
// size of kExpTableBits, for the three KV cache formats.
#include "engine/accel_kernels.hpp"
#include "kernels/vector_unit.hpp"

namespace engine::accel {
namespace {

template <class A, int BITS>
AttentionKernels<BITS> attention_instance() {
  AttentionKernels<BITS> k;
  k.store = &kernels::kv_store<A, BITS>;
  k.attend = &kernels::attention<A, BITS>;
  return k;
}

template <int LANES, int EXP_BITS>
VectorKernels instance() {
  using V = kernels::VectorUnitConfig<LANES, EXP_BITS, kMaxDim>;
  using A = kernels::AttentionConfig<V, kMaxHeadDim, kKvBlock, kMaxTokens, kMaxContext, kMaxHeads>;
  VectorKernels k;
  k.rmsnorm = &kernels::rmsnorm<V>;
  k.quantize_dynamic = &kernels::quantize_dynamic<V>;
  k.quantize_static = &kernels::quantize_static<V>;
  k.residual_add = &kernels::residual_add<V>;
  k.swiglu = &kernels::swiglu<V>;
  k.rope = &kernels::rope<V>;
  k.argmax = &kernels::argmax<V>;
  k.kv8 = attention_instance<A, 8>();
  k.kv16 = attention_instance<A, 16>();
  k.kv32 = attention_instance<A, 32>();
  return k;
}

template <int LANES>
VectorKernels by_exp(int exp_bits) {
  switch (exp_bits) {
    case 6: return instance<LANES, 6>();
    case 8: return instance<LANES, 8>();
    case 10: return instance<LANES, 10>();
    default: return {};
  }
}

}  // namespace

VectorKernels vector_kernels(int lanes, int exp_table_bits) {
  switch (lanes) {
    case 8: return by_exp<8>(exp_table_bits);
    case 16: return by_exp<16>(exp_table_bits);
    case 32: return by_exp<32>(exp_table_bits);
    case 64: return by_exp<64>(exp_table_bits);
    default: return {};
  }
}

}  // namespace engine::accel
