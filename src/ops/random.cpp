// The random family (src/kern/random.h): rand, randn and randint draw from Philox counters that a
// Generator reserves (Note [philox streams]), so the CPU and CUDA give the same values; arange
// and linspace fill by the same family's arange kernel.
#include "kern/random.h"

#include <cmath>
#include <cstdint>

#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "sinter/ops.h"
#include "sinter/tensor.h"

namespace sinter {

Tensor arange(double end, const TensorOptions& opts) { return arange(0.0, end, 1.0, opts); }

Tensor arange(double start, double end, double step, const TensorOptions& opts) {
  SINTER_CHECK(step != 0.0 && std::isfinite(step), "arange: step must be finite and nonzero, got ",
               step);
  SINTER_CHECK(std::isfinite(start) && std::isfinite(end), "arange: bounds must be finite, got ",
               start, " and ", end);
  SINTER_CHECK((end - start) / step >= 0, "arange: step ", step, " does not lead from ", start,
               " to ", end);
  const double count = std::ceil((end - start) / step);
  SINTER_CHECK(count < 9.0e18, "arange: [", start, ", ", end, ") in steps of ", step, " has ",
               count, " elements, too many to count");
  const auto n = static_cast<int64_t>(count);
  TensorOptions o = opts;
  o.requires_grad = false;
  Tensor t = empty({n}, o);
  if (n > 0) SINTER_DISPATCH(t.device(), arange, t.data_ptr(), t.dtype(), n, start, step);
  return finish_factory(t, opts);
}

Tensor linspace(double start, double end, int64_t steps, const TensorOptions& opts) {
  SINTER_CHECK(steps >= 0, "linspace: steps must be non-negative, got ", steps);
  TensorOptions o = opts;
  o.requires_grad = false;
  Tensor t = empty({steps}, o);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  if (steps > 0) SINTER_DISPATCH(t.device(), arange, t.data_ptr(), t.dtype(), steps, start, step);
  return finish_factory(t, opts);
}

namespace {
Generator& gen_or_default(Generator* g) { return g ? *g : default_generator(); }
}  // namespace

// A new tensor whose n elements come from n reserved Philox counters (Note [philox streams]).
template <class Fill>
Tensor random_tensor(const Shape& shape, const TensorOptions& opts, Generator* gen, Fill fill) {
  TensorOptions o = opts;
  o.requires_grad = false;
  Tensor t = empty(shape, o);
  const GeneratorState st = gen_or_default(gen).reserve(static_cast<uint64_t>(t.numel()));
  if (t.numel() > 0) fill(t, st.seed, st.offset);
  return finish_factory(t, opts);
}

Tensor rand(const Shape& shape, const TensorOptions& opts, Generator* gen) {
  SINTER_CHECK(is_floating(opts.dtype), "rand: dtype must be floating, got ", opts.dtype);
  return random_tensor(shape, opts, gen, [](const Tensor& t, uint64_t seed, uint64_t offset) {
    SINTER_DISPATCH(t.device(), random_uniform, t.data_ptr(), t.dtype(), t.numel(), seed, offset,
                    0.0, 1.0);
  });
}

Tensor randn(const Shape& shape, const TensorOptions& opts, Generator* gen) {
  SINTER_CHECK(is_floating(opts.dtype), "randn: dtype must be floating, got ", opts.dtype);
  return random_tensor(shape, opts, gen, [](const Tensor& t, uint64_t seed, uint64_t offset) {
    SINTER_DISPATCH(t.device(), random_normal, t.data_ptr(), t.dtype(), t.numel(), seed, offset,
                    0.0, 1.0);
  });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& opts,
               Generator* gen) {
  SINTER_CHECK(low < high, "randint: low (", low, ") must be less than high (", high, ")");
  SINTER_CHECK(is_integral(opts.dtype) || is_floating(opts.dtype), "randint: unsupported dtype ",
               opts.dtype);
  {
    // [low, high) must hold values the dtype represents exactly.
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    switch (opts.dtype) {
      case DType::i32:
        lo = INT32_MIN, hi = static_cast<int64_t>(INT32_MAX) + 1;
        break;
      case DType::u8:
        lo = 0, hi = 256;
        break;
      case DType::b8:
        lo = 0, hi = 2;
        break;
      case DType::f32:
        lo = -(int64_t{1} << 24), hi = int64_t{1} << 24;
        break;
      case DType::bf16:
        lo = -256, hi = 256;
        break;
      case DType::f16:
        lo = -2048, hi = 2048;
        break;
      case DType::f64:
        lo = -(int64_t{1} << 53), hi = int64_t{1} << 53;
        break;
      default:
        break;
    }
    SINTER_CHECK(low >= lo && high <= hi, "randint: range [", low, ", ", high,
                 ") does not fit dtype ", opts.dtype, " (exact values in [", lo, ", ", hi, "))");
  }
  SINTER_CHECK(!opts.requires_grad, "randint: integer tensors cannot require grad");
  return random_tensor(shape, opts, gen,
                       [low, high](const Tensor& t, uint64_t seed, uint64_t offset) {
                         SINTER_DISPATCH(t.device(), random_int, t.data_ptr(), t.dtype(), t.numel(),
                                         seed, offset, low, high);
                       });
}

}  // namespace sinter
