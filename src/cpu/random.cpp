// CPU reference for the counter-based random fills and arange. Element i comes from Philox block
// (seed, offset + i) as Note [philox streams] in src/kern/philox.h says, the same as on CUDA.
#include "kern/random.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cpu/cpu_util.h"
#include "internal/parallel.h"
#include "kern/philox.h"
#include "kern/scalar_ops.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

// out[i] = value(tag, i) for i in [0, n), converted to the storage type T of `dtype` (tag is
// TypeTag<T>).
template <class F>
void fill(void* out, DType dtype, int64_t n, F value) {
  visit_storage(dtype, "random", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(out);
    // Element i's value depends on i alone (a counter-based stream): any split gives the same.
    detail::parallel_blocks(n, 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) p[i] = from_value<T>(value(tag, i));
    });
  });
}

// Fills the floating `dtype` with draws of a distribution of parameters (a, b) from the Philox
// stream: dist_f64 for f64, else dist_f32 with the parameters as float, rounded once to bf16/f16.
template <class DistF64, class DistF32>
void fill_distribution(const char* op, void* out, DType dtype, int64_t n, uint64_t seed,
                       uint64_t offset, double a, double b, DistF64 dist_f64, DistF32 dist_f32) {
  SINTER_CHECK(is_floating(dtype), op, ": needs a floating dtype, got ", dtype_name(dtype));
  const auto fa = static_cast<float>(a), fb = static_cast<float>(b);
  fill(out, dtype, n, [&](auto tag, int64_t i) {
    const PhiloxBlock bits = philox_element(seed, offset, i);
    if constexpr (std::is_same_v<typename decltype(tag)::type, double>) {
      return dist_f64(bits, a, b);
    } else {
      return dist_f32(bits, fa, fb);
    }
  });
}

}  // namespace

void random_uniform(const Ctx&, void* out, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                    double lo, double hi) {
  fill_distribution("random_uniform", out, dtype, n, seed, offset, lo, hi, uniform_f64,
                    uniform_f32);
}

void random_normal(const Ctx&, void* out, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                   double mean, double std) {
  fill_distribution("random_normal", out, dtype, n, seed, offset, mean, std, normal_f64,
                    normal_f32);
}

void random_int(const Ctx&, void* out, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                int64_t lo, int64_t hi) {
  SINTER_CHECK(hi > lo, "random_int: empty range [", lo, ", ", hi, ")");
  fill(out, dtype, n,
       [&](auto, int64_t i) { return randint_i64(philox_element(seed, offset, i), lo, hi); });
}

// start + i * step in double with one rounding (fma), as the CUDA kernel computes it.
void arange(const Ctx&, void* out, DType dtype, int64_t n, double start, double step) {
  fill(out, dtype, n,
       [&](auto, int64_t i) { return std::fma(static_cast<double>(i), step, start); });
}

}  // namespace sinter::cpu
