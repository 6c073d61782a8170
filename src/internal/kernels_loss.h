// The kernel interface of softmax, log_softmax and the fused cross entropy: declared once in
// sinter::kern and implemented in sinter::cpu (src/cpu/softmax.cpp) and sinter::cudak
// (kernels/softmax.cu, or src/cuda/loss_nocuda.cpp without CUDA).
#pragma once

#include <cstdint>

#include "internal/kernels.h"

namespace sinter::kern {

// Note [softmax rows]
// A tensor reduced over one dim is viewed as contiguous (outer, dim, inner); row (o, i) is the
// `dim` elements at o * dim * inner + k * inner + i, k in [0, dim). Rows with inner == 1 are dense
// (the common last-dim case); the others are strided by inner. Sums and maxima run in the
// accumulation type: f64 for f64, f32 for f32, bf16 and f16 (the CPU reference uses f64 for all).

// y = softmax(x) over each row, or log_softmax when `log`. x, y: (outer, dim, inner) of a floating
// dtype; dim >= 1.
void softmax_rows(const Ctx& ctx, const void* x, DType dtype, int64_t outer, int64_t dim,
                  int64_t inner, bool log, void* y);
// The backward from the forward's output y and the gradient g (all three of dtype, same layout):
// softmax: dx = y * (g - sum(g * y)); log_softmax: dx = g - exp(y) * sum(g), sums over each row.
void softmax_rows_backward(const Ctx& ctx, const void* g, const void* y, DType dtype, int64_t outer,
                           int64_t dim, int64_t inner, bool log, void* dx);

// The accumulation dtype of cross entropy's per-sample values (losses, logsumexp, gradients).
inline DType loss_acc_dtype(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }

// logits: contiguous (n, c, inner) of dtype; class dim c as the rows of Note [softmax rows].
// target: contiguous (n, inner) i64, each in [0, c) or equal to ignore_index (the op checks).
struct CrossEntropyArgs {
  DType dtype = DType::f32;
  int64_t n = 0, c = 0, inner = 1;
  const void* logits = nullptr;
  const int64_t* target = nullptr;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
};
// Per sample (n, inner), in loss_acc_dtype: lse = logsumexp of the row and
// loss = lse - (1 - eps) x[t] - (eps / c) sum_k x[k], 0 where target == ignore_index.
void cross_entropy_rows(const Ctx& ctx, const CrossEntropyArgs& args, void* loss, void* lse);
// dlogits (n, c, inner) of dtype: grad[s] * (softmax(x)[k] - (1 - eps) [k == t] - eps / c) for
// sample s, 0 for ignored samples. lse from the forward; grad in loss_acc_dtype, one value per
// sample (grad_stride 1) or one for all (grad_stride 0).
void cross_entropy_rows_backward(const Ctx& ctx, const CrossEntropyArgs& args, const void* lse,
                                 const void* grad, int64_t grad_stride, void* dlogits);

}  // namespace sinter::kern

namespace sinter::cpu {
using namespace sinter::kern;  // NOLINT
void softmax_rows(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, bool, void*);
void softmax_rows_backward(const Ctx&, const void*, const void*, DType, int64_t, int64_t, int64_t,
                           bool, void*);
void cross_entropy_rows(const Ctx&, const CrossEntropyArgs&, void*, void*);
void cross_entropy_rows_backward(const Ctx&, const CrossEntropyArgs&, const void*, const void*,
                                 int64_t, void*);
}  // namespace sinter::cpu

namespace sinter::cudak {
using namespace sinter::kern;  // NOLINT
void softmax_rows(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, bool, void*);
void softmax_rows_backward(const Ctx&, const void*, const void*, DType, int64_t, int64_t, int64_t,
                           bool, void*);
void cross_entropy_rows(const Ctx&, const CrossEntropyArgs&, void*, void*);
void cross_entropy_rows_backward(const Ctx&, const CrossEntropyArgs&, const void*, const void*,
                                 int64_t, void*);
}  // namespace sinter::cudak
