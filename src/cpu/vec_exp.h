// f32 exp and tanh (built on exp) for the CPU's f32 rows, written so that a compiler vectorizes a
// loop of them (no calls, no branches: selects), with their own polynomials (Note [cpu vector
// math]).
#pragma once

#include <bit>
#include <cstdint>

namespace sinter::cpu::vec {

// Note [cpu vector math]
// exp: x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 in two parts, so that r is
// exact), exp(r) by its Taylor polynomial to r^7 (the first term left out is below 2e-9 of the
// result, a thirtieth of f32's epsilon), and 2^n applied as two powers of two so that results
// down to the subnormals and up to infinity come out right. n is rounded by adding 1.5 * 2^23,
// which leaves n in the low bits of the sum (x is clamped to [-110, 100] first, where |x / ln2|
// is far below 2^22). The clamps are written as the comparisons that keep NaN (a comparison with
// NaN is false), and NaN then goes through the arithmetic: no test for it, and no branch, so that
// a loop of exp is about 30 vector instructions per vector of floats. tanh: its odd Taylor
// polynomial to x^15 for |x| < 0.55 (truncation below 5e-8 relative), else 1 - 2 / (exp(2x) + 1).
// NaN comes out as NaN. Each is within a few f32 ulp of the correctly rounded value (the tests
// hold them and the rows built on them to the f64 formulas, tests/test_cpu_vec_math.cpp).
//
// They are not the C library's expf and tanhf, which the functors of kern/elementwise_ops.h call
// on the CPU, nor CUDA's, so the f32 rows built on them (the elementwise ops whose row of
// SINTER_UNARY_OPS names one, softmax, the attention tiles) do not give the functors' or the CUDA
// kernels' bits: on [-100, 100], exp is at most 1 ulp from expf and tanh 3 from tanhf (the
// activations: see src/cpu/vec_elementwise.cpp); the parity tests hold the CPU to CUDA within the
// op table's tolerances. Nor are a row's bits the same on every CPU: its AVX-512 clone
// (src/cpu/vec_clones.h) fuses multiply-adds, which the baseline cannot.

inline float pow2i(int32_t n) { return std::bit_cast<float>((n + 127) << 23); }

// exp(r) for |r| <= ln2 / 2 (a little more in exp_sum): its Taylor polynomial to r^7.
inline float exp_poly(float r) {
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  return p * r + 1.0f;
}

// exp(r) 2^n for |r| <= ln2 / 2 (a little more in exp_sum), the tail of both exps below.
inline float exp_scaled(float r, int32_t n) {
  const float p = exp_poly(r);
  const int32_t half = n >> 1;
  return p * pow2i(half) * pow2i(n - half);
}

constexpr float kExpRound = 12582912.0f;  // 1.5 * 2^23

inline float exp(float x) {
  const float lo = x < -110.0f ? -110.0f : x;
  const float xc = lo > 100.0f ? 100.0f : lo;
  const float t = xc * 1.44269504088896341f + kExpRound;
  const float nf = t - kExpRound;
  const float r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;
  return exp_scaled(r, std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kExpRound));
}

// exp(x + lo), for an x whose rounding error would matter (exp(-x^2 / 2) of a large x, in two
// parts) and an |lo| of a few units at most: x + lo only chooses n, and r takes lo after the exact
// x - n ln2_hi, so that the sum's rounding (up to 4e-6 at x = -100) stays out of the result. A sum
// outside [-110, 100] is clamped there as a whole, as exp clamps x.
inline float exp_sum(float x, float lo) {
  const float s = x + lo;
  const bool under = s<-110.0f, over = s> 100.0f;  // false for NaN, which goes through
  const float xc = under ? -110.0f : over ? 100.0f : x;
  const float lc = under || over ? 0.0f : lo;
  const float t = (xc + lc) * 1.44269504088896341f + kExpRound;
  const float nf = t - kExpRound;
  const float r = ((xc - nf * 0.693359375f) + lc) - nf * -2.12194440e-4f;
  return exp_scaled(r, std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kExpRound));
}

inline float tanh(float x) {
  const float x2 = x * x;
  float p = -929569.0f / 638512875.0f;
  p = p * x2 + 21844.0f / 6081075.0f;
  p = p * x2 + -1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 + -17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 + -1.0f / 3.0f;
  const float small = x + x * x2 * p;
  const float large = 1.0f - 2.0f / (exp(2.0f * x) + 1.0f);
  return (x < 0.55f && x > -0.55f) ? small : large;  // NaN: large, through exp
}

}  // namespace sinter::cpu::vec
