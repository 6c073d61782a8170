// The int8 GEMM on the tensor cores (Note [int8 mma gemm] in kernels/int8_mma.h):
// mma.sync.m16n8k32 on s8 operands with s32 accumulators, sm_80 and newer.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "int8_gemm.cuh"
#include "int8_mma.h"

namespace sinter::cudak {
namespace {

using namespace int8mma;  // NOLINT

// d += A (16x32, row) * B (32x8, col), s8 operands, s32 accumulators; fragments as in Note [int8
// mma gemm].
__device__ __forceinline__ void mma_16832_s8(int32_t (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)d, (void)a, (void)b;
  __trap();
#endif
}

__global__ void __launch_bounds__(kThreads)
    int8_gemm_kernel(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b,
                     int64_t ldb, int32_t* c, int64_t ldc, bool vector_a, bool vector_b) {
  __shared__ __align__(16) int8_t as[kBM * kLd];
  __shared__ __align__(16) int8_t bs[kBN * kLd];
  const int tid = static_cast<int>(threadIdx.x), w = tid / 32, lane = tid % 32;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  int32_t acc[kMI][kNI][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kBK) {
    load_chunk(tid, a, m, k, lda, m0, k0, vector_a, as);
    load_chunk(tid, b, n, k, ldb, n0, k0, vector_b, bs);
    __syncthreads();
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni) {
        uint32_t fa[4], fb[2];
        fragments(as, bs, w, lane, mi, ni, fa, fb);
        mma_16832_s8(acc[mi][ni], fa, fb);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < kNI; ++ni) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const Chunk e = d_elem(lane, r, warp_row0(w) + mi * 16, warp_col0(w) + ni * 8);
        const int64_t row = m0 + e.row, col = n0 + e.col;
        if (row < m && col < n) c[row * ldc + col] = acc[mi][ni][r];
      }
    }
  }
}

}  // namespace

void int8_gemm(const kern::Ctx& ctx, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
               const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc) {
  SINTER_CHECK(m >= 0 && n >= 0 && k >= 0 && k <= (int64_t{1} << 17), "int8_gemm: sizes m=", m,
               " n=", n, " k=", k, " (k at most 2^17, so that the int32 sums cannot overflow)");
  if (m == 0 || n == 0) return;
  DeviceGuard guard(ctx.device);
  const int64_t gx = (n + kBN - 1) / kBN, gy = (m + kBM - 1) / kBM;
  SINTER_CHECK(gx <= INT_MAX && gy <= 65535, "int8_gemm: problem too large for one launch (grid ",
               gx, " x ", gy, ")");
  const auto aligned = [](const int8_t* p, int64_t ld) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 16 == 0;
  };
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  int8_gemm_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(ctx.stream)>>>(
      m, n, k, a, lda, b, ldb, c, ldc, aligned(a, lda), aligned(b, ldb));
  SINTER_LAUNCH_CHECK("int8_gemm_kernel");
}

}  // namespace sinter::cudak
