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

// The scaled quantization of a row-major rows x cols matrix x (f32, f64, bf16 or f16 values, each
// taken as the f32 nearest it, as x.to(f32) gives) into FP8 codes (Note [fp8
// scaling]): each tile_rows x tile_cols tile gets the scale of its own amax (margin 0), unless one
// scale is given for every tile (fp8_one_scale): *scale_ptr (only once *steps > 0 where steps is
// set: the delayed recipe's history), else the scale from *amax_in (with `margin`), else `scale`
// (has_scale). codes = saturate(x * scale), scale_inv[tile] = 1 / scale (row-major,
// ceil(rows / tile_rows) x ceil(cols / tile_cols)). amax_out, if set, receives the max of its
// value and x's amax. Amaxes travel as the bits of a non-negative float (they order as integers;
// NaN above infinity).
// Where codes_t is set (fp8_quantize_transpose), x^T's codes (cols x rows) and scales are written
// in the same pass: the same tiles transposed, or, with retile_t, tiles of tile_rows x tile_cols of
// x^T with their own amaxes (the block recipe's 128 x 1 tiles of x).
struct Fp8QuantizeArgs {
  const void* x = nullptr;
  DType x_type = DType::f32;
  int64_t rows = 0, cols = 0, tile_rows = 1, tile_cols = 1;
  DType format = DType::f8e4m3;
  const float* scale_ptr = nullptr;
  const int64_t* steps = nullptr;
  const uint32_t* amax_in = nullptr;
  bool has_scale = false;
  float scale = 1.0f;
  int margin = 0;
  uint8_t* codes = nullptr;
  float* scale_inv = nullptr;
  uint32_t* amax_out = nullptr;
  uint8_t* codes_t = nullptr;
  float* scale_inv_t = nullptr;
  bool retile_t = false;
};

SINTER_HD inline bool fp8_has_one_scale(const Fp8QuantizeArgs& q) {
  return q.scale_ptr || q.amax_in || q.has_scale;
}

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

// The one scale of a quantization that has one (fp8_has_one_scale), read where the kernel runs.
SINTER_HD inline float fp8_one_scale(const Fp8QuantizeArgs& q, float fmax) {
  if (q.scale_ptr && (q.steps == nullptr || *q.steps > 0)) return *q.scale_ptr;
  if (q.amax_in) return fp8_scale_from_amax(bits_float(*q.amax_in), fmax, q.margin);
  return q.scale;
}

// The fused quantization and transpose (fp8_quantize_transpose) walks x in regions of
// kFp8ScaleBlock x kFp8ScaleBlock (R), one block each, row-major over ceil(cols / R) regions per
// row, with one scale for all (kOne), one per 1 x R tile (kRows: a row of the region), or one per
// R x R block (kBlock: the region); with retile_t under kRows, x^T's scales come from the region's
// columns (x^T's 1 x R tiles). One scale takes one tile of the whole matrix (and, retiled, of the
// whole transpose). It takes no other tiles (kUnfused: the caller quantizes twice).
enum class Fp8PairMode : int { kUnfused, kOne, kRows, kBlock };
SINTER_HD inline Fp8PairMode fp8_pair_mode(const Fp8QuantizeArgs& q) {
  if (fp8_has_one_scale(q)) {  // its one tile the whole matrix, and the transpose's too
    const bool whole = q.tile_rows >= q.rows && q.tile_cols >= q.cols;
    const bool whole_t = !q.retile_t || (q.tile_rows >= q.cols && q.tile_cols >= q.rows);
    return whole && whole_t ? Fp8PairMode::kOne : Fp8PairMode::kUnfused;
  }
  if (q.tile_rows == 1 && q.tile_cols == kFp8ScaleBlock) return Fp8PairMode::kRows;
  if (q.tile_rows == kFp8ScaleBlock && q.tile_cols == kFp8ScaleBlock) return Fp8PairMode::kBlock;
  return Fp8PairMode::kUnfused;
}

// Region g of the fused pass: its corner and extent (those of the last row and column of regions
// may be partial).
SINTER_HD inline Fp8Tile fp8_region(int64_t rows, int64_t cols, int64_t g) {
  const int64_t b = kFp8ScaleBlock, per_row = (cols + b - 1) / b;
  const int64_t r0 = (g / per_row) * b, c0 = (g % per_row) * b;
  return {r0, c0, rows - r0 < b ? rows - r0 : b, cols - c0 < b ? cols - c0 : b};
}

// Where the fused pass writes the scale_inv of x's element at region-local (r, c): q's (in its
// row-major table), and that of x^T's element (c, r) (t's table).
SINTER_HD inline int64_t fp8_pair_scale_index(Fp8PairMode mode, int64_t cols, const Fp8Tile& g,
                                              int64_t r) {
  const int64_t b = kFp8ScaleBlock, per_row = (cols + b - 1) / b;
  if (mode == Fp8PairMode::kOne) return 0;
  if (mode == Fp8PairMode::kRows) return (g.r0 + r) * per_row + g.c0 / b;
  return (g.r0 / b) * per_row + g.c0 / b;
}
SINTER_HD inline int64_t fp8_pair_scale_index_t(Fp8PairMode mode, bool retile, int64_t rows,
                                                const Fp8Tile& g, int64_t r, int64_t c) {
  const int64_t b = kFp8ScaleBlock, per_col = (rows + b - 1) / b;
  if (mode == Fp8PairMode::kOne) return 0;
  if (mode == Fp8PairMode::kRows) {
    return retile ? (g.c0 + c) * per_col + g.r0 / b  // x^T's own 1 x R tiles
                  : (g.c0 / b) * rows + g.r0 + r;    // q's R x 1 tiles of x^T
  }
  return (g.c0 / b) * per_col + g.r0 / b;
}

// The delayed recipe's state (Note [fp8 delayed state]), updated by the same code on the host and
// on the device: `hist` (3 x h, row-major), `scale` (3), `steps` (1).
SINTER_HD inline void fp8_record_amax(float* hist, int64_t h, int64_t steps, int64_t slot,
                                      float amax) {
  float& cell = hist[slot * h + steps % h];
  if (amax - amax == 0.0f && cell < amax) cell = amax;  // a finite amax, and larger
}
SINTER_HD inline void fp8_advance(float* hist, int64_t h, float* scale, int64_t* steps,
                                  int margin) {
  for (int64_t slot = 0; slot < 3; ++slot) {
    float m = 0.0f;
    for (int64_t i = 0; i < h; ++i) m = m < hist[slot * h + i] ? hist[slot * h + i] : m;
    // The inputs' and weights' scales are e4m3's, the gradients' (slot 2) e5m2's.
    if (m > 0.0f) scale[slot] = fp8_scale_from_amax(m, slot == 2 ? 57344.0f : 448.0f, margin);
  }
  *steps += 1;
  for (int64_t slot = 0; slot < 3; ++slot) hist[slot * h + *steps % h] = 0.0f;
}

}  // namespace sinter::kern

namespace sinter::cudak {
// The amax of n values of x (f32, f64, bf16 or f16) into *out (as bits); with `steps`, 0 without
// reading x where *steps > 0 (the delayed recipe's first pass alone needs it).
void fp8_amax(const kern::Ctx& ctx, const void* x, DType x_type, int64_t n, uint32_t* out,
              const int64_t* steps = nullptr);
void fp8_quantize(const kern::Ctx& ctx, const kern::Fp8QuantizeArgs& q);
// fp8_quantize with x^T's codes and scales in the same pass (codes_t set; fp8_pair_mode not
// kUnfused).
void fp8_quantize_transpose(const kern::Ctx& ctx, const kern::Fp8QuantizeArgs& q);
// fp8_record_amax and fp8_advance on the device's state (the amax as bits on the device).
void fp8_record_amax(const kern::Ctx& ctx, float* hist, int64_t h, const int64_t* steps,
                     int64_t slot, const uint32_t* amax);
void fp8_advance(const kern::Ctx& ctx, float* hist, int64_t h, float* scale, int64_t* steps,
                 int margin);
// An Error naming what does not fit where the GPU has no sm_90a FP8 GEMM or the operands do not
// fit it (k a multiple of 16, 16-byte aligned bases).
void fp8_gemm(const kern::Ctx& ctx, const kern::Fp8GemmArgs& g);
}  // namespace sinter::cudak
