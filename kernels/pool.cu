// CUDA 2-D pooling: max (with indices), average and adaptive average, forward and backward. One
// thread per output element forward; one thread per input element backward, gathering from the
// outputs whose windows cover it, so no atomics are needed and the sums are deterministic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "gather_reach.h"
#include "kern/pool.h"
#include "kern/pool_windows.h"
#include "kern/scalar_ops.h"

namespace sinter::cudak {
namespace {

#define SINTER_GRID_STRIDE(i, n)                                                         \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// The outputs along one dim whose (dilated) windows may cover input position i: [lo, hi].
__device__ void covering(int64_t i, int64_t k, int64_t s, int64_t p, int64_t d, int64_t n_out,
                         int64_t* lo, int64_t* hi) {
  const int64_t t = i + p - d * (k - 1);
  *lo = t <= 0 ? 0 : (t + s - 1) / s;
  *hi = min((i + p) / s, n_out - 1);
}

// The element max_window_argmax picks (kern/pool_windows.h), as the CPU reference does.
template <typename T>
__global__ void max_pool_forward_kernel(Pool2dGeom g, const T* x, T* y, int64_t* indices,
                                        int64_t total) {
  SINTER_GRID_STRIDE(o, total) {
    const int64_t ow = o % g.w_out, oh = (o / g.w_out) % g.h_out, p = o / (g.w_out * g.h_out);
    const T* plane = x + p * g.h * g.w;
    const int64_t best =
        max_window_argmax(g, plane, oh, ow, [](T v) -> Acc<T> { return to_acc(v); });
    y[o] = plane[best];
    indices[o] = best;
  }
}

template <typename T>
__global__ void max_pool_backward_kernel(Pool2dGeom g, const T* dy, const int64_t* indices, T* dx,
                                         int64_t total) {
  SINTER_GRID_STRIDE(e, total) {
    const int64_t iw = e % g.w, ih = (e / g.w) % g.h, p = e / (g.w * g.h);
    const int64_t pos = ih * g.w + iw, base = p * g.h_out * g.w_out;
    int64_t oh0, oh1, ow0, ow1;
    covering(ih, g.kh, g.stride_h, g.pad_h, g.dil_h, g.h_out, &oh0, &oh1);
    covering(iw, g.kw, g.stride_w, g.pad_w, g.dil_w, g.w_out, &ow0, &ow1);
    Acc<T> s = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = base + oh * g.w_out + ow;
        if (indices[o] == pos) s += to_acc(dy[o]);
      }
    }
    dx[e] = from_acc<T>(s);
  }
}

template <typename T>
__global__ void avg_pool_forward_kernel(Pool2dGeom g, const T* x, T* y, int64_t total) {
  SINTER_GRID_STRIDE(o, total) {
    const int64_t ow = o % g.w_out, oh = (o / g.w_out) % g.h_out, p = o / (g.w_out * g.h_out);
    const T* plane = x + p * g.h * g.w;
    const AvgWindow win = avg_window(g, oh, ow);
    Acc<T> s = 0;
    for (int64_t ih = win.h0; ih < win.h1; ++ih) {
      for (int64_t iw = win.w0; iw < win.w1; ++iw) s += to_acc(plane[ih * g.w + iw]);
    }
    y[o] = from_acc<T>(s / static_cast<Acc<T>>(win.divisor));
  }
}

template <typename T>
__global__ void avg_pool_backward_kernel(Pool2dGeom g, const T* dy, T* dx, int64_t total) {
  SINTER_GRID_STRIDE(e, total) {
    const int64_t iw = e % g.w, ih = (e / g.w) % g.h, p = e / (g.w * g.h);
    const int64_t base = p * g.h_out * g.w_out;
    int64_t oh0, oh1, ow0, ow1;
    covering(ih, g.kh, g.stride_h, g.pad_h, 1, g.h_out, &oh0, &oh1);
    covering(iw, g.kw, g.stride_w, g.pad_w, 1, g.w_out, &ow0, &ow1);
    Acc<T> s = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const AvgWindow win = avg_window(g, oh, ow);
        s += to_acc(dy[base + oh * g.w_out + ow]) / static_cast<Acc<T>>(win.divisor);
      }
    }
    dx[e] = from_acc<T>(s);
  }
}

template <typename T>
__global__ void adaptive_forward_kernel(Pool2dGeom g, const T* x, T* y, int64_t total) {
  SINTER_GRID_STRIDE(o, total) {
    const int64_t ow = o % g.w_out, oh = (o / g.w_out) % g.h_out, p = o / (g.w_out * g.h_out);
    const T* plane = x + p * g.h * g.w;
    const int64_t h0 = adaptive_start(oh, g.h, g.h_out), h1 = adaptive_end(oh, g.h, g.h_out);
    const int64_t w0 = adaptive_start(ow, g.w, g.w_out), w1 = adaptive_end(ow, g.w, g.w_out);
    Acc<T> s = 0;
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw) s += to_acc(plane[ih * g.w + iw]);
    }
    y[o] = from_acc<T>(s / static_cast<Acc<T>>((h1 - h0) * (w1 - w0)));
  }
}

// Input row ih is in the windows of outputs [floor(ih * h_out / h), ceil((ih + 1) * h_out / h));
// each candidate is still tested, so rounding at the ends cannot add a wrong one.
template <typename T>
__global__ void adaptive_backward_kernel(Pool2dGeom g, const T* dy, T* dx, int64_t total) {
  SINTER_GRID_STRIDE(e, total) {
    const int64_t iw = e % g.w, ih = (e / g.w) % g.h, p = e / (g.w * g.h);
    const int64_t base = p * g.h_out * g.w_out;
    const int64_t oh0 = ih * g.h_out / g.h, oh1 = ((ih + 1) * g.h_out + g.h - 1) / g.h;
    const int64_t ow0 = iw * g.w_out / g.w, ow1 = ((iw + 1) * g.w_out + g.w - 1) / g.w;
    Acc<T> s = 0;
    for (int64_t oh = oh0; oh < oh1 && oh < g.h_out; ++oh) {
      const int64_t h0 = adaptive_start(oh, g.h, g.h_out), h1 = adaptive_end(oh, g.h, g.h_out);
      if (ih < h0 || ih >= h1) continue;
      for (int64_t ow = ow0; ow < ow1 && ow < g.w_out; ++ow) {
        const int64_t w0 = adaptive_start(ow, g.w, g.w_out), w1 = adaptive_end(ow, g.w, g.w_out);
        if (iw < w0 || iw >= w1) continue;
        s += to_acc(dy[base + oh * g.w_out + ow]) / static_cast<Acc<T>>((h1 - h0) * (w1 - w0));
      }
    }
    dx[e] = from_acc<T>(s);
  }
}

template <typename T>
__global__ void adaptive_max_forward_kernel(Pool2dGeom g, const T* x, T* y, int64_t* indices,
                                            int64_t total) {
  SINTER_GRID_STRIDE(o, total) {
    const int64_t ow = o % g.w_out, oh = (o / g.w_out) % g.h_out, p = o / (g.w_out * g.h_out);
    const T* plane = x + p * g.h * g.w;
    const int64_t best =
        adaptive_window_argmax(g, plane, oh, ow, [](T v) -> Acc<T> { return to_acc(v); });
    y[o] = plane[best];
    indices[o] = best;
  }
}

// One thread per input element: the outputs whose windows hold it (kern::adaptive_reach) that
// picked it, in output order.
template <typename T>
__global__ void adaptive_max_backward_kernel(Pool2dGeom g, const T* dy, const int64_t* indices,
                                             T* dx, int64_t total) {
  SINTER_GRID_STRIDE(e, total) {
    const int64_t iw = e % g.w, ih = (e / g.w) % g.h, p = e / (g.w * g.h);
    const int64_t pos = ih * g.w + iw, base = p * g.h_out * g.w_out;
    int64_t oh0, oh1, ow0, ow1;
    adaptive_reach(ih, g.h, g.h_out, &oh0, &oh1);
    adaptive_reach(iw, g.w, g.w_out, &ow0, &ow1);
    Acc<T> s = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = base + oh * g.w_out + ow;
        if (indices[o] == pos) s += to_acc(dy[o]);
      }
    }
    dx[e] = from_acc<T>(s);
  }
}

#undef SINTER_GRID_STRIDE

unsigned blocks_for(int64_t n) { return capped_grid(ceil_div(n, 256)); }

}  // namespace

void max_pool2d_forward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* x, void* y,
                        int64_t* indices) {
  const int64_t total = g.planes * g.h_out * g.w_out;
  if (total == 0) return;
  launch_floating(ctx, dtype, "max_pool2d_forward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    max_pool_forward_kernel<T><<<blocks_for(total), 256, 0, stream>>>(
        g, static_cast<const T*>(x), static_cast<T*>(y), indices, total);
    SINTER_LAUNCH_CHECK("max_pool_forward_kernel");
  });
}

void max_pool2d_backward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* dy,
                         const int64_t* indices, void* dx) {
  const int64_t total = g.planes * g.h * g.w;
  if (total == 0) return;
  launch_floating(ctx, dtype, "max_pool2d_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    max_pool_backward_kernel<T><<<blocks_for(total), 256, 0, stream>>>(
        g, static_cast<const T*>(dy), indices, static_cast<T*>(dx), total);
    SINTER_LAUNCH_CHECK("max_pool_backward_kernel");
  });
}

void avg_pool2d_forward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* x, void* y) {
  const int64_t total = g.planes * g.h_out * g.w_out;
  if (total == 0) return;
  launch_floating(ctx, dtype, "avg_pool2d_forward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    avg_pool_forward_kernel<T><<<blocks_for(total), 256, 0, stream>>>(g, static_cast<const T*>(x),
                                                                      static_cast<T*>(y), total);
    SINTER_LAUNCH_CHECK("avg_pool_forward_kernel");
  });
}

void avg_pool2d_backward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* dy,
                         void* dx) {
  const int64_t total = g.planes * g.h * g.w;
  if (total == 0) return;
  launch_floating(ctx, dtype, "avg_pool2d_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    avg_pool_backward_kernel<T><<<blocks_for(total), 256, 0, stream>>>(g, static_cast<const T*>(dy),
                                                                       static_cast<T*>(dx), total);
    SINTER_LAUNCH_CHECK("avg_pool_backward_kernel");
  });
}

void adaptive_avg_pool2d_forward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* x,
                                 void* y) {
  const int64_t total = g.planes * g.h_out * g.w_out;
  if (total == 0) return;
  launch_floating(ctx, dtype, "adaptive_avg_pool2d_forward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    adaptive_forward_kernel<T><<<blocks_for(total), 256, 0, stream>>>(g, static_cast<const T*>(x),
                                                                      static_cast<T*>(y), total);
    SINTER_LAUNCH_CHECK("adaptive_forward_kernel");
  });
}

void adaptive_avg_pool2d_backward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* dy,
                                  void* dx) {
  const int64_t total = g.planes * g.h * g.w;
  if (total == 0) return;
  launch_floating(ctx, dtype, "adaptive_avg_pool2d_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    adaptive_backward_kernel<T><<<blocks_for(total), 256, 0, stream>>>(g, static_cast<const T*>(dy),
                                                                       static_cast<T*>(dx), total);
    SINTER_LAUNCH_CHECK("adaptive_backward_kernel");
  });
}

void adaptive_max_pool2d_forward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* x,
                                 void* y, int64_t* indices) {
  const int64_t total = g.planes * g.h_out * g.w_out;
  if (total == 0) return;
  launch_floating(ctx, dtype, "adaptive_max_pool2d_forward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    adaptive_max_forward_kernel<T><<<blocks_for(total), 256, 0, stream>>>(
        g, static_cast<const T*>(x), static_cast<T*>(y), indices, total);
    SINTER_LAUNCH_CHECK("adaptive_max_forward_kernel");
  });
}

void adaptive_max_pool2d_backward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* dy,
                                  const int64_t* indices, void* dx) {
  const int64_t total = g.planes * g.h * g.w;
  if (total == 0) return;
  launch_floating(ctx, dtype, "adaptive_max_pool2d_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    adaptive_max_backward_kernel<T><<<blocks_for(total), 256, 0, stream>>>(
        g, static_cast<const T*>(dy), indices, static_cast<T*>(dx), total);
    SINTER_LAUNCH_CHECK("adaptive_max_backward_kernel");
  });
}

}  // namespace sinter::cudak
