// CUDA topk_rows: each row's first k elements in Note [topk order]. Small k: a block per row picks
// them one at a time, each pick a block-wide arg-extremum over the elements ranked after the last.
// Larger k: CUB's segmented radix sort of keys whose unsigned order is that order, stable, so equal
// keys keep their positions' order; then the first k of each sorted row. searchsorted_rows: a
// thread per value runs Note [searchsorted]'s binary search.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <type_traits>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/sort.h"
#include "scratch.cuh"

namespace sinter::cudak {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// k up to this takes k passes over the row; more takes the sort.
constexpr int64_t kRoundsMaxK = 16;
// Elements sorted per CUB call (whole rows, at least one): bounds the scratch to 24 bytes each.
constexpr int64_t kSortBatch = int64_t{1} << 24;

// ---- k rounds of a block-wide arg-extremum ----

// A candidate: the value, widened exactly, and its position; i < 0 is no candidate.
template <typename A>
struct Pick {
  A v;
  int64_t i;
};

// The one of a and b that comes first in Note [topk order].
template <typename A>
__device__ __forceinline__ Pick<A> first_of(Pick<A> a, Pick<A> b, bool largest) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  return topk_before(b.v, b.i, a.v, a.i, largest) ? b : a;
}

// A block per row (grid-stride over rows). Round r picks the first element ranked after round
// r - 1's pick: the order is total, so the picks are the row's first k, in order, each once.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    topk_rounds_kernel(const T* in, int64_t rows, int64_t len, int64_t k, bool largest, T* values,
                       int64_t* indices) {
  using A = Acc<T>;
  __shared__ Pick<A> warp_first[kWarps];
  __shared__ Pick<A> last;  // the previous round's pick
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = in + row * len;
    for (int64_t r = 0; r < k; ++r) {
      const Pick<A> prev = r > 0 ? last : Pick<A>{A(0), -1};
      Pick<A> best{A(0), -1};
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
        const Pick<A> c{to_acc(x[j]), j};
        if (prev.i >= 0 && !topk_before(prev.v, prev.i, c.v, c.i, largest)) continue;  // taken
        best = first_of(best, c, largest);
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) {
        Pick<A> o;
        o.v = __shfl_down_sync(0xffffffffu, best.v, offset);
        o.i = __shfl_down_sync(0xffffffffu, best.i, offset);
        best = first_of(best, o, largest);
      }
      if (lane == 0) warp_first[warp] = best;
      __syncthreads();
      if (threadIdx.x == 0) {
        // Thread 0 holds warp 0's pick; at least len - r >= 1 elements were candidates.
        for (int w = 1; w < kWarps; ++w) best = first_of(best, warp_first[w], largest);
        values[row * k + r] = x[best.i];
        indices[row * k + r] = best.i;
        last = best;
      }
      __syncthreads();  // `last` is read and warp_first rewritten by the next round
    }
  }
}

// ---- segmented sort ----

// Bits of T's sort key: the double or the int64 for 8-byte types, else the float (bf16, f16, f32)
// or the int32 (i32, u8, b8) that holds the value exactly.
template <typename T>
constexpr int kKeyBits = sizeof(T) == 8 ? 64 : 32;

// A key whose unsigned ascending order is Note [topk order] (up to ties, which the stable sort
// leaves in position order): the value's bits made order-preserving (negative floats inverted,
// the sign bit of the rest flipped), NaN as the largest key and -0.0 as +0.0; all bits inverted
// when the largest come first.
template <typename T>
__device__ __forceinline__ uint64_t topk_key(T v, bool largest) {
  constexpr int kBits = kKeyBits<T>;
  constexpr uint64_t kMask = kBits == 64 ? ~uint64_t{0} : (uint64_t{1} << kBits) - 1;
  constexpr uint64_t kSign = uint64_t{1} << (kBits - 1);
  using A = Acc<T>;
  uint64_t u;
  if constexpr (std::is_floating_point_v<A>) {
    const A f = to_acc(v);
    if (isnan(f)) {
      u = kMask;
    } else {
      const A z = f == A(0) ? A(0) : f;
      uint64_t bits;
      if constexpr (sizeof(A) == 8) {
        bits = static_cast<uint64_t>(__double_as_longlong(z));
      } else {
        bits = __float_as_uint(z);
      }
      u = (bits & kSign) ? (~bits & kMask) : (bits | kSign);
    }
  } else {
    u = (static_cast<uint64_t>(static_cast<int64_t>(to_acc(v))) ^ kSign) & kMask;
  }
  return largest ? (~u & kMask) : u;
}

// n elements of whole rows of len: their keys and positions in the row, and the nseg + 1 segment
// offsets of the rows.
template <typename T>
__global__ void topk_keys_kernel(const T* in, int64_t n, int64_t len, bool largest, uint64_t* keys,
                                 int32_t* pos, int64_t nseg, int* offsets) {
  for (int64_t e = thread_index(); e < n; e += thread_count()) {
    keys[e] = topk_key(in[e], largest);
    pos[e] = static_cast<int32_t>(e % len);
  }
  for (int64_t s = thread_index(); s <= nseg; s += thread_count()) {
    offsets[s] = static_cast<int>(s * len);
  }
}

// The first k positions of each sorted row of len, and the values at them.
template <typename T>
__global__ void topk_take_kernel(const T* in, const int32_t* sorted_pos, int64_t rows, int64_t len,
                                 int64_t k, T* values, int64_t* indices) {
  for (int64_t t = thread_index(); t < rows * k; t += thread_count()) {
    const int64_t r = t / k, j = t - r * k;
    const int64_t p = sorted_pos[r * len + j];
    indices[t] = p;
    values[t] = in[r * len + p];
  }
}

template <typename T>
void topk_sorted(const Ctx& ctx, const T* in, int64_t rows, int64_t len, int64_t k, bool largest,
                 T* values, int64_t* indices) {
  SINTER_CHECK(len <= INT32_MAX, "topk_rows: rows of ", len, " elements are longer than the ",
               INT32_MAX, " its sort takes");
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  // Whole rows per CUB call; its item counts and offsets are int: batch * len <= INT32_MAX.
  const int64_t batch = std::clamp<int64_t>(kSortBatch / len, 1, rows);
  const int64_t most = batch * len;
  const Scratch<uint64_t> keys(ctx, most), sorted_keys(ctx, most);
  const Scratch<int32_t> pos(ctx, most), sorted_pos(ctx, most);
  const Scratch<int> offsets(ctx, batch + 1);
  const auto sort = [&](void* temp, size_t& temp_bytes, int64_t n, int64_t nseg) {
    SINTER_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
        temp, temp_bytes, keys.get(), sorted_keys.get(), pos.get(), sorted_pos.get(),
        static_cast<int>(n), static_cast<int>(nseg), offsets.get(), offsets.get() + 1, 0,
        kKeyBits<T>, stream));
  };
  size_t temp_bytes = 0;
  sort(nullptr, temp_bytes, most, batch);  // the size query of the largest call
  // At least a byte: a null temp pointer would make the sorting calls size queries.
  const Scratch<unsigned char> temp(ctx, std::max<int64_t>(static_cast<int64_t>(temp_bytes), 1));
  for (int64_t r0 = 0; r0 < rows; r0 += batch) {
    const int64_t nr = std::min(batch, rows - r0), n = nr * len;
    topk_keys_kernel<T><<<wave_grid(n, kThreads, ctx.device), kThreads, 0, stream>>>(
        in + r0 * len, n, len, largest, keys.get(), pos.get(), nr, offsets.get());
    SINTER_LAUNCH_CHECK("topk_keys_kernel");
    size_t bytes = temp_bytes;
    sort(temp.get(), bytes, n, nr);
    topk_take_kernel<T><<<wave_grid(nr * k, kThreads, ctx.device), kThreads, 0, stream>>>(
        in + r0 * len, sorted_pos.get(), nr, len, k, values + r0 * k, indices + r0 * k);
    SINTER_LAUNCH_CHECK("topk_take_kernel");
  }
}

// A thread per value (grid-stride): its row's binary search (Note [searchsorted]).
template <typename T>
__global__ void searchsorted_kernel(const T* bounds, const T* values, int64_t m, int64_t k,
                                    int64_t n, bool right, int64_t* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const T* row = bounds + (i / k) * m;
    out[i] =
        searchsorted_index([&](int64_t j) { return to_acc(row[j]); }, m, to_acc(values[i]), right);
  }
}

}  // namespace

void searchsorted_rows(const Ctx& ctx, const void* bounds, const void* values, DType dtype,
                       int64_t rows, int64_t m, int64_t k, bool right, int64_t* out) {
  const int64_t n = rows * k;
  if (n == 0) return;
  DeviceGuard guard(ctx.device);
  visit_storage(dtype, "searchsorted_rows", [&](auto tag) {
    using T = typename decltype(tag)::type;
    searchsorted_kernel<T><<<capped_grid((n + kThreads - 1) / kThreads), kThreads, 0,
                             static_cast<cudaStream_t>(ctx.stream)>>>(
        static_cast<const T*>(bounds), static_cast<const T*>(values), m, k, n, right, out);
    SINTER_LAUNCH_CHECK("searchsorted_kernel");
  });
}

void topk_rows(const Ctx& ctx, const void* in, DType dtype, int64_t rows, int64_t len, int64_t k,
               bool largest, void* values, int64_t* indices) {
  if (rows == 0 || k == 0) return;
  DeviceGuard guard(ctx.device);
  visit_storage(dtype, "topk_rows", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in);
    T* v = static_cast<T*>(values);
    if (k <= kRoundsMaxK) {
      topk_rounds_kernel<T>
          <<<capped_grid(rows), kThreads, 0, static_cast<cudaStream_t>(ctx.stream)>>>(
              x, rows, len, k, largest, v, indices);
      SINTER_LAUNCH_CHECK("topk_rounds_kernel");
    } else {
      topk_sorted<T>(ctx, x, rows, len, k, largest, v, indices);
    }
  });
}

}  // namespace sinter::cudak
