// CUDA reduce_rows: Sum, Prod, Max and Min (with the index of the first extremum) along the last
// dim of a contiguous (outer, r) block; sum_lines, the sums along a middle dim; and scan_rows, the
// running sums or products along a dim.
// Short rows take a warp or a part of one each, long rows a block each; a few very long rows are
// split over many blocks whose partial results a second pass combines.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/reduce.h"
#include "scratch.cuh"

namespace sinter::cudak {
namespace {

template <typename A>
__device__ __forceinline__ bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return isnan(v);
  } else {
    return false;
  }
}

// a + b; integral sums add as unsigned, so that an overflowing sum wraps instead of being
// undefined.
template <typename A>
__device__ __forceinline__ A sum_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

// A partial result: the value and, for Max/Min, the position it came from in its row.
template <typename A>
struct State {
  A v;
  int64_t i;
};

// a * b; integral products multiply as unsigned, so that an overflow wraps.
template <typename A>
__device__ __forceinline__ A prod_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

template <typename A>
struct SumFn {
  using Acc = A;
  static constexpr bool kIndexed = false;
  __device__ static State<A> identity() { return {A(0), 0}; }
  __device__ static State<A> combine(State<A> a, State<A> b) { return {sum_add(a.v, b.v), 0}; }
  __device__ static A apply(A a, A b) { return sum_add(a, b); }
};

template <typename A>
struct ProdFn {
  using Acc = A;
  static constexpr bool kIndexed = false;
  __device__ static State<A> identity() { return {A(1), 0}; }
  __device__ static State<A> combine(State<A> a, State<A> b) { return {prod_mul(a.v, b.v), 0}; }
  __device__ static A apply(A a, A b) { return prod_mul(a, b); }
};

// Note [extremum order]
// NaN beats every number, then the larger (Max) or smaller (Min) value, then the smaller index.
// That is a strict order on (value, index) pairs, so any combining order (threads, warps, blocks,
// split passes) picks the same winner: the first NaN, or else the first extremum. The identity
// carries index INT64_MAX, so it loses every tie against a real element.
template <typename A, bool kMax>
struct ExtremeFn {
  using Acc = A;
  static constexpr bool kIndexed = true;
  __device__ static State<A> identity() {
    if constexpr (std::is_floating_point_v<A>) {
      return {kMax ? -A(INFINITY) : A(INFINITY), INT64_MAX};
    } else {
      return {kMax ? INT64_MIN : INT64_MAX, INT64_MAX};
    }
  }
  __device__ static State<A> combine(State<A> a, State<A> b) {
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    bool take_b;
    if (an || bn) {
      take_b = bn && (!an || b.i < a.i);
    } else if (a.v == b.v) {
      take_b = b.i < a.i;
    } else {
      take_b = kMax ? b.v > a.v : b.v < a.v;
    }
    return take_b ? b : a;
  }
};

// Tree over groups of kWidth adjacent lanes (a power of two up to 32); each group's result lands in
// its first lane. A group's first lane only ever reads lanes of its own group.
template <class Fn, int kWidth = 32>
__device__ __forceinline__ State<typename Fn::Acc> warp_reduce(State<typename Fn::Acc> s) {
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset >>= 1) {
    State<typename Fn::Acc> o;
    o.v = __shfl_down_sync(0xffffffffu, s.v, offset);
    o.i = Fn::kIndexed ? __shfl_down_sync(0xffffffffu, s.i, offset) : 0;
    s = Fn::combine(s, o);
  }
  return s;
}

// The whole block's result lands in thread 0. `smem` holds one State per warp (at most 32).
template <class Fn>
__device__ __forceinline__ State<typename Fn::Acc> block_reduce(State<typename Fn::Acc> s,
                                                                State<typename Fn::Acc>* smem) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  s = warp_reduce<Fn>(s);
  if (lane == 0) smem[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < static_cast<int>(blockDim.x / 32) ? smem[lane] : Fn::identity();
    s = warp_reduce<Fn>(s);
  }
  __syncthreads();  // smem is reused by the caller's next row
  return s;
}

// Element (row, j) of the input, widened, with its index. fold() combines elements [begin, end)
// of a row into s, this thread taking every size-th from rank on: the 16-byte aligned middle of the
// span as whole vectors (8 bf16 or f16, 4 f32 per load), the ragged head and tail one at a time.
template <typename T>
struct InputLoader {
  const T* in;
  int64_t r;
  __device__ State<Acc<T>> operator()(int64_t row, int64_t j) const {
    return {to_acc(in[row * r + j]), j};
  }
  template <class Fn>
  __device__ __forceinline__ void fold(int64_t row, int64_t begin, int64_t end, int rank, int size,
                                       State<Acc<T>>& s) const {
    constexpr int kVec = 16 / sizeof(T);
    const T* p = in + row * r;
    const auto mis = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p + begin) % 16 / sizeof(T));
    const int64_t vbegin = begin + std::min<int64_t>(mis ? kVec - mis : 0, end - begin);
    const int64_t nvec = (end - vbegin) / kVec;
    for (int64_t j = begin + rank; j < vbegin; j += size) s = Fn::combine(s, (*this)(row, j));
    const auto* pv = reinterpret_cast<const Vec16<T>*>(p + vbegin);
#pragma unroll 4
    for (int64_t v = rank; v < nvec; v += size) {
      const Vec16<T> x = pv[v];
#pragma unroll
      for (int e = 0; e < kVec; ++e) s = Fn::combine(s, {to_acc(x.v[e]), vbegin + v * kVec + e});
    }
    for (int64_t j = vbegin + nvec * kVec + rank; j < end; j += size) {
      s = Fn::combine(s, (*this)(row, j));
    }
  }
};

// Partial result j of a row, from the first pass of a split reduction.
template <typename A>
struct PartialLoader {
  const State<A>* partials;
  int64_t splits;
  __device__ State<A> operator()(int64_t row, int64_t j) const {
    return partials[row * splits + j];
  }
  template <class Fn>
  __device__ __forceinline__ void fold(int64_t row, int64_t begin, int64_t end, int rank, int size,
                                       State<A>& s) const {
    for (int64_t j = begin + rank; j < end; j += size) s = Fn::combine(s, (*this)(row, j));
  }
};

template <typename OutT>
struct FinalWriter {
  OutT* out;
  int64_t* indices;
  template <typename A>
  __device__ void operator()(int64_t row, int64_t, State<A> s) const {
    out[row] = from_acc<OutT>(s.v);
    if (indices) indices[row] = s.i;
  }
};

template <typename A>
struct PartialWriter {
  State<A>* partials;
  int64_t splits;
  __device__ void operator()(int64_t row, int64_t split, State<A> s) const {
    partials[row * splits + split] = s;
  }
};

// kGroup lanes per row and 32 / kGroup rows per warp, so that short rows neither idle most of a
// warp nor each pay a full shuffle tree; a warp's rows are adjacent, so its loads still coalesce.
// Whole warps step together (the shuffles need every lane); groups past the last row carry the
// identity.
template <class Fn, int kGroup, class Loader, class Writer>
__global__ void reduce_group_kernel(Loader load, Writer write, int64_t rows, int64_t r) {
  constexpr int kRowsPerWarp = 32 / kGroup;
  const int lane = threadIdx.x % 32, member = lane % kGroup;
  const int64_t warps = blockDim.x / 32;
  const int64_t step = static_cast<int64_t>(gridDim.x) * warps * kRowsPerWarp;
  for (int64_t first = (blockIdx.x * warps + threadIdx.x / 32) * kRowsPerWarp; first < rows;
       first += step) {
    const int64_t row = first + lane / kGroup;
    State<typename Fn::Acc> s = Fn::identity();
    if (row < rows) load.template fold<Fn>(row, 0, r, member, kGroup, s);
    s = warp_reduce<Fn, kGroup>(s);
    if (member == 0 && row < rows) write(row, 0, s);
  }
}

// One block per task; task = (row, split) covers elements [split * chunk, (split + 1) * chunk) of
// the row, so with splits == 1 a block reduces a whole row.
template <class Fn, class Loader, class Writer>
__global__ void reduce_block_kernel(Loader load, Writer write, int64_t rows, int64_t splits,
                                    int64_t r, int64_t chunk) {
  __shared__ State<typename Fn::Acc> smem[32];
  for (int64_t task = blockIdx.x; task < rows * splits; task += gridDim.x) {
    const int64_t row = task / splits, split = task - row * splits;
    const int64_t end = (split + 1) * chunk < r ? (split + 1) * chunk : r;
    State<typename Fn::Acc> s = Fn::identity();
    load.template fold<Fn>(row, split * chunk, end, threadIdx.x, blockDim.x, s);
    s = block_reduce<Fn>(s, smem);
    if (threadIdx.x == 0) write(row, split, s);
  }
}

constexpr int64_t kWarpRowMax = 256;    // rows up to this length take a warp or less each
constexpr int64_t kSplitChunk = 16384;  // least elements per block when a row is split

template <typename T, class Fn>
void reduce_launch(const Ctx& ctx, const T* in, int64_t outer, int64_t r, void* out,
                   int64_t* indices) {
  using A = typename Fn::Acc;
  using OutT = std::conditional_t<!Fn::kIndexed && std::is_integral_v<A>, int64_t, T>;
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const InputLoader<T> load{in, r};
  const FinalWriter<OutT> write{static_cast<OutT*>(out), indices};

  if (r <= kWarpRowMax) {
    // About 4 or more elements per lane: 1, 4, 16 or 32 lanes per row.
    const auto launch = [&](auto group) {
      constexpr int kGroup = decltype(group)::value, kThreads = 256;
      constexpr int64_t kRowsPerBlock = kThreads / kGroup;
      reduce_group_kernel<Fn, kGroup>
          <<<capped_grid((outer + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0, stream>>>(
              load, write, outer, r);
      SINTER_LAUNCH_CHECK("reduce_group_kernel");
    };
    if (r <= 4) return launch(std::integral_constant<int, 1>{});
    if (r <= 16) return launch(std::integral_constant<int, 4>{});
    if (r <= 64) return launch(std::integral_constant<int, 16>{});
    return launch(std::integral_constant<int, 32>{});
  }

  const int threads = r >= 8192 ? 512 : 256;
  const int sms = device_sm_count(ctx.device);
  // Fewer rows than can fill the device: split each row so that about 4 blocks run per SM.
  int64_t splits = 1;
  if (outer < 2 * sms && r >= 2 * kSplitChunk) {
    splits = std::min((r + kSplitChunk - 1) / kSplitChunk, (4 * sms + outer - 1) / outer);
  }
  if (splits <= 1) {
    reduce_block_kernel<Fn>
        <<<capped_grid(outer), threads, 0, stream>>>(load, write, outer, 1, r, r);
    SINTER_LAUNCH_CHECK("reduce_block_kernel");
    return;
  }
  const int64_t chunk = (r + splits - 1) / splits;
  splits = (r + chunk - 1) / chunk;
  // partials: (outer, splits), each the result of one chunk with its index in the whole row.
  const Scratch<State<A>> partials(ctx, outer * splits);
  reduce_block_kernel<Fn><<<capped_grid(outer * splits), threads, 0, stream>>>(
      load, PartialWriter<A>{partials.get(), splits}, outer, splits, r, chunk);
  SINTER_LAUNCH_CHECK("reduce_block_kernel");
  reduce_block_kernel<Fn><<<capped_grid(outer), 256, 0, stream>>>(
      PartialLoader<A>{partials.get(), splits}, write, outer, 1, splits, splits);
  SINTER_LAUNCH_CHECK("reduce_block_kernel");
}

template <typename T>
void reduce_typed(const Ctx& ctx, const void* in, int64_t outer, int64_t r, ReduceOp op, void* out,
                  int64_t* indices) {
  const T* x = static_cast<const T*>(in);
  switch (op) {
    case ReduceOp::Sum:
      return reduce_launch<T, SumFn<Acc<T>>>(ctx, x, outer, r, out, indices);
    case ReduceOp::Prod:
      return reduce_launch<T, ProdFn<Acc<T>>>(ctx, x, outer, r, out, indices);
    case ReduceOp::Max:
      return reduce_launch<T, ExtremeFn<Acc<T>, true>>(ctx, x, outer, r, out, indices);
    case ReduceOp::Min:
      return reduce_launch<T, ExtremeFn<Acc<T>, false>>(ctx, x, outer, r, out, indices);
  }
  SINTER_THROW("reduce_rows: unknown op ", static_cast<int>(op));
}

// ---- scans: cumsum and cumprod ----

// What a scan writes: the storage type for floating inputs, int64 for the others.
template <typename T>
using ScanOut = std::conditional_t<std::is_integral_v<Acc<T>>, int64_t, T>;

constexpr int kScanThreads = 256;

// Dense rows (inner == 1): a warp per row walks it in chunks of 32 consecutive elements
// (coalesced), an inclusive shuffle scan per chunk combined with the carry of the chunks before.
// reverse walks from the row's end. Fn is SumFn or ProdFn.
template <typename T, class Fn>
__global__ void __launch_bounds__(kScanThreads, 1)
    scan_warp_kernel(const T* in, ScanOut<T>* out, int64_t outer, int64_t len, bool reverse) {
  using A = Acc<T>;
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_block = blockDim.x / 32;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * warps_per_block;
  // The loop bounds are the same for the 32 lanes of a warp, so every shuffle sees the whole warp.
  for (int64_t row = blockIdx.x * warps_per_block + threadIdx.x / 32; row < outer; row += stride) {
    const T* x = in + row * len;
    ScanOut<T>* y = out + row * len;
    A carry = Fn::identity().v;
    for (int64_t base = 0; base < len; base += 32) {
      const int64_t k = base + lane;
      const int64_t pos = reverse ? len - 1 - k : k;
      A v = k < len ? to_acc(x[pos]) : Fn::identity().v;
      for (int off = 1; off < 32; off <<= 1) {
        const A u = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v = Fn::apply(u, v);
      }
      v = Fn::apply(carry, v);
      if (k < len) y[pos] = from_acc<ScanOut<T>>(v);
      carry = __shfl_sync(0xffffffffu, v, 31);
    }
  }
}

// Strided rows (inner > 1): a thread per (o, i) line; neighbouring threads read neighbouring i, so
// each step of the walk is coalesced.
template <typename T, class Fn>
__global__ void __launch_bounds__(kScanThreads, 1)
    scan_lines_kernel(const T* in, ScanOut<T>* out, int64_t outer, int64_t len, int64_t inner,
                      bool reverse) {
  using A = Acc<T>;
  const int64_t lines = outer * inner;
  for (int64_t line = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; line < lines;
       line += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = line / inner, i = line - o * inner;
    const T* x = in + o * len * inner + i;
    ScanOut<T>* y = out + o * len * inner + i;
    A acc = Fn::identity().v;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t k = reverse ? len - 1 - j : j;
      acc = Fn::apply(acc, to_acc(x[k * inner]));
      y[k * inner] = from_acc<ScanOut<T>>(acc);
    }
  }
}

template <typename T, class Fn>
void scan_launch(cudaStream_t stream, const T* x, ScanOut<T>* y, int64_t outer, int64_t len,
                 int64_t inner, bool reverse) {
  if (inner == 1) {
    constexpr int64_t kWarps = kScanThreads / 32;
    scan_warp_kernel<T, Fn>
        <<<capped_grid((outer + kWarps - 1) / kWarps), kScanThreads, 0, stream>>>(x, y, outer, len,
                                                                                  reverse);
    SINTER_LAUNCH_CHECK("scan_warp_kernel");
  } else {
    scan_lines_kernel<T, Fn><<<capped_grid((outer * inner + kScanThreads - 1) / kScanThreads),
                               kScanThreads, 0, stream>>>(x, y, outer, len, inner, reverse);
    SINTER_LAUNCH_CHECK("scan_lines_kernel");
  }
}

// sum_lines: a thread per (o, i) line, as scan_lines_kernel walks its lines; neighbouring threads
// read neighbouring i, so each step is coalesced.
template <typename T>
__global__ void __launch_bounds__(kScanThreads, 1)
    sum_lines_kernel(const T* in, ScanOut<T>* out, int64_t outer, int64_t r, int64_t inner) {
  using A = Acc<T>;
  const int64_t lines = outer * inner;
  for (int64_t line = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; line < lines;
       line += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = line / inner, i = line - o * inner;
    const T* x = in + o * r * inner + i;
    A acc = SumFn<A>::identity().v;
    for (int64_t j = 0; j < r; ++j) acc = SumFn<A>::apply(acc, to_acc(x[j * inner]));
    out[line] = from_acc<ScanOut<T>>(acc);
  }
}

}  // namespace

void sum_lines(const Ctx& ctx, const void* in, DType dtype, int64_t outer, int64_t r, int64_t inner,
               void* out, DType out_dtype) {
  const DType want = is_integral(dtype) ? DType::i64 : dtype;
  SINTER_CHECK(out_dtype == want, "sum_lines: output dtype ", out_dtype, " for input ", dtype,
               ", expected ", want);
  if (outer == 0 || inner == 0) return;
  DeviceGuard guard(ctx.device);
  cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
  visit_storage(dtype, "sum_lines", [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_lines_kernel<T>
        <<<capped_grid((outer * inner + kScanThreads - 1) / kScanThreads), kScanThreads, 0,
           stream>>>(static_cast<const T*>(in), static_cast<ScanOut<T>*>(out), outer, r, inner);
    SINTER_LAUNCH_CHECK("sum_lines_kernel");
  });
}

void scan_rows(const Ctx& ctx, const void* in, DType dtype, int64_t outer, int64_t len,
               int64_t inner, ReduceOp op, bool reverse, void* out, DType out_dtype) {
  const DType want = is_integral(dtype) ? DType::i64 : dtype;
  SINTER_CHECK(out_dtype == want, "scan_rows: output dtype ", out_dtype, " for input ", dtype,
               ", expected ", want);
  SINTER_CHECK(op == ReduceOp::Sum || op == ReduceOp::Prod, "scan_rows: op ", static_cast<int>(op),
               " is not Sum or Prod");
  if (outer == 0 || len == 0 || inner == 0) return;
  DeviceGuard guard(ctx.device);
  cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
  visit_storage(dtype, "scan_rows", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in);
    auto* y = static_cast<ScanOut<T>*>(out);
    if (op == ReduceOp::Prod) {
      scan_launch<T, ProdFn<Acc<T>>>(stream, x, y, outer, len, inner, reverse);
    } else {
      scan_launch<T, SumFn<Acc<T>>>(stream, x, y, outer, len, inner, reverse);
    }
  });
}

void reduce_rows(const Ctx& ctx, const void* in, DType dtype, int64_t outer, int64_t r, ReduceOp op,
                 void* out, DType out_dtype, int64_t* indices) {
  const bool arith = op == ReduceOp::Sum || op == ReduceOp::Prod;
  const DType want = arith && is_integral(dtype) ? DType::i64 : dtype;
  SINTER_CHECK(out_dtype == want, "reduce_rows: output dtype ", out_dtype, " for input ", dtype,
               ", expected ", want);
  SINTER_CHECK(arith || r >= 1, "reduce_rows: Max/Min of an empty row");
  if (outer == 0) return;
  DeviceGuard guard(ctx.device);
  visit_storage(dtype, "reduce_rows", [&](auto tag) {
    reduce_typed<typename decltype(tag)::type>(ctx, in, outer, r, op, out, indices);
  });
}

}  // namespace sinter::cudak
