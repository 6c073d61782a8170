// The int8 GEMM of Note [int8 gemm]: the packing, an AVX2 kernel, its plain fallback and the
// reference loops.
#include "cpu/int8.h"

#include <algorithm>

#include "sinter/core/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SINTER_INT8_AVX2 1
#endif

namespace sinter::cpu::int8 {

namespace {
constexpr int64_t kBlockRows = 4;  // rows of c per AVX2 micro-kernel
// The packed block of channels jb: pairs p = 0..k/2-1, each 16 channels x 2 values.
inline const int16_t* block_of(const PackedB& b, int64_t jb) {
  return b.data.data() + jb * (b.k / 2) * (2 * kBlockN);
}
}  // namespace

PackedB pack_b(int64_t n, int64_t k, const int16_t* b, int64_t ldb) {
  SINTER_CHECK(n >= 0 && k >= 0 && k <= kMaxK, "int8 gemm: k ", k, " outside [0, ", kMaxK,
               "] (the int32 sums could overflow) or n ", n, " negative");
  PackedB p;
  p.n = n;
  p.k = padded_k(k);
  const int64_t blocks = (n + kBlockN - 1) / kBlockN, pairs = p.k / 2;
  p.data.assign(static_cast<size_t>(blocks * pairs * 2 * kBlockN), 0);
  for (int64_t jb = 0; jb < blocks; ++jb) {
    int16_t* out = p.data.data() + jb * pairs * 2 * kBlockN;
    for (int64_t pair = 0; pair < pairs; ++pair) {
      for (int64_t ch = 0; ch < kBlockN; ++ch) {
        const int64_t j = jb * kBlockN + ch;
        if (j >= n) continue;
        for (int64_t t = 0; t < 2; ++t) {
          const int64_t kk = 2 * pair + t;
          out[(pair * kBlockN + ch) * 2 + t] = kk < k ? b[j * ldb + kk] : int16_t{0};
        }
      }
    }
  }
  return p;
}

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

namespace {}  // namespace

void gemm_fallback(int64_t m, const int16_t* a, int64_t lda, const PackedB& b, int32_t* c,
                   int64_t ldc) {
  const int64_t blocks = (b.n + kBlockN - 1) / kBlockN, pairs = b.k / 2;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t jb = 0; jb < blocks; ++jb) {
      int32_t acc[kBlockN] = {};
      const int16_t* blk = block_of(b, jb);
      for (int64_t p = 0; p < pairs; ++p) {
        const int32_t a0 = a[i * lda + 2 * p], a1 = a[i * lda + 2 * p + 1];
        for (int64_t ch = 0; ch < kBlockN; ++ch) {
          acc[ch] += a0 * blk[(p * kBlockN + ch) * 2] + a1 * blk[(p * kBlockN + ch) * 2 + 1];
        }
      }
      const int64_t width = std::min(kBlockN, b.n - jb * kBlockN);
      for (int64_t ch = 0; ch < width; ++ch) c[i * ldc + jb * kBlockN + ch] = acc[ch];
    }
  }
}

namespace {

#ifdef SINTER_INT8_AVX2

// Rows i..i+kRows-1 of c against the channel block jb.
template <int kRows>
__attribute__((target("avx2"))) void micro(const int16_t* a, int64_t lda, const int16_t* blk,
                                           int64_t pairs, int32_t* c, int64_t ldc, int64_t width) {
  __m256i acc[kRows][2];
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + p * 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + p * 32 + 16));
    for (int r = 0; r < kRows; ++r) {
      int32_t pair;
      __builtin_memcpy(&pair, a + r * lda + 2 * p, sizeof pair);
      const __m256i av = _mm256_set1_epi32(pair);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  for (int r = 0; r < kRows; ++r) {
    if (width == kBlockN) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc), acc[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc + 8), acc[r][1]);
    } else {
      alignas(32) int32_t tmp[kBlockN];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), acc[r][0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), acc[r][1]);
      for (int64_t ch = 0; ch < width; ++ch) c[r * ldc + ch] = tmp[ch];
    }
  }
}

__attribute__((target("avx2"))) void gemm_avx2(int64_t m, const int16_t* a, int64_t lda,
                                               const PackedB& b, int32_t* c, int64_t ldc) {
  const int64_t blocks = (b.n + kBlockN - 1) / kBlockN, pairs = b.k / 2;
  for (int64_t jb = 0; jb < blocks; ++jb) {
    const int16_t* blk = block_of(b, jb);
    const int64_t width = std::min(kBlockN, b.n - jb * kBlockN);
    int32_t* cj = c + jb * kBlockN;
    int64_t i = 0;
    for (; i + kBlockRows <= m; i += kBlockRows) {
      micro<kBlockRows>(a + i * lda, lda, blk, pairs, cj + i * ldc, ldc, width);
    }
    for (; i < m; ++i) micro<1>(a + i * lda, lda, blk, pairs, cj + i * ldc, ldc, width);
  }
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

#endif

}  // namespace

void gemm(int64_t m, const int16_t* a, int64_t lda, const PackedB& b, int32_t* c, int64_t ldc) {
#ifdef SINTER_INT8_AVX2
  if (has_avx2()) {
    gemm_avx2(m, a, lda, b, c, ldc);
    return;
  }
#endif
  gemm_fallback(m, a, lda, b, c, ldc);
}

const char* gemm_isa() {
#ifdef SINTER_INT8_AVX2
  if (has_avx2()) return "avx2";
#endif
  return "scalar";
}

}  // namespace sinter::cpu::int8
