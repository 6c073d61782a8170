// The kernel interface of topk: in sinter::cpu (src/cpu/sort.cpp) and sinter::cudak
// (kernels/sort.cu), Note [kernel interfaces]; and the order both rank a row's elements by.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kern/ctx.h"
#include "kern/scalar_ops.h"

namespace sinter::kern {

// Note [topk order]
// topk ranks a row's elements by a strict total order on (value, position) pairs, the same for
// largest and smallest first: NaN (any NaN) ranks as larger than every number, as in PyTorch, so
// NaNs lead the largest and trail the smallest; -0.0 equals +0.0; equal values, NaNs among them,
// go by the smaller position first. topk_before(a, i, b, j, largest) is true when value a at
// position i comes before value b at position j. Values are compared as stored, widened exactly
// (bf16 and f16 as float, integers as themselves).
template <class V>
SINTER_HD inline bool topk_before(V a, int64_t i, V b, int64_t j, bool largest) {
  if constexpr (std::is_floating_point_v<V>) {
    const bool an = a != a, bn = b != b;
    if (an || bn) return an && bn ? i < j : (largest ? an : bn);
  }
  if (a == b) return i < j;
  return largest ? a > b : a < b;
}

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/sort.inc"
#include "kern/declare.h"
