// The f32 and bf16 column sums' rows (src/cpu/reduce.cpp, Note [line sums]), compiled for AVX-512,
// AVX2 and the baseline (src/cpu/vec_clones.h).
#include <bit>
#include <cstdint>

#include "cpu/vec_clones.h"
#include "cpu/vec_rows.h"

namespace sinter::cpu::vec {

SINTER_VECTOR_CLONES void add_widened_row(const float* x, int64_t n, double* acc) {
  for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(x[i]);
}

SINTER_VECTOR_CLONES void add_widened_bf16_row(const BFloat16* x, int64_t n, double* acc) {
  const auto* bits = reinterpret_cast<const uint16_t*>(x);
  for (int64_t i = 0; i < n; ++i) {
    acc[i] += static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits[i]) << 16));
  }
}

}  // namespace sinter::cpu::vec
