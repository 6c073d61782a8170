// What the CUDA kernel files share: dtype visitors over the device element types and the launchers'
// preamble, the accumulation type and the conversions to and from it, 16-byte vectors and
// alignment, grid sizing, and warp and block reductions. The CPU reference's counterpart is
// src/cpu/cpu_util.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cuda_check.cuh"
#include "device_info.cuh"
#include "kern/ctx.h"
#include "kern/float8.h"
#include "kern/scalar_ops.h"

namespace sinter::cudak {

// The float8 dtypes in kernels: their bits, converted by kern/float8.h's formulas (Note [float8]),
// so that a copy on the GPU rounds as one on the CPU does.
struct DevFloat8E4M3 {
  uint8_t bits;
};
struct DevFloat8E5M2 {
  uint8_t bits;
};

// ---- dtype visitors: f(TypeTag<T>{}) with T the device element type ----

template <class F>
void visit_storage(DType t, const char* op, F&& f) {
  kern::visit_storage_type<__nv_bfloat16, __half>(t, op, std::forward<F>(f));
}

// As visit_storage, with the float8 dtypes too: for copies and fills.
template <class F>
void visit_copy(DType t, const char* op, F&& f) {
  kern::visit_copy_type<__nv_bfloat16, __half, DevFloat8E4M3, DevFloat8E5M2>(t, op,
                                                                             std::forward<F>(f));
}

template <class F>
void visit_floating(DType t, const char* op, F&& f) {
  kern::visit_floating_type<__nv_bfloat16, __half>(t, op, std::forward<F>(f));
}

inline cudaStream_t stream_of(const kern::Ctx& ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

// A launcher of floating-point kernels: makes ctx's device current for the call and calls
// f(TypeTag<T>{}, stream) with T the device type of `dtype` (op names the launcher when dtype is
// not floating).
template <class F>
void launch_floating(const kern::Ctx& ctx, DType dtype, const char* op, F&& f) {
  DeviceGuard guard(ctx.device);
  visit_floating(dtype, op, [&](auto tag) { f(tag, stream_of(ctx)); });
}

// ---- accumulation ----

// What a kernel sums or compares in: float for f32, bf16 and f16 (the widening is exact, so
// comparisons agree with the storage type), double for f64, int64 for the integral types and bool.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double,
                               std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

// bf16 and f16 as float; every other type as it is.
template <class T>
SINTER_HD __forceinline__ auto widen(T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, DevFloat8E4M3>) {
    return kern::float8_decode(v.bits, kern::e4m3_format());
  } else if constexpr (std::is_same_v<T, DevFloat8E5M2>) {
    return kern::float8_decode(v.bits, kern::e5m2_format());
  } else {
    return v;
  }
}

template <class T>
SINTER_HD __forceinline__ Acc<T> to_acc(T v) {
  return static_cast<Acc<T>>(widen(v));
}

// A computed value as element type T: a T unchanged; bf16, f16 and the float8 types go by way of
// float and round to nearest even, as BFloat16, Half and Float8E4M3/E5M2 do on the host; the other
// types convert as kern/scalar_ops.h's convert.
template <class T, class V>
SINTER_HD __forceinline__ T from_acc(V v) {
  if constexpr (std::is_same_v<T, V>) {
    return v;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(kern::convert<float>(v));
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(kern::convert<float>(v));
  } else if constexpr (std::is_same_v<T, DevFloat8E4M3>) {
    return T{kern::float8_encode(kern::convert<float>(v), kern::e4m3_format())};
  } else if constexpr (std::is_same_v<T, DevFloat8E5M2>) {
    return T{kern::float8_encode(kern::convert<float>(v), kern::e5m2_format())};
  } else {
    return kern::convert<T>(v);
  }
}

// ---- vectors and alignment ----

// N elements of T moved as one load or store.
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Elements per 16-byte vector, and that vector.
template <class T>
constexpr int kVecWidth = static_cast<int>(16 / sizeof(T));
template <class T>
using Vec16 = Vec<T, kVecWidth<T>>;

SINTER_HD inline bool aligned_to(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}
SINTER_HD inline bool aligned16(const void* p) { return aligned_to(p, 16); }

// ---- grid sizing ----

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A grid for `tasks` blocks, at least one and at most max_blocks: grid-stride loops do the rest.
inline unsigned capped_grid(int64_t tasks, int64_t max_blocks = int64_t{1} << 20) {
  return static_cast<unsigned>(std::clamp<int64_t>(tasks, 1, max_blocks));
}

// One thread per work item, up to a full wave of resident threads (2048 per SM) on `device`.
inline unsigned wave_grid(int64_t work, int block, int device) {
  const int64_t wave = static_cast<int64_t>(device_sm_count(device)) * (2048 / block);
  return capped_grid(ceil_div(work, block), wave);
}

// Calls f(std::true_type{}) when flat indices below `total` fit int32 (a kernel's cheaper index
// math), else f(std::false_type{}).
template <class F>
void visit_index32(int64_t total, F&& f) {
  if (total < (int64_t{1} << 31)) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

__device__ __forceinline__ int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t thread_count() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// ---- warp and block reductions ----

template <class A>
__device__ __forceinline__ A shfl_xor(A v, int offset) {
  return __shfl_xor_sync(0xffffffffu, v, offset);
}

// The sum over the warp, returned to every lane.
template <class A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += shfl_xor(v, offset);
  return v;
}

// The sum over a block of kWarps warps (blockDim.x == 32 * kWarps), returned to every thread.
// smem: kWarps values.
template <int kWarps, class A>
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

}  // namespace sinter::cudak
