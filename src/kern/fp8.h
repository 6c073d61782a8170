// The kernel interface of FP8 training's GEMM (sinter::fp8::gemm on CUDA tensors; Note [fp8 gemm]
// in src/fp8/fp8.cpp): kernels/gemm_fp8.cu. The CPU computes the same formulas with tensor ops in
// src/fp8/fp8.cpp.
#pragma once

#include <cstdint>

#include "kern/ctx.h"
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

}  // namespace sinter::kern

namespace sinter::cudak {
// An Error naming what does not fit where the GPU has no sm_90a FP8 GEMM or the operands do not
// fit it (k a multiple of 16, 16-byte aligned bases).
void fp8_gemm(const kern::Ctx& ctx, const kern::Fp8GemmArgs& g);
}  // namespace sinter::cudak
