// More of PyTorch's elementwise ops: the rest of the trigonometric, hyperbolic and logarithmic
// functions, tests of floating values, logic and bitwise ops, and the reductions all, any and
// count_nonzero. sinter/ops.h includes this header.
#pragma once

#include <optional>
#include <vector>

#include "sinter/core/scalar.h"
#include "sinter/tensor.h"

namespace sinter {

// --- math of one argument: integer and bool tensors compute in f32; differentiable ---
// Out of their domains these give NaN (asin, acos and atanh outside [-1, 1], acosh below 1) or
// infinities (atanh(+-1)), as PyTorch's.
// log|Gamma(a)| (inf at 0, -1, -2, ...), and its derivative digamma(a) (-inf at 0, NaN at the
// negative integers), as PyTorch's; integral inputs give f32 (Note [gamma functions]).
Tensor lgamma(const Tensor& a);
Tensor digamma(const Tensor& a);
Tensor tan(const Tensor& a);
Tensor asin(const Tensor& a);
Tensor acos(const Tensor& a);
Tensor atan(const Tensor& a);
Tensor sinh(const Tensor& a);
Tensor cosh(const Tensor& a);
Tensor asinh(const Tensor& a);
Tensor acosh(const Tensor& a);
Tensor atanh(const Tensor& a);
Tensor log2(const Tensor& a);
Tensor log10(const Tensor& a);
Tensor exp2(const Tensor& a);  // 2^a
// 1 / a (integers give f32, 1 / 0 is inf).
Tensor reciprocal(const Tensor& a);
// a * pi / 180 and a * 180 / pi.
Tensor deg2rad(const Tensor& a);
Tensor rad2deg(const Tensor& a);
// log(exp(a) + exp(b)) and log2(2^a + 2^b), broadcast, without overflow: max + log1p(exp(-|a -
// b|)) (equal infinities give that infinity). Floating operands (integers alone are an error, as
// in PyTorch); bf16 and f16 compute in f32 and round once.
Tensor logaddexp(const Tensor& a, const Tensor& b);
Tensor logaddexp2(const Tensor& a, const Tensor& b);
// a * log(b), broadcast, and 0 where a is 0 unless b is NaN (PyTorch's xlogy, its gradients
// too); integer operands convert to f32 as they are (not through their common integer dtype).
Tensor xlogy(const Tensor& a, const Tensor& b);
// log(a / (1 - a)); with eps >= 0, a is first clamped to [eps, 1 - eps] (the gradient is 0
// outside; a negative eps clamps nothing). The gradient is PyTorch's: NaN outside [0, 1] without
// eps, infinite at 0 and 1.
Tensor logit(const Tensor& a, std::optional<double> eps = std::nullopt);

// --- tests of values (bool results, not differentiable) ---
// Integer and bool tensors hold no NaN and no infinity: isnan and isinf give all false for them,
// isfinite all true.
Tensor isnan(const Tensor& a);
Tensor isinf(const Tensor& a);
Tensor isposinf(const Tensor& a);
Tensor isneginf(const Tensor& a);
Tensor isfinite(const Tensor& a);
// a with NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (by default 0 and the dtype's
// largest and lowest finite values), as PyTorch's; integer tensors are their own (a copy). The
// gradient passes where a is finite and is 0 where a value was replaced.
Tensor nan_to_num(const Tensor& a, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);

// --- logic: any dtype, non-zero (and NaN) is true; bool results, broadcast ---
Tensor logical_not(const Tensor& a);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);

// --- bitwise: integral and bool tensors (floating ones are an error, as in PyTorch) ---
// The operands promote as add's (result_type): bool with bool stays bool, bool with an integer
// scalar is i64. bitwise_not of bool is logical_not.
Tensor bitwise_not(const Tensor& a);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, const Scalar& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Scalar& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Scalar& b);
inline Tensor operator~(const Tensor& a) { return bitwise_not(a); }
inline Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
inline Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
inline Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }

// --- reductions over a set of dims (all dims when empty) ---
// Whether every element (all) or some element (any) is non-zero: bool, or u8 for a u8 tensor (as
// PyTorch). all of no elements is true, any false. Not differentiable.
Tensor all(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor any(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// The number of non-zero elements: i64. Not differentiable.
Tensor count_nonzero(const Tensor& a, const std::vector<int64_t>& dims = {});

}  // namespace sinter
