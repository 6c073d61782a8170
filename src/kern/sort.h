// The kernel interface of topk and searchsorted: in sinter::cpu (src/cpu/sort.cpp) and
// sinter::cudak (kernels/sort.cu), Note [kernel interfaces]; the order both rank a row's elements
// by, and the binary search both run.
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

// Note [searchsorted]
// The index at which v goes into an ascending row of m boundaries: PyTorch's binary search, step
// for step (the same midpoints), so that the result is PyTorch's even where the row is not sorted
// as asked or holds NaN (which torch.sort puts last). Left: the first position whose boundary is
// not below v (!(b >= v) moves right); right: the first whose boundary is above it (!(b > v)
// moves right). A NaN v compares false with everything and goes after every boundary (m). at(j)
// gives boundary j widened as v is.
template <class V, class At>
SINTER_HD inline int64_t searchsorted_index(const At& at, int64_t m, V v, bool right) {
  int64_t start = 0, end = m;
  while (start < end) {
    const int64_t mid = start + ((end - start) >> 1);
    const V b = at(mid);
    if (right ? !(b > v) : !(b >= v)) {
      start = mid + 1;
    } else {
      end = mid;
    }
  }
  return start;
}

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/sort.inc"
#include "kern/declare.h"
