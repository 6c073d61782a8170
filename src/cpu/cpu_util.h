// What the CPU reference kernels share: stored values widened to double and rounded back once, the
// CUDA kernels' accumulation type (for what the CPU keeps in it too), the fixed-order sums, the
// prefetch of the row kernels' next row, and the visits of the storage types.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cpu/vec_rows.h"
#include "kern/scalar_ops.h"

namespace sinter::cpu {

// bf16 and f16 are stored as 16 bits but computed and converted as float.
template <class T>
constexpr bool is_half_type = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;
// So are the float8 types, which only copies convert (Note [float8]).
template <class T>
constexpr bool is_narrow_float =
    is_half_type<T> || std::is_same_v<T, Float8E4M3> || std::is_same_v<T, Float8E5M2>;

// A stored value as double (bf16 and f16 by way of float).
template <class T>
double widen(T v) {
  if constexpr (is_narrow_float<T>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// Note [lane sums]
// The CPU kernels' long sums go through lane_sum: f(j) for j < n added in double into kSumLanes
// partial sums (j's lane is j % kSumLanes, the last n % kSumLanes terms into a separate tail), then
// the lanes in order and the tail. The order is fixed by n alone, so the sum is the same bits on
// every run, thread count and CPU, and a compiler keeps the lanes in vector registers instead of
// waiting on one add after another. Sixteen lanes are two 512-bit vectors of doubles, two chains of
// adds: with one (eight lanes), a row of 1024 floats waited 128 add latencies and took half again
// as long.
constexpr int kSumLanes = 16;

// Always inlined: a call from a vector row (src/cpu/vec_clones.h) then runs in that row's
// instruction set; an out-of-line copy would be the baseline's.
template <class F>
[[gnu::always_inline]] inline double lane_sum(int64_t n, F f) {
  double acc[kSumLanes] = {};
  int64_t j = 0;
  for (; j + kSumLanes <= n; j += kSumLanes) {
    for (int l = 0; l < kSumLanes; ++l) acc[l] += f(j + l);
  }
  double tail = 0;
  for (; j < n; ++j) tail += f(j);
  double s = 0;
  for (int l = 0; l < kSumLanes; ++l) s += acc[l];
  return s + tail;
}

// Note [row prefetch]
// The row kernels of softmax and layer norm (src/cpu/vec_rows.h) read their row once from memory
// and then work on it in the L1 cache: the memory sat idle through that work, and two threads
// reached half of a copy's bandwidth. So they prefetch the next row (the floats after this one)
// while they work, a chunk of kPrefetchChunk floats before each chunk of their last passes; the
// prefetch of memory past a tensor's end is harmless (prefetches do not fault).
constexpr int64_t kPrefetchChunk = 256;

// Prefetches the n floats from p into the caches, a cache line at a time.
[[gnu::always_inline]] inline void prefetch_floats(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i);
}

// Rounds once to T: double stays double; the others go by way of float, as the CUDA kernels do.
template <class T>
T narrow(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return T(static_cast<float>(v));
  }
}

// A stored value as the elementwise math sees it: bf16 and f16 as float, the others as they are.
template <class T>
auto to_value(T v) {
  if constexpr (is_narrow_float<T>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

// A computed value converted to storage type T as kern::convert does (bf16 and f16 by way of
// float), which is how the CUDA kernels store it.
template <class T, class V>
T from_value(V v) {
  if constexpr (is_narrow_float<T>) {
    return T(kern::convert<float>(v));
  } else {
    return kern::convert<T>(v);
  }
}

// The accumulation (compute) type of the CUDA kernels for storage type T: f64 for f64, else f32.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A row of T (f32, bf16, f16) widened to f32, and an f32 row rounded to T as T's conversion
// rounds; bf16 through the vector rows (src/cpu/vec_convert.cpp).
template <class T>
void widen_row(const T* x, int64_t n, float* out) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    vec::widen_bf16_row(x, n, out);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i]);
  }
}

template <class T>
void narrow_row(const float* x, int64_t n, T* out) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    vec::narrow_bf16_row(x, n, out);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = T(x[i]);
  }
}

// Calls f(TypeTag<T>{}) with T the storage type of the floating `dtype` (f32, f64, bf16, f16);
// another dtype is an error naming `op`.
template <class F>
void visit_float(DType dtype, const char* op, F&& f) {
  kern::visit_floating_type<BFloat16, Half>(dtype, op, std::forward<F>(f));
}

// As visit_float, for every dtype.
template <class F>
void visit_storage(DType dtype, const char* op, F&& f) {
  kern::visit_storage_type<BFloat16, Half>(dtype, op, std::forward<F>(f));
}

// As visit_storage, with the float8 dtypes too: for copies and fills.
template <class F>
void visit_copy(DType dtype, const char* op, F&& f) {
  kern::visit_copy_type<BFloat16, Half, Float8E4M3, Float8E5M2>(dtype, op, std::forward<F>(f));
}

}  // namespace sinter::cpu
