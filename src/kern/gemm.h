// The kernel interface of batched GEMM with its fused epilogue: in sinter::cpu (src/cpu/gemm.cpp)
// and sinter::cudak (kernels/gemm.cu and the paths it picks), Note [kernel interfaces].
#pragma once

#include <cstdint>

#include "kern/act.h"
#include "kern/ctx.h"
#include "sinter/core/dtype.h"

namespace sinter::kern {

// Row-major batched GEMM: C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b], with
// op(A) of shape (m, k), op(B) of shape (k, n), C of shape (m, n).
// A not transposed: op(A)(i, p) = a[i * lda + p]; transposed: op(A)(i, p) = a[p * lda + i]. Same
// for B. C(i, j) = c[i * ldc + j]. Batch b adds b * stride_x to each pointer (stride 0 broadcasts).
// dtype is f32, f64, bf16 or f16 for all three; accumulation is f32 (f64 for f64).
// When beta == 0, C is not read (it may hold NaN).
// The epilogue, in order: v = alpha * acc + beta * C(i, j); v += bias[j] when bias is set (n
// elements of dtype, shared by the batch); pre_act(i, j) = v when pre_act is set (same layout as
// C); then C(i, j) = act(v). allow_tf32 lets f32 products run on tensor cores with TF32 inputs
// (10-bit mantissa). path forces one kernel family (tests and benchmarks); Auto picks by dtype,
// shape, alignment and GPU.
enum class GemmPath : int { Auto, Simt, MmaSync, Wgmma };
struct GemmArgs {
  DType dtype = DType::f32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  double alpha = 1.0, beta = 0.0;
  bool allow_tf32 = false;
  const void* bias = nullptr;
  void* pre_act = nullptr;
  GemmAct act = GemmAct::None;
  GemmPath path = GemmPath::Auto;
};

}  // namespace sinter::kern

namespace sinter::cpu {
// The runs of terms the CPU's gemm cuts the sums of a product into (Note [deep products] in
// src/cpu/gemm.cpp), or 0 where it cuts only C.
int64_t gemm_depth_chunks(const kern::GemmArgs& g);
}  // namespace sinter::cpu

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/gemm.inc"
#include "kern/declare.h"
