// CPU reference for reduce_rows (Sum, Max and Min along the last dim of a contiguous (outer, r)
// block) and cumsum_rows. Floating sums accumulate in double here (more than the f32 the CUDA
// kernels use) so that the reference is the more accurate side of a parity test.
#include "kern/reduce.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cpu/cpu_util.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

template <typename T>
constexpr bool kFloating = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                           std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

// The value a sum or a comparison sees: floating types widen exactly to double, the others to
// int64.
template <typename T>
auto exact(T v) {
  if constexpr (kFloating<T>) {
    return widen(v);
  } else {
    return static_cast<int64_t>(v);
  }
}

template <typename V>
bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

template <typename T>
void sum_rows(const T* in, int64_t outer, int64_t r, void* out) {
  for (int64_t o = 0; o < outer; ++o) {
    const T* row = in + o * r;
    if constexpr (!kFloating<T>) {
      // Unsigned, so that an overflowing sum wraps (as on the GPU) instead of being undefined.
      uint64_t acc = 0;
      for (int64_t j = 0; j < r; ++j) acc += static_cast<uint64_t>(exact(row[j]));
      static_cast<int64_t*>(out)[o] = static_cast<int64_t>(acc);
    } else {
      double acc = 0;
      for (int64_t j = 0; j < r; ++j) acc += exact(row[j]);
      static_cast<T*>(out)[o] = narrow<T>(acc);
    }
  }
}

// The first NaN wins outright; otherwise the first element that no later one strictly beats.
template <typename T, bool kMax>
void extreme_rows(const T* in, int64_t outer, int64_t r, T* out, int64_t* indices) {
  for (int64_t o = 0; o < outer; ++o) {
    const T* row = in + o * r;
    int64_t best = 0;
    auto best_v = exact(row[0]);
    if (!is_nan(best_v)) {
      for (int64_t j = 1; j < r; ++j) {
        const auto v = exact(row[j]);
        if (is_nan(v)) {
          best = j;
          break;
        }
        if (kMax ? v > best_v : v < best_v) {
          best = j;
          best_v = v;
        }
      }
    }
    out[o] = row[best];
    if (indices) indices[o] = best;
  }
}

template <typename T>
void reduce_typed(const void* in, int64_t outer, int64_t r, ReduceOp op, void* out,
                  int64_t* indices) {
  const T* x = static_cast<const T*>(in);
  switch (op) {
    case ReduceOp::Sum:
      sum_rows(x, outer, r, out);
      return;
    case ReduceOp::Max:
      extreme_rows<T, true>(x, outer, r, static_cast<T*>(out), indices);
      return;
    case ReduceOp::Min:
      extreme_rows<T, false>(x, outer, r, static_cast<T*>(out), indices);
      return;
  }
  SINTER_THROW("reduce_rows: unknown op ", static_cast<int>(op));
}

template <typename T>
void cumsum_typed(const T* in, int64_t outer, int64_t len, int64_t inner, bool reverse, void* out) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* x = in + o * len * inner + i;
      if constexpr (!kFloating<T>) {
        int64_t* y = static_cast<int64_t*>(out) + o * len * inner + i;
        uint64_t acc = 0;  // unsigned: an overflowing sum wraps, as on the GPU
        for (int64_t j = 0; j < len; ++j) {
          const int64_t k = reverse ? len - 1 - j : j;
          acc += static_cast<uint64_t>(exact(x[k * inner]));
          y[k * inner] = static_cast<int64_t>(acc);
        }
      } else {
        T* y = static_cast<T*>(out) + o * len * inner + i;
        double acc = 0;
        for (int64_t j = 0; j < len; ++j) {
          const int64_t k = reverse ? len - 1 - j : j;
          acc += exact(x[k * inner]);
          y[k * inner] = narrow<T>(acc);
        }
      }
    }
  }
}

// The output dtype the caller allocated must be `want`, the one the kernel writes.
void check_out_dtype(const char* op, DType dtype, DType out_dtype, DType want) {
  SINTER_CHECK(out_dtype == want, op, ": output dtype ", out_dtype, " for input ", dtype,
               ", expected ", want);
}

}  // namespace

void cumsum_rows(const Ctx&, const void* in, DType dtype, int64_t outer, int64_t len, int64_t inner,
                 bool reverse, void* out, DType out_dtype) {
  check_out_dtype("cumsum_rows", dtype, out_dtype, is_integral(dtype) ? DType::i64 : dtype);
  visit_storage(dtype, "cumsum_rows", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cumsum_typed(static_cast<const T*>(in), outer, len, inner, reverse, out);
  });
}

void reduce_rows(const Ctx&, const void* in, DType dtype, int64_t outer, int64_t r, ReduceOp op,
                 void* out, DType out_dtype, int64_t* indices) {
  check_out_dtype("reduce_rows", dtype, out_dtype,
                  op == ReduceOp::Sum && is_integral(dtype) ? DType::i64 : dtype);
  SINTER_CHECK(op == ReduceOp::Sum || r >= 1, "reduce_rows: Max/Min of an empty row");
  if (outer == 0) return;
  visit_storage(dtype, "reduce_rows", [&](auto tag) {
    reduce_typed<typename decltype(tag)::type>(in, outer, r, op, out, indices);
  });
}

}  // namespace sinter::cpu
