// f32 exp, tanh and the activations built on them, written so that a compiler vectorizes a loop of
// them (no calls, no branches: selects), and row kernels of them compiled for AVX-512, AVX2 and
// the baseline, picked at run time (Note [cpu vector math]).
#pragma once

#include <bit>
#include <cstdint>

#include "kern/elementwise.h"

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
// gelu's tanh form is x / (1 + exp(-2u)), the same value as 0.5 x (1 + tanh(u)) without its
// cancellation for negative x. NaN comes out as NaN. Each is within a few f32 ulp of the correctly
// rounded value (the tests hold them to the f64 formulas).

inline float pow2i(int32_t n) { return std::bit_cast<float>((n + 127) << 23); }

inline float exp(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const float lo = x < -110.0f ? -110.0f : x;
  const float xc = lo > 100.0f ? 100.0f : lo;
  const float t = xc * 1.44269504088896341f + kRound;
  const float nf = t - kRound;
  const float r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t n = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound);
  const int32_t half = n >> 1;
  return p * pow2i(half) * pow2i(n - half);
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

inline float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

inline float silu(float x) { return x / (1.0f + exp(-x)); }

inline float gelu_tanh(float x) {
  const float u = 0.797884560802865355f * (x + 0.044715f * x * x * x);
  return x / (1.0f + exp(-2.0f * u));
}

// Note [row prefetch]
// The row kernels of softmax and layer norm read their row once from memory and then work on it in
// the L1 cache: the memory sat idle through that work, and two threads reached half of a copy's
// bandwidth. So they prefetch the next row (the floats after this one) while they work, a chunk of
// kPrefetchChunk floats before each chunk of their last passes; the prefetch of memory past a
// tensor's end is harmless (prefetches do not fault).
constexpr int64_t kPrefetchChunk = 256;

// Prefetches the n floats from p into the caches, a cache line at a time.
[[gnu::always_inline]] inline void prefetch_floats(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i);
}

// y[i] = f(a[i]) for i < n, f one of the functions above.
using RowFn = void (*)(const float* a, float* y, int64_t n);

// The row kernel of `op` for f32 (the widest vector unit this CPU has), or null for an op without
// one.
RowFn unary_row(kern::UnaryOp op);

// y[i] = exp(x[i] - shift) for i < n; returns their sum, added in double by lane_sum (Note [lane
// sums]: the same sum on every CPU).
double exp_shifted_row(const float* x, float shift, float* y, int64_t n);

// One row of n: softmax (or log_softmax when `log`) of x into y, the sum of exp(x - max) by
// exp_shifted_row.
void softmax_row(const float* x, int64_t n, bool log, float* y);

// One row of n: layer norm of x into y with weight w and bias b (either may be null), the mean and
// 1 / sqrt(var + eps) written to *mean and *rstd; sums in double by lane_sum.
// With `rms` (rms_norm), the mean is 0 and not summed.
void layer_norm_row(const float* x, int64_t n, bool rms, const float* w, const float* b, double eps,
                    float* y, double* mean, double* rstd);

// Batch norm's rows (one image's plane of a channel), f32, with the sums (lane_sum, in double) and
// the double formulas of the generic code in src/cpu/norm.cpp, so that the bits are the same on
// every CPU (src/cpu/vec_norm.cpp):
// sum_row is the sum of x, sq_dev_sum_row that of (x - mu)^2, grad_sums_row those of g and of
// g (x - mu); affine_row writes (x - mu) scale + shift.
double sum_row(const float* x, int64_t n);
double sq_dev_sum_row(const float* x, int64_t n, double mu);
void grad_sums_row(const float* g, const float* x, int64_t n, double mu, double* sum_g,
                   double* sum_g_xc);
void affine_row(const float* x, int64_t n, double mu, double scale, double shift, float* y);

// Batch norm's input gradient in training: dx = scale (g - mean_dy - xhat mean_dy_xhat), with
// xhat = (x - mean) rstd.
struct BatchNormGrad {
  double mean, rstd, scale, mean_dy, mean_dy_xhat;
};
void batch_norm_grad_row(const float* g, const float* x, int64_t n, const BatchNormGrad& p,
                         float* dx);

}  // namespace sinter::cpu::vec
