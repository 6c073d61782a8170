// CPU reference for the counter-based random fills and arange. Element i comes from Philox block
// (seed, offset + i) as Note [philox streams] in internal/philox.h says, the same as on CUDA.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "internal/kernels.h"
#include "internal/philox.h"
#include "internal/scalar_ops.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

template <class F>
void visit_storage(DType t, F&& f) {
  visit_storage_type<BFloat16, Half>(t, "random", std::forward<F>(f));
}

// Rounds a computed value to the element type; bf16 and f16 go by way of float.
template <class T, class V>
T store_value(V v) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
    return T(convert<float>(v));
  } else {
    return convert<T>(v);
  }
}

}  // namespace

void random_uniform(const Ctx&, void* out, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                    double lo, double hi) {
  SINTER_CHECK(is_floating(dtype), "random_uniform: needs a floating dtype, got ",
               dtype_name(dtype));
  visit_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(out);
    if constexpr (std::is_same_v<T, double>) {
      for (int64_t i = 0; i < n; ++i) p[i] = uniform_f64(philox_element(seed, offset, i), lo, hi);
    } else {
      const auto flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
      for (int64_t i = 0; i < n; ++i) {
        p[i] = store_value<T>(uniform_f32(philox_element(seed, offset, i), flo, fhi));
      }
    }
  });
}

void random_normal(const Ctx&, void* out, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                   double mean, double std) {
  SINTER_CHECK(is_floating(dtype), "random_normal: needs a floating dtype, got ",
               dtype_name(dtype));
  visit_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(out);
    if constexpr (std::is_same_v<T, double>) {
      for (int64_t i = 0; i < n; ++i) p[i] = normal_f64(philox_element(seed, offset, i), mean, std);
    } else {
      const auto fmean = static_cast<float>(mean), fstd = static_cast<float>(std);
      for (int64_t i = 0; i < n; ++i) {
        p[i] = store_value<T>(normal_f32(philox_element(seed, offset, i), fmean, fstd));
      }
    }
  });
}

void random_int(const Ctx&, void* out, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                int64_t lo, int64_t hi) {
  SINTER_CHECK(hi > lo, "random_int: empty range [", lo, ", ", hi, ")");
  visit_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(out);
    for (int64_t i = 0; i < n; ++i) {
      p[i] = store_value<T>(randint_i64(philox_element(seed, offset, i), lo, hi));
    }
  });
}

// start + i * step in double with one rounding (fma), as the CUDA kernel computes it.
void arange(const Ctx&, void* out, DType dtype, int64_t n, double start, double step) {
  visit_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(out);
    for (int64_t i = 0; i < n; ++i) {
      p[i] = store_value<T>(std::fma(static_cast<double>(i), step, start));
    }
  });
}

}  // namespace sinter::cpu
