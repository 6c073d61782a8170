// Scalar math shared by the CPU reference and the CUDA kernels, so both compute one formula: the
// C math library by compute type, value conversions between element types, dtype visitors and
// integer arithmetic that never traps. The elementwise ops built on it are in
// kern/elementwise_ops.h.
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kern/float8.h"  // SINTER_HD, and the float8 conversions
#include "sinter/core/dtype.h"
#include "sinter/core/error.h"

namespace sinter::kern {

// The C math library by compute type. The unqualified C names resolve to libm on the host and to
// the CUDA math library on the device, whose results can differ from libm's in the last bits.
template <class C>
struct Math;

template <>
struct Math<float> {
  static SINTER_HD float abs(float x) { return ::fabsf(x); }
  static SINTER_HD float exp(float x) { return ::expf(x); }
  static SINTER_HD float log(float x) { return ::logf(x); }
  static SINTER_HD float log1p(float x) { return ::log1pf(x); }
  static SINTER_HD float expm1(float x) { return ::expm1f(x); }
  static SINTER_HD float sqrt(float x) { return ::sqrtf(x); }
  static SINTER_HD float sin(float x) { return ::sinf(x); }
  static SINTER_HD float cos(float x) { return ::cosf(x); }
  static SINTER_HD float tanh(float x) { return ::tanhf(x); }
  static SINTER_HD float erf(float x) { return ::erff(x); }
  static SINTER_HD float erfc(float x) { return ::erfcf(x); }
  static SINTER_HD float pow(float x, float y) { return ::powf(x, y); }
  static SINTER_HD float atan2(float y, float x) { return ::atan2f(y, x); }
  static SINTER_HD float hypot(float x, float y) { return ::hypotf(x, y); }
  static SINTER_HD float trunc(float x) { return ::truncf(x); }
  static SINTER_HD float floor(float x) { return ::floorf(x); }
  static SINTER_HD float ceil(float x) { return ::ceilf(x); }
  static SINTER_HD float rint(float x) { return ::rintf(x); }
  static SINTER_HD float fmod(float x, float y) { return ::fmodf(x, y); }
  static SINTER_HD float copysign(float x, float y) { return ::copysignf(x, y); }
  static SINTER_HD float tan(float x) { return ::tanf(x); }
  static SINTER_HD float asin(float x) { return ::asinf(x); }
  static SINTER_HD float acos(float x) { return ::acosf(x); }
  static SINTER_HD float atan(float x) { return ::atanf(x); }
  static SINTER_HD float sinh(float x) { return ::sinhf(x); }
  static SINTER_HD float cosh(float x) { return ::coshf(x); }
  static SINTER_HD float asinh(float x) { return ::asinhf(x); }
  static SINTER_HD float acosh(float x) { return ::acoshf(x); }
  static SINTER_HD float atanh(float x) { return ::atanhf(x); }
  static SINTER_HD float log2(float x) { return ::log2f(x); }
  static SINTER_HD float log10(float x) { return ::log10f(x); }
  static SINTER_HD float exp2(float x) { return ::exp2f(x); }
};

template <>
struct Math<double> {
  static SINTER_HD double abs(double x) { return ::fabs(x); }
  static SINTER_HD double exp(double x) { return ::exp(x); }
  static SINTER_HD double log(double x) { return ::log(x); }
  static SINTER_HD double log1p(double x) { return ::log1p(x); }
  static SINTER_HD double expm1(double x) { return ::expm1(x); }
  static SINTER_HD double sqrt(double x) { return ::sqrt(x); }
  static SINTER_HD double sin(double x) { return ::sin(x); }
  static SINTER_HD double cos(double x) { return ::cos(x); }
  static SINTER_HD double tanh(double x) { return ::tanh(x); }
  static SINTER_HD double erf(double x) { return ::erf(x); }
  static SINTER_HD double erfc(double x) { return ::erfc(x); }
  static SINTER_HD double pow(double x, double y) { return ::pow(x, y); }
  static SINTER_HD double atan2(double y, double x) { return ::atan2(y, x); }
  static SINTER_HD double hypot(double x, double y) { return ::hypot(x, y); }
  static SINTER_HD double trunc(double x) { return ::trunc(x); }
  static SINTER_HD double floor(double x) { return ::floor(x); }
  static SINTER_HD double ceil(double x) { return ::ceil(x); }
  static SINTER_HD double rint(double x) { return ::rint(x); }
  static SINTER_HD double fmod(double x, double y) { return ::fmod(x, y); }
  static SINTER_HD double copysign(double x, double y) { return ::copysign(x, y); }
  static SINTER_HD double tan(double x) { return ::tan(x); }
  static SINTER_HD double asin(double x) { return ::asin(x); }
  static SINTER_HD double acos(double x) { return ::acos(x); }
  static SINTER_HD double atan(double x) { return ::atan(x); }
  static SINTER_HD double sinh(double x) { return ::sinh(x); }
  static SINTER_HD double cosh(double x) { return ::cosh(x); }
  static SINTER_HD double asinh(double x) { return ::asinh(x); }
  static SINTER_HD double acosh(double x) { return ::acosh(x); }
  static SINTER_HD double atanh(double x) { return ::atanh(x); }
  static SINTER_HD double log2(double x) { return ::log2(x); }
  static SINTER_HD double log10(double x) { return ::log10(x); }
  static SINTER_HD double exp2(double x) { return ::exp2(x); }
};

// Integer ranges as plain constants (std::numeric_limits is not callable from device code).
template <class I>
struct IntRange;
template <>
struct IntRange<int64_t> {
  static constexpr int64_t lo = -9223372036854775807LL - 1, hi = 9223372036854775807LL;
};
template <>
struct IntRange<int32_t> {
  static constexpr int32_t lo = -2147483647 - 1, hi = 2147483647;
};
template <>
struct IntRange<uint8_t> {
  static constexpr uint8_t lo = 0, hi = 255;
};

// Value conversion between float, double, int64_t, int32_t, uint8_t and bool (bf16/f16 travel as
// float). To bool: v != 0 (NaN is true). Floating to integer truncates toward zero, saturates at
// the target's range and maps NaN to 0, which is what CUDA's cvt.rzi.sat does, so CPU and CUDA
// agree where plain C++ would leave it undefined. Integer to integer wraps modulo 2^bits.
template <class To, class From>
SINTER_HD inline To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (!(v == v)) return To(0);
    constexpr From hi = static_cast<From>(IntRange<To>::hi);
    constexpr From lo = static_cast<From>(IntRange<To>::lo);
    if (v >= hi) return IntRange<To>::hi;
    if (v <= lo) return IntRange<To>::lo;
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with T the type that stores elements of the floating dtype `t`. Bf16 and
// F16 are the caller's 16-bit float types: BFloat16 and Half on the host, __nv_bfloat16 and __half
// in kernels.
template <class Bf16, class F16, class F>
void visit_floating_type(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      return f(TypeTag<float>{});
    case DType::f64:
      return f(TypeTag<double>{});
    case DType::bf16:
      return f(TypeTag<Bf16>{});
    case DType::f16:
      return f(TypeTag<F16>{});
    default:
      break;
  }
  SINTER_CHECK(!is_float8(t), op, ": no arithmetic on ", t,
               " tensors (as in PyTorch); convert with .to() first");
  SINTER_THROW(op, ": needs a floating dtype, got ", t);
}

// As visit_floating_type, for every dtype.
template <class Bf16, class F16, class F>
void visit_storage_type(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::i64:
      return f(TypeTag<int64_t>{});
    case DType::i32:
      return f(TypeTag<int32_t>{});
    case DType::u8:
      return f(TypeTag<uint8_t>{});
    case DType::b8:
      return f(TypeTag<bool>{});
    default:
      return visit_floating_type<Bf16, F16>(t, op, std::forward<F>(f));
  }
}

// As visit_storage_type, with the float8 dtypes too (F8E4M3, F8E5M2: the caller's types): for the
// copies and fills that convert to and from them.
template <class Bf16, class F16, class F8E4M3, class F8E5M2, class F>
void visit_copy_type(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f8e4m3:
      return f(TypeTag<F8E4M3>{});
    case DType::f8e5m2:
      return f(TypeTag<F8E5M2>{});
    default:
      return visit_storage_type<Bf16, F16>(t, op, std::forward<F>(f));
  }
}

// The compute type of an elementwise op from op[1]'s dtype (kern/elementwise.h): double for f64,
// int64_t for integral types and bool, float otherwise.

template <class F>
decltype(auto) visit_compute_type(DType t, F&& f) {
  switch (t) {
    case DType::f64:
      return f(TypeTag<double>{});
    case DType::f32:
    case DType::bf16:
    case DType::f16:
      return f(TypeTag<float>{});
    default:
      return f(TypeTag<int64_t>{});
  }
}

namespace scalar {

// Integer arithmetic wraps modulo 2^64 (through uint64_t, since signed overflow is undefined).
SINTER_HD inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
SINTER_HD inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
SINTER_HD inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Truncating division that never traps: x / 0 is 0 (where C++ is undefined and x86 faults), and
// INT64_MIN / -1 wraps to INT64_MIN.
SINTER_HD inline int64_t int_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_sub(0, a);
  return a / b;
}

// Note [integer division]
// Floor division and Python's remainder (the sign of the divisor) of integers, total like int_div:
// x // 0 and x % 0 are 0 (the CPU ops refuse a zero divisor before they get here), and INT64_MIN
// // -1 wraps to INT64_MIN with remainder 0.
SINTER_HD inline int64_t int_floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_sub(0, a);
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
SINTER_HD inline int64_t int_remainder(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// Python's remainder of floats: fmod moved into the divisor's sign (NaN for b == 0, as fmod).
template <class C>
SINTER_HD inline C remainder(C a, C b) {
  C r = Math<C>::fmod(a, b);
  if (r != C(0) && ((r < C(0)) != (b < C(0)))) r += b;
  return r;
}

// Python's floor division of floats, as CPython computes it: the quotient of a - fmod(a, b), exact
// where floor(a / b) would round a quotient just below an integer up to it; a / b for b == 0
// (inf or NaN), and a zero with the sign of a / b.
template <class C>
SINTER_HD inline C floor_div(C a, C b) {
  if (b == C(0)) return a / b;
  const C mod = Math<C>::fmod(a, b);
  C div = (a - mod) / b;
  if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) div -= C(1);
  if (div == C(0)) return Math<C>::copysign(C(0), a / b);
  C q = Math<C>::floor(div);
  if (div - q > C(0.5)) q += C(1);
  return q;
}

// a^b by repeated squaring, wrapping on overflow. A negative exponent gives 0 (the truncated value
// of 1/a^|b|), except for bases 1 and -1.
SINTER_HD inline int64_t int_pow(int64_t a, int64_t b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, base = static_cast<uint64_t>(a);
  auto e = static_cast<uint64_t>(b);
  while (e) {
    if (e & 1) result *= base;
    base *= base;
    e >>= 1;
  }
  return static_cast<int64_t>(result);
}

// 1 / (1 + exp(-x)), without exp overflowing for large |x|: the sigmoid of every functor (Sigmoid,
// Silu, Swiglu, the gradients of silu and softplus). The CPU's f32 vector form is the sigmoid row
// of src/cpu/vec_elementwise.cpp.
template <class C>
SINTER_HD inline C sigmoid(C x) {
  if (x >= C(0)) return C(1) / (C(1) + Math<C>::exp(-x));
  const C e = Math<C>::exp(x);
  return e / (C(1) + e);
}

// Note [erfinv]
// erfinv(y), |y| < 1, one formula on the host and the device. The start is Winitzki's closed form
// for the inverse (relative error about 2e-3), x0^2 = sqrt(t^2 + q) - t with t = 2 / (pi k) + l /
// 2, q = -l / k, l = log(1 - y^2), k = 0.147, written as q / (sqrt(t^2 + q) + t) so that it keeps
// its digits for small |y|. Then Halley's steps on f(x) = erf(x) - |y|: with d = f / f', and f'' =
// -2x f', x -= d / (1 + x d). Where |y| > 1/2, f is computed as (1 - |y|) - erfc(x): 1 - |y| is
// exact there and erfc keeps its relative accuracy, so the steps still converge in the tail, where
// erf(x) rounds to 1. The convergence is cubic: two steps for float and three for double reach the
// last bit (worst relative errors seen against 50-digit values: 1e-7 and 1.7e-16).
template <class C>
SINTER_HD inline C erfinv(C y) {
  if (y != y) return y;
  const C a = Math<C>::abs(y);
  if (a > C(1)) return C(NAN);
  if (a == C(1)) return Math<C>::copysign(C(INFINITY), y);
  if (a == C(0)) return y;
  const bool tail = a > C(0.5);
  const C l = tail ? Math<C>::log((C(1) - a) * (C(1) + a)) : Math<C>::log1p(-a * a);
  const C t = C(4.3307467508011221) + C(0.5) * l;  // 2 / (pi * 0.147) + l / 2
  const C q = -l / C(0.147);
  C x = Math<C>::sqrt(q / (Math<C>::sqrt(t * t + q) + t));
  constexpr int kSteps = sizeof(C) == sizeof(double) ? 3 : 2;
  for (int i = 0; i < kSteps; ++i) {
    const C f = tail ? (C(1) - a) - Math<C>::erfc(x) : Math<C>::erf(x) - a;
    const C d = f / (C(1.1283791670955126) * Math<C>::exp(-x * x));  // f' = 2 / sqrt(pi) e^(-x^2)
    x -= d / (C(1) + x * d);
  }
  return Math<C>::copysign(x, y);
}

// Note [gamma functions]
// lgamma(x) = log|Gamma(x)|, digamma(x) = lgamma'(x) and trigamma(x) = digamma'(x), one formula on
// the host and the device (the C library's lgamma writes the global signgam: a data race between
// the CPU's threads). On (-1/2, 1/2) one step of Gamma(x + 1) = x Gamma(x) moves x up (exact for
// the tiniest x, where pi / sin(pi x) would overflow); at -1/2 and below they reflect through
// Gamma(x) Gamma(1 - x) = pi / sin(pi x): lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x),
// digamma(x) = digamma(1 - x) - pi / tan(pi x), trigamma(x) = pi^2 / sin^2(pi x) - trigamma(1 - x),
// with sin and tan taken of x less its nearest integer (exact, so that they keep their digits next
// to the poles and for large |x|). Then the recurrences move x up to 20 or more, where the
// asymptotic series are cut after the x^-9 (lgamma), x^-10 (digamma) and x^-11 (trigamma) terms:
// the first term left out is below 3e-17 there. lgamma(1) and lgamma(2) are exactly 0. float
// computes in double (within half an ulp of PyTorch's float values, where float's own digits would
// lose 20). trigamma is good to about 1e-16 against 30-digit values; PyTorch's (polygamma(1, x))
// cuts its series earlier and is off by up to 1e-9. At the poles (0, -1, -2, ...) lgamma and
// trigamma are inf; digamma is -inf at +0 (inf at -0) and NaN at the negative integers, as
// PyTorch's.
template <class C>
SINTER_HD inline C sin_pi(C x) {
  return Math<C>::sin(C(3.141592653589793) * (x - Math<C>::rint(x)));  // |sin(pi x)| and its square
}
template <class C>
SINTER_HD inline C tan_pi(C x) {
  return Math<C>::tan(C(3.141592653589793) * (x - Math<C>::rint(x)));  // tan has period 1
}
template <class C>
SINTER_HD inline bool is_pole(C x) {
  return x <= C(0) && x == Math<C>::floor(x);
}
// lgamma, digamma and trigamma of y >= 1/2 (the shifts and series of Note [gamma functions]).
template <class C>
SINTER_HD inline C lgamma_upper(C y) {
  C log_product = C(0), product = C(1);
  for (; y < C(20); y += C(1)) {
    product *= y;
    if (product > C(1e250)) {
      log_product += Math<C>::log(product);
      product = C(1);
    }
  }
  const C r = C(1) / y, r2 = r * r;
  const C series =
      r * (C(1) / 12 - r2 * (C(1) / 360 - r2 * (C(1) / 1260 - r2 * (C(1) / 1680 - r2 / 1188))));
  return (y - C(0.5)) * Math<C>::log(y) - y + C(0.91893853320467274) + series -
         (log_product + Math<C>::log(product));
}
template <class C>
SINTER_HD inline C digamma_upper(C y) {
  C shift = C(0);
  for (; y < C(20); y += C(1)) shift += C(1) / y;
  const C r2 = C(1) / (y * y);
  const C series =
      r2 * (C(1) / 12 - r2 * (C(1) / 120 - r2 * (C(1) / 252 - r2 * (C(1) / 240 - r2 / 132))));
  return Math<C>::log(y) - C(0.5) / y - series - shift;
}
template <class C>
SINTER_HD inline C trigamma_upper(C y) {
  C shift = C(0);
  for (; y < C(20); y += C(1)) shift += C(1) / (y * y);
  const C r = C(1) / y, r2 = r * r;
  const C tail = C(1) / 30 - r2 * (C(1) / 42 - r2 * (C(1) / 30 - C(5) * r2 / 66));
  return r + r2 * (C(0.5) + r * (C(1) / 6 - r2 * tail)) + shift;
}
template <class C>
SINTER_HD inline C lgamma(C x) {
  // float computes in double: the shift's log-sum cancels digits that float does not have.
  if constexpr (std::is_same_v<C, float>) {
    return static_cast<float>(lgamma(static_cast<double>(x)));
  }
  if (x != x) return x;
  if (is_pole(x) || Math<C>::abs(x) == C(INFINITY)) return C(INFINITY);
  if (x == C(1) || x == C(2)) return C(0);
  if (x >= C(0.5)) return lgamma_upper(x);
  if (x > C(-0.5)) return lgamma_upper(x + C(1)) - Math<C>::log(Math<C>::abs(x));
  return Math<C>::log(C(3.141592653589793) / Math<C>::abs(sin_pi(x))) - lgamma_upper(C(1) - x);
}
template <class C>
SINTER_HD inline C digamma(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return static_cast<float>(digamma(static_cast<double>(x)));
  }
  if (x != x) return x;
  if (x == C(0)) return Math<C>::copysign(C(INFINITY), -x);  // -inf at +0, inf at -0
  if (is_pole(x)) return C(NAN);
  if (x >= C(0.5)) return digamma_upper(x);
  if (x > C(-0.5)) return digamma_upper(x + C(1)) - C(1) / x;
  return digamma_upper(C(1) - x) - C(3.141592653589793) / tan_pi(x);
}
template <class C>
SINTER_HD inline C trigamma(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return static_cast<float>(trigamma(static_cast<double>(x)));
  }
  if (x != x) return x;
  if (is_pole(x)) return C(INFINITY);
  if (x >= C(0.5)) return trigamma_upper(x);
  if (x > C(-0.5)) return trigamma_upper(x + C(1)) + C(1) / (x * x);
  const C s = sin_pi(x);
  return C(9.869604401089358) / (s * s) - trigamma_upper(C(1) - x);
}

// Maximum/minimum that return NaN when either side is NaN.
template <class C>
SINTER_HD inline C maximum(C a, C b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}
template <class C>
SINTER_HD inline C minimum(C a, C b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}

}  // namespace scalar

}  // namespace sinter::kern
