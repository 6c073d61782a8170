// The CUDA-core building block shared by the GEMM and convolution kernels (kernels/gemm.cu's
// general kernel, kernels/conv.cu's implicit GEMM): one thread's register tile of C accumulated
// with FMAs from the block's shared-memory tiles of A and B. The tensor-core counterpart is
// mma.cuh.
#pragma once

namespace sinter::cudak {

// Note [fma tile]
// A block of 16 x 16 threads computes a (16 kTM, 16 kTN) tile of C; thread (ty, tx) owns the rows
// ty + 16 i and the columns tx + 16 j, strided rather than adjacent, so that a warp's shared-memory
// reads hit distinct banks or broadcast and its C stores coalesce. For each of the kK steps q of
// the staged tiles (k-major: as (kK, >= 16 kTM), bs (kK, >= 16 kTN), padded as their kernel
// chooses), the thread loads its kTM values of A and kTN of B into registers and adds their outer
// product into acc, its rows from the last: each acc[i][j] adds its products in q order whatever
// the row order, and with rows from the first ptxas (CUDA 13, sm_90a) gave seven of conv.cu's
// kernels one or two registers more.
template <int kK, int kTM, int kTN, int kLdA, int kLdB, class A>
__device__ __forceinline__ void fma_tile(const A (&as)[kK][kLdA], const A (&bs)[kK][kLdB], int ty,
                                         int tx, A (&acc)[kTM][kTN]) {
#pragma unroll
  for (int q = 0; q < kK; ++q) {
    A av[kTM], bv[kTN];
#pragma unroll
    for (int i = 0; i < kTM; ++i) av[i] = as[q][ty + 16 * i];
#pragma unroll
    for (int j = 0; j < kTN; ++j) bv[j] = bs[q][tx + 16 * j];
#pragma unroll
    for (int i = kTM - 1; i >= 0; --i) {
#pragma unroll
      for (int j = 0; j < kTN; ++j) acc[i][j] += av[i] * bv[j];
    }
  }
}

}  // namespace sinter::cudak
