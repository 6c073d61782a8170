// Elementwise ops composed of the elementwise family's: lerp, addcmul, addcdiv, clamp with tensor
// bounds (its own backward, the gradient to the bound taken) and isclose / allclose.
#include <cmath>
#include <limits>

#include "internal/autograd_impl.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

void check_lerp(const Tensor& start, const Tensor& end) {
  check_defined("lerp", start);
  check_defined("lerp", end);
  SINTER_CHECK(start.dtype() == end.dtype(), "lerp: start is ", start.dtype(), ", end ",
               end.dtype(), " (they must have one dtype)");
  SINTER_CHECK(is_floating(start.dtype()), "lerp: expected floating tensors, got dtype ",
               start.dtype());
}

// a or b, a and b of bool tensors (broadcast).
Tensor either(const Tensor& a, const Tensor& b) { return where(a, a, b); }
Tensor both(const Tensor& a, const Tensor& b) { return where(a, b, a); }

}  // namespace

Tensor lerp(const Tensor& start, const Tensor& end, double weight) {
  SINTER_PROFILE_OP("lerp", start, end);
  check_lerp(start, end);
  const Tensor diff = sub(end, start);
  // PyTorch's two forms: each exact at its end (weight 0 gives start, weight 1 gives end).
  return std::abs(weight) < 0.5 ? add(start, mul(diff, weight)) : sub(end, mul(diff, 1.0 - weight));
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  SINTER_PROFILE_OP("lerp", start, end, weight);
  check_lerp(start, end);
  check_defined("lerp", weight);
  SINTER_CHECK(weight.dtype() == start.dtype(), "lerp: weight is ", weight.dtype(), ", start ",
               start.dtype(), " (they must have one dtype)");
  const Tensor diff = sub(end, start);
  return where(lt(abs(weight), 0.5), add(start, mul(diff, weight)),
               sub(end, mul(diff, sub(1.0, weight))));
}

Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, double value) {
  SINTER_PROFILE_OP("addcmul", input, t1, t2);
  check_defined("addcmul", input);
  check_defined("addcmul", t1);
  check_defined("addcmul", t2);
  const Tensor prod = mul(t1, t2);
  return add(input, value == 1.0 ? prod : mul(prod, value));
}

Tensor addcdiv(const Tensor& input, const Tensor& t1, const Tensor& t2, double value) {
  SINTER_PROFILE_OP("addcdiv", input, t1, t2);
  check_defined("addcdiv", input);
  check_defined("addcdiv", t1);
  check_defined("addcdiv", t2);
  SINTER_CHECK(is_floating(t1.dtype()) && is_floating(t2.dtype()),
               "addcdiv: integer division is not supported: t1 is ", t1.dtype(), ", t2 ",
               t2.dtype());
  const Tensor quot = div(t1, t2);
  return add(input, value == 1.0 ? quot : mul(quot, value));
}

Tensor clamp(const Tensor& a0, const Tensor& lo0, const Tensor& hi0) {
  SINTER_PROFILE_OP("clamp", a0, lo0, hi0);
  check_defined("clamp", a0);
  SINTER_CHECK(lo0.defined() || hi0.defined(), "clamp: at least one of min and max must be given");
  // The three promoted to one dtype, as PyTorch's.
  DType dt = a0.dtype();
  for (const Tensor* t : {&lo0, &hi0}) {
    if (!t->defined()) continue;
    SINTER_CHECK(t->device() == a0.device(), "clamp: a bound is on ", t->device(),
                 ", the input on ", a0.device());
    dt = promote_types(dt, t->dtype());
  }
  auto cast = [dt](const Tensor& t) { return !t.defined() || t.dtype() == dt ? t : t.to(dt); };
  const Tensor a = cast(a0), lo = cast(lo0), hi = cast(hi0);
  Tensor out;
  {
    NoGradGuard ng;
    out = lo.defined() ? maximum(a, lo) : a;
    out = hi.defined() ? minimum(out, hi) : out;
    if (out.is_same(a)) out = a.clone();
  }
  if (needs_grad({&a, &lo, &hi})) {
    SavedTensor sa(a, "clamp"), slo(lo, "clamp"), shi(hi, "clamp");
    const Shape sha = a.shape(), shlo = lo.defined() ? lo.shape() : Shape{},
                shhi = hi.defined() ? hi.shape() : Shape{};
    const bool need_lo = lo.defined() && lo.requires_grad(),
               need_hi = hi.defined() && hi.requires_grad();
    record("clamp", {&out}, {a, lo, hi}, [=](const Grads& g) {
      const Tensor x = sa.get(), l = slo.get(), h = shi.get();
      // Where each bound was taken (PyTorch's clamp_backward_min_max): hi wins where l > h.
      Tensor took_lo, took_hi;
      if (l.defined()) took_lo = h.defined() ? both(lt(x, l), le(l, h)) : lt(x, l);
      if (h.defined()) took_hi = l.defined() ? either(gt(x, h), lt(h, l)) : gt(x, h);
      // a keeps the gradient where neither was taken (NaN included: it compares false).
      Tensor keep = l.defined() ? ge(x, l) : le(x, h);
      if (l.defined() && h.defined()) keep = both(keep, le(x, h));
      const Tensor zero = zeros({}, {.dtype = g[0].dtype(), .device = g[0].device()});
      auto part = [&](const Tensor& mask, const Shape& shape) {
        return sum_to(where(mask, g[0], zero), shape);
      };
      return Grads{part(keep, sha), need_lo ? part(took_lo, shlo) : Tensor(),
                   need_hi ? part(took_hi, shhi) : Tensor()};
    });
  }
  return out;
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  SINTER_PROFILE_OP("isclose", a, b);
  check_defined("isclose", a);
  check_defined("isclose", b);
  SINTER_CHECK(a.dtype() == b.dtype(), "isclose: a is ", a.dtype(), ", b ", b.dtype(),
               " (they must have one dtype)");
  SINTER_CHECK(rtol >= 0 && atol >= 0, "isclose: rtol and atol must be non-negative, got rtol ",
               rtol, " and atol ", atol);
  NoGradGuard ng;
  Tensor close = eq(a, b);
  if (equal_nan) close = either(close, both(ne(a, a), ne(b, b)));
  if (a.dtype() == DType::b8 || (rtol == 0 && atol == 0)) return close;
  // Integers compare in f32, PyTorch's default dtype. A finite difference within the tolerance
  // (inf - inf is NaN and inf - x is inf: neither counts; equal infinities matched above).
  const Tensor x = is_floating(a.dtype()) ? a : a.to(DType::f32);
  const Tensor y = is_floating(b.dtype()) ? b : b.to(DType::f32);
  const Tensor actual = abs(sub(x, y));
  const Tensor allowed = add(abs(mul(y, rtol)), atol);
  const Tensor finite = lt(actual, std::numeric_limits<double>::infinity());
  return either(close, both(finite, le(actual, allowed)));
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  SINTER_PROFILE_OP("allclose", a, b);
  const Tensor close = isclose(a, b, rtol, atol, equal_nan);
  return sum(close.to(DType::i64)).item<int64_t>() == close.numel();
}

}  // namespace sinter
