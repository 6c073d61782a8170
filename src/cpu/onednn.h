// The CPU kernels' oneDNN paths: the convolutions in f32 and bf16, the f32 and bf16 GEMMs (Note
// [onednn convolutions] in src/cpu/onednn_dnnl.cpp).
#pragma once

#include <cstdint>

#include "kern/conv.h"
#include "sinter/core/dtype.h"

namespace sinter::cpu::onednn {

// Each runs its pass in oneDNN and returns true, or returns false, having written nothing, where
// oneDNN does not take it: a build without oneDNN, onednn_enabled() off, a dtype
// other than f32 and bf16, an empty tensor, or a geometry oneDNN has no implementation for. The
// caller then runs the library's own kernel. The pointers are contiguous tensors, as the kernels'.
bool conv2d_forward(const kern::Conv2dGeom& g, DType dtype, const void* x, const void* w,
                    const void* bias, void* y);
bool conv2d_backward_input(const kern::Conv2dGeom& g, DType dtype, const void* dy, const void* w,
                           void* dx);
bool conv2d_backward_weight(const kern::Conv2dGeom& g, DType dtype, const void* x, const void* dy,
                            void* dw);

// c (m, n), f32 with row stride ldc, = op(a) @ op(b) for a and b of `ab` (f32 or bf16): a is
// (m, k) with row stride lda, or (k, m) when ta; b is (k, n) with row stride ldb, or (n, k) when
// tb. On the calling thread; bf16 on the CPU's bf16 dot products where it has them, f32 sums of
// the exact bf16 products. False, having written nothing, where oneDNN does not take it (a build
// without it, no implementation on this CPU). The caller checks onednn_enabled(), once for a whole
// batch. With a GemmBatch, `count` products in one call: product i reads a + i stride_a and
// b + i stride_b (elements; 0: the one matrix for all) and writes c + i m ldc.
struct GemmBatch {
  int64_t count = 1, stride_a = 0, stride_b = 0;
};
bool gemm(DType ab, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
          const void* b, int64_t ldb, float* c, int64_t ldc, const GemmBatch& batch = {});

// How bf16 products (the GEMMs and convolutions above) run: on the CPU's bf16 dot products (dot),
// or as f32 products of copies widened to f32 (widened: the same exact products, summed in f32 by
// the f32 kernels), rounded to bf16 once either way. automatic: dot where the CPU's bf16 dot
// products outrun its f32 FMAs (Note [bf16 products] in src/cpu/onednn_dnnl.cpp). Process-wide;
// the tests set it to run both paths on one machine.
enum class Bf16Products { automatic, dot, widened };
void set_bf16_products(Bf16Products how);
// Whether bf16 products run on the dot products under the current setting.
bool bf16_dot_products();
// How many primitive calls oneDNN has run in this process (the tests check that a path ran).
int64_t calls();
// How many of them ran with the thread's signals held (Note [onednn signals] in
// src/cpu/onednn_common.h).
int64_t calls_with_signals_held();

}  // namespace sinter::cpu::onednn
