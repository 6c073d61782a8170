// The int8 GEMM of Note [int8 gemm]: an AVX2 kernel and the reference loops.
#include "cpu/int8.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SINTER_INT8_AVX2 1
#endif

namespace sinter::cpu::int8 {

void gemm_reference(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda,
                    const int16_t* b, int64_t ldb, int32_t* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = 0;
      for (int64_t p = 0; p < k; ++p) s += int32_t{a[i * lda + p]} * int32_t{b[j * ldb + p]};
      c[i * ldc + j] = s;
    }
  }
}

#ifdef SINTER_INT8_AVX2
namespace {

__attribute__((target("avx2"))) inline __m256i load(const int16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

__attribute__((target("avx2"))) inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// Rows i0, i0 + 1 (rows = 2) or i0 alone (rows = 1) against columns j0..j0 + cols - 1 (cols <= 4).
template <int kRows, int kCols>
__attribute__((target("avx2"))) void block(int64_t k, const int16_t* a, int64_t lda,
                                           const int16_t* b, int64_t ldb, int32_t* c, int64_t ldc) {
  __m256i acc[kRows][kCols];
  for (int r = 0; r < kRows; ++r) {
    for (int q = 0; q < kCols; ++q) acc[r][q] = _mm256_setzero_si256();
  }
  for (int64_t p = 0; p < k; p += kBlockK) {
    __m256i av[kRows];
    for (int r = 0; r < kRows; ++r) av[r] = load(a + r * lda + p);
    for (int q = 0; q < kCols; ++q) {
      const __m256i bv = load(b + q * ldb + p);
      for (int r = 0; r < kRows; ++r) {
        acc[r][q] = _mm256_add_epi32(acc[r][q], _mm256_madd_epi16(av[r], bv));
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int q = 0; q < kCols; ++q) c[r * ldc + q] = hsum(acc[r][q]);
  }
}

template <int kRows>
__attribute__((target("avx2"))) void row_block(int64_t n, int64_t k, const int16_t* a, int64_t lda,
                                               const int16_t* b, int64_t ldb, int32_t* c,
                                               int64_t ldc) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) block<kRows, 4>(k, a, lda, b + j * ldb, ldb, c + j, ldc);
  for (; j < n; ++j) block<kRows, 1>(k, a, lda, b + j * ldb, ldb, c + j, ldc);
}

__attribute__((target("avx2"))) void gemm_avx2(int64_t m, int64_t n, int64_t k, const int16_t* a,
                                               int64_t lda, const int16_t* b, int64_t ldb,
                                               int32_t* c, int64_t ldc) {
  int64_t i = 0;
  for (; i + 2 <= m; i += 2) row_block<2>(n, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc);
  if (i < m) row_block<1>(n, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc);
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

}  // namespace
#endif

void gemm(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* b,
          int64_t ldb, int32_t* c, int64_t ldc) {
#ifdef SINTER_INT8_AVX2
  if (has_avx2()) {
    gemm_avx2(m, n, k, a, lda, b, ldb, c, ldc);
    return;
  }
#endif
  gemm_reference(m, n, k, a, lda, b, ldb, c, ldc);
}

const char* gemm_isa() {
#ifdef SINTER_INT8_AVX2
  if (has_avx2()) return "avx2";
#endif
  return "scalar";
}

}  // namespace sinter::cpu::int8
