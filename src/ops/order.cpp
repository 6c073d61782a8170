// The order statistics of sinter/ops_tensor.h (kthvalue, median, nanmedian, quantile and
// nanquantile), each read from a stable sort along its dim. NaN sorts last, so the first
// n - (NaN count) places of a sorted slice hold its numbers in order, and a gather at per-slice
// positions reads every statistic at once (its gradient goes back through the gather and the sort
// to the element read). quantile's ranks are f64, and it gathers its Q places from each sorted
// slice without copying the slice Q times.
#include <limits>

#include "internal/autograd_impl.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/autograd.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

Tensor constant(double v, DType dtype, const Device& device) {
  return full({}, v, {.dtype = dtype, .device = device});
}

// median and nanmedian along dim: the lower median of each slice's numbers; without skip_nan a
// slice holding NaN gives its first NaN (and that NaN's index).
std::tuple<Tensor, Tensor> median_along(const char* name, const Tensor& a, int64_t dim,
                                        bool keepdim, bool skip_nan) {
  check_defined(name, a);
  const Tensor x = a.dim() == 0 ? a.reshape({1}) : a;
  const int64_t d = wrap_dim(name, dim, x.dim());
  const int64_t n = x.size(d);
  SINTER_CHECK(n > 0, name, ": dim ", dim, " of shape ", shape_str(a.shape()),
               " has no elements to take a median of");
  const auto [sv, si] = sort(x, d);
  const Tensor nans = sum(isnan(x), {d}, true);  // i64, the dim kept
  const Tensor lower = constant(static_cast<double>((n - 1) / 2), DType::i64, x.device());
  // nanmedian: (m - 1) / 2 of the m numbers, 0 (a NaN) where there are none.
  const Tensor pos = skip_nan ? clamp(div(sub(sub(n, nans), 1), 2, "floor"), 0)
                              : where(gt(nans, 0), sub(n, nans), lower);
  Tensor values = gather(sv, d, pos), indices = gather(si, d, pos);
  if (a.dim() == 0) return {values.reshape({}), indices.reshape({})};
  if (!keepdim) return {squeeze(values, d), squeeze(indices, d)};
  return {values, indices};
}

// The median of all of a's elements, its gradient shared evenly among those equal to it (the NaNs
// for a NaN median), as PyTorch's evenly_distribute_backward.
Tensor median_of_all(const char* name, const Tensor& a, bool skip_nan) {
  check_defined(name, a);
  if (a.numel() == 0) {
    SINTER_CHECK(is_floating(a.dtype()), name, ": an empty ", a.dtype(),
                 " tensor has no median (a floating one gives NaN)");
    return constant(kNan, a.dtype(), a.device());
  }
  Tensor out;
  {
    NoGradGuard ng;
    out = std::get<0>(median_along(name, a.reshape({-1}), 0, false, skip_nan)).clone();
  }
  if (needs_grad({&a})) {
    Tensor equal, count;
    {
      NoGradGuard ng;
      equal = where(isnan(out), isnan(a), eq(a, out));
      count = sum(equal).to(a.dtype());
    }
    record(name, {&out}, {a}, [equal, count](const Grads& g) {
      const Tensor zero = zeros({}, {.dtype = g[0].dtype(), .device = g[0].device()});
      return Grads{where(equal, div(g[0], count), zero)};
    });
  }
  return out;
}

Tensor quantiles(const char* name, const Tensor& a, const Tensor& q, std::optional<int64_t> dim,
                 bool keepdim, QuantileInterpolation how, bool skip_nan) {
  check_defined(name, a);
  check_defined(name, q);
  SINTER_CHECK(a.dtype() == DType::f32 || a.dtype() == DType::f64, name,
               ": the input must be f32 or f64, got ", a.dtype());
  SINTER_CHECK(q.dtype() == a.dtype(), name, ": q must have the input's dtype ", a.dtype(),
               ", got ", q.dtype());
  SINTER_CHECK(q.device() == a.device(), name, ": q is on ", q.device(), ", the input on ",
               a.device());
  SINTER_CHECK(q.dim() <= 1, name, ": q must be a number, or a 0-d or 1-D tensor, got shape ",
               shape_str(q.shape()));
  SINTER_CHECK(a.numel() > 0, name, ": the input is empty");
  for (double v : q.detach().to(DType::f64).cpu().reshape({-1}).to_vector<double>()) {
    SINTER_CHECK(v >= 0.0 && v <= 1.0, name, ": q values must be in [0, 1], got ", v);
  }
  // The slices along the last dim: a's dim moved there, or all of a flattened.
  const Tensor src = a.dim() == 0 ? a.reshape({1}) : a;
  const int64_t d = dim ? wrap_dim(name, *dim, src.dim()) : 0;
  const Tensor x = dim ? movedim(src, {d}, {-1}) : src.reshape({-1});
  const int64_t n = x.size(-1);
  const auto [sv, si] = sort(x, -1);
  const Tensor nans = sum(isnan(x), {-1}, true);  // i64 (rows..., 1)
  // The ranks (rows..., Q), q (m - 1) of each slice's m numbers (0 where it has none), in f64:
  // past 2^24 elements an f32 rank would round past the last place.
  const Tensor numbers = skip_nan ? sub(n, nans).to(DType::f64)
                                  : full(nans.shape(), static_cast<double>(n),
                                         {.dtype = DType::f64, .device = a.device()});
  Shape q_shape(static_cast<size_t>(x.dim()), 1);
  q_shape.back() = q.numel();
  const Tensor ranks =
      clamp(mul(q.detach().to(DType::f64).reshape(q_shape), sub(numbers, 1.0)), 0.0);
  // Each rank's neighbours read from the sorted slices themselves (gather takes Q places).
  const auto at = [&](const Tensor& pos) { return gather(sv, -1, pos.to(DType::i64)); };
  const Tensor lo = floor(ranks), hi = ceil(ranks);
  Tensor out;
  switch (how) {
    case QuantileInterpolation::Lower:
      out = at(lo);
      break;
    case QuantileInterpolation::Higher:
      out = at(hi);
      break;
    case QuantileInterpolation::Nearest:
      out = at(round(ranks));
      break;
    case QuantileInterpolation::Midpoint:
      out = lerp(at(lo), at(hi), 0.5);
      break;
    case QuantileInterpolation::Linear:
      out = lerp(at(lo), at(hi), sub(ranks, lo).to(a.dtype()));
      break;
  }
  if (!skip_nan) out = where(gt(nans, 0), constant(kNan, a.dtype(), a.device()), out);
  out = movedim(out, {-1}, {0});  // (Q, rows...)
  if (keepdim && a.dim() > 0) {
    if (dim) {
      out = unsqueeze(out, 1 + d);
    } else {
      Shape ones(static_cast<size_t>(a.dim()) + 1, 1);
      ones[0] = q.numel();
      out = out.reshape(ones);
    }
  }
  return q.dim() == 0 ? squeeze(out, 0) : out;
}

Tensor number_q(const Tensor& a, double q) {
  check_defined("quantile", a);
  return full({}, q, {.dtype = a.dtype(), .device = a.device()});
}

}  // namespace

std::tuple<Tensor, Tensor> kthvalue(const Tensor& a, int64_t k, int64_t dim, bool keepdim) {
  SINTER_PROFILE_OP("kthvalue", a);
  check_defined("kthvalue", a);
  const Tensor x = a.dim() == 0 ? a.reshape({1}) : a;
  const int64_t d = wrap_dim("kthvalue", dim, x.dim());
  SINTER_CHECK(k >= 1 && k <= x.size(d), "kthvalue: k = ", k, " is out of range for dim ", dim,
               " of shape ", shape_str(a.shape()), " (1 to ", x.size(d), ")");
  const auto [sv, si] = sort(x, d);
  Tensor values = narrow(sv, d, k - 1, 1), indices = narrow(si, d, k - 1, 1);
  if (a.dim() == 0) return {values.reshape({}), indices.reshape({})};
  if (!keepdim) return {squeeze(values, d), squeeze(indices, d)};
  return {values, indices};
}

std::tuple<Tensor, Tensor> median(const Tensor& a, int64_t dim, bool keepdim) {
  SINTER_PROFILE_OP("median", a);
  return median_along("median", a, dim, keepdim, false);
}

std::tuple<Tensor, Tensor> nanmedian(const Tensor& a, int64_t dim, bool keepdim) {
  SINTER_PROFILE_OP("nanmedian", a);
  return median_along("nanmedian", a, dim, keepdim, true);
}

Tensor median(const Tensor& a) {
  SINTER_PROFILE_OP("median", a);
  return median_of_all("median", a, false);
}

Tensor nanmedian(const Tensor& a) {
  SINTER_PROFILE_OP("nanmedian", a);
  return median_of_all("nanmedian", a, true);
}

Tensor quantile(const Tensor& a, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                QuantileInterpolation interpolation) {
  SINTER_PROFILE_OP("quantile", a, q);
  return quantiles("quantile", a, q, dim, keepdim, interpolation, false);
}

Tensor quantile(const Tensor& a, double q, std::optional<int64_t> dim, bool keepdim,
                QuantileInterpolation interpolation) {
  return quantile(a, number_q(a, q), dim, keepdim, interpolation);
}

Tensor nanquantile(const Tensor& a, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   QuantileInterpolation interpolation) {
  SINTER_PROFILE_OP("nanquantile", a, q);
  return quantiles("nanquantile", a, q, dim, keepdim, interpolation, true);
}

Tensor nanquantile(const Tensor& a, double q, std::optional<int64_t> dim, bool keepdim,
                   QuantileInterpolation interpolation) {
  return nanquantile(a, number_q(a, q), dim, keepdim, interpolation);
}

}  // namespace sinter
