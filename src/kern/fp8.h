// The kernel interface of FP8 training's GEMM (sinter::fp8::gemm on CUDA tensors; Note [fp8 gemm]
// in src/fp8/fp8.cpp): kernels/gemm_fp8.cu. The CPU computes the same formulas with tensor ops in
// src/fp8/fp8.cpp.
#pragma once

#include <cstdint>

#include "kern/ctx.h"
#include "kern/float8.h"
#include "sinter/core/dtype.h"

namespace sinter::kern {

// out (m, n) = a (m, k) b (n, k)^T from FP8 codes, both row-major with k contiguous (K-major), and
// their f32 inverse scales: row r of a takes row r / a_tile_rows of a_scale_inv (b likewise), whose
// scale_cols columns are one scale over the whole of K (scale_cols 1) or one per 128 of K
// (kFp8ScaleBlock; the block recipe). All pointers on the kernel's device.
constexpr int64_t kFp8ScaleBlock = 128;
struct Fp8GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  DType a_type = DType::f8e4m3, b_type = DType::f8e4m3;
  int64_t m = 0, n = 0, k = 0;
  const float* a_scale_inv = nullptr;
  const float* b_scale_inv = nullptr;
  int64_t a_tile_rows = 1, b_tile_rows = 1, scale_cols = 1;
  void* out = nullptr;
  DType out_type = DType::f32;  // f32, bf16 or f16
};

// The scaled quantization of a row-major rows x cols f32 matrix x into FP8 codes (Note [fp8
// scaling]): each tile_rows x tile_cols tile gets the scale of its own amax (margin 0), unless one
// scale is given for every tile: *scale_ptr, or the scale from *amax_in (with `margin`), or
// `scale` (has_scale). codes = saturate(x * scale), scale_inv[tile] = 1 / scale (row-major,
// ceil(rows / tile_rows) x ceil(cols / tile_cols)). amax_out, if set, receives the max of its
// value and x's amax. Amaxes travel as the bits of a non-negative float (they order as integers;
// NaN above infinity).
struct Fp8QuantizeArgs {
  const float* x = nullptr;
  int64_t rows = 0, cols = 0, tile_rows = 1, tile_cols = 1;
  DType format = DType::f8e4m3;
  const float* scale_ptr = nullptr;
  const uint32_t* amax_in = nullptr;
  bool has_scale = false;
  float scale = 1.0f;
  int margin = 0;
  uint8_t* codes = nullptr;
  float* scale_inv = nullptr;
  uint32_t* amax_out = nullptr;
};

// Tile t of a quantization (row-major over ceil(cols / tile_cols) tiles per row): its corner and
// extent (the last row and column of tiles may be partial), and the flat index of its e-th element
// (row-major within the tile), e < h * w. The CUDA kernel walks these; tests/test_fp8.cpp replays
// them on the host.
struct Fp8Tile {
  int64_t r0, c0, h, w;
};
SINTER_HD inline Fp8Tile fp8_tile(const Fp8QuantizeArgs& q, int64_t t, int64_t tiles_per_row) {
  const int64_t r0 = (t / tiles_per_row) * q.tile_rows, c0 = (t % tiles_per_row) * q.tile_cols;
  const int64_t h = q.rows - r0 < q.tile_rows ? q.rows - r0 : q.tile_rows;
  const int64_t w = q.cols - c0 < q.tile_cols ? q.cols - c0 : q.tile_cols;
  return {r0, c0, h, w};
}
SINTER_HD inline int64_t fp8_tile_element(const Fp8QuantizeArgs& q, const Fp8Tile& t, int64_t e) {
  return (t.r0 + e / t.w) * q.cols + t.c0 + e % t.w;
}

// The scale_inv the FP8 GEMM takes for row `row` of an operand of `rows` rows in block kb of k
// (scale_cols columns; Fp8GemmArgs): row clamped into the operand, so that a ragged tile's masked
// rows read a valid entry.
SINTER_HD inline float fp8_scale_at(const float* s, int64_t row, int64_t rows, int64_t tile_rows,
                                    int64_t scale_cols, int64_t kb) {
  const int64_t r = row < rows ? row : rows - 1;
  return s[(r / tile_rows) * scale_cols + kb];
}

// The scale that maps amax to fmax / 2^margin, as fp8::scale_from_amax computes it (1 where amax
// is 0, infinite or NaN; the largest float where the quotient overflows).
SINTER_HD inline float fp8_scale_from_amax(float amax, float fmax, int margin) {
  if (!(amax > 0.0f) || amax - amax != 0.0f) return 1.0f;  // 0, NaN, infinity
  float pow2 = 1.0f;                                       // 2^margin, exact
  for (int i = 0; i < margin; ++i) pow2 *= 2.0f;
  for (int i = 0; i > margin; --i) pow2 *= 0.5f;
  const float s = fmax / amax / pow2;
  return s - s != 0.0f ? 3.40282347e+38f : s;
}

}  // namespace sinter::kern

namespace sinter::cudak {
void fp8_amax(const kern::Ctx& ctx, const float* x, int64_t n, uint32_t* out);
void fp8_quantize(const kern::Ctx& ctx, const kern::Fp8QuantizeArgs& q);
// An Error naming what does not fit where the GPU has no sm_90a FP8 GEMM or the operands do not
// fit it (k a multiple of 16, 16-byte aligned bases).
void fp8_gemm(const kern::Ctx& ctx, const kern::Fp8GemmArgs& g);
}  // namespace sinter::cudak
