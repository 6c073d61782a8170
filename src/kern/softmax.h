// The kernel interface of softmax, log_softmax and the fused cross entropy: in sinter::cpu
// (src/cpu/softmax.cpp) and sinter::cudak (kernels/softmax.cu), Note [kernel interfaces].
#pragma once

#include <cstdint>

#include "kern/ctx.h"

namespace sinter::kern {

// Note [softmax rows]
// A tensor reduced over one dim is viewed as contiguous (outer, dim, inner); row (o, i) is the
// `dim` elements at o * dim * inner + k * inner + i, k in [0, dim). Rows with inner == 1 are dense
// (the common last-dim case); the others are strided by inner. Sums and maxima run in the
// accumulation type: f64 for f64, f32 for f32, bf16 and f16 (the CPU reference uses f64 for all).

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

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/softmax.inc"
#include "kern/declare.h"
