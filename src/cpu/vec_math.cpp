// The f32 row kernels of Note [cpu vector math], each compiled three times (AVX-512, AVX2 and the
// baseline x86-64) with the loader picking the one this CPU runs (GCC's and Clang's
// target_clones); elsewhere, once for the baseline.
#include "cpu/vec_math.h"

#include <cstdint>

namespace sinter::cpu::vec {
namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SINTER_VECTOR_CLONES __attribute__((target_clones("avx512f", "arch=haswell", "default")))
#else
#define SINTER_VECTOR_CLONES
#endif

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

SINTER_VECTOR_CLONES void exp_shifted_block(const float* x, float shift, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vec::exp(x[i] - shift);
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
  exp_shifted_block(x, shift, y, n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += y[i];
  return sum;
}

}  // namespace sinter::cpu::vec
