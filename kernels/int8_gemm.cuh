// The int8 tensor-core GEMM (Note [int8 mma gemm] in kernels/int8_mma.h), for the CUDA side of the
// quantized layers: compiled, and checked on a GPU by CudaInt8Gemm.MatchesTheReference.
#pragma once

#include <cstdint>

#include "kern/ctx.h"

namespace sinter::cudak {

// c[i * ldc + j] = sum_p a[i * lda + p] * b[j * ldb + p] for i < m, j < n, p < k (k <= 2^17),
// exact in int32; a, b and c on ctx's device.
void int8_gemm(const kern::Ctx& ctx, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
               const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc);

}  // namespace sinter::cudak
