// CUDA softmax, log_softmax and the fused cross entropy over the rows of Note [softmax rows]
// (src/internal/kernels_loss.h). Dense rows take a warp each (a block each when long); strided
// rows (inner > 1) take a thread each, so that a warp's loads are adjacent in memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "accumulate.cuh"
#include "cuda_check.cuh"
#include "internal/kernels_loss.h"
#include "internal/scalar_ops.h"

namespace sinter::cudak {
namespace {

__device__ __forceinline__ float exp_acc(float v) { return expf(v); }
__device__ __forceinline__ double exp_acc(double v) { return exp(v); }
__device__ __forceinline__ float log_acc(float v) { return logf(v); }
__device__ __forceinline__ double log_acc(double v) { return log(v); }

// The online softmax state: the running maximum m and the sum s of exp(x - m) so far. NaN never
// becomes m but always reaches s, which then stays NaN; rows of only -inf keep m = -inf, s = 0.
template <typename A>
struct MaxSum {
  A m;
  A s;
};

template <typename A>
__device__ __forceinline__ MaxSum<A> max_sum_identity() {
  return {-static_cast<A>(INFINITY), A(0)};
}

template <typename A>
__device__ __forceinline__ void max_sum_add(MaxSum<A>& st, A x) {
  if (x > st.m) {
    st.s = st.s * exp_acc(st.m - x) + A(1);
    st.m = x;
  } else if (st.m != -static_cast<A>(INFINITY) || x != x) {
    st.s += exp_acc(x - st.m);
  }
}

struct CombineMaxSum {
  template <typename A>
  __device__ MaxSum<A> operator()(MaxSum<A> a, MaxSum<A> b) const {
    const A m = a.m > b.m ? a.m : b.m;
    if (m == -static_cast<A>(INFINITY)) return {m, a.s + b.s};  // keeps a NaN in either
    return {m, a.s * exp_acc(a.m - m) + b.s * exp_acc(b.m - m)};
  }
};

struct CombineSum {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

template <typename A>
__device__ __forceinline__ A shfl_xor(A v, int offset) {
  return __shfl_xor_sync(0xffffffffu, v, offset);
}
template <typename A>
__device__ __forceinline__ MaxSum<A> shfl_xor(MaxSum<A> v, int offset) {
  return {shfl_xor(v.m, offset), shfl_xor(v.s, offset)};
}

// Which threads share one row.
enum class Mode { Thread, Warp, Block };

template <Mode M>
__device__ __forceinline__ int group_rank() {
  if constexpr (M == Mode::Thread) return 0;
  if constexpr (M == Mode::Warp) return static_cast<int>(threadIdx.x % 32);
  return static_cast<int>(threadIdx.x);
}

template <Mode M>
__device__ __forceinline__ int group_size() {
  if constexpr (M == Mode::Thread) return 1;
  if constexpr (M == Mode::Warp) return 32;
  return static_cast<int>(blockDim.x);
}

template <Mode M>
__device__ __forceinline__ int64_t first_row() {
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (M == Mode::Thread) return tid;
  if constexpr (M == Mode::Warp) return tid / 32;
  return blockIdx.x;
}

template <Mode M>
__device__ __forceinline__ int64_t row_step() {
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if constexpr (M == Mode::Thread) return threads;
  if constexpr (M == Mode::Warp) return threads / 32;
  return gridDim.x;
}

// Every thread of the row's group gets the combined value. In Block mode all threads of the block
// must call it; smem holds one value per warp.
template <Mode M, class V, class F>
__device__ __forceinline__ V group_allreduce(V v, F f, V* smem) {
  if constexpr (M != Mode::Thread) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = f(v, shfl_xor(v, offset));
  }
  if constexpr (M == Mode::Block) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    __syncthreads();  // the previous row's readers are done with smem
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = smem[0];
    for (int w = 1; w < warps; ++w) v = f(v, smem[w]);
  }
  return v;
}

// The first element of row `row` in (outer, dim, inner); the row's elements are `inner` apart.
__device__ __forceinline__ int64_t row_base(int64_t row, int64_t dim, int64_t inner) {
  const int64_t o = row / inner;
  return o * dim * inner + (row - o * inner);
}

template <typename T, Mode M, bool kLog>
__global__ void softmax_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                               int64_t dim, int64_t inner) {
  using A = Acc<T>;
  __shared__ MaxSum<A> smem[32];
  const int rank = group_rank<M>(), size = group_size<M>();
  for (int64_t row = first_row<M>(); row < rows; row += row_step<M>()) {
    const int64_t base = row_base(row, dim, inner);
    MaxSum<A> st = max_sum_identity<A>();
    for (int64_t k = rank; k < dim; k += size) max_sum_add(st, to_acc(x[base + k * inner]));
    st = group_allreduce<M>(st, CombineMaxSum{}, smem);
    const A log_s = log_acc(st.s), inv_s = A(1) / st.s;
    for (int64_t k = rank; k < dim; k += size) {
      const A v = to_acc(x[base + k * inner]) - st.m;
      y[base + k * inner] = from_acc<T>(kLog ? v - log_s : exp_acc(v) * inv_s);
    }
  }
}

template <typename T, Mode M, bool kLog>
__global__ void softmax_backward_kernel(const T* __restrict__ g, const T* __restrict__ y,
                                        T* __restrict__ dx, int64_t rows, int64_t dim,
                                        int64_t inner) {
  using A = Acc<T>;
  __shared__ A smem[32];
  const int rank = group_rank<M>(), size = group_size<M>();
  for (int64_t row = first_row<M>(); row < rows; row += row_step<M>()) {
    const int64_t base = row_base(row, dim, inner);
    A dot = 0;
    for (int64_t k = rank; k < dim; k += size) {
      const int64_t e = base + k * inner;
      dot += kLog ? to_acc(g[e]) : to_acc(g[e]) * to_acc(y[e]);
    }
    dot = group_allreduce<M>(dot, CombineSum{}, smem);
    for (int64_t k = rank; k < dim; k += size) {
      const int64_t e = base + k * inner;
      const A gv = to_acc(g[e]), yv = to_acc(y[e]);
      dx[e] = from_acc<T>(kLog ? gv - exp_acc(yv) * dot : yv * (gv - dot));
    }
  }
}

// One row per sample; the smoothing sum is shifted by the row's first element (Note [cross
// entropy sums] in src/cpu/softmax.cpp).
template <typename T, Mode M>
__global__ void cross_entropy_kernel(const T* __restrict__ x, const int64_t* __restrict__ target,
                                     Acc<T>* __restrict__ loss, Acc<T>* __restrict__ lse,
                                     int64_t rows, int64_t c, int64_t inner, int64_t ignore_index,
                                     Acc<T> eps) {
  using A = Acc<T>;
  __shared__ MaxSum<A> smem_ms[32];
  __shared__ A smem_sum[32];
  const int rank = group_rank<M>(), size = group_size<M>();
  for (int64_t row = first_row<M>(); row < rows; row += row_step<M>()) {
    const int64_t base = row_base(row, c, inner);
    MaxSum<A> st = max_sum_identity<A>();
    for (int64_t k = rank; k < c; k += size) max_sum_add(st, to_acc(x[base + k * inner]));
    st = group_allreduce<M>(st, CombineMaxSum{}, smem_ms);
    A shift = 0, shifted = 0;
    if (eps > A(0)) {
      const A x0 = to_acc(x[base]);
      shift = isfinite(x0) ? x0 : A(0);
      for (int64_t k = rank; k < c; k += size) shifted += to_acc(x[base + k * inner]) - shift;
      shifted = group_allreduce<M>(shifted, CombineSum{}, smem_sum);
    }
    if (rank != 0) continue;
    const A log_s = log_acc(st.s);
    lse[row] = st.m + log_s;
    const int64_t t = target[row];
    if (t == ignore_index) {
      loss[row] = A(0);
      continue;
    }
    A l = log_s + (A(1) - eps) * (st.m - to_acc(x[base + t * inner]));
    if (eps > A(0)) l += eps * ((st.m - shift) - shifted / static_cast<A>(c));
    loss[row] = l;
  }
}

// One thread per logit: dx = grad * (softmax - (1 - eps) onehot - eps / c), 0 for ignored rows.
template <typename T>
__global__ void cross_entropy_backward_kernel(const T* __restrict__ x,
                                              const int64_t* __restrict__ target,
                                              const Acc<T>* __restrict__ lse,
                                              const Acc<T>* __restrict__ grad, int64_t grad_stride,
                                              T* __restrict__ dx, int64_t total, int64_t c,
                                              int64_t inner, int64_t ignore_index, Acc<T> eps) {
  using A = Acc<T>;
  const A uniform = eps / static_cast<A>(c);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t ok = inner == 1 ? e : e / inner;  // (o, k)
    const int64_t o = ok / c, k = ok - o * c;
    const int64_t row = o * inner + (e - ok * inner);
    const int64_t t = target[row];
    A v = 0;
    if (t != ignore_index) {
      const A p = exp_acc(to_acc(x[e]) - lse[row]);
      v = grad[row * grad_stride] * (p - (k == t ? A(1) - eps : A(0)) - uniform);
    }
    dx[e] = from_acc<T>(v);
  }
}

constexpr int64_t kWarpRowMax = 1024;    // dense rows up to this length take a warp each
constexpr int64_t kMaxBlocks = 1 << 20;  // grids stride beyond this
constexpr int kThreads = 256;

unsigned blocks_for(int64_t work, int64_t per_block) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((work + per_block - 1) / per_block, 1, kMaxBlocks));
}

struct RowLaunch {
  Mode mode;
  unsigned grid;
  int threads;
};

RowLaunch row_launch(int64_t rows, int64_t dim, int64_t inner) {
  if (inner > 1) return {Mode::Thread, blocks_for(rows, kThreads), kThreads};
  if (dim <= kWarpRowMax) return {Mode::Warp, blocks_for(rows, kThreads / 32), kThreads};
  return {Mode::Block, blocks_for(rows, 1), dim > 8192 ? 1024 : 512};
}

// Calls f.template operator()<T>() for the floating dtype `dtype`.
template <class F>
void visit_floating(const char* name, DType dtype, F&& f) {
  kern::visit_floating_type<__nv_bfloat16, __half>(
      dtype, name, [&](auto tag) { f.template operator()<typename decltype(tag)::type>(); });
}

template <typename T, bool kLog>
void softmax_launch(cudaStream_t stream, const T* x, T* y, int64_t outer, int64_t dim,
                    int64_t inner) {
  const int64_t rows = outer * inner;
  const RowLaunch l = row_launch(rows, dim, inner);
  switch (l.mode) {
    case Mode::Thread:
      softmax_kernel<T, Mode::Thread, kLog>
          <<<l.grid, l.threads, 0, stream>>>(x, y, rows, dim, inner);
      break;
    case Mode::Warp:
      softmax_kernel<T, Mode::Warp, kLog><<<l.grid, l.threads, 0, stream>>>(x, y, rows, dim, inner);
      break;
    case Mode::Block:
      softmax_kernel<T, Mode::Block, kLog>
          <<<l.grid, l.threads, 0, stream>>>(x, y, rows, dim, inner);
      break;
  }
  SINTER_LAUNCH_CHECK("softmax_kernel");
}

template <typename T, bool kLog>
void softmax_backward_launch(cudaStream_t stream, const T* g, const T* y, T* dx, int64_t outer,
                             int64_t dim, int64_t inner) {
  const int64_t rows = outer * inner;
  const RowLaunch l = row_launch(rows, dim, inner);
  switch (l.mode) {
    case Mode::Thread:
      softmax_backward_kernel<T, Mode::Thread, kLog>
          <<<l.grid, l.threads, 0, stream>>>(g, y, dx, rows, dim, inner);
      break;
    case Mode::Warp:
      softmax_backward_kernel<T, Mode::Warp, kLog>
          <<<l.grid, l.threads, 0, stream>>>(g, y, dx, rows, dim, inner);
      break;
    case Mode::Block:
      softmax_backward_kernel<T, Mode::Block, kLog>
          <<<l.grid, l.threads, 0, stream>>>(g, y, dx, rows, dim, inner);
      break;
  }
  SINTER_LAUNCH_CHECK("softmax_backward_kernel");
}

}  // namespace

void softmax_rows(const Ctx& ctx, const void* x, DType dtype, int64_t outer, int64_t dim,
                  int64_t inner, bool log, void* y) {
  if (outer * dim * inner == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_floating("softmax_rows", dtype, [&]<typename T>() {
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (log) {
      softmax_launch<T, true>(stream, xt, yt, outer, dim, inner);
    } else {
      softmax_launch<T, false>(stream, xt, yt, outer, dim, inner);
    }
  });
}

void softmax_rows_backward(const Ctx& ctx, const void* g, const void* y, DType dtype, int64_t outer,
                           int64_t dim, int64_t inner, bool log, void* dx) {
  if (outer * dim * inner == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_floating("softmax_rows_backward", dtype, [&]<typename T>() {
    const T* gt = static_cast<const T*>(g);
    const T* yt = static_cast<const T*>(y);
    T* dxt = static_cast<T*>(dx);
    if (log) {
      softmax_backward_launch<T, true>(stream, gt, yt, dxt, outer, dim, inner);
    } else {
      softmax_backward_launch<T, false>(stream, gt, yt, dxt, outer, dim, inner);
    }
  });
}

void cross_entropy_rows(const Ctx& ctx, const CrossEntropyArgs& a, void* loss, void* lse) {
  const int64_t rows = a.n * a.inner;
  if (rows == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_floating("cross_entropy_rows", a.dtype, [&]<typename T>() {
    using A = Acc<T>;
    const T* x = static_cast<const T*>(a.logits);
    A* lo = static_cast<A*>(loss);
    A* ls = static_cast<A*>(lse);
    const A eps = static_cast<A>(a.label_smoothing);
    const RowLaunch l = row_launch(rows, a.c, a.inner);
    switch (l.mode) {
      case Mode::Thread:
        cross_entropy_kernel<T, Mode::Thread><<<l.grid, l.threads, 0, stream>>>(
            x, a.target, lo, ls, rows, a.c, a.inner, a.ignore_index, eps);
        break;
      case Mode::Warp:
        cross_entropy_kernel<T, Mode::Warp><<<l.grid, l.threads, 0, stream>>>(
            x, a.target, lo, ls, rows, a.c, a.inner, a.ignore_index, eps);
        break;
      case Mode::Block:
        cross_entropy_kernel<T, Mode::Block><<<l.grid, l.threads, 0, stream>>>(
            x, a.target, lo, ls, rows, a.c, a.inner, a.ignore_index, eps);
        break;
    }
    SINTER_LAUNCH_CHECK("cross_entropy_kernel");
  });
}

void cross_entropy_rows_backward(const Ctx& ctx, const CrossEntropyArgs& a, const void* lse,
                                 const void* grad, int64_t grad_stride, void* dlogits) {
  const int64_t total = a.n * a.c * a.inner;
  if (total == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_floating("cross_entropy_rows_backward", a.dtype, [&]<typename T>() {
    using A = Acc<T>;
    cross_entropy_backward_kernel<T><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(a.logits), a.target, static_cast<const A*>(lse),
        static_cast<const A*>(grad), grad_stride, static_cast<T*>(dlogits), total, a.c, a.inner,
        a.ignore_index, static_cast<A>(a.label_smoothing));
    SINTER_LAUNCH_CHECK("cross_entropy_backward_kernel");
  });
}

}  // namespace sinter::cudak
