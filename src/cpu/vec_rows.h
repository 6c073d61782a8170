// The CPU's f32 row kernels, by family: the elementwise rows (src/cpu/vec_elementwise.cpp), the
// softmax row (src/cpu/vec_softmax.cpp) and the norm rows (src/cpu/vec_norm.cpp), each compiled for
// AVX-512, AVX2 and the baseline, picked at run time (src/cpu/vec_clones.h).
#pragma once

#include <cstdint>

#include "kern/conv.h"
#include "kern/elementwise.h"
#include "sinter/core/dtype.h"

namespace sinter::cpu::vec {

// y[i] = f(a[i]) for i < n, f the op of an elementwise row.
using RowFn = void (*)(const float* a, float* y, int64_t n);

// The f32 row of `op` that its row of SINTER_UNARY_OPS names, or null for `none`
// (Note [elementwise op list]).
RowFn unary_row(kern::UnaryOp op);

// y[i] = f(a[i], b[i]) for i < n; binary_row(op) is the f32 row of op where it has one
// (GeluTanhBackward and GeluBackward, the gradients of the gelu rows' activations), else null.
using BinaryRowFn = void (*)(const float* a, const float* b, float* y, int64_t n);
BinaryRowFn binary_row(kern::BinaryOp op);
// The exact gelu's rows by Note [exact gelu row]'s formula, which unary_row(Gelu) and
// binary_row(GeluBackward) give on a CPU without AVX-512F (Note [gelu tables] in
// src/cpu/vec_elementwise.cpp), so that both kinds are tested on every machine.
RowFn gelu_formula_row();
BinaryRowFn gelu_backward_formula_row();
// y[i] += b[i] for i < n (a GEMM epilogue's bias), in the CPU's widest vectors.
void add_into_row(const float* b, float* y, int64_t n);

// One row of n: softmax (or log_softmax when `log`) of x into y, exp by Note [cpu vector math] and
// the sum of exp(x - max) added in double in lane_sum's order (Note [lane sums]).
void softmax_row(const float* x, int64_t n, bool log, float* y);

// The gradient of one softmax row y of n: dx[k] = (y[k] (g[k] - d), in double, rounded to f32)
// times scale, with d the sum of g y added in double in lane_sum's order (scale 1 for softmax's own
// gradient; attention's scale for its scores' softmax, Note [attention softmax] in
// src/cpu/softmax.cpp).
void softmax_grad_row(const float* g, const float* y, int64_t n, float scale, float* dx);

// One row of n: layer norm of x into y with weight w and bias b (either may be null), the mean and
// 1 / sqrt(var + eps) written to *mean and *rstd; sums in double by lane_sum.
// With `rms` (rms_norm), the mean is 0 and not summed.
void layer_norm_row(const float* x, int64_t n, bool rms, const float* w, const float* b, double eps,
                    float* y, double* mean, double* rstd);

// One row of n of layer norm's gradient (rms_norm's with `rms`): with xhat = (x - mu) rs and
// g = dy w (w may be null: 1), dx = rs (g - mean(g) - xhat mean(g xhat)) (mean(g) = 0 with rms),
// the means' sums by lane_sum, all in double; cdw[j] += dy xhat and cdb[j] += dy where they are
// not null, and dx only where it is not null.
void layer_norm_grad_row(const float* dy, const float* x, int64_t n, bool rms, double mu, double rs,
                         const float* w, double* cdw, double* cdb, float* dx);

// Batch norm's rows (an image's plane of a channel; the sums a channel's planes), f32, with the
// sums (lane_sum, in double) and the double formulas of the generic code in src/cpu/norm.cpp, so
// that the bits are the same on every CPU (src/cpu/vec_norm.cpp). The sums run over a channel's
// `planes` planes of n values, `stride` values apart, each plane's sum by lane_sum, added in plane
// order: sum_planes is the sum of x, sq_dev_sum_planes that of (x - mu)^2, grad_sums_planes those
// of g and of g (x - mu); affine_row writes (x - mu) scale + shift.
double sum_planes(const float* x, int64_t planes, int64_t n, int64_t stride);
double sq_dev_sum_planes(const float* x, int64_t planes, int64_t n, int64_t stride, double mu);
void grad_sums_planes(const float* g, const float* x, int64_t planes, int64_t n, int64_t stride,
                      double mu, double* sum_g, double* sum_g_xc);
void affine_row(const float* x, int64_t n, double mu, double scale, double shift, float* y);

// Batch norm's input gradient in training: dx = scale (g - mean_dy - xhat mean_dy_xhat), with
// xhat = (x - mean) rstd.
struct BatchNormGrad {
  double mean, rstd, scale, mean_dy, mean_dy_xhat;
};
void batch_norm_grad_row(const float* g, const float* x, int64_t n, const BatchNormGrad& p,
                         float* dx);
// The same rows on bf16 planes, widened as they are read and rounded as BFloat16 rounds as they are
// written (Note [bf16 norm rows]): the sums the f32 sums' bits on the widened values; the
// normalization and the input gradient in f32, in AVX512-BF16 where the CPU has it.
double sum_planes(const BFloat16* x, int64_t planes, int64_t n, int64_t stride);
double sq_dev_sum_planes(const BFloat16* x, int64_t planes, int64_t n, int64_t stride, double mu);
void grad_sums_planes(const BFloat16* g, const BFloat16* x, int64_t planes, int64_t n,
                      int64_t stride, double mu, double* sum_g, double* sum_g_xc);
void affine_row(const BFloat16* x, int64_t n, double mu, double scale, double shift, BFloat16* y);
void batch_norm_grad_row(const BFloat16* g, const BFloat16* x, int64_t n, const BatchNormGrad& p,
                         BFloat16* dx);

// bf16 to f32 and back for i < n, as BFloat16's own conversions (round to nearest even, NaN kept
// and quieted), vectorized (src/cpu/vec_convert.cpp).
void widen_bf16_row(const BFloat16* x, int64_t n, float* y);
void narrow_bf16_row(const float* x, int64_t n, BFloat16* y);
// relu, its gradient (x > 0 ? g : 0) and a + b on bf16 rows, the f32 functors' results rounded
// as BFloat16 rounds (Note [bf16 elementwise rows] in src/cpu/vec_convert.cpp).
void relu_bf16_row(const BFloat16* x, int64_t n, BFloat16* y);
void relu_backward_bf16_row(const BFloat16* g, const BFloat16* x, int64_t n, BFloat16* y);
void add_bf16_row(const BFloat16* a, const BFloat16* b, int64_t n, BFloat16* y);

// acc[i] += x[i] in double for i < n: a lane of the f32 and bf16 column sums (Note [line sums] in
// src/cpu/reduce.cpp; src/cpu/vec_sums.cpp).
void add_widened_row(const float* x, int64_t n, double* acc);
void add_widened_bf16_row(const BFloat16* x, int64_t n, double* acc);

// The int8 inference plans' rows (src/cpu/vec_int8.cpp). quantize_int8_row: q[i] =
// kern::quantize_int8(x[i], scale). int8_epilogue_row: out[j] = c scale[j] + shift[j] (c = acc[j]
// as f32, the product and the sum rounded apart) then, without res, relu as kern::int8_epilogue
// applies it (`relu`); with res, + res[j] and relu as the relu op applies it.
void quantize_int8_row(const float* x, int64_t n, float scale, int8_t* q);
void int8_epilogue_row(const int32_t* acc, int64_t n, const float* scale, const float* shift,
                       bool relu, const float* res, float* out);

// The inference plans' max pooling (src/cpu/vec_pool.cpp): one channels-last image x of (g.h, g.w,
// g.c_in) into y of (g.h_out, g.w_out, g.c_in), windows of g.kh x g.kw at g.stride_*, g.dil_*,
// g.pad_* (top and left; the windows' taps outside the image skipped): max_pool2d's values, a NaN
// in a window its result.
void max_pool_nhwc(const float* x, const kern::Conv2dGeom& g, float* y);

}  // namespace sinter::cpu::vec
