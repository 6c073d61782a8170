// CUDA batch_norm, layer_norm (and rms_norm) and dropout (src/kern/norm.h). Batch norm reduces each
// channel in one read (Note [batch norm Welford]), over several blocks when channels are few;
// layer norm holds a row in registers (Note [layer norm rows]) up to 8192 elements, with a column
// pass for dweight/dbias; dropout regenerates its Philox mask (Note [dropout mask]) in forward and
// backward alike. Loads are 16 bytes wide where sizes and alignment allow. Sums accumulate in f32
// (f64 for f64).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/norm.h"
#include "kern/philox.h"
#include "kern/scalar_ops.h"
#include "merges.h"
#include "scratch.cuh"
#include "sinter/core/determinism.h"

namespace sinter::cudak {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// Blocks for `work` items at `per_block` a block; grid-stride loops cover what a grid leaves.
unsigned grid_for(int64_t work, int64_t per_block) {
  return capped_grid(ceil_div(work, per_block));
}

// Storage to and from the accumulation type of Note [norm statistics] (cuda_util.cuh's Acc).
template <class T>
__device__ __forceinline__ Acc<T> load(const T* p, int64_t i) {
  return to_acc(p[i]);
}

template <class T>
__device__ __forceinline__ T store(Acc<T> v) {
  return from_acc<T>(v);
}

template <class T>
__device__ __forceinline__ Acc<T> param(const T* p, int64_t i, float absent) {
  return p ? load(p, i) : Acc<T>(absent);
}

// --- batch norm: x (n, c, hw); channel k's element t is at (t / hw, k, t % hw) ---

// Loads kV elements of p from e on as Acc<T>: one 16-byte load when kV is T's vector width.
template <class T, int kV>
__device__ __forceinline__ void load_vec(const T* p, int64_t e, Acc<T> (&dst)[kV]) {
  if constexpr (kV == kVecWidth<T>) {
    const Vec16<T> x = *reinterpret_cast<const Vec16<T>*>(p + e);
#pragma unroll
    for (int j = 0; j < kV; ++j) dst[j] = load(x.v, j);
  } else {
#pragma unroll
    for (int j = 0; j < kV; ++j) dst[j] = load(p, e + j);
  }
}

template <class T, int kV>
__device__ __forceinline__ void store_vec(T* p, int64_t e, const Acc<T> (&src)[kV]) {
  if constexpr (kV == kVecWidth<T>) {
    Vec16<T> x;
#pragma unroll
    for (int j = 0; j < kV; ++j) x.v[j] = store<T>(src[j]);
    *reinterpret_cast<Vec16<T>*>(p + e) = x;
  } else {
#pragma unroll
    for (int j = 0; j < kV; ++j) p[e + j] = store<T>(src[j]);
  }
}

// Calls f(e) with the offset in x of each kV-element vector u in [begin, end) of channel k, this
// thread taking every blockDim.x-th from threadIdx.x on. Vector u holds elements u kV .. u kV + kV
// of the channel's (n, hw) values; hw % kV == 0, so no vector crosses from one sample to the next.
// (i, j) = divmod(u kV, hw) advances by a fixed step, so the loop divides only once.
template <int kV, class F>
__device__ __forceinline__ void for_channel_vectors(int64_t k, int64_t c, int64_t hw, int64_t begin,
                                                    int64_t end, F&& f) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * kV;
  const int64_t dq = step / hw, dr = step - dq * hw;
  const int64_t t = (begin + threadIdx.x) * kV;
  int64_t i = t / hw, j = t - i * hw;
  for (int64_t u = begin + threadIdx.x; u < end; u += blockDim.x) {
    f((i * c + k) * hw + j);
    i += dq;
    j += dr;
    if (j >= hw) {
      j -= hw;
      ++i;
    }
  }
}

// Welford states and their combine: merges.h (Note [batch norm Welford]).

// The combined state of the block, returned to every thread. smem: kWarps states.
template <class A>
__device__ __forceinline__ Welford<A> block_welford(Welford<A> w, Welford<A>* smem) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Welford<A> o = {__shfl_xor_sync(0xffffffffu, w.n, offset),
                          __shfl_xor_sync(0xffffffffu, w.mean, offset),
                          __shfl_xor_sync(0xffffffffu, w.m2, offset)};
    w = welford_combine(w, o);
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = w;
  __syncthreads();
  w = smem[0];
  for (int i = 1; i < static_cast<int>(blockDim.x / 32); ++i) w = welford_combine(w, smem[i]);
  return w;
}

template <class A>
__device__ __forceinline__ void write_stats(Welford<A> w, A eps, int64_t k, A* mean, A* var,
                                            A* rstd) {
  const A v = w.m2 / w.n;
  mean[k] = w.mean;
  var[k] = v;
  rstd[k] = A(1) / sqrt(v + eps);
}

// x: (n, c, hw) with hw % kV == 0 (and 16-byte aligned when kV > 1). Block b reduces part
// b % splits of channel b / splits: the final statistics when splits == 1, else its partial state.
template <class T, int kV>
__global__ void batch_norm_stats_kernel(const T* x, int64_t c, int64_t hw, int64_t nvec,
                                        int64_t splits, Acc<T> eps, Welford<Acc<T>>* partial,
                                        Acc<T>* mean, Acc<T>* var, Acc<T>* rstd) {
  using A = Acc<T>;
  __shared__ Welford<A> smem[kWarps];
  const int64_t k = blockIdx.x / splits, part = blockIdx.x - k * splits;
  const int64_t chunk = (nvec + splits - 1) / splits;
  const int64_t begin = part * chunk, end = min(nvec, begin + chunk);
  Welford<A> w = {A(0), A(0), A(0)};
  for_channel_vectors<kV>(k, c, hw, begin, end, [&](int64_t e) {
    A v[kV];
    load_vec<T, kV>(x, e, v);
    w = welford_combine(w, welford_of<kV>(v));
  });
  w = block_welford(w, smem);
  if (threadIdx.x != 0) return;
  if (splits == 1) {
    write_stats(w, eps, k, mean, var, rstd);
  } else {
    partial[blockIdx.x] = w;
  }
}

// Block k combines the `splits` partial states of channel k.
template <class A>
__global__ void batch_norm_stats_finish_kernel(const Welford<A>* partial, int64_t splits, A eps,
                                               A* mean, A* var, A* rstd) {
  __shared__ Welford<A> smem[kWarps];
  const int64_t k = blockIdx.x;
  Welford<A> w = {A(0), A(0), A(0)};
  for (int64_t s = threadIdx.x; s < splits; s += blockDim.x) {
    w = welford_combine(w, partial[k * splits + s]);
  }
  w = block_welford(w, smem);
  if (threadIdx.x == 0) write_stats(w, eps, k, mean, var, rstd);
}

// Calls f(e, k) for each kV-element vector of an (n, c, hw) tensor (hw % kV == 0), grid-stride: e
// its first element, k its channel. Index math in 32 bits when the tensor has fewer than 2^31
// elements (kSmall), once per vector.
template <int kV, bool kSmall, class F>
__device__ __forceinline__ void for_tensor_vectors(int64_t c, int64_t hw, int64_t total, F&& f) {
  using I = std::conditional_t<kSmall, uint32_t, int64_t>;
  const int64_t nvec = total / kV;
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u < nvec;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const auto e = static_cast<I>(u * kV);
    f(static_cast<int64_t>(e), static_cast<int64_t>((e / static_cast<I>(hw)) % static_cast<I>(c)));
  }
}

// x, y: (n, c, hw), kV-element vectors (hw % kV == 0, both 16-byte aligned when kV > 1).
template <class T, int kV, bool kSmall>
__global__ void batch_norm_apply_kernel(const T* x, int64_t c, int64_t hw, int64_t total,
                                        const Acc<T>* mean, const Acc<T>* rstd,
                                        const Acc<T>* weight, const Acc<T>* bias, T* y) {
  using A = Acc<T>;
  for_tensor_vectors<kV, kSmall>(c, hw, total, [&](int64_t e, int64_t k) {
    const A mu = mean[k], scale = rstd[k] * param(weight, k, 1.0f), b = param(bias, k, 0.0f);
    A v[kV];
    load_vec<T, kV>(x, e, v);
#pragma unroll
    for (int j = 0; j < kV; ++j) v[j] = (v[j] - mu) * scale + b;
    store_vec<T, kV>(y, e, v);
  });
}

// dx of batch_norm_backward for the kV elements from e on: in training
// scale (dy - mean_dy - xhat mean_dy_xhat) with xhat = (x - mu) rs, in eval scale dy.
template <class T, int kV>
__device__ __forceinline__ void batch_norm_dx_vec(const T* dy, const T* x, int64_t e, bool training,
                                                  Acc<T> mu, Acc<T> rs, Acc<T> scale,
                                                  Acc<T> mean_dy, Acc<T> mean_dy_xhat, T* dx) {
  Acc<T> g[kV];
  load_vec<T, kV>(dy, e, g);
  if (training) {
    Acc<T> xv[kV];
    load_vec<T, kV>(x, e, xv);
#pragma unroll
    for (int j = 0; j < kV; ++j) g[j] = scale * (g[j] - mean_dy - (xv[j] - mu) * rs * mean_dy_xhat);
  } else {
#pragma unroll
    for (int j = 0; j < kV; ++j) g[j] = scale * g[j];
  }
  store_vec<T, kV>(dx, e, g);
}

// Block b reduces part b % splits of channel b / splits; kV as in batch_norm_stats_kernel (dx
// aligned too when kV > 1). With one part per channel the block also writes dweight, dbias and
// dx; with more it writes its two sums to partial[2 b], partial[2 b + 1] for
// batch_norm_backward_finish_kernel and batch_norm_dx_kernel.
template <class T, int kV>
__global__ void batch_norm_backward_kernel(const T* dy, const T* x, int64_t c, int64_t hw,
                                           int64_t m, int64_t splits, const Acc<T>* mean,
                                           const Acc<T>* rstd, const Acc<T>* weight, bool training,
                                           Acc<T>* partial, T* dx, Acc<T>* dweight, Acc<T>* dbias) {
  using A = Acc<T>;
  __shared__ A smem[kWarps];
  const int64_t k = blockIdx.x / splits, part = blockIdx.x - k * splits, nvec = m / kV;
  const int64_t chunk = (nvec + splits - 1) / splits;
  const int64_t begin = part * chunk, end = min(nvec, begin + chunk);
  const A mu = mean[k], rs = rstd[k];
  A s_dy = 0, s_dy_xhat = 0;
  for_channel_vectors<kV>(k, c, hw, begin, end, [&](int64_t e) {
    A g[kV], xv[kV];
    load_vec<T, kV>(dy, e, g);
    load_vec<T, kV>(x, e, xv);
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      s_dy += g[j];
      s_dy_xhat += g[j] * (xv[j] - mu) * rs;
    }
  });
  s_dy = block_sum<kWarps>(s_dy, smem);
  s_dy_xhat = block_sum<kWarps>(s_dy_xhat, smem);
  if (splits > 1) {
    if (threadIdx.x == 0) {
      partial[2 * blockIdx.x] = s_dy;
      partial[2 * blockIdx.x + 1] = s_dy_xhat;
    }
    return;
  }
  if (threadIdx.x == 0) {
    if (dbias) dbias[k] = s_dy;
    if (dweight) dweight[k] = s_dy_xhat;
  }
  if (!dx) return;
  const A scale = rs * param(weight, k, 1.0f);
  const A mean_dy = m > 0 ? s_dy / static_cast<A>(m) : A(0);
  const A mean_dy_xhat = m > 0 ? s_dy_xhat / static_cast<A>(m) : A(0);
  for_channel_vectors<kV>(k, c, hw, 0, nvec, [&](int64_t e) {
    batch_norm_dx_vec<T, kV>(dy, x, e, training, mu, rs, scale, mean_dy, mean_dy_xhat, dx);
  });
}

// Block k adds the `splits` partial sums of channel k: dbias, dweight, and in coef[2 k], coef[2 k +
// 1] the means sum(dy) / m and sum(dy xhat) / m that dx needs.
template <class A>
__global__ void batch_norm_backward_finish_kernel(const A* partial, int64_t splits, int64_t m,
                                                  A* dweight, A* dbias, A* coef) {
  __shared__ A smem[kWarps];
  const int64_t k = blockIdx.x;
  A s_dy = 0, s_dy_xhat = 0;
  for (int64_t s = threadIdx.x; s < splits; s += blockDim.x) {
    s_dy += partial[2 * (k * splits + s)];
    s_dy_xhat += partial[2 * (k * splits + s) + 1];
  }
  s_dy = block_sum<kWarps>(s_dy, smem);
  s_dy_xhat = block_sum<kWarps>(s_dy_xhat, smem);
  if (threadIdx.x != 0) return;
  if (dbias) dbias[k] = s_dy;
  if (dweight) dweight[k] = s_dy_xhat;
  coef[2 * k] = s_dy / static_cast<A>(m);
  coef[2 * k + 1] = s_dy_xhat / static_cast<A>(m);
}

// dx of batch_norm_backward from the per-channel coef of batch_norm_backward_finish_kernel; layout
// and index math as batch_norm_apply_kernel.
template <class T, int kV, bool kSmall>
__global__ void batch_norm_dx_kernel(const T* dy, const T* x, int64_t c, int64_t hw, int64_t total,
                                     const Acc<T>* mean, const Acc<T>* rstd, const Acc<T>* weight,
                                     bool training, const Acc<T>* coef, T* dx) {
  using A = Acc<T>;
  for_tensor_vectors<kV, kSmall>(c, hw, total, [&](int64_t e, int64_t k) {
    const A rs = rstd[k];
    batch_norm_dx_vec<T, kV>(dy, x, e, training, mean[k], rs, rs * param(weight, k, 1.0f),
                             coef[2 * k], coef[2 * k + 1], dx);
  });
}

// --- layer norm: x (rows, cols); warp w of the grid owns rows w, w + total warps, ... ---

template <class T>
__global__ void layer_norm_forward_kernel(const T* x, int64_t rows, int64_t cols, bool rms,
                                          const Acc<T>* weight, const Acc<T>* bias, Acc<T> eps,
                                          T* y, Acc<T>* mean, Acc<T>* rstd) {
  using A = Acc<T>;
  const int lane = threadIdx.x % 32;
  const int64_t nwarps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; r < rows;
       r += nwarps) {
    const T* row = x + r * cols;
    A s = 0;
    if (!rms) {
      for (int64_t j = lane; j < cols; j += 32) s += load(row, j);
    }
    const A mu = rms ? A(0) : warp_sum(s) / static_cast<A>(cols);
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
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, int64_t rows, int64_t cols, bool rms,
                                     const Acc<T>* mean, const Acc<T>* rstd, const Acc<T>* weight,
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
    const A mean_g = rms ? A(0) : warp_sum(s_g) / static_cast<A>(cols);
    const A mean_g_xhat = warp_sum(s_g_xhat) / static_cast<A>(cols);
    for (int64_t j = lane; j < cols; j += 32) {
      const A g = load(dy, base + j) * param(weight, j, 1.0f);
      const A xhat = (load(x, base + j) - mu) * rs;
      dx[base + j] = store<T>(rs * (g - mean_g - xhat * mean_g_xhat));
    }
  }
}

// Note [layer norm rows]
// A row of at most size * kPer elements is read once and held in registers, `size` threads (a warp,
// or a block of kThreads) to a row. Slot i of thread `rank` holds element layer_slot<kV>(i, rank,
// size): kV-element vectors rank, rank + size, ... (kV > 1 when cols is a multiple of the 16-byte
// vector and the rows are aligned), or single elements for kV == 1. Slots past the row end hold 0
// and are masked where that matters.
template <int kV>
__device__ __forceinline__ int64_t layer_slot(int i, int rank, int size) {
  return (static_cast<int64_t>(i / kV) * size + rank) * kV + i % kV;
}

template <class T, int kPer, int kV>
__device__ __forceinline__ void load_slots(const T* row, int64_t cols, int rank, int size,
                                           Acc<T> (&v)[kPer]) {
  static_assert(kPer % kV == 0, "a row slot holds whole vectors");
#pragma unroll
  for (int i = 0; i < kPer; i += kV) {
    Acc<T> part[kV] = {};
    const int64_t e = layer_slot<kV>(i, rank, size);
    if (e < cols) load_vec<T, kV>(row, e, part);
#pragma unroll
    for (int j = 0; j < kV; ++j) v[i + j] = part[j];
  }
}

template <class T, int kPer, int kV>
__device__ __forceinline__ void store_slots(T* row, int64_t cols, int rank, int size,
                                            const Acc<T> (&v)[kPer]) {
  static_assert(kPer % kV == 0, "a row slot holds whole vectors");
#pragma unroll
  for (int i = 0; i < kPer; i += kV) {
    const int64_t e = layer_slot<kV>(i, rank, size);
    if (e >= cols) continue;
    Acc<T> part[kV];
#pragma unroll
    for (int j = 0; j < kV; ++j) part[j] = v[i + j];
    store_vec<T, kV>(row, e, part);
  }
}

// The rows of a warp (kBlockRow false) or of a whole block of kThreads (kBlockRow true).
template <bool kBlockRow>
struct RowGroup {
  int rank, size;
  int64_t first, step;
  __device__ RowGroup() {
    if constexpr (kBlockRow) {
      rank = threadIdx.x;
      size = kThreads;
      first = blockIdx.x;
      step = gridDim.x;
    } else {
      rank = threadIdx.x % 32;
      size = 32;
      first = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
      step = static_cast<int64_t>(gridDim.x) * kWarps;
    }
  }
  template <class A>
  __device__ A sum(A v, A* smem) const {
    if constexpr (kBlockRow) {
      return block_sum<kWarps>(v, smem);
    } else {
      return warp_sum(v);
    }
  }
};

// layer_norm_forward_kernel for rows that fit Note [layer norm rows].
template <class T, bool kBlockRow, int kPer, int kV>
__global__ void __launch_bounds__(kThreads, 2)
    layer_norm_cached_kernel(const T* x, int64_t rows, int64_t cols, bool rms, const Acc<T>* weight,
                             const Acc<T>* bias, Acc<T> eps, T* y, Acc<T>* mean, Acc<T>* rstd) {
  using A = Acc<T>;
  __shared__ A smem[kWarps];
  const RowGroup<kBlockRow> grp;
  for (int64_t r = grp.first; r < rows; r += grp.step) {
    A v[kPer];
    load_slots<T, kPer, kV>(x + r * cols, cols, grp.rank, grp.size, v);
    A s = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) s += v[i];
    // rms is the same for the whole grid: every thread of a row group takes the same side.
    const A mu = rms ? A(0) : grp.sum(s, smem) / static_cast<A>(cols);
    A q = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const A d = v[i] - mu;
      q += layer_slot<kV>(i, grp.rank, grp.size) < cols ? d * d : A(0);
    }
    const A rs = A(1) / sqrt(grp.sum(q, smem) / static_cast<A>(cols) + eps);
    if (grp.rank == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t e = layer_slot<kV>(i, grp.rank, grp.size);
      if (e < cols) v[i] = (v[i] - mu) * rs * param(weight, e, 1.0f) + param(bias, e, 0.0f);
    }
    store_slots<T, kPer, kV>(y + r * cols, cols, grp.rank, grp.size, v);
  }
}

// layer_norm_dx_kernel for rows that fit Note [layer norm rows].
template <class T, bool kBlockRow, int kPer, int kV>
__global__ void __launch_bounds__(kThreads, 2)
    layer_norm_dx_cached_kernel(const T* dy, const T* x, int64_t rows, int64_t cols, bool rms,
                                const Acc<T>* mean, const Acc<T>* rstd, const Acc<T>* weight,
                                T* dx) {
  using A = Acc<T>;
  __shared__ A smem[kWarps];
  const RowGroup<kBlockRow> grp;
  for (int64_t r = grp.first; r < rows; r += grp.step) {
    const A mu = mean[r], rs = rstd[r];
    A g[kPer], xh[kPer];
    load_slots<T, kPer, kV>(dy + r * cols, cols, grp.rank, grp.size, g);
    load_slots<T, kPer, kV>(x + r * cols, cols, grp.rank, grp.size, xh);
    A s_g = 0, s_g_xhat = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t e = layer_slot<kV>(i, grp.rank, grp.size);
      g[i] *= e < cols ? param(weight, e, 1.0f) : A(0);
      xh[i] = (xh[i] - mu) * rs;
      s_g += g[i];
      s_g_xhat += g[i] * xh[i];
    }
    const A mean_g = rms ? A(0) : grp.sum(s_g, smem) / static_cast<A>(cols);
    const A mean_g_xhat = grp.sum(s_g_xhat, smem) / static_cast<A>(cols);
#pragma unroll
    for (int i = 0; i < kPer; ++i) g[i] = rs * (g[i] - mean_g - xh[i] * mean_g_xhat);
    store_slots<T, kPer, kV>(dx + r * cols, cols, grp.rank, grp.size, g);
  }
}

// Column sums for dweight/dbias. Block (32, kColRows): column blockIdx.x * 32 + threadIdx.x, rows
// [blockIdx.y * chunk, +chunk) split over threadIdx.y; partial sums meet in shared memory and one
// atomic per column and block adds them to the output. In deterministic mode (`partial` set) the
// block stores its sums to row blockIdx.y of partial (2 x chunks x cols: weight, then bias)
// instead, and layer_norm_dparams_finish_kernel adds them in chunk order.
constexpr int kColRows = 8;

template <class T>
__global__ void layer_norm_dparams_kernel(const T* dy, const T* x, int64_t rows, int64_t cols,
                                          int64_t chunk, const Acc<T>* mean, const Acc<T>* rstd,
                                          Acc<T>* dweight, Acc<T>* dbias, Acc<T>* partial) {
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
  if (partial) {
    const int64_t slot = static_cast<int64_t>(blockIdx.y) * cols + j;
    partial[slot] = aw;
    partial[static_cast<int64_t>(gridDim.y) * cols + slot] = ab;
    return;
  }
  if (dweight) atomicAdd(dweight + j, aw);
  if (dbias) atomicAdd(dbias + j, ab);
}

template <class A>
__global__ void layer_norm_dparams_finish_kernel(const A* partial, int64_t chunks, int64_t cols,
                                                 A* dweight, A* dbias) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < cols;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    A aw = 0, ab = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      aw += partial[c * cols + j];
      ab += partial[(chunks + c) * cols + j];
    }
    if (dweight) dweight[j] += aw;
    if (dbias) dbias[j] += ab;
  }
}

// --- dropout ---

template <class T>
__global__ void dropout_kernel(const T* in, int64_t numel, uint64_t seed, uint64_t offset,
                               uint32_t threshold, Acc<T> scale, kern::DropoutBlock block, T* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const bool keep = (kern::philox_element(seed, offset, block.index(i)).w[0] >> 8) >= threshold;
    out[i] = keep ? store<T>(load(in, i) * scale) : store<T>(Acc<T>(0));
  }
}

// Calls f(IntC<kV>) with kV the vector width of T when hw is a multiple of it and every pointer is
// 16-byte aligned, else 1.
template <class T, class F>
void visit_vec_width(int64_t hw, std::initializer_list<const void*> ps, F&& f) {
  bool vec = hw % kVecWidth<T> == 0;
  for (const void* p : ps) vec = vec && (p == nullptr || aligned16(p));
  if (vec) {
    f(std::integral_constant<int, kVecWidth<T>>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

// Blocks per channel for the batch norm sums over nvec vectors a channel: few channels cannot fill
// the device a block each, so they are split until about 4 blocks run per SM, each with at least
// 16 vectors per thread.
int64_t stat_splits(int64_t nvec, int64_t c, int device) {
  const int sms = device_sm_count(device);
  return std::max<int64_t>(
      1, std::min((nvec + 16 * kThreads - 1) / (16 * kThreads), (4 * sms + c - 1) / c));
}

// For rows of `cols` elements that fit Note [layer norm rows], calls f(block_row, IntC<kPer>,
// IntC<kV>, grid) with the configuration and returns true: a warp per row with 8 or kWide slots a
// lane up to 32 kWide elements, a block per row with kWide slots a thread beyond. kWide: 32 (16
// for f64) for one row in registers, half that for two, so that no register spills.
template <class T, int kRowsHeld, class F>
bool visit_layer_rows(int64_t rows, int64_t cols, std::initializer_list<const void*> ps, F&& f) {
  constexpr int kWide = (sizeof(T) == 8 ? 16 : 32) / kRowsHeld;
  if (cols > static_cast<int64_t>(kThreads) * kWide) return false;
  visit_vec_width<T>(cols, ps, [&](auto width) {
    using Warp = std::false_type;
    using Block = std::true_type;
    const unsigned warp_grid = grid_for(rows, kWarps), block_grid = grid_for(rows, 1);
    if (cols <= 32 * 8) {
      f(Warp{}, std::integral_constant<int, 8>{}, width, warp_grid);
      return;
    }
    if constexpr (kWide > 8) {
      if (cols <= 32 * kWide) {
        f(Warp{}, std::integral_constant<int, kWide>{}, width, warp_grid);
        return;
      }
    }
    f(Block{}, std::integral_constant<int, kWide>{}, width, block_grid);
  });
  return true;
}

}  // namespace

void batch_norm_stats(const Ctx& ctx, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      double eps, void* mean, void* var, void* rstd) {
  if (c == 0) return;
  launch_floating(ctx, dtype, "batch_norm_stats", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    visit_vec_width<T>(hw, {x}, [&](auto width) {
      constexpr int kV = decltype(width)::value;
      const int64_t nvec = n * hw / kV, splits = stat_splits(nvec, c, ctx.device);
      const Scratch<Welford<A>> partial(ctx, splits > 1 ? c * splits : 0);
      batch_norm_stats_kernel<T, kV><<<static_cast<unsigned>(c * splits), kThreads, 0, stream>>>(
          static_cast<const T*>(x), c, hw, nvec, splits, static_cast<A>(eps), partial.get(),
          static_cast<A*>(mean), static_cast<A*>(var), static_cast<A*>(rstd));
      SINTER_LAUNCH_CHECK("batch_norm_stats_kernel");
      if (splits > 1) {
        batch_norm_stats_finish_kernel<A><<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
            partial.get(), splits, static_cast<A>(eps), static_cast<A*>(mean), static_cast<A*>(var),
            static_cast<A*>(rstd));
        SINTER_LAUNCH_CHECK("batch_norm_stats_finish_kernel");
      }
    });
  });
}

void batch_norm_apply(const Ctx& ctx, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      const void* mean, const void* rstd, const void* weight, const void* bias,
                      void* y) {
  const int64_t total = n * c * hw;
  if (total == 0) return;
  launch_floating(ctx, dtype, "batch_norm_apply", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    visit_vec_width<T>(hw, {x, y}, [&](auto width) {
      constexpr int kV = decltype(width)::value;
      visit_index32(total, [&](auto small) {
        batch_norm_apply_kernel<T, kV, decltype(small)::value>
            <<<grid_for(total / kV, kThreads), kThreads, 0, stream>>>(
                static_cast<const T*>(x), c, hw, total, static_cast<const A*>(mean),
                static_cast<const A*>(rstd), static_cast<const A*>(weight),
                static_cast<const A*>(bias), static_cast<T*>(y));
        SINTER_LAUNCH_CHECK("batch_norm_apply_kernel");
      });
    });
  });
}

void batch_norm_backward(const Ctx& ctx, const void* dy, const void* x, DType dtype, int64_t n,
                         int64_t c, int64_t hw, const void* mean, const void* rstd,
                         const void* weight, bool training, void* dx, void* dweight, void* dbias) {
  if (c == 0) return;
  launch_floating(ctx, dtype, "batch_norm_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    visit_vec_width<T>(hw, {dy, x, dx}, [&](auto width) {
      constexpr int kV = decltype(width)::value;
      const int64_t m = n * hw, splits = stat_splits(m / kV, c, ctx.device);
      const auto* pdy = static_cast<const T*>(dy);
      const auto* px = static_cast<const T*>(x);
      const auto* pmean = static_cast<const A*>(mean);
      const auto* prstd = static_cast<const A*>(rstd);
      const auto* pw = static_cast<const A*>(weight);
      // partial: (c, splits, 2) block sums, then coef: (c, 2).
      const Scratch<A> scratch(ctx, splits > 1 ? 2 * c * (splits + 1) : 0);
      A* partial = scratch.get();
      batch_norm_backward_kernel<T, kV><<<static_cast<unsigned>(c * splits), kThreads, 0, stream>>>(
          pdy, px, c, hw, m, splits, pmean, prstd, pw, training, partial, static_cast<T*>(dx),
          static_cast<A*>(dweight), static_cast<A*>(dbias));
      SINTER_LAUNCH_CHECK("batch_norm_backward_kernel");
      if (splits > 1) {
        A* coef = partial + 2 * c * splits;
        batch_norm_backward_finish_kernel<A><<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
            partial, splits, m, static_cast<A*>(dweight), static_cast<A*>(dbias), coef);
        SINTER_LAUNCH_CHECK("batch_norm_backward_finish_kernel");
        const int64_t total = m * c;
        if (dx) {
          visit_index32(total, [&](auto small) {
            batch_norm_dx_kernel<T, kV, decltype(small)::value>
                <<<grid_for(total / kV, kThreads), kThreads, 0, stream>>>(
                    pdy, px, c, hw, total, pmean, prstd, pw, training, coef, static_cast<T*>(dx));
            SINTER_LAUNCH_CHECK("batch_norm_dx_kernel");
          });
        }
      }
    });
  });
}

void layer_norm_forward(const Ctx& ctx, const void* x, DType dtype, int64_t rows, int64_t cols,
                        kern::RowNorm kind, const void* weight, const void* bias, double eps,
                        void* y, void* mean, void* rstd) {
  if (rows == 0 || cols == 0) return;
  const bool rms = kind == kern::RowNorm::Rms;
  launch_floating(ctx, dtype, "layer_norm_forward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const bool cached = visit_layer_rows<T, 1>(
        rows, cols, {x, y}, [&](auto block_row, auto per, auto width, unsigned grid) {
          layer_norm_cached_kernel<T, decltype(block_row)::value, decltype(per)::value,
                                   decltype(width)::value><<<grid, kThreads, 0, stream>>>(
              static_cast<const T*>(x), rows, cols, rms, static_cast<const A*>(weight),
              static_cast<const A*>(bias), static_cast<A>(eps), static_cast<T*>(y),
              static_cast<A*>(mean), static_cast<A*>(rstd));
          SINTER_LAUNCH_CHECK("layer_norm_cached_kernel");
        });
    if (cached) return;
    layer_norm_forward_kernel<T><<<grid_for(rows, kWarps), kThreads, 0, stream>>>(
        static_cast<const T*>(x), rows, cols, rms, static_cast<const A*>(weight),
        static_cast<const A*>(bias), static_cast<A>(eps), static_cast<T*>(y), static_cast<A*>(mean),
        static_cast<A*>(rstd));
    SINTER_LAUNCH_CHECK("layer_norm_forward_kernel");
  });
}

void layer_norm_backward(const Ctx& ctx, const void* dy, const void* x, DType dtype, int64_t rows,
                         int64_t cols, kern::RowNorm kind, const void* mean, const void* rstd,
                         const void* weight, void* dx, void* dweight, void* dbias) {
  if (rows == 0 || cols == 0) return;
  const bool rms = kind == kern::RowNorm::Rms;
  launch_floating(ctx, dtype, "layer_norm_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const auto* pdy = static_cast<const T*>(dy);
    const auto* px = static_cast<const T*>(x);
    const auto* pmean = static_cast<const A*>(mean);
    const auto* prstd = static_cast<const A*>(rstd);
    const bool cached =
        dx &&
        visit_layer_rows<T, 2>(
            rows, cols, {dy, x, dx}, [&](auto block_row, auto per, auto width, unsigned grid) {
              layer_norm_dx_cached_kernel<T, decltype(block_row)::value, decltype(per)::value,
                                          decltype(width)::value><<<grid, kThreads, 0, stream>>>(
                  pdy, px, rows, cols, rms, pmean, prstd, static_cast<const A*>(weight),
                  static_cast<T*>(dx));
              SINTER_LAUNCH_CHECK("layer_norm_dx_cached_kernel");
            });
    if (dx && !cached) {
      layer_norm_dx_kernel<T><<<grid_for(rows, kWarps), kThreads, 0, stream>>>(
          pdy, px, rows, cols, rms, pmean, prstd, static_cast<const A*>(weight),
          static_cast<T*>(dx));
      SINTER_LAUNCH_CHECK("layer_norm_dx_kernel");
    }
    if (dweight || dbias) {
      // About 64 rows per block, and at most 4096 row chunks (grid.y is limited to 65535).
      const int64_t chunks = std::clamp<int64_t>((rows + 63) / 64, 1, 4096);
      const int64_t chunk = (rows + chunks - 1) / chunks;
      const int64_t used = (rows + chunk - 1) / chunk;
      const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(used));
      const bool fixed_order = deterministic_algorithms_enabled() && used > 1;
      const Scratch<A> partial(ctx, fixed_order ? 2 * used * cols : 0);
      layer_norm_dparams_kernel<T><<<grid, dim3(32, kColRows), 0, stream>>>(
          pdy, px, rows, cols, chunk, pmean, prstd, static_cast<A*>(dweight),
          static_cast<A*>(dbias), partial.get());
      SINTER_LAUNCH_CHECK("layer_norm_dparams_kernel");
      if (fixed_order) {
        layer_norm_dparams_finish_kernel<A><<<grid_for(cols, kThreads), kThreads, 0, stream>>>(
            partial.get(), used, cols, static_cast<A*>(dweight), static_cast<A*>(dbias));
        SINTER_LAUNCH_CHECK("layer_norm_dparams_finish_kernel");
      }
    }
  });
}

void dropout_apply(const Ctx& ctx, const void* in, DType dtype, int64_t numel, uint64_t seed,
                   uint64_t offset, uint32_t threshold, double scale,
                   const kern::DropoutBlock& block, void* out) {
  if (numel == 0) return;
  launch_floating(ctx, dtype, "dropout_apply", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    dropout_kernel<T><<<grid_for(numel, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(in), numel, seed, offset, threshold, static_cast<A>(scale), block,
        static_cast<T*>(out));
    SINTER_LAUNCH_CHECK("dropout_kernel");
  });
}

}  // namespace sinter::cudak
