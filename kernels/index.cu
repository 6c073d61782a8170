// CUDA index_select (gather of whole slices along one dim) and index_add (its adjoint: a
// scatter-add with atomics, so repeated indices accumulate), and gather and scatter_add, their
// elementwise counterparts (Note [gather layout]). In deterministic mode the two adds sort their
// targets first and add in a fixed order (Note [deterministic algorithms]).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <limits>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "internal/cuda_runtime.h"
#include "kern/index.h"
#include "scratch.cuh"
#include "sinter/core/determinism.h"

namespace sinter::cudak {
namespace {

constexpr int kThreads = 256;
// Grids stride beyond cuda_util.cuh's block cap.
unsigned grid_for(int64_t n) { return capped_grid(ceil_div(n, kThreads)); }

// in: (outer, in_dim, inner) and out: (outer, nidx, inner) in units of W, the widest word that
// divides the slice and the alignment of both pointers, so any dtype moves as plain words.
template <typename W>
__global__ void index_select_kernel(const W* in, W* out, int64_t in_dim, int64_t inner,
                                    const int64_t* idx, int64_t nidx, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, row = e / inner;
    const int64_t o = row / nidx, j = row - o * nidx;
    const int64_t r = idx[j];  // out of range: zeros (Note [deferred device checks])
    out[e] = r >= 0 && r < in_dim ? in[(o * in_dim + r) * inner + i] : W{};
  }
}

// Records the first index outside [lo, hi) that is not `skip` (Note [deferred device checks]).
__global__ void check_indices_kernel(const int64_t* idx, int64_t n, int64_t lo, int64_t hi,
                                     int64_t skip, int32_t what, DeviceCheckRecord* record) {
  for (int64_t k = thread_index(); k < n; k += thread_count()) {
    const int64_t v = idx[k];
    if (v == skip || (v >= lo && v < hi)) continue;
    if (atomicCAS(&record->claim, 0, 1) == 0) {
      record->what = what;
      record->value = v;
      record->lo = lo;
      record->hi = hi;
      record->skip = skip;
      __threadfence_system();  // the fields before the flag that publishes them
      atomicExch(&record->flag, 1);
    }
    return;
  }
}

// src: (outer, nidx, inner) -> out: (outer, out_dim, inner), element e of src adds into its slot.
template <typename T>
__global__ void index_add_kernel(T* out, int64_t out_dim, int64_t inner, const int64_t* idx,
                                 int64_t nidx, const T* src, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, row = e / inner;
    const int64_t o = row / nidx, j = row - o * nidx;
    const int64_t r = idx[j];  // out of range: nothing (Note [deferred device checks])
    if (r >= 0 && r < out_dim) atomicAdd(out + (o * out_dim + r) * inner + i, src[e]);
  }
}

// A thread per element of the index (Note [gather layout]); W is a word of the element's size,
// so every dtype moves as plain bits.
template <typename W>
__global__ void gather_kernel(const W* in, GatherGeom g, const int64_t* idx, W* out) {
  for (int64_t e = thread_index(); e < g.numel; e += thread_count()) {
    out[e] = in[gather_offset(g, e, idx[e])];
  }
}

template <typename T>
__global__ void scatter_add_kernel(T* out, GatherGeom g, const int64_t* idx, const T* src) {
  for (int64_t e = thread_index(); e < g.numel; e += thread_count()) {
    atomicAdd(out + gather_offset(g, e, idx[e]), src[e]);
  }
}

// --- Deterministic adds (Note [deterministic algorithms]) ---
// A target's sources are found by sorting (target, position) pairs stably by target: the run of
// equal targets lists its sources in position order, and the first pair of each run adds them all.

// keys[j] = idx[j] when it is in [0, out_dim), else out_dim (sorted last, adds nothing).
__global__ void index_keys_kernel(const int64_t* idx, int64_t n, int64_t out_dim, uint64_t* keys,
                                  uint32_t* pos) {
  for (int64_t j = thread_index(); j < n; j += thread_count()) {
    const int64_t r = idx[j];
    keys[j] = static_cast<uint64_t>(r >= 0 && r < out_dim ? r : out_dim);
    pos[j] = static_cast<uint32_t>(j);
  }
}

// keys[e] = the offset element e of src adds into.
__global__ void scatter_keys_kernel(GatherGeom g, const int64_t* idx, uint64_t* keys,
                                    uint32_t* pos) {
  for (int64_t e = thread_index(); e < g.numel; e += thread_count()) {
    keys[e] = static_cast<uint64_t>(gather_offset(g, e, idx[e]));
    pos[e] = static_cast<uint32_t>(e);
  }
}

// One thread per (o, p, i), p a sorted position: the first position of a run adds the run's
// sources, in position order, into out once.
template <typename T>
__global__ void index_add_sorted_kernel(T* out, int64_t out_dim, int64_t inner,
                                        const uint64_t* keys, const uint32_t* pos, int64_t n,
                                        const T* src, int64_t total) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t i = e % inner, row = e / inner;
    const int64_t o = row / n, p = row - o * n;
    const uint64_t k = keys[p];
    if (k >= static_cast<uint64_t>(out_dim) || (p > 0 && keys[p - 1] == k)) continue;
    T* dst = out + (o * out_dim + static_cast<int64_t>(k)) * inner + i;
    Acc<T> acc = to_acc(*dst);
    for (int64_t q = p; q < n && keys[q] == k; ++q)
      acc += to_acc(src[(o * n + pos[q]) * inner + i]);
    *dst = from_acc<T>(acc);
  }
}

template <typename T>
__global__ void scatter_add_sorted_kernel(T* out, const uint64_t* keys, const uint32_t* pos,
                                          int64_t n, const T* src) {
  for (int64_t p = thread_index(); p < n; p += thread_count()) {
    const uint64_t k = keys[p];
    if (p > 0 && keys[p - 1] == k) continue;
    Acc<T> acc = to_acc(out[k]);
    for (int64_t q = p; q < n && keys[q] == k; ++q) acc += to_acc(src[pos[q]]);
    out[k] = from_acc<T>(acc);
  }
}

// n (key, position) pairs, sorted stably by the key's low `bits` bits into `sorted_keys` and
// `sorted_pos`, with the unsorted pairs from `fill(keys, pos)` (a launch on ctx's stream).
template <class Fill>
void sort_targets(const Ctx& ctx, const char* op, int64_t n, int bits, uint64_t* sorted_keys,
                  uint32_t* sorted_pos, Fill fill) {
  SINTER_CHECK(n <= std::numeric_limits<uint32_t>::max(), op,
               ": sorting its targets takes at most ", std::numeric_limits<uint32_t>::max(),
               " index elements, not ", n);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const Scratch<uint64_t> keys(ctx, n);
  const Scratch<uint32_t> pos(ctx, n);
  fill(keys.get(), pos.get());
  size_t temp_bytes = 0;
  SINTER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys.get(), sorted_keys,
                                                    pos.get(), sorted_pos, n, 0, bits, stream));
  const Scratch<unsigned char> temp(ctx, std::max<int64_t>(static_cast<int64_t>(temp_bytes), 1));
  SINTER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys.get(), sorted_keys,
                                                    pos.get(), sorted_pos, n, 0, bits, stream));
}

// One thread per sorted position: the first position of a target's run folds the run's sources,
// in element order, into the target (Note [scatter reduce] in src/kern/index.h).
template <typename T>
__global__ void scatter_reduce_sorted_kernel(T* out, const uint64_t* keys, const uint32_t* pos,
                                             int64_t n, const T* src, kern::ScatterMode mode) {
  for (int64_t p = thread_index(); p < n; p += thread_count()) {
    const uint64_t k = keys[p];
    if (p > 0 && keys[p - 1] == k) continue;
    Acc<T> acc = to_acc(out[k]);
    for (int64_t q = p; q < n && keys[q] == k; ++q) {
      acc = kern::scatter_combine(acc, to_acc(src[pos[q]]), mode);
    }
    out[k] = from_acc<T>(acc);
  }
}

template <typename T>
void index_add_deterministic(const Ctx& ctx, void* out, int64_t outer, int64_t out_dim,
                             int64_t inner, const int64_t* idx, int64_t nidx, const void* src) {
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const Scratch<uint64_t> sorted_keys(ctx, nidx);
  const Scratch<uint32_t> sorted_pos(ctx, nidx);
  // Keys up to out_dim itself (the key of an index out of range).
  const int bits = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(out_dim))));
  sort_targets(ctx, "index_add", nidx, bits, sorted_keys.get(), sorted_pos.get(),
               [&](uint64_t* k, uint32_t* q) {
                 index_keys_kernel<<<grid_for(nidx), kThreads, 0, stream>>>(idx, nidx, out_dim, k,
                                                                            q);
                 SINTER_LAUNCH_CHECK("index_keys_kernel");
               });
  const int64_t total = outer * nidx * inner;
  index_add_sorted_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(
      static_cast<T*>(out), out_dim, inner, sorted_keys.get(), sorted_pos.get(), nidx,
      static_cast<const T*>(src), total);
  SINTER_LAUNCH_CHECK("index_add_sorted_kernel");
}

template <typename T>
void scatter_add_deterministic(const Ctx& ctx, void* out, const GatherGeom& g, const int64_t* idx,
                               const void* src) {
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const Scratch<uint64_t> sorted_keys(ctx, g.numel);
  const Scratch<uint32_t> sorted_pos(ctx, g.numel);
  sort_targets(ctx, "scatter_add", g.numel, 64, sorted_keys.get(), sorted_pos.get(),
               [&](uint64_t* k, uint32_t* q) {
                 scatter_keys_kernel<<<grid_for(g.numel), kThreads, 0, stream>>>(g, idx, k, q);
                 SINTER_LAUNCH_CHECK("scatter_keys_kernel");
               });
  scatter_add_sorted_kernel<T><<<grid_for(g.numel), kThreads, 0, stream>>>(
      static_cast<T*>(out), sorted_keys.get(), sorted_pos.get(), g.numel,
      static_cast<const T*>(src));
  SINTER_LAUNCH_CHECK("scatter_add_sorted_kernel");
}

template <typename W>
void gather_words(cudaStream_t stream, const void* in, const GatherGeom& g, const int64_t* idx,
                  void* out) {
  gather_kernel<W><<<grid_for(g.numel), kThreads, 0, stream>>>(static_cast<const W*>(in), g, idx,
                                                               static_cast<W*>(out));
  SINTER_LAUNCH_CHECK("gather_kernel");
}

template <typename W>
void select_words(cudaStream_t stream, const void* in, int64_t outer, int64_t in_dim,
                  int64_t slice_words, const int64_t* idx, int64_t nidx, void* out) {
  const int64_t total = outer * nidx * slice_words;
  index_select_kernel<W><<<grid_for(total), kThreads, 0, stream>>>(
      static_cast<const W*>(in), static_cast<W*>(out), in_dim, slice_words, idx, nidx, total);
  SINTER_LAUNCH_CHECK("index_select_kernel");
}

template <typename T>
void add_typed(const Ctx& ctx, void* out, int64_t outer, int64_t out_dim, int64_t inner,
               const int64_t* idx, int64_t nidx, const void* src) {
  if (deterministic_algorithms_enabled()) {
    return index_add_deterministic<T>(ctx, out, outer, out_dim, inner, idx, nidx, src);
  }
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const int64_t total = outer * nidx * inner;
  index_add_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(
      static_cast<T*>(out), out_dim, inner, idx, nidx, static_cast<const T*>(src), total);
  SINTER_LAUNCH_CHECK("index_add_kernel");
}

}  // namespace

void check_indices(const Ctx& ctx, const int64_t* idx, int64_t n, int64_t lo, int64_t hi,
                   int64_t skip, DeviceCheck what) {
  if (n <= 0) return;
  DeviceGuard guard(ctx.device);
  DeviceCheckRecord* record = cuda::detail::device_check_record(ctx.device);
  check_indices_kernel<<<wave_grid(n, kThreads, ctx.device), kThreads, 0,
                         static_cast<cudaStream_t>(ctx.stream)>>>(
      idx, n, lo, hi, skip, static_cast<int32_t>(what), record);
  SINTER_LAUNCH_CHECK("check_indices_kernel");
}

void index_select(const Ctx& ctx, const void* in, DType dtype, int64_t outer, int64_t in_dim,
                  int64_t inner, const int64_t* idx, int64_t nidx, void* out) {
  const int64_t slice = inner * static_cast<int64_t>(element_size(dtype));
  if (outer == 0 || nidx == 0 || slice == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const auto aligned = [&](int64_t w) {
    return slice % w == 0 && aligned_to(in, w) && aligned_to(out, w);
  };
  if (aligned(16))
    return select_words<uint4>(stream, in, outer, in_dim, slice / 16, idx, nidx, out);
  if (aligned(8))
    return select_words<uint64_t>(stream, in, outer, in_dim, slice / 8, idx, nidx, out);
  if (aligned(4))
    return select_words<uint32_t>(stream, in, outer, in_dim, slice / 4, idx, nidx, out);
  if (aligned(2))
    return select_words<uint16_t>(stream, in, outer, in_dim, slice / 2, idx, nidx, out);
  select_words<uint8_t>(stream, in, outer, in_dim, slice, idx, nidx, out);
}

void index_add(const Ctx& ctx, void* out, DType dtype, int64_t outer, int64_t out_dim,
               int64_t inner, const int64_t* idx, int64_t nidx, const void* src) {
  if (outer == 0 || nidx == 0 || inner == 0) return;
  DeviceGuard guard(ctx.device);
  switch (dtype) {
    case DType::f32:
      return add_typed<float>(ctx, out, outer, out_dim, inner, idx, nidx, src);
    case DType::f64:
      return add_typed<double>(ctx, out, outer, out_dim, inner, idx, nidx, src);
    case DType::bf16:
      return add_typed<__nv_bfloat16>(ctx, out, outer, out_dim, inner, idx, nidx, src);
    case DType::f16:
      return add_typed<__half>(ctx, out, outer, out_dim, inner, idx, nidx, src);
    default:
      break;
  }
  SINTER_THROW("index_add: unsupported dtype ", dtype);
}

void gather(const Ctx& ctx, const void* in, DType dtype, const GatherGeom& g, const int64_t* idx,
            void* out) {
  if (g.numel == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  switch (element_size(dtype)) {
    case 1:
      return gather_words<uint8_t>(stream, in, g, idx, out);
    case 2:
      return gather_words<uint16_t>(stream, in, g, idx, out);
    case 4:
      return gather_words<uint32_t>(stream, in, g, idx, out);
    case 8:
      return gather_words<uint64_t>(stream, in, g, idx, out);
    default:
      break;
  }
  SINTER_THROW("gather: unsupported dtype ", dtype);
}

void scatter_add(const Ctx& ctx, void* out, DType dtype, const GatherGeom& g, const int64_t* idx,
                 const void* src) {
  if (g.numel == 0) return;
  launch_floating(ctx, dtype, "scatter_add", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    if (deterministic_algorithms_enabled()) {
      return scatter_add_deterministic<T>(ctx, out, g, idx, src);
    }
    scatter_add_kernel<T><<<grid_for(g.numel), kThreads, 0, stream>>>(static_cast<T*>(out), g, idx,
                                                                      static_cast<const T*>(src));
    SINTER_LAUNCH_CHECK("scatter_add_kernel");
  });
}

// Always by sorting the targets: Assign's last source wins as on the CPU, and every mode is
// deterministic (Note [scatter reduce]).
void scatter_reduce(const Ctx& ctx, void* out, int64_t out_numel, DType dtype, const GatherGeom& g,
                    const int64_t* idx, const void* src, kern::ScatterMode mode) {
  if (g.numel == 0) return;
  // The offsets are below out_numel: the sort reads only the bits that can differ.
  const int bits = std::max(
      1,
      static_cast<int>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(out_numel, 2) - 1))));
  DeviceGuard guard(ctx.device);
  const auto stream = stream_of(ctx);
  visit_storage(dtype, "scatter_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Scratch<uint64_t> sorted_keys(ctx, g.numel);
    const Scratch<uint32_t> sorted_pos(ctx, g.numel);
    sort_targets(ctx, "scatter_reduce", g.numel, bits, sorted_keys.get(), sorted_pos.get(),
                 [&](uint64_t* k, uint32_t* q) {
                   scatter_keys_kernel<<<grid_for(g.numel), kThreads, 0, stream>>>(g, idx, k, q);
                   SINTER_LAUNCH_CHECK("scatter_keys_kernel");
                 });
    scatter_reduce_sorted_kernel<T><<<grid_for(g.numel), kThreads, 0, stream>>>(
        static_cast<T*>(out), sorted_keys.get(), sorted_pos.get(), g.numel,
        static_cast<const T*>(src), mode);
    SINTER_LAUNCH_CHECK("scatter_reduce_sorted_kernel");
  });
}

}  // namespace sinter::cudak
