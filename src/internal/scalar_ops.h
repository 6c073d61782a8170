// Scalar math shared by the CPU elementwise loop (src/cpu/elementwise.cpp) and the CUDA kernels
// (kernels/elementwise.cu), so both compute one function: the UnaryOp/BinaryOp functors and the
// value conversions between element types.
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "internal/kernels.h"
#include "sinter/core/error.h"

#ifndef SINTER_HD
#if defined(__CUDACC__)
#define SINTER_HD __host__ __device__
#else
#define SINTER_HD
#endif
#endif

namespace sinter::kern {

// The C math library by compute type. The unqualified C names resolve to libm on the host and to
// the CUDA math library on the device.
template <class C>
struct Math;

template <>
struct Math<float> {
  static SINTER_HD float abs(float x) { return ::fabsf(x); }
  static SINTER_HD float exp(float x) { return ::expf(x); }
  static SINTER_HD float log(float x) { return ::logf(x); }
  static SINTER_HD float sqrt(float x) { return ::sqrtf(x); }
  static SINTER_HD float sin(float x) { return ::sinf(x); }
  static SINTER_HD float cos(float x) { return ::cosf(x); }
  static SINTER_HD float tanh(float x) { return ::tanhf(x); }
  static SINTER_HD float erf(float x) { return ::erff(x); }
  static SINTER_HD float pow(float x, float y) { return ::powf(x, y); }
};

template <>
struct Math<double> {
  static SINTER_HD double abs(double x) { return ::fabs(x); }
  static SINTER_HD double exp(double x) { return ::exp(x); }
  static SINTER_HD double log(double x) { return ::log(x); }
  static SINTER_HD double sqrt(double x) { return ::sqrt(x); }
  static SINTER_HD double sin(double x) { return ::sin(x); }
  static SINTER_HD double cos(double x) { return ::cos(x); }
  static SINTER_HD double tanh(double x) { return ::tanh(x); }
  static SINTER_HD double erf(double x) { return ::erf(x); }
  static SINTER_HD double pow(double x, double y) { return ::pow(x, y); }
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

// Calls f(TypeTag<T>{}) with T the type that stores elements of `t`. Bf16 and F16 are the caller's
// 16-bit float types: BFloat16 and Half on the host, __nv_bfloat16 and __half in kernels.
template <class Bf16, class F16, class F>
void visit_storage_type(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      return f(TypeTag<float>{});
    case DType::f64:
      return f(TypeTag<double>{});
    case DType::bf16:
      return f(TypeTag<Bf16>{});
    case DType::f16:
      return f(TypeTag<F16>{});
    case DType::i64:
      return f(TypeTag<int64_t>{});
    case DType::i32:
      return f(TypeTag<int32_t>{});
    case DType::u8:
      return f(TypeTag<uint8_t>{});
    case DType::b8:
      return f(TypeTag<bool>{});
  }
  SINTER_THROW(op, ": unknown dtype ", static_cast<int>(t));
}

// As visit_storage_type, for the floating dtypes only (the kernels of nn ops).
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
  SINTER_THROW(op, ": needs a floating dtype, got ", t);
}

// The compute type of an elementwise op from op[1]'s dtype (see kernels.h): double for f64, int64_t
// for integral types and bool, float otherwise.

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

// The ops an integral compute type supports; the ops layer never asks for the others.
SINTER_HD constexpr bool integral_ok(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sign || op == UnaryOp::Clamp;
}
SINTER_HD constexpr bool integral_ok(BinaryOp op) {
  return static_cast<int>(op) <= static_cast<int>(BinaryOp::Ge);
}
SINTER_HD constexpr bool is_comparison(BinaryOp op) {
  return static_cast<int>(op) >= static_cast<int>(BinaryOp::Eq) &&
         static_cast<int>(op) <= static_cast<int>(BinaryOp::Ge);
}

template <UnaryOp OP>
using UnaryConst = std::integral_constant<UnaryOp, OP>;
template <BinaryOp OP>
using BinaryConst = std::integral_constant<BinaryOp, OP>;

// Calls f(std::integral_constant<UnaryOp, op>{}), turning the runtime op into a template argument.
template <class F>
decltype(auto) visit_unary_op(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::Neg:
      return f(UnaryConst<UnaryOp::Neg>{});
    case UnaryOp::Abs:
      return f(UnaryConst<UnaryOp::Abs>{});
    case UnaryOp::Exp:
      return f(UnaryConst<UnaryOp::Exp>{});
    case UnaryOp::Log:
      return f(UnaryConst<UnaryOp::Log>{});
    case UnaryOp::Sqrt:
      return f(UnaryConst<UnaryOp::Sqrt>{});
    case UnaryOp::Rsqrt:
      return f(UnaryConst<UnaryOp::Rsqrt>{});
    case UnaryOp::Sin:
      return f(UnaryConst<UnaryOp::Sin>{});
    case UnaryOp::Cos:
      return f(UnaryConst<UnaryOp::Cos>{});
    case UnaryOp::Tanh:
      return f(UnaryConst<UnaryOp::Tanh>{});
    case UnaryOp::Sigmoid:
      return f(UnaryConst<UnaryOp::Sigmoid>{});
    case UnaryOp::Relu:
      return f(UnaryConst<UnaryOp::Relu>{});
    case UnaryOp::LeakyRelu:
      return f(UnaryConst<UnaryOp::LeakyRelu>{});
    case UnaryOp::Gelu:
      return f(UnaryConst<UnaryOp::Gelu>{});
    case UnaryOp::GeluTanh:
      return f(UnaryConst<UnaryOp::GeluTanh>{});
    case UnaryOp::Silu:
      return f(UnaryConst<UnaryOp::Silu>{});
    case UnaryOp::Sign:
      return f(UnaryConst<UnaryOp::Sign>{});
    case UnaryOp::Clamp:
      return f(UnaryConst<UnaryOp::Clamp>{});
  }
  return f(UnaryConst<UnaryOp::Neg>{});  // not reached: every enumerator is handled above
}

template <class F>
decltype(auto) visit_binary_op(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::Add:
      return f(BinaryConst<BinaryOp::Add>{});
    case BinaryOp::Sub:
      return f(BinaryConst<BinaryOp::Sub>{});
    case BinaryOp::Mul:
      return f(BinaryConst<BinaryOp::Mul>{});
    case BinaryOp::Div:
      return f(BinaryConst<BinaryOp::Div>{});
    case BinaryOp::Pow:
      return f(BinaryConst<BinaryOp::Pow>{});
    case BinaryOp::Maximum:
      return f(BinaryConst<BinaryOp::Maximum>{});
    case BinaryOp::Minimum:
      return f(BinaryConst<BinaryOp::Minimum>{});
    case BinaryOp::Eq:
      return f(BinaryConst<BinaryOp::Eq>{});
    case BinaryOp::Ne:
      return f(BinaryConst<BinaryOp::Ne>{});
    case BinaryOp::Lt:
      return f(BinaryConst<BinaryOp::Lt>{});
    case BinaryOp::Le:
      return f(BinaryConst<BinaryOp::Le>{});
    case BinaryOp::Gt:
      return f(BinaryConst<BinaryOp::Gt>{});
    case BinaryOp::Ge:
      return f(BinaryConst<BinaryOp::Ge>{});
    case BinaryOp::ReluBackward:
      return f(BinaryConst<BinaryOp::ReluBackward>{});
    case BinaryOp::LeakyReluBackward:
      return f(BinaryConst<BinaryOp::LeakyReluBackward>{});
    case BinaryOp::GeluBackward:
      return f(BinaryConst<BinaryOp::GeluBackward>{});
    case BinaryOp::GeluTanhBackward:
      return f(BinaryConst<BinaryOp::GeluTanhBackward>{});
    case BinaryOp::SiluBackward:
      return f(BinaryConst<BinaryOp::SiluBackward>{});
    case BinaryOp::SigmoidBackward:
      return f(BinaryConst<BinaryOp::SigmoidBackward>{});
    case BinaryOp::TanhBackward:
      return f(BinaryConst<BinaryOp::TanhBackward>{});
  }
  return f(BinaryConst<BinaryOp::Add>{});  // not reached: every enumerator is handled above
}

namespace scalar {

constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2*pi)
constexpr double kGeluCubic = 0.044715;

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

// 1 / (1 + exp(-x)), without exp overflowing for large |x|.
template <class C>
SINTER_HD inline C sigmoid(C x) {
  if (x >= C(0)) return C(1) / (C(1) + Math<C>::exp(-x));
  const C e = Math<C>::exp(x);
  return e / (C(1) + e);
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

// One UnaryOp on compute type C (float, double, or int64_t for the ops integral_ok accepts).
template <UnaryOp OP, class C>
SINTER_HD inline C unary_fn(C x, C p0, C p1) {
  if constexpr (OP == UnaryOp::Clamp) {
    // min(max(x, p0), p1); a NaN x fails both comparisons and comes out unchanged.
    const C y = x < p0 ? p0 : x;
    return y > p1 ? p1 : y;
  } else if constexpr (std::is_integral_v<C>) {
    static_assert(integral_ok(OP), "this UnaryOp has no integral form");
    if constexpr (OP == UnaryOp::Neg) return scalar::wrap_sub(0, x);
    if constexpr (OP == UnaryOp::Abs) return x < 0 ? scalar::wrap_sub(0, x) : x;
    if constexpr (OP == UnaryOp::Sign) return C(x > 0) - C(x < 0);
  } else if constexpr (OP == UnaryOp::Neg) {
    return -x;
  } else if constexpr (OP == UnaryOp::Abs) {
    return Math<C>::abs(x);
  } else if constexpr (OP == UnaryOp::Exp) {
    return Math<C>::exp(x);
  } else if constexpr (OP == UnaryOp::Log) {
    return Math<C>::log(x);
  } else if constexpr (OP == UnaryOp::Sqrt) {
    return Math<C>::sqrt(x);
  } else if constexpr (OP == UnaryOp::Rsqrt) {
    return C(1) / Math<C>::sqrt(x);
  } else if constexpr (OP == UnaryOp::Sin) {
    return Math<C>::sin(x);
  } else if constexpr (OP == UnaryOp::Cos) {
    return Math<C>::cos(x);
  } else if constexpr (OP == UnaryOp::Tanh) {
    return Math<C>::tanh(x);
  } else if constexpr (OP == UnaryOp::Sigmoid) {
    return scalar::sigmoid(x);
  } else if constexpr (OP == UnaryOp::Relu) {
    return (x > C(0) || x != x) ? x : C(0);
  } else if constexpr (OP == UnaryOp::LeakyRelu) {
    return x > C(0) ? x : p0 * x;
  } else if constexpr (OP == UnaryOp::Gelu) {
    return C(0.5) * x * (C(1) + Math<C>::erf(x * C(scalar::kSqrt1_2)));
  } else if constexpr (OP == UnaryOp::GeluTanh) {
    const C inner = C(scalar::kSqrt2OverPi) * (x + C(scalar::kGeluCubic) * x * x * x);
    return C(0.5) * x * (C(1) + Math<C>::tanh(inner));
  } else if constexpr (OP == UnaryOp::Silu) {
    return x * scalar::sigmoid(x);
  } else if constexpr (OP == UnaryOp::Sign) {
    // 0 and NaN come out as themselves.
    return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);
  }
  (void)p0;
  (void)p1;
  return x;
}

// One BinaryOp on compute type C. Comparisons return 1 or 0 in C.
template <BinaryOp OP, class C>
SINTER_HD inline C binary_fn(C a, C b, C p0) {
  (void)p0;
  if constexpr (OP == BinaryOp::Eq) return C(a == b);
  if constexpr (OP == BinaryOp::Ne) return C(a != b);
  if constexpr (OP == BinaryOp::Lt) return C(a < b);
  if constexpr (OP == BinaryOp::Le) return C(a <= b);
  if constexpr (OP == BinaryOp::Gt) return C(a > b);
  if constexpr (OP == BinaryOp::Ge) return C(a >= b);
  if constexpr (OP == BinaryOp::Maximum) return scalar::maximum(a, b);
  if constexpr (OP == BinaryOp::Minimum) return scalar::minimum(a, b);
  if constexpr (std::is_integral_v<C>) {
    static_assert(integral_ok(OP), "this BinaryOp has no integral form");
    if constexpr (OP == BinaryOp::Add) return scalar::wrap_add(a, b);
    if constexpr (OP == BinaryOp::Sub) return scalar::wrap_sub(a, b);
    if constexpr (OP == BinaryOp::Mul) return scalar::wrap_mul(a, b);
    if constexpr (OP == BinaryOp::Div) return scalar::int_div(a, b);
    if constexpr (OP == BinaryOp::Pow) return scalar::int_pow(a, b);
  } else {
    if constexpr (OP == BinaryOp::Add) return a + b;
    if constexpr (OP == BinaryOp::Sub) return a - b;
    if constexpr (OP == BinaryOp::Mul) return a * b;
    if constexpr (OP == BinaryOp::Div) return a / b;
    if constexpr (OP == BinaryOp::Pow) return Math<C>::pow(a, b);
    // Backward helpers: a is the incoming gradient, b the forward's input x (or output y).
    if constexpr (OP == BinaryOp::ReluBackward) return b > C(0) ? a : C(0);
    if constexpr (OP == BinaryOp::LeakyReluBackward) return b > C(0) ? a : a * p0;
    if constexpr (OP == BinaryOp::GeluBackward) {
      // d/dx [x * Phi(x)] = Phi(x) + x * phi(x)
      const C cdf = C(0.5) * (C(1) + Math<C>::erf(b * C(scalar::kSqrt1_2)));
      const C pdf = C(scalar::kInvSqrt2Pi) * Math<C>::exp(C(-0.5) * b * b);
      return a * (cdf + b * pdf);
    }
    if constexpr (OP == BinaryOp::GeluTanhBackward) {
      // f = x/2 * (1 + t) with t = tanh(k (x + c x^3)), so
      // f' = (1 + t)/2 + x/2 * (1 - t^2) * k (1 + 3 c x^2)
      const C x2 = b * b;
      const C k = C(scalar::kSqrt2OverPi);
      const C c = C(scalar::kGeluCubic);
      const C t = Math<C>::tanh(k * (b + c * x2 * b));
      const C dinner = k * (C(1) + C(3) * c * x2);
      return a * (C(0.5) * (C(1) + t) + C(0.5) * b * (C(1) - t * t) * dinner);
    }
    if constexpr (OP == BinaryOp::SiluBackward) {
      const C s = scalar::sigmoid(b);
      return a * s * (C(1) + b * (C(1) - s));
    }
    if constexpr (OP == BinaryOp::SigmoidBackward) return a * b * (C(1) - b);
    if constexpr (OP == BinaryOp::TanhBackward) return a * (C(1) - b * b);
  }
  return a;
}

// Runtime-op forms of the above, for callers that loop over one element at a time. With an integral
// compute type, an op integral_ok rejects returns 0.
template <class C>
SINTER_HD inline C apply_unary(UnaryOp op, C x, C p0, C p1) {
#define SINTER_UNARY_CASE(name)                                         \
  case UnaryOp::name:                                                   \
    if constexpr (std::is_integral_v<C> && !integral_ok(UnaryOp::name)) \
      return C(0);                                                      \
    else                                                                \
      return unary_fn<UnaryOp::name>(x, p0, p1);
  switch (op) {
    SINTER_UNARY_CASE(Neg)
    SINTER_UNARY_CASE(Abs)
    SINTER_UNARY_CASE(Exp)
    SINTER_UNARY_CASE(Log)
    SINTER_UNARY_CASE(Sqrt)
    SINTER_UNARY_CASE(Rsqrt)
    SINTER_UNARY_CASE(Sin)
    SINTER_UNARY_CASE(Cos)
    SINTER_UNARY_CASE(Tanh)
    SINTER_UNARY_CASE(Sigmoid)
    SINTER_UNARY_CASE(Relu)
    SINTER_UNARY_CASE(LeakyRelu)
    SINTER_UNARY_CASE(Gelu)
    SINTER_UNARY_CASE(GeluTanh)
    SINTER_UNARY_CASE(Silu)
    SINTER_UNARY_CASE(Sign)
    SINTER_UNARY_CASE(Clamp)
  }
#undef SINTER_UNARY_CASE
  return C(0);
}

template <class C>
SINTER_HD inline C apply_binary(BinaryOp op, C a, C b, C p0) {
#define SINTER_BINARY_CASE(name)                                         \
  case BinaryOp::name:                                                   \
    if constexpr (std::is_integral_v<C> && !integral_ok(BinaryOp::name)) \
      return C(0);                                                       \
    else                                                                 \
      return binary_fn<BinaryOp::name>(a, b, p0);
  switch (op) {
    SINTER_BINARY_CASE(Add)
    SINTER_BINARY_CASE(Sub)
    SINTER_BINARY_CASE(Mul)
    SINTER_BINARY_CASE(Div)
    SINTER_BINARY_CASE(Pow)
    SINTER_BINARY_CASE(Maximum)
    SINTER_BINARY_CASE(Minimum)
    SINTER_BINARY_CASE(Eq)
    SINTER_BINARY_CASE(Ne)
    SINTER_BINARY_CASE(Lt)
    SINTER_BINARY_CASE(Le)
    SINTER_BINARY_CASE(Gt)
    SINTER_BINARY_CASE(Ge)
    SINTER_BINARY_CASE(ReluBackward)
    SINTER_BINARY_CASE(LeakyReluBackward)
    SINTER_BINARY_CASE(GeluBackward)
    SINTER_BINARY_CASE(GeluTanhBackward)
    SINTER_BINARY_CASE(SiluBackward)
    SINTER_BINARY_CASE(SigmoidBackward)
    SINTER_BINARY_CASE(TanhBackward)
  }
#undef SINTER_BINARY_CASE
  return C(0);
}

}  // namespace sinter::kern
