// The elementwise ops of the unary and binary kernels: one __host__ __device__ functor per op,
// shared by the CPU loop (src/cpu/elementwise.cpp) and the CUDA kernels (kernels/elementwise.cu),
// and the lists that everything else about them is generated from (Note [elementwise op list]),
// the CPU's f32 vector rows included.
#pragma once

#include <type_traits>
#include <utility>

#include "kern/scalar_ops.h"
#include "sinter/core/error.h"

namespace sinter::kern {

// Note [elementwise op list]
// An op is a functor in kern::fn below and a row of SINTER_UNARY_OPS or SINTER_BINARY_OPS, named
// alike. The rows generate the UnaryOp and BinaryOp enums, the dispatch from a runtime op to its
// functor on both backends (visit_elementwise, unary_fn, binary_fn) and the ops layer's checks
// (integral_ok, floating_ok, is_comparison). A row of SINTER_ACTIVATIONS also generates the public
// op of a unary functor whose gradient is a binary one (src/ops/elementwise.cpp).
//
// A unary row also names the op's f32 vector row on the CPU, or `none`: the CPU computes the op in
// f32 (f32, bf16 and f16 tensors) with the row `<name>_row` of src/cpu/vec_elementwise.cpp instead
// of the functor (Note [cpu vector math] in src/cpu/vec_exp.h). The name is a bare token that only
// the CPU expands, so the vector math never reaches nvcc; the binary ops have no vector rows.
//
// A functor takes its operands in the compute type C (float or double; int64_t too for the ops
// that accept integral dtypes, some through an int64_t overload; int64_t alone for the Bitwise
// rows, which the dispatch never instantiates for a floating type), then the op's parameters that
// it uses, in order (p0, p1).
namespace fn {

constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2*pi)
constexpr double kGeluCubic = 0.044715;
// selu's alpha and scale (Klambauer et al. 2017), as PyTorch writes them.
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

// ---- unary ----

struct Neg {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return -x;
  }
  SINTER_HD int64_t operator()(int64_t x) const { return scalar::wrap_sub(0, x); }
};
struct Abs {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::abs(x);
  }
  SINTER_HD int64_t operator()(int64_t x) const { return x < 0 ? scalar::wrap_sub(0, x) : x; }
};
struct Exp {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::exp(x);
  }
};
struct Log {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::log(x);
  }
};
struct Sqrt {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::sqrt(x);
  }
};
struct Rsqrt {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return C(1) / Math<C>::sqrt(x);
  }
};
struct Sin {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::sin(x);
  }
};
struct Cos {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::cos(x);
  }
};
struct Tanh {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::tanh(x);
  }
};
struct Sigmoid {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return scalar::sigmoid(x);
  }
};
struct Erf {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::erf(x);
  }
};
// The inverse of erf (Note [erfinv]).
struct Erfinv {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return scalar::erfinv(x);
  }
};
// log|Gamma(x)| and its first two derivatives (Note [gamma functions]).
struct Lgamma {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return scalar::lgamma(x);
  }
};
struct Digamma {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return scalar::digamma(x);
  }
};
struct Trigamma {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return scalar::trigamma(x);
  }
};
// exp(x) - 1 and log(1 + x), exact near 0 where the plain forms lose digits.
struct Expm1 {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::expm1(x);
  }
};
struct Log1p {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::log1p(x);
  }
};
// The integer at or below x, at or above it, nearest it (halves to even, as rint in the default
// rounding mode and PyTorch's nearbyint), toward zero; and what trunc leaves (x - trunc(x), NaN
// for an infinite x). Infinities and NaN pass through the first four.
struct Floor {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::floor(x);
  }
};
struct Ceil {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::ceil(x);
  }
};
struct Round {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::rint(x);
  }
};
struct Trunc {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return Math<C>::trunc(x);
  }
};
struct Frac {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return x - Math<C>::trunc(x);
  }
};
// The rest of the C math library's functions of one argument, as PyTorch computes them.
#define SINTER_MATH_FUNCTOR_(Name, fn)  \
  struct Name {                         \
    template <class C>                  \
    SINTER_HD C operator()(C x) const { \
      return Math<C>::fn(x);            \
    }                                   \
  };
SINTER_MATH_FUNCTOR_(Tan, tan)
SINTER_MATH_FUNCTOR_(Asin, asin)
SINTER_MATH_FUNCTOR_(Acos, acos)
SINTER_MATH_FUNCTOR_(Atan, atan)
SINTER_MATH_FUNCTOR_(Sinh, sinh)
SINTER_MATH_FUNCTOR_(Cosh, cosh)
SINTER_MATH_FUNCTOR_(Asinh, asinh)
SINTER_MATH_FUNCTOR_(Acosh, acosh)
SINTER_MATH_FUNCTOR_(Atanh, atanh)
SINTER_MATH_FUNCTOR_(Log2, log2)
SINTER_MATH_FUNCTOR_(Log10, log10)
SINTER_MATH_FUNCTOR_(Exp2, exp2)
#undef SINTER_MATH_FUNCTOR_
// ~x of an integer (bool takes logical_not in the ops layer); integral dtypes only.
struct BitwiseNot {
  SINTER_HD int64_t operator()(int64_t x) const { return ~x; }
};
struct Relu {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return (x > C(0) || x != x) ? x : C(0);
  }
};
struct LeakyRelu {
  template <class C>
  SINTER_HD C operator()(C x, C negative_slope) const {
    return x > C(0) ? x : negative_slope * x;
  }
};
// Exact, with erf: x * Phi(x).
struct Gelu {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return C(0.5) * x * (C(1) + Math<C>::erf(x * C(kSqrt1_2)));
  }
};
// The tanh approximation.
struct GeluTanh {
  template <class C>
  SINTER_HD C operator()(C x) const {
    const C inner = C(kSqrt2OverPi) * (x + C(kGeluCubic) * x * x * x);
    return C(0.5) * x * (C(1) + Math<C>::tanh(inner));
  }
};
struct Silu {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return x * scalar::sigmoid(x);
  }
};
struct Sign {
  // 0 and NaN come out as themselves.
  template <class C>
  SINTER_HD C operator()(C x) const {
    return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);
  }
  SINTER_HD int64_t operator()(int64_t x) const { return int64_t(x > 0) - int64_t(x < 0); }
};
// min(max(x, lo), hi); a NaN x fails both comparisons and comes out unchanged.
struct Clamp {
  template <class C>
  SINTER_HD C operator()(C x, C lo, C hi) const {
    const C y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};
// Clamp as an activation: floating dtypes only, with a gradient.
struct Hardtanh : Clamp {};
// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch's softplus).
struct Softplus {
  template <class C>
  SINTER_HD C operator()(C x, C beta, C threshold) const {
    const C bx = beta * x;
    return bx > threshold ? x : Math<C>::log1p(Math<C>::exp(bx)) / beta;
  }
};
// scale x where x > 0, else scale alpha (exp(x) - 1): elu with scale 1, selu with its constants.
struct Elu {
  template <class C>
  SINTER_HD C operator()(C x, C alpha, C scale) const {
    return x > C(0) ? scale * x : scale * alpha * Math<C>::expm1(x);
  }
};
// x tanh(softplus(x)), softplus unthresholded as PyTorch's (exp(x) = inf gives x).
struct Mish {
  template <class C>
  SINTER_HD C operator()(C x) const {
    return x * Math<C>::tanh(Math<C>::log1p(Math<C>::exp(x)));
  }
};
// min(max(x + 3, 0), 6) / 6 and x times it; a NaN x fails both comparisons and stays NaN.
struct Hardsigmoid {
  template <class C>
  SINTER_HD C operator()(C x) const {
    const C r = x + C(3);
    return (r < C(0) ? C(0) : (r > C(6) ? C(6) : r)) / C(6);
  }
};
struct Hardswish {
  template <class C>
  SINTER_HD C operator()(C x) const {
    const C r = x + C(3);
    return x * (r < C(0) ? C(0) : (r > C(6) ? C(6) : r)) / C(6);
  }
};

// ---- binary ----

struct Add {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return a + b;
  }
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return scalar::wrap_add(a, b); }
};
struct Sub {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return a - b;
  }
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return scalar::wrap_sub(a, b); }
};
struct Mul {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return a * b;
  }
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return scalar::wrap_mul(a, b); }
};
// True division: integral operands are promoted to a floating dtype before it (div in ops.h).
struct Div {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return a / b;
  }
};
// div(..., "trunc"): the quotient rounded toward zero (Note [integer division] for integers).
struct DivTrunc {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return Math<C>::trunc(a / b);
  }
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return scalar::int_div(a, b); }
};
// div(..., "floor") and floor_divide: the quotient rounded toward -inf.
struct DivFloor {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return scalar::floor_div(a, b);
  }
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return scalar::int_floor_div(a, b); }
};
// a - b * floor(a / b): the sign of b, as Python's % and torch.remainder.
struct Remainder {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return scalar::remainder(a, b);
  }
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return scalar::int_remainder(a, b); }
};
struct Pow {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return Math<C>::pow(a, b);
  }
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return scalar::int_pow(a, b); }
};
// a & b, a | b and a ^ b of integers and bools (computed in int64_t); integral dtypes only.
struct BitwiseAnd {
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return a & b; }
};
struct BitwiseOr {
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return a | b; }
};
struct BitwiseXor {
  SINTER_HD int64_t operator()(int64_t a, int64_t b) const { return a ^ b; }
};
struct Maximum {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return scalar::maximum(a, b);
  }
};
struct Minimum {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return scalar::minimum(a, b);
  }
};
// The angle of the point (b, a): atan2(a, b), in (-pi, pi], the quadrant from both signs.
struct Atan2 {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return Math<C>::atan2(a, b);
  }
};
// sqrt(a^2 + b^2) without overflow or underflow in the squares.
struct Hypot {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return Math<C>::hypot(a, b);
  }
};
// Comparisons return 1 or 0 in C.
struct Eq {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return C(a == b);
  }
};
struct Ne {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return C(a != b);
  }
};
struct Lt {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return C(a < b);
  }
};
struct Le {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return C(a <= b);
  }
};
struct Gt {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return C(a > b);
  }
};
struct Ge {
  template <class C>
  SINTER_HD C operator()(C a, C b) const {
    return C(a >= b);
  }
};

// Backward helpers: (g, x) -> g * f'(x) with g the incoming gradient and x the forward's input,
// or (g, y) with y the forward's output, and the forward's parameters.
struct ReluBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x) const {
    return x > C(0) ? g : C(0);
  }
};
struct LeakyReluBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x, C negative_slope) const {
    return x > C(0) ? g : g * negative_slope;
  }
};
struct GeluBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x) const {
    // d/dx [x * Phi(x)] = Phi(x) + x * phi(x)
    const C cdf = C(0.5) * (C(1) + Math<C>::erf(x * C(kSqrt1_2)));
    const C pdf = C(kInvSqrt2Pi) * Math<C>::exp(C(-0.5) * x * x);
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x) const {
    // f = x/2 * (1 + t) with t = tanh(k (x + c x^3)), so
    // f' = (1 + t)/2 + x/2 * (1 - t^2) * k (1 + 3 c x^2)
    const C x2 = x * x;
    const C k = C(kSqrt2OverPi);
    const C c = C(kGeluCubic);
    const C t = Math<C>::tanh(k * (x + c * x2 * x));
    const C dinner = k * (C(1) + C(3) * c * x2);
    return g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * dinner);
  }
};
struct SiluBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x) const {
    const C s = scalar::sigmoid(x);
    return g * s * (C(1) + x * (C(1) - s));
  }
};
struct SigmoidBackward {  // (g, y)
  template <class C>
  SINTER_HD C operator()(C g, C y) const {
    return g * y * (C(1) - y);
  }
};
struct TanhBackward {  // (g, y)
  template <class C>
  SINTER_HD C operator()(C g, C y) const {
    return g * (C(1) - y * y);
  }
};
struct HardtanhBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x, C lo, C hi) const {
    return (x > lo && x < hi) ? g : C(0);
  }
};
struct SoftplusBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x, C beta, C threshold) const {
    const C bx = beta * x;
    return bx > threshold ? g : g * scalar::sigmoid(bx);
  }
};
struct EluBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x, C alpha, C scale) const {
    return x > C(0) ? g * scale : g * scale * alpha * Math<C>::exp(x);
  }
};
struct MishBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x) const {
    // d/dx [x t] with t = tanh(softplus(x)): t + x sigmoid(x) (1 - t^2).
    const C t = Math<C>::tanh(Math<C>::log1p(Math<C>::exp(x)));
    return g * (t + x * scalar::sigmoid(x) * (C(1) - t * t));
  }
};
// PyTorch's: 0 up to -3 inclusive, x / 3 + 1/2 inside, 1 from 3 on.
struct HardswishBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x) const {
    return x <= C(-3) ? C(0) : (x < C(3) ? g * (x / C(3) + C(0.5)) : g);
  }
};
// g / 6 inside (-3, 3); PyTorch's f64 kernel multiplies by f32's 1/6 instead (3e-8 away).
struct HardsigmoidBackward {
  template <class C>
  SINTER_HD C operator()(C g, C x) const {
    return (x > C(-3) && x < C(3)) ? g / C(6) : C(0);
  }
};
// The gated unit of a SwiGLU MLP, (gate, up): silu(gate) up in one pass (Silu's formula).
struct Swiglu {
  template <class C>
  SINTER_HD C operator()(C gate, C up) const {
    return gate * scalar::sigmoid(gate) * up;
  }
};

}  // namespace fn

// X(Name, Form), one row per functor above, and X(Name, Form, Vec) for the unary ones. Form:
// Floating (float and double compute types), Integral (int64_t too: the compute type of the
// integral dtypes and bool), Comparison (Integral, and the output is bool) or Bitwise (int64_t
// alone: integral dtypes and bool, no floating form). Vec: the CPU's f32
// vector row of the op, or none (Note [elementwise op list]).
#define SINTER_UNARY_OPS(X)        \
  X(Neg, Integral, none)           \
  X(Abs, Integral, none)           \
  X(Exp, Floating, exp)            \
  X(Log, Floating, none)           \
  X(Sqrt, Floating, none)          \
  X(Rsqrt, Floating, none)         \
  X(Sin, Floating, none)           \
  X(Cos, Floating, none)           \
  X(Tanh, Floating, tanh)          \
  X(Sigmoid, Floating, sigmoid)    \
  X(Relu, Floating, none)          \
  X(LeakyRelu, Floating, none)     \
  X(Gelu, Floating, gelu)          \
  X(GeluTanh, Floating, gelu_tanh) \
  X(Silu, Floating, silu)          \
  X(Sign, Integral, none)          \
  X(Clamp, Integral, none)         \
  X(Hardtanh, Floating, none)      \
  X(Softplus, Floating, none)      \
  X(Elu, Floating, none)           \
  X(Mish, Floating, none)          \
  X(Hardsigmoid, Floating, none)   \
  X(Hardswish, Floating, none)     \
  X(Erf, Floating, none)           \
  X(Erfinv, Floating, none)        \
  X(Lgamma, Floating, none)        \
  X(Digamma, Floating, none)       \
  X(Trigamma, Floating, none)      \
  X(Expm1, Floating, none)         \
  X(Log1p, Floating, none)         \
  X(Floor, Floating, none)         \
  X(Ceil, Floating, none)          \
  X(Round, Floating, none)         \
  X(Trunc, Floating, none)         \
  X(Frac, Floating, none)          \
  X(Tan, Floating, none)           \
  X(Asin, Floating, none)          \
  X(Acos, Floating, none)          \
  X(Atan, Floating, none)          \
  X(Sinh, Floating, none)          \
  X(Cosh, Floating, none)          \
  X(Asinh, Floating, none)         \
  X(Acosh, Floating, none)         \
  X(Atanh, Floating, none)         \
  X(Log2, Floating, none)          \
  X(Log10, Floating, none)         \
  X(Exp2, Floating, none)          \
  X(BitwiseNot, Bitwise, none)

#define SINTER_BINARY_OPS(X)     \
  X(Add, Integral)               \
  X(Sub, Integral)               \
  X(Mul, Integral)               \
  X(Div, Floating)               \
  X(DivTrunc, Integral)          \
  X(DivFloor, Integral)          \
  X(Remainder, Integral)         \
  X(Pow, Integral)               \
  X(Maximum, Integral)           \
  X(Minimum, Integral)           \
  X(Atan2, Floating)             \
  X(Hypot, Floating)             \
  X(BitwiseAnd, Bitwise)         \
  X(BitwiseOr, Bitwise)          \
  X(BitwiseXor, Bitwise)         \
  X(Eq, Comparison)              \
  X(Ne, Comparison)              \
  X(Lt, Comparison)              \
  X(Le, Comparison)              \
  X(Gt, Comparison)              \
  X(Ge, Comparison)              \
  X(ReluBackward, Floating)      \
  X(LeakyReluBackward, Floating) \
  X(GeluBackward, Floating)      \
  X(GeluTanhBackward, Floating)  \
  X(SiluBackward, Floating)      \
  X(SigmoidBackward, Floating)   \
  X(TanhBackward, Floating)      \
  X(HardtanhBackward, Floating)  \
  X(SoftplusBackward, Floating)  \
  X(Swiglu, Floating)            \
  X(EluBackward, Floating)       \
  X(MishBackward, Floating)      \
  X(HardswishBackward, Floating) \
  X(HardsigmoidBackward, Floating)

// X(name, Forward, Backward, Saved, (signature), args...): the public op `Tensor name signature`
// (declared in include/sinter/ops.h) is UnaryOp::Forward of x with the args after x as its
// parameters, on the dtypes that Forward accepts; its gradient is BinaryOp::Backward of (g, x) or
// (g, y), as Saved is Input or Output, with the same parameters.
#define SINTER_ACTIVATIONS(X)                                                                      \
  X(tanh, Tanh, TanhBackward, Output, (const Tensor& x), x)                                        \
  X(sigmoid, Sigmoid, SigmoidBackward, Output, (const Tensor& x), x)                               \
  X(relu, Relu, ReluBackward, Input, (const Tensor& x), x)                                         \
  X(leaky_relu, LeakyRelu, LeakyReluBackward, Input, (const Tensor& x, double slope), x, slope)    \
  X(silu, Silu, SiluBackward, Input, (const Tensor& x), x)                                         \
  X(hardtanh, Hardtanh, HardtanhBackward, Input, (const Tensor& x, double lo, double hi), x, lo,   \
    hi)                                                                                            \
  X(softplus, Softplus, SoftplusBackward, Input, (const Tensor& x, double beta, double threshold), \
    x, beta, threshold)                                                                            \
  X(elu, Elu, EluBackward, Input, (const Tensor& x, double alpha), x, alpha, 1.0)                  \
  X(selu, Elu, EluBackward, Input, (const Tensor& x), x, kern::fn::kSeluAlpha,                     \
    kern::fn::kSeluScale)                                                                          \
  X(mish, Mish, MishBackward, Input, (const Tensor& x), x)                                         \
  X(hardswish, Hardswish, HardswishBackward, Input, (const Tensor& x), x)                          \
  X(hardsigmoid, Hardsigmoid, HardsigmoidBackward, Input, (const Tensor& x), x)

// ---- generated from the lists ----

enum class OpForm { Floating, Integral, Comparison, Bitwise };

#define SINTER_OP_ENUMERATOR(name, form, ...) name,
#define SINTER_OP_FORM(name, form, ...) OpForm::form,
#define SINTER_OP_ONE(name, form, ...) +1

enum class UnaryOp : int { SINTER_UNARY_OPS(SINTER_OP_ENUMERATOR) };
enum class BinaryOp : int { SINTER_BINARY_OPS(SINTER_OP_ENUMERATOR) };

SINTER_HD constexpr OpForm form_of(UnaryOp op) {
  constexpr OpForm forms[] = {SINTER_UNARY_OPS(SINTER_OP_FORM)};
  return forms[static_cast<int>(op)];
}
SINTER_HD constexpr OpForm form_of(BinaryOp op) {
  constexpr OpForm forms[] = {SINTER_BINARY_OPS(SINTER_OP_FORM)};
  return forms[static_cast<int>(op)];
}

template <class Op>
inline constexpr int kOpCount = 0;
template <>
inline constexpr int kOpCount<UnaryOp> = 0 SINTER_UNARY_OPS(SINTER_OP_ONE);
template <>
inline constexpr int kOpCount<BinaryOp> = 0 SINTER_BINARY_OPS(SINTER_OP_ONE);

// OpFunctor<UnaryOp::Relu>::type is fn::Relu.
template <auto OP>
struct OpFunctor;
#define SINTER_UNARY_FUNCTOR(name, form, vec) \
  template <>                                 \
  struct OpFunctor<UnaryOp::name> {           \
    using type = fn::name;                    \
  };
#define SINTER_BINARY_FUNCTOR(name, form) \
  template <>                             \
  struct OpFunctor<BinaryOp::name> {      \
    using type = fn::name;                \
  };
SINTER_UNARY_OPS(SINTER_UNARY_FUNCTOR)
SINTER_BINARY_OPS(SINTER_BINARY_FUNCTOR)

#undef SINTER_OP_ENUMERATOR
#undef SINTER_OP_FORM
#undef SINTER_OP_ONE
#undef SINTER_UNARY_FUNCTOR
#undef SINTER_BINARY_FUNCTOR

// Whether an op accepts integral operands (an int64_t compute type); the ops layer checks this.
template <class Op>
SINTER_HD constexpr bool integral_ok(Op op) {
  return form_of(op) != OpForm::Floating;
}
// Whether an op accepts floating operands (a float or double compute type).
template <class Op>
SINTER_HD constexpr bool floating_ok(Op op) {
  return form_of(op) != OpForm::Bitwise;
}
// Whether a BinaryOp writes bool (b8) outputs.
SINTER_HD constexpr bool is_comparison(BinaryOp op) { return form_of(op) == OpForm::Comparison; }

// Calls the functor of OP on the operands x..., with those of p0, p1 that it takes.
template <auto OP, class C, class... X>
SINTER_HD inline C call_op(C p0, C p1, X... x) {
  static_assert(std::is_floating_point_v<C> || integral_ok(OP), "this op has no integral form");
  static_assert(std::is_integral_v<C> || floating_ok(OP), "this op has no floating form");
  using Fn = typename OpFunctor<OP>::type;
  if constexpr (std::is_invocable_v<Fn, X...>) {
    return Fn{}(x...);
  } else if constexpr (std::is_invocable_v<Fn, X..., C>) {
    return Fn{}(x..., p0);
  } else {
    return Fn{}(x..., p0, p1);
  }
}

// One UnaryOp on compute type C (float, double, or int64_t for the ops integral_ok accepts).
template <UnaryOp OP, class C>
SINTER_HD inline C unary_fn(C x, C p0, C p1) {
  return call_op<OP>(p0, p1, x);
}

// One BinaryOp on compute type C.
template <BinaryOp OP, class C>
SINTER_HD inline C binary_fn(C a, C b, C p0, C p1) {
  return call_op<OP>(p0, p1, a, b);
}

// Calls f(std::integral_constant<Op, op>{}), turning the runtime op into a template argument.
template <class Op, class F>
void visit_op(Op op, F&& f) {
  const bool found = [&]<int... I>(std::integer_sequence<int, I...>) {
    return ((static_cast<int>(op) == I &&
             (f(std::integral_constant<Op, static_cast<Op>(I)>{}), true)) ||
            ...);
  }
  (std::make_integer_sequence<int, kOpCount<Op>>{});
  if (!found) SINTER_THROW("elementwise: unknown op ", static_cast<int>(op));
}

// The dispatch of the unary and binary kernels: calls f(TypeTag<C>{}, std::integral_constant<Op,
// op>{}) with C the compute type of dtype t, or throws if op has no form for C.
template <class Op, class F>
void visit_elementwise(const char* kernel, DType t, Op op, F&& f) {
  visit_compute_type(t, [&](auto ctag) {
    using C = typename decltype(ctag)::type;
    constexpr bool kIntegral = std::is_integral_v<C>;
    visit_op(op, [&](auto opc) {
      if constexpr (kIntegral && !integral_ok(decltype(opc)::value)) {
        SINTER_THROW(kernel, ": op ", static_cast<int>(op), " needs a floating dtype, got ",
                     dtype_name(t));
      } else if constexpr (!kIntegral && !floating_ok(decltype(opc)::value)) {
        SINTER_THROW(kernel, ": op ", static_cast<int>(op), " needs an integral dtype, got ",
                     dtype_name(t));
      } else {
        f(ctag, opc);
      }
    });
  });
}

}  // namespace sinter::kern
