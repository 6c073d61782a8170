// CUDA batch_norm, layer_norm and dropout (src/internal/kernels_norm.h). Batch norm takes one block
// per channel for its statistics and backward sums; layer norm one warp per row, with a column pass
// for dweight/dbias; dropout regenerates its Philox mask (Note [dropout mask]) in forward and
// backward alike. Sums accumulate in f32 (f64 for f64).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda_check.cuh"
#include "internal/kernels_norm.h"
#include "internal/philox.h"
#include "internal/scalar_ops.h"

namespace sinter::cudak {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest

unsigned grid_for(int64_t work, int64_t per_block) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((work + per_block - 1) / per_block, 1, kMaxBlocks));
}

// The accumulation type of Note [norm statistics].
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
__device__ __forceinline__ Acc<T> load(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(p[i]);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(p[i]);
  } else {
    return p[i];
  }
}

template <class T>
__device__ __forceinline__ T store(Acc<T> v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return v;
  }
}

template <class T>
__device__ __forceinline__ Acc<T> param(const T* p, int64_t i, float absent) {
  return p ? load(p, i) : Acc<T>(absent);
}

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum over the block, returned to every thread. smem: kWarps values; blockDim.x == kThreads.
template <class A>
__device__ __forceinline__ A block_sum(A v, A* smem) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();  // smem may still be read from a previous call
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  A total = A(0);
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += smem[w];
  return total;
}

// --- batch norm: x (n, c, hw); block k owns channel k, element t of it at (t / hw, k, t % hw) ---

__device__ __forceinline__ int64_t channel_elem(int64_t t, int64_t k, int64_t c, int64_t hw) {
  const int64_t i = t / hw;
  return (i * c + k) * hw + (t - i * hw);
}

template <class T>
__global__ void batch_norm_stats_kernel(const T* x, int64_t c, int64_t hw, int64_t m, Acc<T> eps,
                                        Acc<T>* mean, Acc<T>* var, Acc<T>* rstd) {
  using A = Acc<T>;
  __shared__ A smem[kWarps];
  const int64_t k = blockIdx.x;
  A s = 0;
  for (int64_t t = threadIdx.x; t < m; t += blockDim.x) s += load(x, channel_elem(t, k, c, hw));
  const A mu = block_sum(s, smem) / static_cast<A>(m);
  A q = 0;
  for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
    const A d = load(x, channel_elem(t, k, c, hw)) - mu;
    q += d * d;
  }
  const A v = block_sum(q, smem) / static_cast<A>(m);
  if (threadIdx.x == 0) {
    mean[k] = mu;
    var[k] = v;
    rstd[k] = A(1) / sqrt(v + eps);
  }
}

template <class T>
__global__ void batch_norm_apply_kernel(const T* x, int64_t c, int64_t hw, int64_t total,
                                        const Acc<T>* mean, const Acc<T>* rstd, const T* weight,
                                        const T* bias, T* y) {
  using A = Acc<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = (e / hw) % c;
    const A scale = rstd[k] * param(weight, k, 1.0f);
    y[e] = store<T>((load(x, e) - mean[k]) * scale + param(bias, k, 0.0f));
  }
}

template <class T>
__global__ void batch_norm_backward_kernel(const T* dy, const T* x, int64_t c, int64_t hw,
                                           int64_t m, const Acc<T>* mean, const Acc<T>* rstd,
                                           const T* weight, bool training, T* dx, Acc<T>* dweight,
                                           Acc<T>* dbias) {
  using A = Acc<T>;
  __shared__ A smem[kWarps];
  const int64_t k = blockIdx.x;
  const A mu = mean[k], rs = rstd[k];
  A s_dy = 0, s_dy_xhat = 0;
  for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
    const int64_t e = channel_elem(t, k, c, hw);
    const A g = load(dy, e);
    s_dy += g;
    s_dy_xhat += g * (load(x, e) - mu) * rs;
  }
  s_dy = block_sum(s_dy, smem);
  s_dy_xhat = block_sum(s_dy_xhat, smem);
  if (threadIdx.x == 0) {
    if (dbias) dbias[k] = s_dy;
    if (dweight) dweight[k] = s_dy_xhat;
  }
  if (!dx) return;
  const A scale = rs * param(weight, k, 1.0f);
  const A mean_dy = m > 0 ? s_dy / static_cast<A>(m) : A(0);
  const A mean_dy_xhat = m > 0 ? s_dy_xhat / static_cast<A>(m) : A(0);
  for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
    const int64_t e = channel_elem(t, k, c, hw);
    const A g = load(dy, e);
    if (training) {
      const A xhat = (load(x, e) - mu) * rs;
      dx[e] = store<T>(scale * (g - mean_dy - xhat * mean_dy_xhat));
    } else {
      dx[e] = store<T>(scale * g);
    }
  }
}

// --- layer norm: x (rows, cols); warp w of the grid owns rows w, w + total warps, ... ---

template <class T>
__global__ void layer_norm_forward_kernel(const T* x, int64_t rows, int64_t cols, const T* weight,
                                          const T* bias, Acc<T> eps, T* y, Acc<T>* mean,
                                          Acc<T>* rstd) {
  using A = Acc<T>;
  const int lane = threadIdx.x % 32;
  const int64_t nwarps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; r < rows;
       r += nwarps) {
    const T* row = x + r * cols;
    A s = 0;
    for (int64_t j = lane; j < cols; j += 32) s += load(row, j);
    const A mu = warp_sum(s) / static_cast<A>(cols);
    A q = 0;
    for (int64_t j = lane; j < cols; j += 32) {
      const A d = load(row, j) - mu;
      q += d * d;
    }
    const A rs = A(1) / sqrt(warp_sum(q) / static_cast<A>(cols) + eps);
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    T* out = y + r * cols;
    for (int64_t j = lane; j < cols; j += 32) {
      out[j] = store<T>((load(row, j) - mu) * rs * param(weight, j, 1.0f) + param(bias, j, 0.0f));
    }
  }
}

template <class T>
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, int64_t rows, int64_t cols,
                                     const Acc<T>* mean, const Acc<T>* rstd, const T* weight,
                                     T* dx) {
  using A = Acc<T>;
  const int lane = threadIdx.x % 32;
  const int64_t nwarps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; r < rows;
       r += nwarps) {
    const int64_t base = r * cols;
    const A mu = mean[r], rs = rstd[r];
    A s_g = 0, s_g_xhat = 0;
    for (int64_t j = lane; j < cols; j += 32) {
      const A g = load(dy, base + j) * param(weight, j, 1.0f);
      s_g += g;
      s_g_xhat += g * (load(x, base + j) - mu) * rs;
    }
    const A mean_g = warp_sum(s_g) / static_cast<A>(cols);
    const A mean_g_xhat = warp_sum(s_g_xhat) / static_cast<A>(cols);
    for (int64_t j = lane; j < cols; j += 32) {
      const A g = load(dy, base + j) * param(weight, j, 1.0f);
      const A xhat = (load(x, base + j) - mu) * rs;
      dx[base + j] = store<T>(rs * (g - mean_g - xhat * mean_g_xhat));
    }
  }
}

// Column sums for dweight/dbias. Block (32, kColRows): column blockIdx.x * 32 + threadIdx.x, rows
// [blockIdx.y * chunk, +chunk) split over threadIdx.y; partial sums meet in shared memory and one
// atomic per column and block adds them to the output.
constexpr int kColRows = 8;

template <class T>
__global__ void layer_norm_dparams_kernel(const T* dy, const T* x, int64_t rows, int64_t cols,
                                          int64_t chunk, const Acc<T>* mean, const Acc<T>* rstd,
                                          Acc<T>* dweight, Acc<T>* dbias) {
  using A = Acc<T>;
  __shared__ A sw[kColRows][33];
  __shared__ A sb[kColRows][33];
  const int64_t j = blockIdx.x * 32 + threadIdx.x;
  const int64_t r0 = blockIdx.y * chunk, r1 = min(rows, r0 + chunk);
  A aw = 0, ab = 0;
  if (j < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColRows) {
      const A d = load(dy, r * cols + j);
      aw += d * (load(x, r * cols + j) - mean[r]) * rstd[r];
      ab += d;
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols) return;
  for (int i = 1; i < kColRows; ++i) {
    aw += sw[i][threadIdx.x];
    ab += sb[i][threadIdx.x];
  }
  if (dweight) atomicAdd(dweight + j, aw);
  if (dbias) atomicAdd(dbias + j, ab);
}

// --- dropout ---

template <class T>
__global__ void dropout_kernel(const T* in, int64_t numel, uint64_t seed, uint64_t offset,
                               uint32_t threshold, Acc<T> scale, T* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const bool keep =
        (kern::philox_element(seed, offset, static_cast<uint64_t>(i)).w[0] >> 8) >= threshold;
    out[i] = keep ? store<T>(load(in, i) * scale) : store<T>(Acc<T>(0));
  }
}

// Calls f(TypeTag<T>{}) for the floating storage types.
template <class F>
void visit_float(DType t, const char* op, F&& f) {
  kern::visit_floating_type<__nv_bfloat16, __half>(t, op, std::forward<F>(f));
}

}  // namespace

void batch_norm_stats(const Ctx& ctx, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      double eps, void* mean, void* var, void* rstd) {
  if (c == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_float(dtype, "batch_norm_stats", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    batch_norm_stats_kernel<T><<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
        static_cast<const T*>(x), c, hw, n * hw, static_cast<A>(eps), static_cast<A*>(mean),
        static_cast<A*>(var), static_cast<A*>(rstd));
    SINTER_LAUNCH_CHECK("batch_norm_stats_kernel");
  });
}

void batch_norm_apply(const Ctx& ctx, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      const void* mean, const void* rstd, const void* weight, const void* bias,
                      void* y) {
  const int64_t total = n * c * hw;
  if (total == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_float(dtype, "batch_norm_apply", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    batch_norm_apply_kernel<T><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), c, hw, total, static_cast<const A*>(mean),
        static_cast<const A*>(rstd), static_cast<const T*>(weight), static_cast<const T*>(bias),
        static_cast<T*>(y));
    SINTER_LAUNCH_CHECK("batch_norm_apply_kernel");
  });
}

void batch_norm_backward(const Ctx& ctx, const void* dy, const void* x, DType dtype, int64_t n,
                         int64_t c, int64_t hw, const void* mean, const void* rstd,
                         const void* weight, bool training, void* dx, void* dweight, void* dbias) {
  if (c == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_float(dtype, "batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    batch_norm_backward_kernel<T><<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), c, hw, n * hw,
        static_cast<const A*>(mean), static_cast<const A*>(rstd), static_cast<const T*>(weight),
        training, static_cast<T*>(dx), static_cast<A*>(dweight), static_cast<A*>(dbias));
    SINTER_LAUNCH_CHECK("batch_norm_backward_kernel");
  });
}

void layer_norm_forward(const Ctx& ctx, const void* x, DType dtype, int64_t rows, int64_t cols,
                        const void* weight, const void* bias, double eps, void* y, void* mean,
                        void* rstd) {
  if (rows == 0 || cols == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_float(dtype, "layer_norm_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    layer_norm_forward_kernel<T><<<grid_for(rows, kWarps), kThreads, 0, stream>>>(
        static_cast<const T*>(x), rows, cols, static_cast<const T*>(weight),
        static_cast<const T*>(bias), static_cast<A>(eps), static_cast<T*>(y), static_cast<A*>(mean),
        static_cast<A*>(rstd));
    SINTER_LAUNCH_CHECK("layer_norm_forward_kernel");
  });
}

void layer_norm_backward(const Ctx& ctx, const void* dy, const void* x, DType dtype, int64_t rows,
                         int64_t cols, const void* mean, const void* rstd, const void* weight,
                         void* dx, void* dweight, void* dbias) {
  if (rows == 0 || cols == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_float(dtype, "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const auto* pdy = static_cast<const T*>(dy);
    const auto* px = static_cast<const T*>(x);
    const auto* pmean = static_cast<const A*>(mean);
    const auto* prstd = static_cast<const A*>(rstd);
    if (dx) {
      layer_norm_dx_kernel<T><<<grid_for(rows, kWarps), kThreads, 0, stream>>>(
          pdy, px, rows, cols, pmean, prstd, static_cast<const T*>(weight), static_cast<T*>(dx));
      SINTER_LAUNCH_CHECK("layer_norm_dx_kernel");
    }
    if (dweight || dbias) {
      // About 64 rows per block, and at most 4096 row chunks (grid.y is limited to 65535).
      const int64_t chunks = std::clamp<int64_t>((rows + 63) / 64, 1, 4096);
      const int64_t chunk = (rows + chunks - 1) / chunks;
      const dim3 grid(static_cast<unsigned>((cols + 31) / 32),
                      static_cast<unsigned>((rows + chunk - 1) / chunk));
      layer_norm_dparams_kernel<T><<<grid, dim3(32, kColRows), 0, stream>>>(
          pdy, px, rows, cols, chunk, pmean, prstd, static_cast<A*>(dweight),
          static_cast<A*>(dbias));
      SINTER_LAUNCH_CHECK("layer_norm_dparams_kernel");
    }
  });
}

void dropout_apply(const Ctx& ctx, const void* in, DType dtype, int64_t numel, uint64_t seed,
                   uint64_t offset, uint32_t threshold, double scale, void* out) {
  if (numel == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_float(dtype, "dropout_apply", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    dropout_kernel<T><<<grid_for(numel, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(in), numel, seed, offset, threshold, static_cast<A>(scale),
        static_cast<T*>(out));
    SINTER_LAUNCH_CHECK("dropout_kernel");
  });
}

}  // namespace sinter::cudak
