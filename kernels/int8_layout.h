// The index math of the int8 family's CUDA kernels around the GEMM (kernels/int8.cu, Note [int8
// kernels] in src/kern/int8.h): padded rows, a convolution's windows and where the epilogue writes.
// Written once for the kernels and for the CPU suite's replay of a whole layer
// (tests/test_int8_mma.cpp), which runs these same functions for every element and compares the
// result with the CPU kernels. No CUDA header: a host compiler reads this file too.
#pragma once

#include <cstdint>

#include "kern/conv.h"
#include "kern/int8.h"

namespace sinter::cudak::int8layout {

// A padded row's bytes: k rounded up to kern::kInt8RowAlign.
SINTER_HD inline int64_t row_bytes(int64_t k) {
  return (k + kern::kInt8RowAlign - 1) / kern::kInt8RowAlign * kern::kInt8RowAlign;
}

// Element e of the padded copy (rows, row_bytes(k)) of w (rows, k): its value, 0 in the padding.
SINTER_HD inline int8_t padded_weight(const int8_t* w, int64_t k, int64_t e) {
  const int64_t kp = row_bytes(k), r = e / kp, p = e % kp;
  return p < k ? w[r * k + p] : int8_t{0};
}

// Element e of the quantized, padded input rows (rows, row_bytes(k)) of x (rows, k).
SINTER_HD inline int8_t padded_input(const float* x, float scale, int64_t k, int64_t e) {
  const int64_t kp = row_bytes(k), r = e / kp, p = e % kp;
  return p < k ? static_cast<int8_t>(kern::quantize_int8(x[r * k + p], scale)) : int8_t{0};
}

// The GEMM's A operand of a convolution, one group at a time, for the output pixels row0 ..
// row0 + rows - 1 of all the images, numbered img * (h_out w_out) + pixel: rows of
// row_bytes(taps) columns, column t = (ci, i, j) of the group's taps (c_in / groups * kh * kw).
// Element e (row row0 + e / row_bytes(taps)): the quantized input qx (n, c_in, h, w) under that
// tap, 0 in the padding of the image and of the row.
SINTER_HD inline int8_t window_value(const kern::Conv2dGeom& g, const int8_t* qx, int64_t row0,
                                     int64_t grp, int64_t e) {
  const int64_t cig = g.c_in / g.groups, taps = cig * g.kh * g.kw, kp = row_bytes(taps);
  const int64_t r = row0 + e / kp, t = e % kp;
  if (t >= taps) return 0;
  const int64_t hw = g.h_out * g.w_out, img = r / hw, pix = r % hw;
  const int64_t oh = pix / g.w_out, ow = pix % g.w_out;
  const int64_t ci = t / (g.kh * g.kw), i = t / g.kw % g.kh, j = t % g.kw;
  const int64_t ih = oh * g.stride_h - g.pad_h + i * g.dil_h;
  const int64_t iw = ow * g.stride_w - g.pad_w + j * g.dil_w;
  if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return 0;
  return qx[((img * g.c_in + grp * cig + ci) * g.h + ih) * g.w + iw];
}

// Where the epilogue of c (rows, c_out / groups) of group grp, pixels from row0 (numbered as in
// window_value), writes element (r, j) in y (n, c_out, h_out, w_out).
SINTER_HD inline int64_t conv_out_index(const kern::Conv2dGeom& g, int64_t row0, int64_t grp,
                                        int64_t r, int64_t j) {
  const int64_t hw = g.h_out * g.w_out, cog = g.c_out / g.groups, pixel = row0 + r;
  return ((pixel / hw) * g.c_out + grp * cog + j) * hw + pixel % hw;
}

// The output pixels a convolution takes in one pass: its A operand and sums, row_bytes(taps) +
// 4 cog bytes a pixel, kept under max_bytes and at most max_rows; at least one.
inline int64_t conv_rows_per_pass(const kern::Conv2dGeom& g, int64_t max_bytes, int64_t max_rows) {
  const int64_t cig = g.c_in / g.groups, cog = g.c_out / g.groups;
  const int64_t per_row = row_bytes(cig * g.kh * g.kw) + 4 * cog;
  const int64_t total = g.n * g.h_out * g.w_out;
  int64_t rows = max_bytes / per_row;
  if (rows > max_rows) rows = max_rows;
  if (rows > total) rows = total;
  return rows < 1 ? 1 : rows;
}

}  // namespace sinter::cudak::int8layout
