// More elementwise math: erf, erfinv, lgamma, digamma, expm1, log1p, floor, ceil, round, trunc,
// frac, the trigonometric and hyperbolic functions, log2, log10, exp2, atan2 and hypot on the
// elementwise kernels (rows of Note [elementwise op list]), and ops composed of others: reciprocal,
// logaddexp, xlogy, logit, lerp, addcmul, addcdiv, clamp with tensor bounds (its own backward, the
// gradient to the bound taken) and isclose / allclose.
#include <cmath>
#include <limits>
#include <utility>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

using kern::BinaryOp;
using kern::UnaryOp;

// a as a floating tensor: integer and bool tensors in f32, PyTorch's default dtype.
Tensor floating(const Tensor& a) { return is_floating(a.dtype()) ? a : a.to(DType::f32); }

// A unary op on the kernel whose gradient is grad(g, s), s its input (or output with save_out).
template <class Grad>
Tensor unary_math(const char* name, const Tensor& a0, UnaryOp op, bool save_out, Grad grad) {
  check_defined(name, a0);
  const Tensor a = floating(a0);
  Tensor out = unary_kernel(name, a, op);
  if (needs_grad({&a})) {
    SavedTensor saved(save_out ? out : a, name);
    record(name, {&out}, {a},
           [saved, grad](const Grads& g) { return Grads{grad(g[0], saved.get())}; });
  }
  return out;
}

// A binary op on the kernel, its operands promoted (f32 for integers), broadcast; grad(g, a, b,
// out) gives both gradients (out undefined without save_out).
template <class Grad>
Tensor binary_math(const char* name, const Tensor& a0, const Tensor& b0, BinaryOp op, bool save_out,
                   Grad grad) {
  check_defined(name, a0);
  check_defined(name, b0);
  const DType dt = a0.dtype() == b0.dtype() ? a0.dtype() : result_type(a0, b0);
  const Tensor a = floating(a0.to(dt)), b = floating(b0.to(dt));
  Tensor out = binary_kernel(name, a, b, op);
  if (needs_grad({&a, &b})) {
    SavedTensor sa(a, name), sb(b, name), so(save_out ? out : Tensor(), name);
    const Shape sha = a.shape(), shb = b.shape();
    record(name, {&out}, {a, b}, [=](const Grads& g) {
      const auto [ga, gb] = grad(g[0], sa.get(), sb.get(), so.get());
      return Grads{sum_to(ga, sha), sum_to(gb, shb)};
    });
  }
  return out;
}

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

Tensor erf(const Tensor& a) {
  SINTER_PROFILE_OP("erf", a);
  return unary_math("erf", a, UnaryOp::Erf, false, [](const Tensor& g, const Tensor& x) {
    // d/dx erf(x) = 2 / sqrt(pi) exp(-x^2)
    return mul(g, mul(exp(neg(mul(x, x))), 1.1283791670955126));
  });
}

Tensor erfinv(const Tensor& a) {
  SINTER_PROFILE_OP("erfinv", a);
  check_defined("erfinv", a);
  SINTER_AUTOCAST(erfinv, a, erfinv(cast(a)));
  return unary_math("erfinv", a, UnaryOp::Erfinv, true, [](const Tensor& g, const Tensor& y) {
    // d/dx erfinv(x) = sqrt(pi) / 2 exp(erfinv(x)^2)
    return mul(g, mul(exp(mul(y, y)), 0.88622692545275801));
  });
}

Tensor expm1(const Tensor& a) {
  SINTER_PROFILE_OP("expm1", a);
  check_defined("expm1", a);
  SINTER_AUTOCAST(expm1, a, expm1(cast(a)));
  return unary_math("expm1", a, UnaryOp::Expm1, true,
                    [](const Tensor& g, const Tensor& y) { return mul(g, add(y, 1.0)); });
}

Tensor lgamma(const Tensor& a) {
  SINTER_PROFILE_OP("lgamma", a);
  return unary_math("lgamma", a, UnaryOp::Lgamma, false,
                    [](const Tensor& g, const Tensor& x) { return mul(g, digamma(x)); });
}

Tensor digamma(const Tensor& a) {
  SINTER_PROFILE_OP("digamma", a);
  // digamma' = trigamma, on the kernel only: it has no derivative of its own here.
  return unary_math("digamma", a, UnaryOp::Digamma, false, [](const Tensor& g, const Tensor& x) {
    return mul(g, unary_kernel("digamma backward", x, UnaryOp::Trigamma));
  });
}

Tensor log1p(const Tensor& a) {
  SINTER_PROFILE_OP("log1p", a);
  check_defined("log1p", a);
  SINTER_AUTOCAST(log1p, a, log1p(cast(a)));
  return unary_math("log1p", a, UnaryOp::Log1p, false,
                    [](const Tensor& g, const Tensor& x) { return div(g, add(x, 1.0)); });
}

namespace {

// floor, ceil, round and trunc: integer tensors are their own (PyTorch returns a copy), bool is
// refused as PyTorch refuses it; the gradient is zero.
Tensor rounded(const char* name, const Tensor& a, UnaryOp op) {
  check_defined(name, a);
  SINTER_CHECK(a.dtype() != DType::b8, name, ": not implemented for bool tensors (as in PyTorch)");
  if (!is_floating(a.dtype())) return a.clone();
  Tensor out = unary_kernel(name, a, op);
  if (needs_grad({&a})) {
    record(name, {&out}, {a}, [](const Grads& g) { return Grads{zeros_like(g[0])}; });
  }
  return out;
}

}  // namespace

Tensor floor(const Tensor& a) {
  SINTER_PROFILE_OP("floor", a);
  return rounded("floor", a, UnaryOp::Floor);
}

Tensor ceil(const Tensor& a) {
  SINTER_PROFILE_OP("ceil", a);
  return rounded("ceil", a, UnaryOp::Ceil);
}

Tensor trunc(const Tensor& a) {
  SINTER_PROFILE_OP("trunc", a);
  return rounded("trunc", a, UnaryOp::Trunc);
}

Tensor round(const Tensor& a, int64_t decimals) {
  SINTER_PROFILE_OP("round", a);
  if (decimals == 0) return rounded("round", a, UnaryOp::Round);
  check_defined("round", a);
  SINTER_CHECK(is_floating(a.dtype()), "round: decimals = ", decimals,
               " needs a floating tensor, got ", a.dtype(), " (as in PyTorch)");
  // bf16 and f16 in f32, rounded once at the end (PyTorch's kernel computes in float).
  if (a.dtype() == DType::bf16 || a.dtype() == DType::f16) {
    return round(a.to(DType::f32), decimals).to(a.dtype());
  }
  const double ten = std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals));
  return decimals > 0 ? div(rounded("round", mul(a, ten), UnaryOp::Round), ten)
                      : mul(rounded("round", div(a, ten), UnaryOp::Round), ten);
}

Tensor frac(const Tensor& a) {
  SINTER_PROFILE_OP("frac", a);
  check_defined("frac", a);
  SINTER_CHECK(is_floating(a.dtype()), "frac: not implemented for ", a.dtype(),
               " tensors (as in PyTorch: floating tensors only)");
  Tensor out = unary_kernel("frac", a, UnaryOp::Frac);
  if (needs_grad({&a})) {
    record("frac", {&out}, {a}, [](const Grads& g) { return Grads{g[0]}; });
  }
  return out;
}

Tensor atan2(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("atan2", a, b);
  return binary_math("atan2", a, b, BinaryOp::Atan2, false,
                     [](const Tensor& g, const Tensor& y, const Tensor& x, const Tensor&) {
                       // d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2)
                       const Tensor r2 = add(mul(x, x), mul(y, y));
                       return std::pair{div(mul(g, x), r2), div(mul(g, neg(y)), r2)};
                     });
}

Tensor hypot(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("hypot", a, b);
  return binary_math("hypot", a, b, BinaryOp::Hypot, true,
                     [](const Tensor& g, const Tensor& x, const Tensor& y, const Tensor& r) {
                       return std::pair{div(mul(g, x), r), div(mul(g, y), r)};
                     });
}

// --- the rest of the math of one argument (sinter/ops_math.h) ---

namespace {
// 1 - x^2 and x^2 - 1, the radicands of the inverse functions' derivatives.
Tensor one_minus_square(const Tensor& x) { return sub(1.0, mul(x, x)); }
}  // namespace

#define SINTER_MATH_(name, OP, save_out, ...)                                        \
  Tensor name(const Tensor& a) {                                                     \
    SINTER_PROFILE_OP(#name, a);                                                     \
    check_defined(#name, a);                                                         \
    return unary_math(#name, a, UnaryOp::OP, save_out,                               \
                      [](const Tensor& g, const Tensor& s) { return __VA_ARGS__; }); \
  }
#define SINTER_MATH_F32_(name, OP, save_out, ...)                                    \
  Tensor name(const Tensor& a) {                                                     \
    SINTER_PROFILE_OP(#name, a);                                                     \
    check_defined(#name, a);                                                         \
    SINTER_AUTOCAST(name, a, name(cast(a)));                                         \
    return unary_math(#name, a, UnaryOp::OP, save_out,                               \
                      [](const Tensor& g, const Tensor& s) { return __VA_ARGS__; }); \
  }
// s is the saved input x, or the output y where save_out.
SINTER_MATH_F32_(tan, Tan, true, mul(g, add(mul(s, s), 1.0)))           // 1 + y^2
SINTER_MATH_F32_(asin, Asin, false, div(g, sqrt(one_minus_square(s))))  // 1 / sqrt(1 - x^2)
SINTER_MATH_F32_(acos, Acos, false, neg(div(g, sqrt(one_minus_square(s)))))
SINTER_MATH_(atan, Atan, false, div(g, add(mul(s, s), 1.0)))  // 1 / (1 + x^2)
SINTER_MATH_F32_(sinh, Sinh, false, mul(g, cosh(s)))
SINTER_MATH_F32_(cosh, Cosh, false, mul(g, sinh(s)))
SINTER_MATH_(asinh, Asinh, false, div(g, sqrt(add(mul(s, s), 1.0))))           // 1 / sqrt(x^2 + 1)
SINTER_MATH_(acosh, Acosh, false, div(g, sqrt(sub(mul(s, s), 1.0))))           // 1 / sqrt(x^2 - 1)
SINTER_MATH_(atanh, Atanh, false, div(g, one_minus_square(s)))                 // 1 / (1 - x^2)
SINTER_MATH_F32_(log2, Log2, false, div(g, mul(s, 0.69314718055994530942)))    // 1 / (x ln 2)
SINTER_MATH_F32_(log10, Log10, false, div(g, mul(s, 2.30258509299404568402)))  // 1 / (x ln 10)
SINTER_MATH_(exp2, Exp2, true, mul(g, mul(s, 0.69314718055994530942)))         // y ln 2
#undef SINTER_MATH_
#undef SINTER_MATH_F32_

Tensor reciprocal(const Tensor& a) {
  SINTER_PROFILE_OP("reciprocal", a);
  check_defined("reciprocal", a);
  SINTER_AUTOCAST(reciprocal, a, reciprocal(cast(a)));
  return div(1.0, a);
}

Tensor deg2rad(const Tensor& a) {
  SINTER_PROFILE_OP("deg2rad", a);
  check_defined("deg2rad", a);
  return mul(floating(a), 0.017453292519943295);  // pi / 180
}

Tensor rad2deg(const Tensor& a) {
  SINTER_PROFILE_OP("rad2deg", a);
  check_defined("rad2deg", a);
  return mul(floating(a), 57.295779513082320876);  // 180 / pi
}

namespace {

// The floating dtype a composed op of two operands computes in: their result_type, or f32 where
// that is integral. Each operand converts straight to it, so an integer is not narrowed on the way
// (an i64 2^62 beside a u8 tensor stays 2^62).
DType floating_type(const Tensor& a, const Tensor& b) {
  const DType dt = a.dtype() == b.dtype() ? a.dtype() : result_type(a, b);
  return is_floating(dt) ? dt : DType::f32;
}

// bf16 and f16 compute in f32 and round once, as PyTorch's ops do in their opmath type.
bool half_type(DType t) { return t == DType::bf16 || t == DType::f16; }

// PyTorch's logaddexp and logaddexp2: a where a and b are the same infinity, else max(a, b) +
// log(1 + base^-|a - b|) / log(base). maximum splits the gradient at ties, which is the exact
// gradient there (1/2 each).
Tensor log_add_exp(const char* name, const Tensor& a0, const Tensor& b0, bool base2) {
  check_defined(name, a0);
  check_defined(name, b0);
  const DType dt = a0.dtype() == b0.dtype() ? a0.dtype() : result_type(a0, b0);
  SINTER_CHECK(is_floating(dt), name, ": not implemented for ", a0.dtype(), " and ", b0.dtype(),
               " (floating operands only, as in PyTorch)");
  if (half_type(dt)) {
    return log_add_exp(name, a0.to(DType::f32), b0.to(DType::f32), base2).to(dt);
  }
  const Tensor a = a0.to(dt), b = b0.to(dt);
  const Tensor m = maximum(a, b);
  const Tensor gap = neg(abs(sub(a, b)));
  const Tensor tail =
      base2 ? mul(log1p(exp2(gap)), 1.4426950408889634074) : log1p(exp(gap));  // 1 / ln 2
  return where(logical_and(isinf(a), eq(a, b)), a, add(m, tail));
}

}  // namespace

Tensor logaddexp(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("logaddexp", a, b);
  return log_add_exp("logaddexp", a, b, false);
}

Tensor logaddexp2(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("logaddexp2", a, b);
  return log_add_exp("logaddexp2", a, b, true);
}

namespace {
// a * log(b), 0 where a is 0 and b is not NaN (log reads 1 there, so no -inf is formed).
Tensor xlogy_values(const Tensor& a, const Tensor& b) {
  const Tensor zero = logical_and(eq(a, 0), logical_not(isnan(b)));
  const Tensor one = full({}, 1.0, {.dtype = b.dtype(), .device = b.device()});
  return where(zero, zeros({}, {.dtype = a.dtype(), .device = a.device()}),
               mul(a, log(where(zero, one, b))));
}
}  // namespace

Tensor xlogy(const Tensor& a0, const Tensor& b0) {
  SINTER_PROFILE_OP("xlogy", a0, b0);
  check_defined("xlogy", a0);
  check_defined("xlogy", b0);
  const DType dt = floating_type(a0, b0);
  if (half_type(dt)) return xlogy(a0.to(DType::f32), b0.to(DType::f32)).to(dt);
  const Tensor a = a0.to(dt), b = b0.to(dt);
  Tensor out;
  {
    NoGradGuard ng;
    out = xlogy_values(a, b);
  }
  if (needs_grad({&a, &b})) {
    // PyTorch's: da = xlogy(g, b), 0 where a = 0 and b <= 0; db = g a / b (NaN at a = b = 0).
    SavedTensor sa(a, "xlogy"), sb(b, "xlogy");
    const Shape sha = a.shape(), shb = b.shape();
    record("xlogy", {&out}, {a, b}, [=](const Grads& g) {
      const Tensor x = sa.get(), y = sb.get();
      const Tensor zero = zeros({}, {.dtype = g[0].dtype(), .device = g[0].device()});
      const Tensor ga = where(logical_and(eq(x, 0), le(y, 0)), zero, xlogy_values(g[0], y));
      return Grads{sum_to(ga, sha), sum_to(mul(g[0], div(x, y)), shb)};
    });
  }
  return out;
}

Tensor logit(const Tensor& a0, std::optional<double> eps0) {
  SINTER_PROFILE_OP("logit", a0);
  check_defined("logit", a0);
  const Tensor a = floating(a0);
  if (half_type(a.dtype())) return logit(a.to(DType::f32), eps0).to(a.dtype());
  // A negative eps clamps nothing, as in PyTorch; with eps, x < eps reads eps, else x > 1 - eps
  // reads 1 - eps (in that order, so eps > 1/2 gives what PyTorch gives).
  const std::optional<double> eps = eps0 && *eps0 >= 0.0 ? eps0 : std::nullopt;
  const double lo = eps.value_or(0.0), hi = 1.0 - lo;
  const auto value = [&](double v) {
    return full({}, v, {.dtype = a.dtype(), .device = a.device()});
  };
  Tensor out;
  {
    NoGradGuard ng;
    const Tensor x = eps ? where(lt(a, lo), value(lo), where(gt(a, hi), value(hi), a)) : a;
    out = log(div(x, sub(1.0, x)));
  }
  if (needs_grad({&a})) {
    // PyTorch's logit_backward: g / (x (1 - x)); outside [eps, 1 - eps] 0, and without eps NaN
    // outside [0, 1].
    SavedTensor sa(a, "logit");
    const bool clamped = eps.has_value();
    record("logit", {&out}, {a}, [=](const Grads& g) {
      const Tensor x = sa.get();
      const Tensor d = div(g[0], mul(x, sub(1.0, x)));
      const Tensor fill = full({}, clamped ? 0.0 : std::numeric_limits<double>::quiet_NaN(),
                               {.dtype = d.dtype(), .device = d.device()});
      return Grads{where(logical_or(lt(x, lo), gt(x, hi)), fill, d)};
    });
  }
  return out;
}

// bf16 and f16 lerp computes in f32 and rounds once, as PyTorch's does in its opmath type: three
// operations each rounded to 8 bits drift far where end - start cancels.
namespace {
bool lerp_in_f32(DType t) { return t == DType::bf16 || t == DType::f16; }
}  // namespace

Tensor lerp(const Tensor& start, const Tensor& end, double weight) {
  SINTER_PROFILE_OP("lerp", start, end);
  check_lerp(start, end);
  if (lerp_in_f32(start.dtype())) {
    return lerp(start.to(DType::f32), end.to(DType::f32), weight).to(start.dtype());
  }
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
  if (lerp_in_f32(start.dtype())) {
    return lerp(start.to(DType::f32), end.to(DType::f32), weight.to(DType::f32)).to(start.dtype());
  }
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
