// The tensor-core (mma.sync) convolution kernels of kernels/conv_tc.cu, which kernels/conv.cu tries
// before its CUDA-core kernels (same tensors and contracts as src/kern/conv.h), and the
// geometry both kernel families index with.
#pragma once

#include <climits>
#include <cstdint>

#include "conv_problems.h"
#include "cuda_util.cuh"
#include "kern/conv.h"

namespace sinter::cudak {

// True when every tensor of the convolution indexes within int32, less `margin` elements.
inline bool conv_fits_i32(const Conv2dGeom& g, int64_t margin = 0) {
  const int64_t lim = INT_MAX - margin;
  const int64_t nx = g.n * g.c_in * g.h * g.w, ny = g.n * g.c_out * g.h_out * g.w_out;
  const int64_t nw = g.c_out * (g.c_in / g.groups) * g.kh * g.kw;
  return nx < lim && ny < lim && nw < lim && g.h + 2 * g.pad_h + g.dil_h * g.kh < lim &&
         g.w + 2 * g.pad_w + g.dil_w * g.kw < lim;
}

// True when the tensor-core kernels take this convolution on `device`: bf16 or f16, or f32 with
// g.allow_tf32; compute capability 8.0 or newer; every tensor indexable in int32.
bool conv_tc_supported(int device, const Conv2dGeom& g, DType dtype);

// Each returns false, launching nothing, when conv_tc_supported says no.
bool conv_tc_forward(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* x,
                     const void* weight, const void* bias, void* y);
bool conv_tc_backward_input(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* dy,
                            const void* weight, void* dx);

// The weight gradient reduces over n * h_out * w_out, which the caller may split: split s covers
// [s * k_chunk, (s + 1) * k_chunk) (k_chunk a multiple of conv_tc_k_step) and, when splits > 1,
// atomically adds its f32 partial sums into acc (zeroed, laid out like dweight) when acc_slice is
// 0, or stores them at acc + s * acc_slice (Note [deterministic algorithms]); splits == 1 writes
// dweight. f32 is WgradConv's Acc<T> for every type these kernels take (bf16, f16, f32). conv_tc_wgrad_tiles is the number of output tiles one split launches.
int64_t conv_tc_k_step(DType dtype);
int64_t conv_tc_wgrad_tiles(const Conv2dGeom& g);
void conv_tc_backward_weight(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* x,
                             const void* dy, void* dweight, float* acc, int64_t acc_slice,
                             int64_t k_chunk, int splits);

}  // namespace sinter::cudak
