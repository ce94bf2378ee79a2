#pragma once
// From a run-time value to the kernel instance of the same compile-time value: the sets are
// arch/instances.hpp's, written once, and every instance of them is compiled.
#include <cstddef>
#include <utility>

namespace engine::accel {

// f.template operator()<Set[i]>() for the i with Set[i] == v; a value-initialized result
// when v is not in the set.
template <const auto& Set, class F, std::size_t... I>
auto dispatch(int v, F&& f, std::index_sequence<I...>) {
  using R = decltype(f.template operator()<Set[0]>());
  R r{};
  (void)((v == Set[I] ? (r = f.template operator()<Set[I]>(), true) : false) || ...);
  return r;
}

template <const auto& Set, class F>
auto dispatch(int v, F&& f) {
  return dispatch<Set>(v, std::forward<F>(f), std::make_index_sequence<Set.size()>{});
}

// f.template operator()<I>() for every I < N.
template <std::size_t N, class F>
void for_each_index(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) { (f.template operator()<I>(), ...); }(std::make_index_sequence<N>{});
}

}  // namespace engine::accel
