// The f32 column sums' row (src/cpu/reduce.cpp, Note [line sums]), compiled for AVX-512, AVX2 and
// the baseline (src/cpu/vec_clones.h).
#include <cstdint>

#include "cpu/vec_clones.h"
#include "cpu/vec_rows.h"

namespace sinter::cpu::vec {

SINTER_VECTOR_CLONES void add_widened_row(const float* x, int64_t n, double* acc) {
  for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(x[i]);
}

}  // namespace sinter::cpu::vec
