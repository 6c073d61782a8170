// The pooling windows, shared by the CPU reference (src/cpu/pool.cpp) and the kernels
// (kernels/pool.cu) so that both pool over exactly the same elements.
#pragma once

#include <cstdint>

#include "internal/kernels_pool.h"
#include "internal/scalar_ops.h"

namespace sinter::kern {

// The average window of output (oh, ow) clipped to the input, [h0, h1) x [w0, w1), and the element
// count it divides by (Note [avg pool divisor] in internal/kernels_pool.inc).
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

// The adaptive window of output o over `in` inputs along one dim with `out` outputs: [start, end).
SINTER_HD inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return o * in / out; }
SINTER_HD inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

}  // namespace sinter::kern
