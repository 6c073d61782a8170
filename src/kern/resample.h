// The kernel interface of interpolate (src/ops/resample.cpp), in sinter::cpu (src/cpu/resample.cpp)
// and sinter::cudak (kernels/resample.cu), Note [kernel interfaces]; and the source taps of an
// output position, one host-and-device function that both backends and the tests run.
#pragma once

#include <cstdint>

#include "kern/ctx.h"
#include "kern/scalar_ops.h"

namespace sinter::kern {

// How an output position reads the input along one dim: one tap (nearest, nearest-exact), two
// (linear) or four (cubic, A = -0.75).
enum class ResampleMode : int { Nearest, NearestExact, Linear, Cubic };

// One resampling of `planes` independent volumes (N * C of an (N, C, *) tensor), (in[0], in[1],
// in[2]) -> (out[0], out[1], out[2]); a 1-D or 2-D resampling has its missing leading dims of size
// 1 in and out. scale[k] > 0 is the caller's scale factor of dim k, 0 when there is none (Note
// [resample coordinates]).
struct ResampleGeom {
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  double scale[3] = {0, 0, 0};
  ResampleMode mode = ResampleMode::Nearest;
  bool align_corners = false;
};

// The input positions an output position reads along one dim, and their weights.
template <class C>
struct ResampleTaps {
  int n = 0;
  int64_t index[4] = {0, 0, 0, 0};
  C weight[4] = {0, 0, 0, 0};
};

// Note [resample coordinates]
// PyTorch's upsample kernels, to the rounding. C, the type of the coordinates and weights, is
// double for f64 tensors and float for the others (PyTorch's opmath type). Along a dim of in ->
// out:
//   ratio = (in - 1) / (out - 1) with align_corners (0 when out == 1), else 1 / scale when the
//           caller gave a scale factor (not in / out: an output size floor(in * scale) rounds),
//           else in / out; each as C.
//   nearest:       floor(ratio o)                           (the index is floored as a float)
//   nearest-exact: floor(max(ratio (o + 0.5) - 0.5, 0) + 0.5)
//   linear, cubic: src = ratio o with align_corners, else ratio (o + 0.5) - 0.5, clamped at 0 for
//                  linear only; i0 = floor(src), t = clamp(src - i0, 0, 1); linear reads i0 and
//                  i0 + 1 with weights 1 - t and t, cubic i0 - 1 .. i0 + 2 with Keys' weights.
// Every index is clamped into [0, in). A dim with in == out is the identity for linear whatever the
// scale (PyTorch's own shortcut), and for every mode without a scale factor, where the formulas
// give the identity too: one tap of weight 1.
template <class C>
SINTER_HD inline C resample_ratio(int64_t in, int64_t out, double scale, bool align_corners) {
  if (align_corners) return out > 1 ? static_cast<C>(in - 1) / static_cast<C>(out - 1) : C(0);
  if (scale > 0) return static_cast<C>(1.0 / scale);
  return static_cast<C>(in) / static_cast<C>(out);
}

SINTER_HD inline int64_t resample_clamp(int64_t i, int64_t in) {
  return i < 0 ? 0 : (i > in - 1 ? in - 1 : i);
}

// Keys' cubic convolution kernel with A = -0.75 (PyTorch's): at distance x <= 1 from the tap, and
// at 1 < x < 2.
template <class C>
SINTER_HD inline C cubic_near(C x) {
  const C a = C(-0.75);
  return ((a + C(2)) * x - (a + C(3))) * x * x + C(1);
}
template <class C>
SINTER_HD inline C cubic_far(C x) {
  const C a = C(-0.75);
  return ((a * x - C(5) * a) * x + C(8) * a) * x - C(4) * a;
}

// The weights of the four taps i0 - 1 .. i0 + 2 at fraction t past i0.
template <class C>
SINTER_HD inline void cubic_weights(C t, C* w) {
  w[0] = cubic_far(t + C(1));
  w[1] = cubic_near(t);
  w[2] = cubic_near(C(1) - t);
  w[3] = cubic_far(C(1) - t + C(1));
}

// The taps of output position o along dim k of g (Note [resample coordinates]).
template <class C>
SINTER_HD inline ResampleTaps<C> resample_taps(const ResampleGeom& g, int k, int64_t o) {
  const int64_t in = g.in[k], out = g.out[k];
  ResampleTaps<C> t;
  if (in == out && (g.mode == ResampleMode::Linear || g.scale[k] <= 0)) {
    t.n = 1;
    t.index[0] = o;
    t.weight[0] = C(1);
    return t;
  }
  const C ratio = resample_ratio<C>(in, out, g.scale[k], g.align_corners);
  const C oc = static_cast<C>(o);
  if (g.mode == ResampleMode::Nearest || g.mode == ResampleMode::NearestExact) {
    float f;
    if (g.mode == ResampleMode::Nearest) {
      f = static_cast<float>(ratio * oc);
    } else {
      C src = ratio * (oc + C(0.5)) - C(0.5);
      src = src < C(0) ? C(0) : src;
      f = static_cast<float>(static_cast<double>(src) + 0.5);
    }
    t.n = 1;
    t.index[0] = resample_clamp(static_cast<int64_t>(::floorf(f)), in);
    t.weight[0] = C(1);
    return t;
  }
  const bool cubic = g.mode == ResampleMode::Cubic;
  C src = g.align_corners ? ratio * oc : ratio * (oc + C(0.5)) - C(0.5);
  if (!cubic && src < C(0)) src = C(0);
  int64_t i0 = static_cast<int64_t>(::floorf(static_cast<float>(src)));
  i0 = i0 < in - 1 ? i0 : in - 1;
  C frac = src - static_cast<C>(i0);
  frac = frac < C(0) ? C(0) : (frac > C(1) ? C(1) : frac);
  if (cubic) {
    t.n = 4;
    cubic_weights(frac, t.weight);
    for (int j = 0; j < 4; ++j) t.index[j] = resample_clamp(i0 - 1 + j, in);
  } else {
    t.n = 2;
    t.index[0] = i0;
    t.index[1] = i0 < in - 1 ? i0 + 1 : i0;
    t.weight[0] = C(1) - frac;
    t.weight[1] = frac;
  }
  return t;
}

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/resample.inc"
#include "kern/declare.h"
