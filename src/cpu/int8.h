// The CPU's int8 kernels behind the quantized layers (src/quant/quantize.cpp): symmetric
// quantization of f32 values, and the GEMM of int8 values into exact int32 sums (Note [int8
// gemm]).
#pragma once

#include <cstdint>

namespace sinter::cpu::int8 {

// Note [int8 gemm]
// c(i, j) = sum_k a(i, k) b(j, k): both operands are rows of int8 values (in [-128, 127]) along k,
// the weight's layout (out, in) and the im2col rows of a convolution, stored widened to int16 and
// zero-padded to a multiple of kBlockK, so that AVX2's vpmaddwd multiplies 16 pairs and adds
// adjacent products into 8 int32 lanes per instruction, exactly (no saturation: |a b| <= 2^14,
// and sums of k < 2^17 terms stay within int32). The AVX2 kernel computes 2 x 4 blocks of c in 8
// accumulators; the reference is three plain loops; both give the same integers. The kernel is
// picked at run time by the CPU's instruction sets (AVX2 where it has it).
constexpr int64_t kBlockK = 16;
inline int64_t padded_k(int64_t k) { return (k + kBlockK - 1) / kBlockK * kBlockK; }

// c[i * ldc + j] for i < m, j < n; k a multiple of kBlockK, lda and ldb >= k.
void gemm(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* b,
          int64_t ldb, int32_t* c, int64_t ldc);
void gemm_reference(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda,
                    const int16_t* b, int64_t ldb, int32_t* c, int64_t ldc);
// The instruction set gemm runs on this CPU: "avx2" or "scalar".
const char* gemm_isa();

// q = saturate(round_half_even(x / scale)) in [-128, 127] (ONNX's QuantizeLinear with zero point
// 0); NaN becomes 0.
inline int16_t quantize(float x, float scale) {
  const float v = x / scale;
  if (!(v == v)) return 0;
  if (v <= -128.0F) return -128;
  if (v >= 127.0F) return 127;
  // Round half to even: nearbyint in the default rounding mode.
  return static_cast<int16_t>(__builtin_nearbyintf(v));
}

}  // namespace sinter::cpu::int8
