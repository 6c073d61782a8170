// Inline-PTX wrappers for the sm_80 tensor-core building blocks shared by the GEMM and convolution
// kernels: cp.async with zero fill, ldmatrix, mma.sync (bf16, f16, tf32) and the TF32 rounding,
// and DeviceIsa, which runs mma_tile.h's warp tile product on them. Each PTX wrapper traps when
// compiled for an older GPU; the launchers never send work there.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "mma_tile.h"

namespace sinter::cudak::mma {

// The 32-bit shared-memory address PTX wants for a pointer into __shared__.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies src_bytes (0..16) from global src to shared dst and zero-fills the rest of the 16 bytes.
// dst and src are 16-byte aligned; src must be a valid address even when src_bytes == 0 (pass the
// tensor's base pointer), though nothing is read from it then.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
#else
  __trap();
#endif
}

// The predicate form: all 16 bytes when valid, zeros otherwise.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  cp_async16(dst, src, valid ? 16 : 0);
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  __trap();
#endif
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#else
  __trap();
#endif
}

// Four 8x8 b16 matrices; lane l gives the row address of row l % 8 of matrix l / 8, and receives in
// r[q] row l / 4, columns 2 * (l % 4) and +1 of matrix q (.trans: of matrix q transposed).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#else
  __trap();
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#else
  __trap();
#endif
}

// d += A (16x16, row) * B (16x8, col) with f32 accumulators, for T = __nv_bfloat16 or __half
// operands. With g = lane / 4, t = lane % 4: a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..],
// a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]; b[0] = B[2t..2t+1][g], b[1] = B[2t+8..][g];
// d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..].
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2]) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  (void)d, (void)a, (void)b;
  __trap();
#endif
}

// d += A (16x8, row) * B (8x8, col) on TF32 inputs with f32 accumulators. With g = lane / 4,
// t = lane % 4: a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4], a[3] = A[g+8][t+4];
// b[0] = B[t][g], b[1] = B[t+4][g]; d as for m16n8k16.
__device__ __forceinline__ void mma_tf32_1688(float (&d)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

// f32 rounded to TF32 (nearest, ties away from zero), as the bit pattern mma's tf32 operands take.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#else
  (void)x;
  __trap();
#endif
  return r;
}

// The PTX wrappers above as the instruction set of warp_mma_tile_on (mma_tile.h).
struct DeviceIsa {
  static __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
    mma::ldmatrix_x4(r, p);
  }
  static __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
    mma::ldmatrix_x4_trans(r, p);
  }
  template <typename T>
  static __device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                                   const uint32_t (&b)[2]) {
    mma::mma_16816<T>(d, a, b);
  }
  static __device__ __forceinline__ void mma_tf32_1688(float (&d)[4], const uint32_t (&a)[4],
                                                       const uint32_t (&b)[2]) {
    mma::mma_tf32_1688(d, a, b);
  }
  static __device__ __forceinline__ uint32_t to_tf32(float x) { return mma::to_tf32(x); }
  // Two floats rounded to T (to nearest even) in one 32-bit word, lo in the low half.
  template <typename T>
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    uint32_t r;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
      r = *reinterpret_cast<const uint32_t*>(&h);
    } else {
      const __half2 h = __floats2half2_rn(lo, hi);
      r = *reinterpret_cast<const uint32_t*>(&h);
    }
    return r;
  }
};

// warp_mma_tile_on (mma_tile.h) on the GPU's tensor cores.
template <typename T, int kMI, int kNI, int kBK, bool kAMajorM, bool kBMajorK, int kLdA, int kLdB>
__device__ __forceinline__ void warp_mma_tile(float (&acc)[kMI][kNI][4], const T* sa, const T* sb,
                                              int wm0, int wn0, int lane) {
  warp_mma_tile_on<DeviceIsa, T, kMI, kNI, kBK, kAMajorM, kBMajorK, kLdA, kLdB>(acc, sa, sb, wm0,
                                                                                wn0, lane);
}

}  // namespace sinter::cudak::mma
