// The kernel interface of batch_norm, layer_norm and dropout (src/ops/norm.cpp): each function
// exists in sinter::cpu (src/cpu/norm.cpp) and sinter::cudak (kernels/norm.cu, or
// src/cuda/norm_nocuda.cpp without CUDA), called through SINTER_DISPATCH.
#pragma once

#include <cstdint>

#include "internal/kernels.h"

namespace sinter::kern {

// Note [norm statistics]
// Tensors of storage dtype `dtype` (f32, f64, bf16, f16) are contiguous. Per-channel (batch norm)
// or per-row (layer norm) statistics, and the dweight/dbias results, are arrays in the accumulation
// dtype: f64 when dtype is f64, else f32. Weight and bias have `dtype`; nullptr means absent
// (weight 1, bias 0). dx, dweight and dbias may each be nullptr when not wanted.

// x: (n, c, hw). mean[c] and var[c] (biased) over n and hw (the CUDA kernel reads x once: Welford,
// combined pairwise); rstd[c] = 1/sqrt(var + eps). n * hw >= 1.
void batch_norm_stats(const Ctx& ctx, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      double eps, void* mean, void* var, void* rstd);
// y[i, k, j] = (x[i, k, j] - mean[k]) * rstd[k] * weight[k] + bias[k]; x, y: (n, c, hw).
void batch_norm_apply(const Ctx& ctx, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      const void* mean, const void* rstd, const void* weight, const void* bias,
                      void* y);
// With xhat = (x - mean) rstd, per channel: dbias = sum(dy), dweight = sum(dy xhat). dx: in
// training (mean and rstd came from this batch, m = n * hw values per channel)
//   dx = weight rstd (dy - dbias / m - xhat dweight / m);
// in eval (running statistics, constants) dx = weight rstd dy. dweight, dbias: written (not added).
void batch_norm_backward(const Ctx& ctx, const void* dy, const void* x, DType dtype, int64_t n,
                         int64_t c, int64_t hw, const void* mean, const void* rstd,
                         const void* weight, bool training, void* dx, void* dweight, void* dbias);

// x, y: (rows, cols), each row normalized: mean[r], rstd[r] = 1/sqrt(var_biased + eps) are saved;
// y = (x - mean) rstd weight + bias, weight and bias of (cols).
void layer_norm_forward(const Ctx& ctx, const void* x, DType dtype, int64_t rows, int64_t cols,
                        const void* weight, const void* bias, double eps, void* y, void* mean,
                        void* rstd);
// With g = dy weight: dx = rstd (g - mean_cols(g) - xhat mean_cols(g xhat)); dweight[j] and
// dbias[j] are ADDED to (the caller zeroes them): sum over rows of dy xhat and of dy.
void layer_norm_backward(const Ctx& ctx, const void* dy, const void* x, DType dtype, int64_t rows,
                         int64_t cols, const void* mean, const void* rstd, const void* weight,
                         void* dx, void* dweight, void* dbias);

// Note [dropout mask]
// Element i of a request (counters from Generator::reserve(n), Note [philox streams]) is kept iff
// (w0 >> 8) >= threshold, w0 the first word of Philox block (seed, offset + i): that is
// uniform01_f32 >= p with threshold = ceil(p 2^24) fixed on the host, so CPU and CUDA keep the same
// elements for every dtype. out[i] = kept ? in[i] * scale : 0. Backward applies the same mask (same
// seed and offset) to the gradient, so no mask is stored.
void dropout_apply(const Ctx& ctx, const void* in, DType dtype, int64_t numel, uint64_t seed,
                   uint64_t offset, uint32_t threshold, double scale, void* out);

}  // namespace sinter::kern

namespace sinter::cpu {
using namespace sinter::kern;  // NOLINT
void batch_norm_stats(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, double, void*,
                      void*, void*);
void batch_norm_apply(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, const void*,
                      const void*, const void*, const void*, void*);
void batch_norm_backward(const Ctx&, const void*, const void*, DType, int64_t, int64_t, int64_t,
                         const void*, const void*, const void*, bool, void*, void*, void*);
void layer_norm_forward(const Ctx&, const void*, DType, int64_t, int64_t, const void*, const void*,
                        double, void*, void*, void*);
void layer_norm_backward(const Ctx&, const void*, const void*, DType, int64_t, int64_t, const void*,
                         const void*, const void*, void*, void*, void*);
void dropout_apply(const Ctx&, const void*, DType, int64_t, uint64_t, uint64_t, uint32_t, double,
                   void*);
}  // namespace sinter::cpu

namespace sinter::cudak {
using namespace sinter::kern;  // NOLINT
void batch_norm_stats(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, double, void*,
                      void*, void*);
void batch_norm_apply(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, const void*,
                      const void*, const void*, const void*, void*);
void batch_norm_backward(const Ctx&, const void*, const void*, DType, int64_t, int64_t, int64_t,
                         const void*, const void*, const void*, bool, void*, void*, void*);
void layer_norm_forward(const Ctx&, const void*, DType, int64_t, int64_t, const void*, const void*,
                        double, void*, void*, void*);
void layer_norm_backward(const Ctx&, const void*, const void*, DType, int64_t, int64_t, const void*,
                         const void*, const void*, void*, void*, void*);
void dropout_apply(const Ctx&, const void*, DType, int64_t, uint64_t, uint64_t, uint32_t, double,
                   void*);
}  // namespace sinter::cudak
