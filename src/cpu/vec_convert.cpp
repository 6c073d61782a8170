// The bf16 rows (src/cpu/vec_rows.h), compiled for AVX-512, AVX2 and the baseline
// (src/cpu/vec_clones.h): BFloat16's conversions (include/sinter/core/dtype.h) bit for bit, in
// integer loops the compiler vectorizes, where the element-by-element conversion stayed scalar.
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu/vec_clones.h"
#include "cpu/vec_rows.h"

namespace sinter::cpu::vec {
namespace {

// The floats' bits, read and written in place (GCC's and Clang's may_alias).
using Bits [[gnu::may_alias]] = uint32_t;

SINTER_VECTOR_CLONES void widen_clone(const uint16_t* x, int64_t n, float* y) {
  auto* out = reinterpret_cast<Bits*>(y);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(x[i]) << 16;
}

SINTER_VECTOR_CLONES void narrow_clone(const float* x, int64_t n, uint16_t* y) {
  const auto* in = reinterpret_cast<const Bits*>(x);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = in[i];
    const auto rounded = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    const auto quiet = static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN, quiet
    y[i] = (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
  }
}

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

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void narrow_avx512bf16(
    const float* x, int64_t n, uint16_t* y) {
  const __m512i exponent = _mm512_set1_epi32(0x7f800000), mantissa = _mm512_set1_epi32(0x007fffff);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    __m256i r = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
    const __m512i u = _mm512_castps_si512(v);
    // Subnormals (zero exponent, nonzero mantissa); zeros round right in the instruction.
    const __mmask16 tiny =
        _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(u, exponent), u, mantissa);
    if (tiny != 0) {
      const auto w = reinterpret_cast<Words>(u);
      const Halves soft = __builtin_convertvector((w + 0x7fffu + ((w >> 16) & 1u)) >> 16, Halves);
      r = _mm256_mask_blend_epi16(tiny, r, reinterpret_cast<__m256i>(soft));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), r);
  }
  narrow_clone(x + i, n - i, y + i);
}

bool has_avx512bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}
#endif

}  // namespace

void widen_bf16_row(const BFloat16* x, int64_t n, float* y) {
  widen_clone(reinterpret_cast<const uint16_t*>(x), n, y);
}

void narrow_bf16_row(const float* x, int64_t n, BFloat16* y) {
#ifdef SINTER_BF16_INSTRUCTION
  if (has_avx512bf16()) return narrow_avx512bf16(x, n, reinterpret_cast<uint16_t*>(y));
#endif
  narrow_clone(x, n, reinterpret_cast<uint16_t*>(y));
}

}  // namespace sinter::cpu::vec
