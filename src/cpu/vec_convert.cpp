// The bf16 rows (src/cpu/vec_rows.h), compiled for AVX-512, AVX2 and the baseline
// (src/cpu/vec_clones.h): BFloat16's conversions (include/sinter/core/dtype.h) bit for bit, in
// integer loops the compiler vectorizes, where the element-by-element conversion stayed scalar.
#include <bit>
#include <cstdint>

#include "cpu/vec_bf16.h"
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

// BFloat16(f) of the f32 bits u: to nearest even, NaN kept and quieted.
[[gnu::always_inline]] inline uint16_t round_bits(uint32_t u) {
  const auto rounded = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  const auto quiet = static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN, quiet
  return (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
}

SINTER_VECTOR_CLONES void narrow_clone(const float* x, int64_t n, uint16_t* y) {
  const auto* in = reinterpret_cast<const Bits*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] = round_bits(in[i]);
}

// Note [bf16 elementwise rows]
// relu, its gradient and add on bf16 tensors, in one pass over the bits: the f32 functors'
// results on the widened values, rounded as BFloat16 rounds (a NaN comes out quieted, as the
// rounding of a widened NaN does; relu's other results are the input's bits or +0, exact). The
// chunked path (widen a chunk, the functor's loop in the baseline's vectors, round it) ran bf16
// relu no faster than f32's, at twice a bf16 copy's time. The same bits under the default MXCSR:
// a host program that sets denormals-are-zero makes the f32 functor's x > 0 false for a positive
// subnormal, which these rows still pass on.
// (Written as masks, without branches, which the compiler would not turn into vector selects.)
// All ones where x is NaN, else zero.
[[gnu::always_inline]] inline uint16_t nan_mask(uint16_t b) {
  return static_cast<uint16_t>(-static_cast<int>((b & 0x7fffu) > 0x7f80u));
}
// All ones where x > 0 (not negative, not zero, not NaN), else zero.
[[gnu::always_inline]] inline uint16_t positive_mask(uint16_t b) {
  return static_cast<uint16_t>(-static_cast<int>((b != 0) & (b <= 0x7f80u)));
}
// x, a NaN quieted.
[[gnu::always_inline]] inline uint16_t quieted(uint16_t b) {
  return static_cast<uint16_t>(b | (nan_mask(b) & 0x40u));
}

SINTER_VECTOR_CLONES void relu_bf16_clone(const uint16_t* x, int64_t n, uint16_t* y) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<uint16_t>(quieted(x[i]) & (positive_mask(x[i]) | nan_mask(x[i])));
  }
}

SINTER_VECTOR_CLONES void relu_backward_bf16_clone(const uint16_t* g, const uint16_t* x, int64_t n,
                                                   uint16_t* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = quieted(g[i]) & positive_mask(x[i]);
}

SINTER_VECTOR_CLONES void add_bf16_clone(const uint16_t* a, const uint16_t* b, int64_t n,
                                         uint16_t* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = std::bit_cast<float>(static_cast<uint32_t>(a[i]) << 16) +
                    std::bit_cast<float>(static_cast<uint32_t>(b[i]) << 16);
    y[i] = round_bits(std::bit_cast<uint32_t>(s));
  }
}

#ifdef SINTER_BF16_INSTRUCTION
SINTER_BF16_TARGET void narrow_avx512bf16(const float* x, int64_t n, uint16_t* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), round16(_mm512_loadu_ps(x + i)));
  }
  narrow_clone(x + i, n - i, y + i);
}

// a + b on 16 bf16 lanes at a time, rounded by the instruction (Note [bf16 rounding instruction]
// in src/cpu/vec_bf16.h).
SINTER_BF16_TARGET void add_avx512bf16(const uint16_t* a, const uint16_t* b, int64_t n,
                                       uint16_t* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i r = round16(_mm512_add_ps(widen16(a + i), widen16(b + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), r);
  }
  add_bf16_clone(a + i, b + i, n - i, y + i);
}
#endif

}  // namespace

void widen_bf16_row(const BFloat16* x, int64_t n, float* y) {
  widen_clone(reinterpret_cast<const uint16_t*>(x), n, y);
}

void relu_bf16_row(const BFloat16* x, int64_t n, BFloat16* y) {
  relu_bf16_clone(reinterpret_cast<const uint16_t*>(x), n, reinterpret_cast<uint16_t*>(y));
}

void relu_backward_bf16_row(const BFloat16* g, const BFloat16* x, int64_t n, BFloat16* y) {
  relu_backward_bf16_clone(reinterpret_cast<const uint16_t*>(g),
                           reinterpret_cast<const uint16_t*>(x), n, reinterpret_cast<uint16_t*>(y));
}

void add_bf16_row(const BFloat16* a, const BFloat16* b, int64_t n, BFloat16* y) {
#ifdef SINTER_BF16_INSTRUCTION
  if (has_avx512bf16()) {
    return add_avx512bf16(reinterpret_cast<const uint16_t*>(a),
                          reinterpret_cast<const uint16_t*>(b), n, reinterpret_cast<uint16_t*>(y));
  }
#endif
  add_bf16_clone(reinterpret_cast<const uint16_t*>(a), reinterpret_cast<const uint16_t*>(b), n,
                 reinterpret_cast<uint16_t*>(y));
}

void narrow_bf16_row(const float* x, int64_t n, BFloat16* y) {
#ifdef SINTER_BF16_INSTRUCTION
  if (has_avx512bf16()) return narrow_avx512bf16(x, n, reinterpret_cast<uint16_t*>(y));
#endif
  narrow_clone(x, n, reinterpret_cast<uint16_t*>(y));
}

}  // namespace sinter::cpu::vec
