// The bf16 rows (src/cpu/vec_rows.h), compiled for AVX-512, AVX2 and the baseline
// (src/cpu/vec_clones.h): BFloat16's conversions (include/sinter/core/dtype.h) bit for bit, in
// integer loops the compiler vectorizes, where the element-by-element conversion stayed scalar.
#include <cstdint>

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

}  // namespace

void widen_bf16_row(const BFloat16* x, int64_t n, float* y) {
  widen_clone(reinterpret_cast<const uint16_t*>(x), n, y);
}

void narrow_bf16_row(const float* x, int64_t n, BFloat16* y) {
  narrow_clone(x, n, reinterpret_cast<uint16_t*>(y));
}

}  // namespace sinter::cpu::vec
