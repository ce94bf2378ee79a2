// Vector-unit and attention instances: every lane count of arch::kVectorLanes with every exp
// table size of arch::kExpTableBits, for the three KV cache formats.
#include "arch/instances.hpp"
#include "engine/accel_dispatch.hpp"
#include "engine/accel_kernels.hpp"
#include "kernels/vector_unit.hpp"

namespace engine::accel {
namespace {

template <class A, int BITS>
AttentionKernels<BITS> attention_instance() {
  AttentionKernels<BITS> k;
  // Tokens' vectors at a stride of their width (the kernels' default stride).
  k.store = [](kernels::KvCache<BITS> cache, const float* kn, const float* vn, int tokens, int pos0, int head_dim) {
    kernels::kv_store<A, BITS>(cache, kn, vn, tokens, pos0, head_dim);
  };
  k.attend = [](float* out, const float* q, kernels::KvCache<BITS> cache, int tokens, int pos0, int n_heads,
                int head_dim, int head_begin, int head_end) {
    kernels::attention<A, BITS>(out, q, cache, tokens, pos0, n_heads, head_dim, head_begin, head_end);
  };
  return k;
}

template <int LANES, int EXP_BITS>
VectorKernels instance() {
  using V = kernels::VectorUnitConfig<LANES, EXP_BITS, kMaxDim>;
  using A = kernels::AttentionConfig<V, kMaxHeadDim, arch::kKvBlock, kMaxTokens, kMaxContext, kMaxHeads>;
  VectorKernels k;
  k.rmsnorm = &kernels::rmsnorm<V>;
  k.head_rmsnorm = &kernels::head_rmsnorm<V, kMaxHeads>;
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

}  // namespace

VectorKernels vector_kernels(int lanes, int exp_table_bits) {
  return dispatch<arch::kVectorLanes>(lanes, [&]<int LANES>() {
    return dispatch<arch::kExpTableBits>(exp_table_bits, [&]<int EXP_BITS>() { return instance<LANES, EXP_BITS>(); });
  });
}

}  // namespace engine::accel
