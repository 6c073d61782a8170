// The tensor-core (mma.sync) convolution kernels of kernels/conv_tc.cu, which kernels/conv.cu tries
// before its CUDA-core kernels (same tensors and contracts as src/kern/conv.h), and the
// geometry both kernel families index with.
#pragma once

#include <climits>
#include <cstdint>

#include "cuda_util.cuh"
#include "kern/conv.h"

namespace sinter::cudak {

// The sizes every pass reads, in the index type I (int32 when every tensor has fewer than 2^31
// elements, which keeps the per-element divisions cheap).
template <typename I>
struct Geom {
  I n, c_in, h, w, c_out, kh, kw, h_out, w_out, sh, sw, ph, pw, dil_h, dil_w, cig, cog;
  explicit Geom(const Conv2dGeom& g)
      : n(static_cast<I>(g.n)),
        c_in(static_cast<I>(g.c_in)),
        h(static_cast<I>(g.h)),
        w(static_cast<I>(g.w)),
        c_out(static_cast<I>(g.c_out)),
        kh(static_cast<I>(g.kh)),
        kw(static_cast<I>(g.kw)),
        h_out(static_cast<I>(g.h_out)),
        w_out(static_cast<I>(g.w_out)),
        sh(static_cast<I>(g.stride_h)),
        sw(static_cast<I>(g.stride_w)),
        ph(static_cast<I>(g.pad_h)),
        pw(static_cast<I>(g.pad_w)),
        dil_h(static_cast<I>(g.dil_h)),
        dil_w(static_cast<I>(g.dil_w)),
        cig(static_cast<I>(g.c_in / g.groups)),
        cog(static_cast<I>(g.c_out / g.groups)) {}

  // x[b, c, oh * sh - ph + i * dil_h, ow * sw - pw + j * dil_w], or `zero` in the padding.
  template <typename T>
  __device__ __forceinline__ T x_tap(const T* x, I b, I c, I oh, I ow, I i, I j, T zero) const {
    const I ih = oh * sh - ph + i * dil_h, iw = ow * sw - pw + j * dil_w;
    if (ih < 0 || ih >= h || iw < 0 || iw >= w) return zero;
    return x[((static_cast<int64_t>(b) * c_in + c) * h + ih) * w + iw];
  }
  // The same widened to the accumulation type.
  template <typename T>
  __device__ Acc<T> x_at(const T* x, I b, I c, I oh, I ow, I i, I j) const {
    return to_acc(x_tap(x, b, c, oh, ow, i, j, from_acc<T>(Acc<T>(0))));
  }
};

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
// dweight. conv_tc_wgrad_tiles is the number of output tiles one split launches.
int64_t conv_tc_k_step(DType dtype);
int64_t conv_tc_wgrad_tiles(const Conv2dGeom& g);
void conv_tc_backward_weight(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* x,
                             const void* dy, void* dweight, float* acc, int64_t acc_slice,
                             int64_t k_chunk, int splits);

// Element o of the weight gradient from one K split: stored in dw when the sum over K is whole
// (split < 0); else its partial sum, in the accumulation type, added atomically into acc_out
// (acc_slice 0) or stored at split's slice of acc_out for an ordered sum afterwards.
template <typename T, typename A>
__device__ __forceinline__ void store_wgrad(T* dw, A* acc_out, int64_t acc_slice, int64_t o, A v,
                                            int split) {
  if (split < 0) {
    dw[o] = from_acc<T>(v);
  } else if (acc_slice == 0) {
    atomicAdd(acc_out + o, v);
  } else {
    acc_out[split * acc_slice + o] = v;
  }
}

}  // namespace sinter::cudak
