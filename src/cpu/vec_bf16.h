// The bf16 rows' vectors on a CPU with AVX512-BF16: 16 bf16 values widened in one load, 16 floats
// rounded by the instruction (Note [bf16 rounding instruction]), and the test of the CPU that the
// rows using them pass before they run. For the row files (src/cpu/vec_*.cpp) alone; on other
// compilers and architectures SINTER_BF16_INSTRUCTION stays undefined and the rows' clones run.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sinter::cpu::vec {

// Note [bf16 rounding instruction]
// On a CPU with AVX512-BF16, vcvtneps2bf16 rounds 16 floats at once as BFloat16 does (to nearest
// even, NaN quieted: (bits >> 16) | 0x40), but for subnormal inputs, which it flushes to a signed
// zero: the subnormal lanes (exponent zero, mantissa not) take the integer formula instead, so the
// bits are BFloat16's on every CPU. A third of the cost of the integer loop, in every bf16 op's
// stores. Zeros, which the instruction rounds right, stay on the fast path: with the exponent test
// alone, a block of relu's outputs with one zero among 16 took the integer formula for all 16.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SINTER_BF16_INSTRUCTION 1
// 16 floats' bits, and 16 bf16s (GCC's and Clang's vector types: the intrinsics' shifts warn of
// undefined lanes in GCC 12).
using Words = uint32_t __attribute__((vector_size(64)));
using Halves = uint16_t __attribute__((vector_size(32)));

#define SINTER_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// 16 floats rounded to bf16 by the instruction, the subnormal lanes (zero exponent, nonzero
// mantissa) by the integer formula; zeros round right in the instruction.
[[gnu::always_inline]] SINTER_BF16_TARGET inline __m256i round16(__m512 v) {
  const __m512i exponent = _mm512_set1_epi32(0x7f800000), mantissa = _mm512_set1_epi32(0x007fffff);
  const __m256i r = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 tiny =
      _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(u, exponent), u, mantissa);
  if (tiny == 0) return r;
  const auto w = reinterpret_cast<Words>(u);
  const Halves soft = __builtin_convertvector((w + 0x7fffu + ((w >> 16) & 1u)) >> 16, Halves);
  return _mm256_mask_blend_epi16(tiny, r, reinterpret_cast<__m256i>(soft));
}

// 16 bf16 values at p widened.
[[gnu::always_inline]] SINTER_BF16_TARGET inline __m512 widen16(const uint16_t* p) {
  const auto w = reinterpret_cast<Words>(
      _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  return reinterpret_cast<__m512>(w << 16);
}

// Whether this CPU has AVX512-BF16, asked once.
inline bool has_avx512bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}
#endif

}  // namespace sinter::cpu::vec
