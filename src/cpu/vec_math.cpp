// The f32 row kernels of Note [cpu vector math], each compiled for AVX-512, AVX2 and the baseline
// (src/cpu/vec_clones.h); the rows of batch norm and layer norm are in src/cpu/vec_norm.cpp.
#include "cpu/vec_math.h"

#include <cstdint>

#include "cpu/cpu_util.h"
#include "cpu/vec_clones.h"

namespace sinter::cpu::vec {
namespace {

#define SINTER_VECTOR_ROW(name, expr)                                         \
  SINTER_VECTOR_CLONES void name##_row(const float* a, float* y, int64_t n) { \
    for (int64_t i = 0; i < n; ++i) {                                         \
      const float x = a[i];                                                   \
      y[i] = (expr);                                                          \
    }                                                                         \
  }
SINTER_VECTOR_ROW(exp, vec::exp(x))
SINTER_VECTOR_ROW(tanh, vec::tanh(x))
SINTER_VECTOR_ROW(sigmoid, vec::sigmoid(x))
SINTER_VECTOR_ROW(silu, vec::silu(x))
SINTER_VECTOR_ROW(gelu_tanh, vec::gelu_tanh(x))
#undef SINTER_VECTOR_ROW

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

}  // namespace

RowFn unary_row(kern::UnaryOp op) {
  switch (op) {
    case kern::UnaryOp::Exp:
      return exp_row;
    case kern::UnaryOp::Tanh:
      return tanh_row;
    case kern::UnaryOp::Sigmoid:
      return sigmoid_row;
    case kern::UnaryOp::Silu:
      return silu_row;
    case kern::UnaryOp::GeluTanh:
      return gelu_tanh_row;
    default:
      return nullptr;
  }
}

double exp_shifted_row(const float* x, float shift, float* y, int64_t n) {
  return exp_shifted_clone(x, shift, y, n);
}

void softmax_row(const float* x, int64_t n, bool log, float* y) { softmax_row_clone(x, n, log, y); }

}  // namespace sinter::cpu::vec
