// The CPU's int8 kernels behind the quantized layers (src/quant/quantize.cpp): symmetric
// quantization of f32 values, and the GEMM of int8 values into exact int32 sums (Note [int8
// gemm]).
#pragma once

#include <cstdint>
#include <vector>

namespace sinter::cpu::int8 {

// Note [int8 gemm]
// c(i, j) = sum_k a(i, k) b(j, k), with a the rows of the input (a Linear's input rows, the
// im2col rows of a convolution) and b the weight (out, in): int8 values in [-128, 127] held
// widened to int16, so that AVX2's vpmaddwd multiplies 16 pairs and adds adjacent products into 8
// int32 lanes, exactly (|a b| <= 2^14: sums of k < 2^17 terms stay within int32). The weight is
// packed once (PackedB): blocks of 16 output channels, and in a block for each pair of k the 16
// channels' two values side by side, so that one vpmaddwd of a broadcast pair of a-values gives 8
// channels' partial sums and no horizontal sum is ever needed. The AVX2 kernel keeps 4 rows x 16
// channels in 8 accumulators; the fallback walks the same packing in plain C++; the reference is
// three plain loops over the unpacked weight. All give the same integers. The kernel is picked at
// run time by the CPU's instruction sets (AVX2 where it has it).
constexpr int64_t kBlockN = 16;
constexpr int64_t kMaxK = int64_t{1} << 17;
// a's rows hold k values padded with zeros to an even count.
inline int64_t padded_k(int64_t k) { return (k + 1) / 2 * 2; }

struct PackedB {
  int64_t n = 0, k = 0;  // k even
  std::vector<int16_t> data;
};
// b (n rows of k values, row stride ldb; k <= kMaxK) packed; k is padded to even with zeros.
PackedB pack_b(int64_t n, int64_t k, const int16_t* b, int64_t ldb);

// c[i * ldc + j] for i < m, j < b.n; a's rows of b.k values at stride lda.
void gemm(int64_t m, const int16_t* a, int64_t lda, const PackedB& b, int32_t* c, int64_t ldc);
// The packed walk in plain C++, what gemm runs without AVX2.
void gemm_fallback(int64_t m, const int16_t* a, int64_t lda, const PackedB& b, int32_t* c,
                   int64_t ldc);
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
