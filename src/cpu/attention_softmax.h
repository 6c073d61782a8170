// The softmax of attention's scores on the CPU in one pass, scaled and causally masked (Note
// [attention softmax] in src/cpu/softmax.cpp), for the composed form of
// scaled_dot_product_attention (src/ops/attention.cpp). CPU only: CUDA runs the fused kernels.
#pragma once

#include <cstdint>

#include "sinter/core/dtype.h"

namespace sinter::cpu {

// x, y: (rows, n) contiguous scores and weights of dtype f32, bf16 or f16; row r is query
// r % tq. y = softmax(x scale) over each row's keys (with `causal`, the first min(r % tq + 1, n)),
// 0 on the others.
void attention_softmax_rows(const void* x, DType dtype, int64_t rows, int64_t tq, int64_t n,
                            double scale, bool causal, void* y);
// dx = (y (g - sum(g y))) scale over each row's keys, 0 on the others; g, y, dx as x above.
void attention_softmax_rows_backward(const void* g, const void* y, DType dtype, int64_t rows,
                                     int64_t tq, int64_t n, double scale, bool causal, void* dx);

}  // namespace sinter::cpu
