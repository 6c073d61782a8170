// The f32 and bf16 column sums' rows (src/cpu/reduce.cpp, Note [line sums]), compiled for AVX-512,
// AVX2 and the baseline (src/cpu/vec_clones.h), bf16's written out for AVX-512 where the CPU has
// it.
#include <bit>
#include <cstdint>

#include "cpu/vec_clones.h"
#include "cpu/vec_rows.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SINTER_SUMS_AVX512 1
#endif

namespace sinter::cpu::vec {

SINTER_VECTOR_CLONES void add_widened_row(const float* x, int64_t n, double* acc) {
  for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(x[i]);
}

namespace {

SINTER_VECTOR_CLONES void add_widened_bf16_clone(const uint16_t* bits, int64_t n, double* acc) {
  for (int64_t i = 0; i < n; ++i) {
    acc[i] += static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits[i]) << 16));
  }
}

#ifdef SINTER_SUMS_AVX512
// Note [bf16 column sum rows]
// The compilers' loop above widens bf16 poorly in the AVX-512 clone (256-bit vectors, its
// conversions split into halves and put back together): a bf16 column sum took longer than f32's
// for half the bytes (8320 rows of 256, one thread: 0.42 against 0.35 ms). This one widens eight
// values a step (vpmovzxwd, a shift) and converts them to doubles in one 512-bit instruction:
// 0.42 -> 0.28 ms. Each double adds the same term as in the loop, so the sums are the same bits.
// (The f32 rows stay on the compiler's 256-bit loop: on the three vector ports it was faster than
// 512-bit conversions on two.)
#define SINTER_SUMS_TARGET __attribute__((target("avx512f")))

SINTER_SUMS_TARGET void add_widened_bf16_avx512(const uint16_t* bits, int64_t n, double* acc) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i)));
    // The masked form: GCC 12's unmasked one warns of its undefined source lanes.
    const __m512d v = _mm512_maskz_cvtps_pd(0xff, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    _mm512_storeu_pd(acc + i, _mm512_add_pd(_mm512_loadu_pd(acc + i), v));
  }
  add_widened_bf16_clone(bits + i, n - i, acc + i);  // the last n % 8
}
#endif

}  // namespace

void add_widened_bf16_row(const BFloat16* x, int64_t n, double* acc) {
  const auto* bits = reinterpret_cast<const uint16_t*>(x);
#ifdef SINTER_SUMS_AVX512
  if (cpu_has_avx512f()) return add_widened_bf16_avx512(bits, n, acc);
#endif
  add_widened_bf16_clone(bits, n, acc);
}

}  // namespace sinter::cpu::vec
