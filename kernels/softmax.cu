// CUDA softmax, log_softmax and the fused cross entropy over the rows of Note [softmax rows]
// in src/kern/softmax.h. Dense rows up to 8192 elements are read once into registers
// (Note [cached rows]), longer ones take a block each and two reads; strided rows (inner > 1) take
// a thread each, so that a warp's loads are adjacent in memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/scalar_ops.h"
#include "kern/softmax.h"
#include "merges.h"

namespace sinter::cudak {
namespace {

__device__ __forceinline__ float exp_acc(float v) { return expf(v); }
__device__ __forceinline__ double exp_acc(double v) { return exp(v); }
__device__ __forceinline__ float log_acc(float v) { return logf(v); }
__device__ __forceinline__ double log_acc(double v) { return log(v); }

// The online softmax state MaxSum and its steps: merges.h.

struct CombineSum {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

// The scalar shfl_xor is cuda_util.cuh's; this overload moves the two fields of a MaxSum.
using cudak::shfl_xor;
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

// Threads per block of the row kernels: kThreads in Thread and Warp mode, up to kRowMaxThreads
// for long rows in Block mode (visit_row_launch). The bound is per mode, so that only Block mode,
// whose blocks of 1024 threads could otherwise fail to launch, is held to 64 registers a thread. A
// minimum of one block per SM (in Block mode, and for f64 in every mode) keeps ptxas from aiming
// at fewer registers and spilling; without it the f32 and 16-bit Thread and Warp kernels keep
// their unbounded register counts (30-46), which a minimum of one raised to 40-64.
constexpr int kThreads = 256;
constexpr int kRowMaxThreads = 1024;
constexpr int max_row_threads(Mode m) { return m == Mode::Block ? kRowMaxThreads : kThreads; }
template <typename T>
constexpr int min_row_blocks(Mode m) {
  return m == Mode::Block || sizeof(T) == 8 ? 1 : 0;
}

template <typename T, Mode M, bool kLog>
__global__ void __launch_bounds__(max_row_threads(M), min_row_blocks<T>(M))
    softmax_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t dim,
                   int64_t inner) {
  using A = Acc<T>;
  __shared__ MaxSum<A> smem[32];
  const int rank = group_rank<M>(), size = group_size<M>();
  for (int64_t row = first_row<M>(); row < rows; row += row_step<M>()) {
    const int64_t base = row_base(row, dim, inner);
    MaxSum<A> st = max_sum_identity<A>();
    for (int64_t k = rank; k < dim; k += size) max_sum_add(st, to_acc(x[base + k * inner]));
    st = finish_max_sum(group_allreduce<M>(st, CombineMaxSum{}, smem));
    const A log_s = log_acc(st.s), inv_s = A(1) / st.s;
    for (int64_t k = rank; k < dim; k += size) {
      const A v = to_acc(x[base + k * inner]) - st.m;
      y[base + k * inner] = from_acc<T>(kLog ? v - log_s : exp_acc(v) * inv_s);
    }
  }
}

template <typename T, Mode M, bool kLog>
__global__ void __launch_bounds__(max_row_threads(M), min_row_blocks<T>(M))
    softmax_backward_kernel(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ dx,
                            int64_t rows, int64_t dim, int64_t inner) {
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

// A sample's lse and loss from its row's MaxSum, the shifted sum of Note [cross entropy sums] and
// logit(t), the logit of its target class t (read only when the sample is not ignored).
template <typename A, class Logit>
__device__ __forceinline__ void write_cross_entropy(int64_t row, MaxSum<A> st, A shift, A shifted,
                                                    int64_t c, int64_t t, int64_t ignore_index,
                                                    A eps, Logit logit, A* loss, A* lse) {
  const A log_s = log_acc(st.s);
  lse[row] = st.m + log_s;
  // An out-of-range target counts as ignored (Note [deferred device checks]): never read.
  if (t == ignore_index || t < 0 || t >= c) {
    loss[row] = A(0);
    return;
  }
  A l = log_s + (A(1) - eps) * (st.m - logit(t));
  if (eps > A(0)) l += eps * ((st.m - shift) - shifted / static_cast<A>(c));
  loss[row] = l;
}

// One row per sample; the smoothing sum is shifted by the row's first element (Note [cross
// entropy sums] in src/cpu/softmax.cpp).
template <typename T, Mode M>
__global__ void __launch_bounds__(max_row_threads(M), min_row_blocks<T>(M))
    cross_entropy_kernel(const T* __restrict__ x, const int64_t* __restrict__ target,
                         Acc<T>* __restrict__ loss, Acc<T>* __restrict__ lse, int64_t rows,
                         int64_t c, int64_t inner, int64_t ignore_index, Acc<T> eps) {
  using A = Acc<T>;
  __shared__ MaxSum<A> smem_ms[32];
  __shared__ A smem_sum[32];
  const int rank = group_rank<M>(), size = group_size<M>();
  for (int64_t row = first_row<M>(); row < rows; row += row_step<M>()) {
    const int64_t base = row_base(row, c, inner);
    MaxSum<A> st = max_sum_identity<A>();
    for (int64_t k = rank; k < c; k += size) max_sum_add(st, to_acc(x[base + k * inner]));
    st = finish_max_sum(group_allreduce<M>(st, CombineMaxSum{}, smem_ms));
    A shift = 0, shifted = 0;
    if (eps > A(0)) {
      const A x0 = to_acc(x[base]);
      shift = isfinite(x0) ? x0 : A(0);
      for (int64_t k = rank; k < c; k += size) shifted += to_acc(x[base + k * inner]) - shift;
      shifted = group_allreduce<M>(shifted, CombineSum{}, smem_sum);
    }
    if (rank == 0) {
      write_cross_entropy(
          row, st, shift, shifted, c, target[row], ignore_index, eps,
          [&](int64_t t) { return to_acc(x[base + t * inner]); }, loss, lse);
    }
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
    if (t != ignore_index && t >= 0 && t < c) {
      const A p = exp_acc(to_acc(x[e]) - lse[row]);
      v = grad[row * grad_stride] * (p - (k == t ? A(1) - eps : A(0)) - uniform);
    }
    dx[e] = from_acc<T>(v);
  }
}

// ---- dense rows held in registers ----

// Dense rows up to 8192 elements take the cached kernels (visit_cached). Their register cap lets a
// block of kCachedThreads launch and a warp-per-row launch of 256 threads run two blocks per SM.
constexpr int kCachedThreads = 512;
constexpr int kCachedMaxRegs = 65536 / kCachedThreads;
constexpr int kWarpsPerBlock = 8;
constexpr int64_t kMaxBlocks = 1 << 20;  // grids stride beyond this

// Note [cached rows]
// A dense row (inner == 1) of at most group_size * kPer elements is read from memory once: thread
// `rank` of the row's group keeps elements of it in registers, either as 16-byte vectors rank, rank
// + size, ... (when the row length is a multiple of the vector and every row starts aligned: `vec`)
// or as single elements rank, rank + size, ... Slots past the row end hold `fill` and are masked
// out of every sum.
template <typename T, int kPer>
struct RowSlots {
  static constexpr int kVec = static_cast<int>(16 / sizeof(T));
  static_assert(kPer % kVec == 0);
  using V = Vec16<T>;

  // The row element held in slot i.
  __device__ __forceinline__ static int64_t index(int i, bool vec, int rank, int size) {
    if (vec) return (static_cast<int64_t>(i / kVec) * size + rank) * kVec + i % kVec;
    return static_cast<int64_t>(i) * size + rank;
  }

  __device__ __forceinline__ static void load(const T* p, int64_t dim, bool vec, int rank, int size,
                                              Acc<T> fill, Acc<T> (&v)[kPer]) {
    if (vec) {
#pragma unroll
      for (int i = 0; i < kPer; i += kVec) {
        const int64_t e = index(i, true, rank, size);
        if (e < dim) {
          const V x = *reinterpret_cast<const V*>(p + e);
#pragma unroll
          for (int k = 0; k < kVec; ++k) v[i + k] = to_acc(x.v[k]);
        } else {
#pragma unroll
          for (int k = 0; k < kVec; ++k) v[i + k] = fill;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int64_t e = index(i, false, rank, size);
        v[i] = e < dim ? to_acc(p[e]) : fill;
      }
    }
  }

  __device__ __forceinline__ static void store(T* p, int64_t dim, bool vec, int rank, int size,
                                               const Acc<T> (&v)[kPer]) {
    if (vec) {
#pragma unroll
      for (int i = 0; i < kPer; i += kVec) {
        const int64_t e = index(i, true, rank, size);
        if (e < dim) {
          V x;
#pragma unroll
          for (int k = 0; k < kVec; ++k) x.v[k] = from_acc<T>(v[i + k]);
          *reinterpret_cast<V*>(p + e) = x;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int64_t e = index(i, false, rank, size);
        if (e < dim) p[e] = from_acc<T>(v[i]);
      }
    }
  }
};

struct CombineMax {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return b > a ? b : a;
  }
};

// The row maximum (NaN never becomes it) and the sum of exp(x - max) over the row, as the CPU
// reference forms them: NaN reaches the sum.
template <Mode M, typename A, int kPer, class Valid>
__device__ __forceinline__ MaxSum<A> cached_max_sum(const A (&v)[kPer], Valid valid, A* smem) {
  A m = -static_cast<A>(INFINITY);
#pragma unroll
  for (int i = 0; i < kPer; ++i) m = v[i] > m ? v[i] : m;
  m = group_allreduce<M>(m, CombineMax{}, smem);
  A s = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) s += valid(i) ? exp_acc(v[i] - m) : A(0);
  return {m, group_allreduce<M>(s, CombineSum{}, smem)};
}

// x, y: (rows, dim) dense, dim <= group size * kPer; vec as in Note [cached rows].
template <typename T, Mode M, int kPer, bool kLog>
__global__ void __maxnreg__(kCachedMaxRegs)
    softmax_cached_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t dim,
                          bool vec) {
  using A = Acc<T>;
  using Slots = RowSlots<T, kPer>;
  __shared__ A smem[32];
  const int rank = group_rank<M>(), size = group_size<M>();
  const auto valid = [&](int i) { return Slots::index(i, vec, rank, size) < dim; };
  for (int64_t row = first_row<M>(); row < rows; row += row_step<M>()) {
    A v[kPer];
    Slots::load(x + row * dim, dim, vec, rank, size, -static_cast<A>(INFINITY), v);
    const MaxSum<A> st = cached_max_sum<M>(v, valid, smem);
    const A log_s = log_acc(st.s), inv_s = A(1) / st.s;
#pragma unroll
    for (int i = 0; i < kPer; ++i) v[i] = kLog ? v[i] - st.m - log_s : exp_acc(v[i] - st.m) * inv_s;
    Slots::store(y + row * dim, dim, vec, rank, size, v);
  }
}

// g, y, dx: (rows, dim) dense, as softmax_cached_kernel.
template <typename T, Mode M, int kPer, bool kLog>
__global__ void __maxnreg__(kCachedMaxRegs)
    softmax_backward_cached_kernel(const T* __restrict__ g, const T* __restrict__ y,
                                   T* __restrict__ dx, int64_t rows, int64_t dim, bool vec) {
  using A = Acc<T>;
  using Slots = RowSlots<T, kPer>;
  __shared__ A smem[32];
  const int rank = group_rank<M>(), size = group_size<M>();
  for (int64_t row = first_row<M>(); row < rows; row += row_step<M>()) {
    A gv[kPer], yv[kPer];
    Slots::load(g + row * dim, dim, vec, rank, size, A(0), gv);
    Slots::load(y + row * dim, dim, vec, rank, size, A(0), yv);
    A dot = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) dot += kLog ? gv[i] : gv[i] * yv[i];
    dot = group_allreduce<M>(dot, CombineSum{}, smem);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      gv[i] = kLog ? gv[i] - exp_acc(yv[i]) * dot : yv[i] * (gv[i] - dot);
    }
    Slots::store(dx + row * dim, dim, vec, rank, size, gv);
  }
}

// cross_entropy_kernel for dense rows (inner == 1) of c <= group size * kPer classes.
template <typename T, Mode M, int kPer>
__global__ void __maxnreg__(kCachedMaxRegs)
    cross_entropy_cached_kernel(const T* __restrict__ x, const int64_t* __restrict__ target,
                                Acc<T>* __restrict__ loss, Acc<T>* __restrict__ lse, int64_t rows,
                                int64_t c, bool vec, int64_t ignore_index, Acc<T> eps) {
  using A = Acc<T>;
  using Slots = RowSlots<T, kPer>;
  __shared__ A smem[32];
  const int rank = group_rank<M>(), size = group_size<M>();
  const auto valid = [&](int i) { return Slots::index(i, vec, rank, size) < c; };
  for (int64_t row = first_row<M>(); row < rows; row += row_step<M>()) {
    const T* xr = x + row * c;
    A v[kPer];
    Slots::load(xr, c, vec, rank, size, -static_cast<A>(INFINITY), v);
    const MaxSum<A> st = cached_max_sum<M>(v, valid, smem);
    A shift = 0, shifted = 0;
    if (eps > A(0)) {
      const A x0 = to_acc(xr[0]);
      shift = isfinite(x0) ? x0 : A(0);
#pragma unroll
      for (int i = 0; i < kPer; ++i) shifted += valid(i) ? v[i] - shift : A(0);
      shifted = group_allreduce<M>(shifted, CombineSum{}, smem);
    }
    if (rank == 0) {
      write_cross_entropy(
          row, st, shift, shifted, c, target[row], ignore_index, eps,
          [&](int64_t t) { return to_acc(xr[t]); }, loss, lse);
    }
  }
}

// Whether the slots of dense rows of `dim` elements of T, starting at the pointers ps, may be
// 16-byte vectors (Note [cached rows]).
template <class T>
bool vec_rows(int64_t dim, std::initializer_list<const void*> ps) {
  if (dim % (16 / static_cast<int64_t>(sizeof(T))) != 0) return false;
  for (const void* p : ps) {
    if (!aligned16(p)) return false;
  }
  return true;
}

template <Mode M>
using ModeC = std::integral_constant<Mode, M>;
template <int K>
using IntC = std::integral_constant<int, K>;

// For dense rows of `dim` elements that fit the cached kernels, calls f(ModeC, IntC<kPer>, grid,
// threads) and returns true: a warp per row with 8 or kWide slots a lane up to 32 kWide elements, a
// block of kCachedThreads with kWide / 2 slots a thread beyond. kWide: 32 (8 for f64) for kernels
// that hold one row, half that for those that hold two, so that no register spills.
template <class T, int kRowsHeld, class F>
bool visit_cached(int64_t rows, int64_t dim, F&& f) {
  constexpr int kWide = (sizeof(T) == 8 ? 8 : 32) / kRowsHeld;
  if (dim > static_cast<int64_t>(kCachedThreads) * (kWide / 2)) return false;
  const auto warp_grid = static_cast<unsigned>(
      std::clamp<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 1, kMaxBlocks));
  const auto block_grid = static_cast<unsigned>(std::clamp<int64_t>(rows, 1, kMaxBlocks));
  const int warp_threads = 32 * kWarpsPerBlock;
  if (dim <= 32 * 8) return f(ModeC<Mode::Warp>{}, IntC<8>{}, warp_grid, warp_threads), true;
  if constexpr (kWide > 8) {
    if (dim <= 32 * kWide)
      return f(ModeC<Mode::Warp>{}, IntC<kWide>{}, warp_grid, warp_threads), true;
  }
  return f(ModeC<Mode::Block>{}, IntC<kWide / 2>{}, block_grid, kCachedThreads), true;
}

constexpr int64_t kWarpRowMax = 1024;  // dense rows up to this length take a warp each

unsigned blocks_for(int64_t work, int64_t per_block) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((work + per_block - 1) / per_block, 1, kMaxBlocks));
}

// For the rows no cached kernel takes, calls f(ModeC, grid, threads): a thread per row when the
// rows are strided (inner > 1), a warp per dense row up to kWarpRowMax elements, a block beyond.
template <class F>
void visit_row_launch(int64_t rows, int64_t dim, int64_t inner, F&& f) {
  if (inner > 1) {
    f(ModeC<Mode::Thread>{}, blocks_for(rows, kThreads), kThreads);
  } else if (dim <= kWarpRowMax) {
    f(ModeC<Mode::Warp>{}, blocks_for(rows, kThreads / 32), kThreads);
  } else {
    f(ModeC<Mode::Block>{}, blocks_for(rows, 1), dim > 8192 ? kRowMaxThreads : 512);
  }
}

template <typename T, bool kLog>
void softmax_launch(cudaStream_t stream, const T* x, T* y, int64_t outer, int64_t dim,
                    int64_t inner) {
  const int64_t rows = outer * inner;
  if (inner == 1 &&
      visit_cached<T, 1>(rows, dim, [&](auto mode, auto per, unsigned grid, int threads) {
        softmax_cached_kernel<T, decltype(mode)::value, decltype(per)::value, kLog>
            <<<grid, threads, 0, stream>>>(x, y, rows, dim, vec_rows<T>(dim, {x, y}));
        SINTER_LAUNCH_CHECK("softmax_cached_kernel");
      })) {
    return;
  }
  visit_row_launch(rows, dim, inner, [&](auto mode, unsigned grid, int threads) {
    softmax_kernel<T, decltype(mode)::value, kLog>
        <<<grid, threads, 0, stream>>>(x, y, rows, dim, inner);
    SINTER_LAUNCH_CHECK("softmax_kernel");
  });
}

template <typename T, bool kLog>
void softmax_backward_launch(cudaStream_t stream, const T* g, const T* y, T* dx, int64_t outer,
                             int64_t dim, int64_t inner) {
  const int64_t rows = outer * inner;
  if (inner == 1 &&
      visit_cached<T, 2>(rows, dim, [&](auto mode, auto per, unsigned grid, int threads) {
        softmax_backward_cached_kernel<T, decltype(mode)::value, decltype(per)::value, kLog>
            <<<grid, threads, 0, stream>>>(g, y, dx, rows, dim, vec_rows<T>(dim, {g, y, dx}));
        SINTER_LAUNCH_CHECK("softmax_backward_cached_kernel");
      })) {
    return;
  }
  visit_row_launch(rows, dim, inner, [&](auto mode, unsigned grid, int threads) {
    softmax_backward_kernel<T, decltype(mode)::value, kLog>
        <<<grid, threads, 0, stream>>>(g, y, dx, rows, dim, inner);
    SINTER_LAUNCH_CHECK("softmax_backward_kernel");
  });
}

}  // namespace

void softmax_rows(const Ctx& ctx, const void* x, DType dtype, int64_t outer, int64_t dim,
                  int64_t inner, bool log, void* y) {
  if (outer * dim * inner == 0) return;
  launch_floating(ctx, dtype, "softmax_rows", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
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
  launch_floating(ctx, dtype, "softmax_rows_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
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
  launch_floating(ctx, a.dtype, "cross_entropy_rows", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const T* x = static_cast<const T*>(a.logits);
    A* lo = static_cast<A*>(loss);
    A* ls = static_cast<A*>(lse);
    const A eps = static_cast<A>(a.label_smoothing);
    if (a.inner == 1 &&
        visit_cached<T, 1>(rows, a.c, [&](auto mode, auto per, unsigned grid, int threads) {
          cross_entropy_cached_kernel<T, decltype(mode)::value, decltype(per)::value>
              <<<grid, threads, 0, stream>>>(x, a.target, lo, ls, rows, a.c, vec_rows<T>(a.c, {x}),
                                             a.ignore_index, eps);
          SINTER_LAUNCH_CHECK("cross_entropy_cached_kernel");
        })) {
      return;
    }
    visit_row_launch(rows, a.c, a.inner, [&](auto mode, unsigned grid, int threads) {
      cross_entropy_kernel<T, decltype(mode)::value><<<grid, threads, 0, stream>>>(
          x, a.target, lo, ls, rows, a.c, a.inner, a.ignore_index, eps);
      SINTER_LAUNCH_CHECK("cross_entropy_kernel");
    });
  });
}

void cross_entropy_rows_backward(const Ctx& ctx, const CrossEntropyArgs& a, const void* lse,
                                 const void* grad, int64_t grad_stride, void* dlogits) {
  const int64_t total = a.n * a.c * a.inner;
  if (total == 0) return;
  launch_floating(ctx, a.dtype, "cross_entropy_rows_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    cross_entropy_backward_kernel<T><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(a.logits), a.target, static_cast<const A*>(lse),
        static_cast<const A*>(grad), grad_stride, static_cast<T*>(dlogits), total, a.c, a.inner,
        a.ignore_index, static_cast<A>(a.label_smoothing));
    SINTER_LAUNCH_CHECK("cross_entropy_backward_kernel");
  });
}

}  // namespace sinter::cudak
