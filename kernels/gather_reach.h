// The outputs each input position reaches, for the backward kernels that gather (one thread per
// input element, in output order: no atomics, Note [deterministic algorithms] in
// src/core/determinism.cpp): interpolate's (kernels/resample.cu) and adaptive max pooling's
// (kernels/pool.cu). Host code too, replayed by tests/test_gather_reach.cpp.
#pragma once

#include <cstdint>

#include "kern/pool_windows.h"
#include "kern/resample.h"

namespace sinter::kern {

// The outputs along dim k whose taps reach input position i: [*lo, *hi], empty when *lo > *hi.
// An output's taps are a contiguous run of input positions whose ends never decrease with the
// output, so the outputs that reach i are contiguous too: from the first whose last tap is at or
// past i, to the last whose first tap is at or before i.
template <class C>
SINTER_HD inline void resample_reach(const ResampleGeom& g, int k, int64_t i, int64_t* lo,
                                     int64_t* hi) {
  int64_t a = 0, b = g.out[k];
  while (a < b) {
    const int64_t m = a + (b - a) / 2;
    const ResampleTaps<C> t = resample_taps<C>(g, k, m);
    if (t.index[t.n - 1] >= i) {
      b = m;
    } else {
      a = m + 1;
    }
  }
  *lo = a;
  a = 0;
  b = g.out[k];
  while (a < b) {
    const int64_t m = a + (b - a) / 2;
    if (resample_taps<C>(g, k, m).index[0] > i) {
      b = m;
    } else {
      a = m + 1;
    }
  }
  *hi = a - 1;
}

// The summed weights of the taps of t at input position i (clamping can put several there).
template <class C>
SINTER_HD inline C resample_weight_at(const ResampleTaps<C>& t, int64_t i) {
  C w = C(0);
  for (int j = 0; j < t.n; ++j) w += t.index[j] == i ? t.weight[j] : C(0);
  return w;
}

// The outputs along one dim whose adaptive windows hold input position i: [*lo, *hi] (never
// empty: adaptive windows cover the input).
SINTER_HD inline void adaptive_reach(int64_t i, int64_t in, int64_t out, int64_t* lo, int64_t* hi) {
  *lo = i * out / in;
  const int64_t last = ((i + 1) * out + in - 1) / in - 1;
  *hi = last < out - 1 ? last : out - 1;
}

}  // namespace sinter::kern
