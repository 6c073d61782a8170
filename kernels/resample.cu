// CUDA resampling (interpolate): one thread per output element forward, one per input element
// backward, gathering from the outputs that reach it, so no atomics are needed and the sums are
// deterministic. The taps come from kern::resample_taps (src/kern/resample.h), the function the
// CPU reference runs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "gather_reach.h"
#include "kern/resample.h"

namespace sinter::cudak {
namespace {

// Output offset o of g as (plane, position along dims 0, 1, 2).
struct ResamplePos {
  int64_t p, a, b, c;
};

__device__ ResamplePos resample_pos(const ResampleGeom& g, int64_t o) {
  const int64_t c = o % g.out[2];
  o /= g.out[2];
  const int64_t b = o % g.out[1];
  o /= g.out[1];
  return {o / g.out[0], o % g.out[0], b, c};
}

// Per Note [resample coordinates] in src/kern/resample.h: dim 0 outermost, as the CPU reference.
template <typename T>
__global__ void resample_forward_kernel(ResampleGeom g, const T* x, T* y, int64_t total) {
  using C = Acc<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += stride) {
    const ResamplePos q = resample_pos(g, o);
    const ResampleTaps<C> t0 = resample_taps<C>(g, 0, q.a), t1 = resample_taps<C>(g, 1, q.b),
                          t2 = resample_taps<C>(g, 2, q.c);
    const T* plane = x + q.p * g.in[0] * g.in[1] * g.in[2];
    C s0 = 0;
    for (int a = 0; a < t0.n; ++a) {
      C s1 = 0;
      for (int b = 0; b < t1.n; ++b) {
        const T* row = plane + (t0.index[a] * g.in[1] + t1.index[b]) * g.in[2];
        C s2 = 0;
        for (int c = 0; c < t2.n; ++c) s2 += t2.weight[c] * to_acc(row[t2.index[c]]);
        s1 += t1.weight[b] * s2;
      }
      s0 += t0.weight[a] * s1;
    }
    y[o] = from_acc<T>(s0);
  }
}

// One thread per dx element: the outputs that reach it along each dim (kern::resample_reach), in
// output order, each dy element times the weights of its taps there.
template <typename T>
__global__ void resample_backward_kernel(ResampleGeom g, const T* dy, T* dx, int64_t total) {
  using C = Acc<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += stride) {
    const int64_t ic = e % g.in[2], ib = (e / g.in[2]) % g.in[1];
    const int64_t ia = (e / (g.in[2] * g.in[1])) % g.in[0], p = e / (g.in[2] * g.in[1] * g.in[0]);
    int64_t lo[3], hi[3];
    resample_reach<C>(g, 0, ia, &lo[0], &hi[0]);
    resample_reach<C>(g, 1, ib, &lo[1], &hi[1]);
    resample_reach<C>(g, 2, ic, &lo[2], &hi[2]);
    const T* plane = dy + p * g.out[0] * g.out[1] * g.out[2];
    C s = 0;
    for (int64_t a = lo[0]; a <= hi[0]; ++a) {
      const C w0 = resample_weight_at(resample_taps<C>(g, 0, a), ia);
      for (int64_t b = lo[1]; b <= hi[1]; ++b) {
        const C w01 = w0 * resample_weight_at(resample_taps<C>(g, 1, b), ib);
        const T* row = plane + (a * g.out[1] + b) * g.out[2];
        for (int64_t c = lo[2]; c <= hi[2]; ++c) {
          s += w01 * resample_weight_at(resample_taps<C>(g, 2, c), ic) * to_acc(row[c]);
        }
      }
    }
    dx[e] = from_acc<T>(s);
  }
}

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return capped_grid(ceil_div(n, kThreads)); }

}  // namespace

void resample_forward(const Ctx& ctx, const ResampleGeom& g, DType dtype, const void* x, void* y) {
  const int64_t total = g.planes * g.out[0] * g.out[1] * g.out[2];
  if (total == 0) return;
  launch_floating(ctx, dtype, "resample_forward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    resample_forward_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
        g, static_cast<const T*>(x), static_cast<T*>(y), total);
    SINTER_LAUNCH_CHECK("resample_forward_kernel");
  });
}

void resample_backward(const Ctx& ctx, const ResampleGeom& g, DType dtype, const void* dy,
                       void* dx) {
  const int64_t total = g.planes * g.in[0] * g.in[1] * g.in[2];
  if (total == 0) return;
  launch_floating(ctx, dtype, "resample_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    resample_backward_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
        g, static_cast<const T*>(dy), static_cast<T*>(dx), total);
    SINTER_LAUNCH_CHECK("resample_backward_kernel");
  });
}

}  // namespace sinter::cudak
