// The pooling windows, shared by the CPU reference (src/cpu/pool.cpp) and the kernels
// (kernels/pool.cu) so that both pool over exactly the same elements.
#pragma once

#include <cstdint>

#include "kern/pool.h"
#include "kern/scalar_ops.h"

namespace sinter::kern {

// The average window of output (oh, ow) clipped to the input, [h0, h1) x [w0, w1), and the element
// count it divides by (Note [avg pool divisor] in src/kern/pool.inc).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

SINTER_HD inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

SINTER_HD inline AvgWindow avg_window(const Pool2dGeom& g, int64_t oh, int64_t ow) {
  int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  int64_t h1 = min_i64(h0 + g.kh, g.h + g.pad_h), w1 = min_i64(w0 + g.kw, g.w + g.pad_w);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = h0 > 0 ? h0 : 0;
  w0 = w0 > 0 ? w0 : 0;
  h1 = min_i64(h1, g.h);
  w1 = min_i64(w1, g.w);
  return {h0, h1, w0, w1, g.count_include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

// The position (ih * w + iw) in `plane` of the element max-pool window (oh, ow) takes: the first
// NaN, else the first maximum in row-major window order. `widen` turns a stored value into the type
// it is compared in (exact for every storage type, so both backends pick the same element). Every
// window holds at least one input element (the ops layer limits the padding, and refuses a dilated
// window that steps over the whole input).
// Whether a window element of value v replaces the best so far (position best, -1 for none, of
// value best_v): the first NaN, else the first maximum in window order.
template <class V>
SINTER_HD bool max_replaces(int64_t best, V best_v, V v) {
  // v != v: v is NaN (std::isnan is not there on the device for every type).
  return best < 0 || (best_v == best_v && (v > best_v || v != v));
}

template <class T, class Widen>
SINTER_HD int64_t max_window_argmax(const Pool2dGeom& g, const T* plane, int64_t oh, int64_t ow,
                                    Widen widen) {
  int64_t best = -1;
  decltype(widen(plane[0])) best_v = 0;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t ih = oh * g.stride_h - g.pad_h + i * g.dil_h;
    if (ih < 0 || ih >= g.h) continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t iw = ow * g.stride_w - g.pad_w + j * g.dil_w;
      if (iw < 0 || iw >= g.w) continue;
      const auto v = widen(plane[ih * g.w + iw]);
      if (max_replaces(best, best_v, v)) {
        best = ih * g.w + iw;
        best_v = v;
      }
    }
  }
  return best;
}

// The adaptive window of output o over `in` inputs along one dim with `out` outputs: [start, end).
SINTER_HD inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return o * in / out; }
SINTER_HD inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

// max_window_argmax over the adaptive window of output (oh, ow) (adaptive_avg_pool2d's).
template <class T, class Widen>
SINTER_HD int64_t adaptive_window_argmax(const Pool2dGeom& g, const T* plane, int64_t oh,
                                         int64_t ow, Widen widen) {
  const int64_t h0 = adaptive_start(oh, g.h, g.h_out), h1 = adaptive_end(oh, g.h, g.h_out);
  const int64_t w0 = adaptive_start(ow, g.w, g.w_out), w1 = adaptive_end(ow, g.w, g.w_out);
  int64_t best = -1;
  decltype(widen(plane[0])) best_v = 0;
  for (int64_t ih = h0; ih < h1; ++ih) {
    for (int64_t iw = w0; iw < w1; ++iw) {
      const auto v = widen(plane[ih * g.w + iw]);
      if (max_replaces(best, best_v, v)) {
        best = ih * g.w + iw;
        best_v = v;
      }
    }
  }
  return best;
}

}  // namespace sinter::kern
