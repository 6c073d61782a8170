// The factories that fill a new tensor with a sequence, arange and linspace, by the arange kernel
// of the random family (src/kern/random.h). The tensor constructors (empty, full, zeros, eye, ...)
// are src/tensor/tensor.cpp's.
#include <cmath>
#include <cstdint>

#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "kern/random.h"
#include "sinter/ops.h"
#include "sinter/tensor.h"

namespace sinter {

Tensor arange(double end, const TensorOptions& opts) { return arange(0.0, end, 1.0, opts); }

Tensor arange(double start, double end, double step, const TensorOptions& opts) {
  SINTER_PROFILE_OP("arange");
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
  SINTER_PROFILE_OP("linspace");
  SINTER_CHECK(steps >= 0, "linspace: steps must be non-negative, got ", steps);
  TensorOptions o = opts;
  o.requires_grad = false;
  Tensor t = empty({steps}, o);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  if (steps > 0) SINTER_DISPATCH(t.device(), arange, t.data_ptr(), t.dtype(), steps, start, step);
  return finish_factory(t, opts);
}

}  // namespace sinter
