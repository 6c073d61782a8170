// Inline-PTX wrappers for the sm_80 tensor-core building blocks shared by the GEMM and convolution
// kernels: cp.async with zero fill, ldmatrix, mma.sync (bf16, f16, tf32) and the TF32 rounding,
// plus one warp's k step of a tile product from shared memory. Each PTX wrapper traps when
// compiled for an older GPU; the launchers never send work there.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

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

// One block-tile k step of a warp's (16 * kMI, 8 * kNI) accumulator tile, read from shared memory:
// acc[im][jn] += A(wm0 + 16 im.., k) B(k, wn0 + 8 jn..) for k in [0, kBK). The A tile is stored
// M-major (sa[k * kLdA + m]) when kAMajorM, else K-major (sa[m * kLdA + k]); the B tile K-major
// (sb[n * kLdB + k]) when kBMajorK, else N-major (sb[k * kLdB + n]). T is __nv_bfloat16 or __half
// (ldmatrix, m16n8k16; rows 16-byte aligned) or float (32-bit loads rounded to TF32, m16n8k8).
// The padding of kLdA and kLdB decides whether the reads are free of bank conflicts.
template <typename T, int kMI, int kNI, int kBK, bool kAMajorM, bool kBMajorK, int kLdA, int kLdB>
__device__ __forceinline__ void warp_mma_tile(float (&acc)[kMI][kNI][4], const T* sa, const T* sb,
                                              int wm0, int wn0, int lane) {
  if constexpr (std::is_same_v<T, float>) {
    // Fragments as 32-bit words (g = lane / 4, t = lane % 4, see mma_tf32_1688).
    const int g = lane / 4, t = lane % 4;
    auto at = [&](int i, int q) { return kAMajorM ? sa[q * kLdA + i] : sa[i * kLdA + q]; };
    auto bt = [&](int q, int j) { return kBMajorK ? sb[j * kLdB + q] : sb[q * kLdB + j]; };
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 8) {
      uint32_t af[kMI][4], bf[kNI][2];
#pragma unroll
      for (int im = 0; im < kMI; ++im) {
        const int i = wm0 + im * 16 + g;
        af[im][0] = to_tf32(at(i, ks + t));
        af[im][1] = to_tf32(at(i + 8, ks + t));
        af[im][2] = to_tf32(at(i, ks + t + 4));
        af[im][3] = to_tf32(at(i + 8, ks + t + 4));
      }
#pragma unroll
      for (int jn = 0; jn < kNI; ++jn) {
        const int j = wn0 + jn * 8 + g;
        bf[jn][0] = to_tf32(bt(ks + t, j));
        bf[jn][1] = to_tf32(bt(ks + t + 4, j));
      }
#pragma unroll
      for (int im = 0; im < kMI; ++im) {
#pragma unroll
        for (int jn = 0; jn < kNI; ++jn) mma_tf32_1688(acc[im][jn], af[im], bf[jn]);
      }
    }
  } else {
    // ldmatrix x4: lane l addresses row l % 8 of 8x8 matrix q = l / 8. For A, matrix q covers
    // rows +(q & 1) * 8 and k +(q >> 1) * 8 (fragment registers a0..a3); for B, two n8 tiles:
    // n +(q >> 1) * 8 and k +(q & 1) * 8 (b0, b1 of the first tile, then of the second). An
    // operand stored MN-major is read transposed.
    static_assert(kNI % 2 == 0, "B fragments come two n8 tiles at a time");
    const int q = lane / 8, r = lane % 8;
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t af[kMI][4], bf[kNI][2];
#pragma unroll
      for (int im = 0; im < kMI; ++im) {
        const int i = wm0 + im * 16;
        if constexpr (kAMajorM) {
          ldmatrix_x4_trans(af[im], sa + (ks + (q >> 1) * 8 + r) * kLdA + i + (q & 1) * 8);
        } else {
          ldmatrix_x4(af[im], sa + (i + (q & 1) * 8 + r) * kLdA + ks + (q >> 1) * 8);
        }
      }
#pragma unroll
      for (int jp = 0; jp < kNI / 2; ++jp) {
        const int j = wn0 + jp * 16;
        uint32_t f[4];
        if constexpr (kBMajorK) {
          ldmatrix_x4(f, sb + (j + (q >> 1) * 8 + r) * kLdB + ks + (q & 1) * 8);
        } else {
          ldmatrix_x4_trans(f, sb + (ks + (q & 1) * 8 + r) * kLdB + j + (q >> 1) * 8);
        }
        bf[2 * jp][0] = f[0];
        bf[2 * jp][1] = f[1];
        bf[2 * jp + 1][0] = f[2];
        bf[2 * jp + 1][1] = f[3];
      }
#pragma unroll
      for (int im = 0; im < kMI; ++im) {
#pragma unroll
        for (int jn = 0; jn < kNI; ++jn) mma_16816<T>(acc[im][jn], af[im], bf[jn]);
      }
    }
  }
}

// Calls fn(row, col, value) for every accumulator of a warp's (16 * kMI, 8 * kNI) tile at
// (wm0, wn0): accumulator e of mma tile (im, jn) is D(g + 8 * (e / 2), 2t + e % 2) of that 16x8
// tile, g = lane / 4, t = lane % 4.
template <int kMI, int kNI, class Fn>
__device__ __forceinline__ void for_each_acc(const float (&acc)[kMI][kNI][4], int wm0, int wn0,
                                             int lane, Fn fn) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int im = 0; im < kMI; ++im) {
#pragma unroll
    for (int jn = 0; jn < kNI; ++jn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        fn(wm0 + im * 16 + g + 8 * (e / 2), wn0 + jn * 8 + 2 * t + e % 2, acc[im][jn][e]);
      }
    }
  }
}

}  // namespace sinter::cudak::mma
