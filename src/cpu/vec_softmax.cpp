// The CPU's f32 softmax row (src/cpu/vec_rows.h), compiled for AVX-512, AVX2 and the baseline
// (src/cpu/vec_clones.h), with the vector exp of Note [cpu vector math].
#include <cstdint>

#include "cpu/cpu_util.h"
#include "cpu/vec_clones.h"
#include "cpu/vec_exp.h"
#include "cpu/vec_rows.h"

namespace sinter::cpu::vec {
namespace {

// y[i] = exp(x[i] - shift) for i < n; returns their sum, added in double by lane_sum (Note [lane
// sums]).
SINTER_VECTOR_CLONES double exp_shifted_clone(const float* x, float shift, float* y, int64_t n) {
  // In chunks, each after the prefetch of as much of the next row (Note [row prefetch]).
  for (int64_t c = 0; c < n; c += kPrefetchChunk) {
    const int64_t end = c + kPrefetchChunk < n ? c + kPrefetchChunk : n;
    prefetch_floats(x + n + c, end - c);
    for (int64_t i = c; i < end; ++i) y[i] = vec::exp(x[i] - shift);
  }
  return lane_sum(n, [&](int64_t i) { return static_cast<double>(y[i]); });
}

SINTER_VECTOR_CLONES void softmax_row_clone(const float* x, int64_t n, bool log, float* y) {
  // The maximum, NaN never taken (a NaN reaches the sum through exp and makes the row NaN).
  // In 16 lanes, so that it vectorizes; the maximum is the same in any order (it ignores NaN).
  // A vector type (GCC and Clang), which compilers keep in registers where the array form of
  // the loop stayed scalar.
  using Lanes = float __attribute__((vector_size(64)));
  // Two sets of lanes, so that one compare waits on the other's less.
  Lanes lanes = Lanes{} - __builtin_inff(), more = lanes;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    Lanes v, w;
    __builtin_memcpy(&v, x + i, sizeof v);
    __builtin_memcpy(&w, x + i + 16, sizeof w);
    lanes = v > lanes ? v : lanes;
    more = w > more ? w : more;
  }
  lanes = more > lanes ? more : lanes;
  for (; i + 16 <= n; i += 16) {
    Lanes v;
    __builtin_memcpy(&v, x + i, sizeof v);
    lanes = v > lanes ? v : lanes;
  }
  float m = -__builtin_inff();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int l = 0; l < 16; ++l) m = lanes[l] > m ? lanes[l] : m;
  const double s = exp_shifted_clone(x, m, y, n);
  if (log) {
    const double shift = static_cast<double>(m) + __builtin_log(s);
    for (int64_t k = 0; k < n; ++k) y[k] = static_cast<float>(static_cast<double>(x[k]) - shift);
  } else {
    const auto inv = static_cast<float>(1.0 / s);
    for (int64_t k = 0; k < n; ++k) y[k] *= inv;
  }
}

SINTER_VECTOR_CLONES void softmax_grad_row_clone(const float* g, const float* y, int64_t n,
                                                 float scale, float* dx) {
  const double d =
      lane_sum(n, [&](int64_t k) { return static_cast<double>(g[k]) * static_cast<double>(y[k]); });
  for (int64_t k = 0; k < n; ++k) {
    const auto v = static_cast<float>(static_cast<double>(y[k]) * (static_cast<double>(g[k]) - d));
    dx[k] = v * scale;
  }
}

}  // namespace

void softmax_row(const float* x, int64_t n, bool log, float* y) { softmax_row_clone(x, n, log, y); }

void softmax_grad_row(const float* g, const float* y, int64_t n, float scale, float* dx) {
  softmax_grad_row_clone(g, y, n, scale, dx);
}

}  // namespace sinter::cpu::vec
