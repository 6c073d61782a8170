// The CPU's f32 elementwise rows, one per name in the Vec column of SINTER_UNARY_OPS
// (Note [elementwise op list]), each compiled for AVX-512, AVX2 and the baseline
// (src/cpu/vec_clones.h), and the table from UnaryOp to its row, generated from that column.
#include <cstdint>
#include <iterator>

#include "cpu/vec_clones.h"
#include "cpu/vec_exp.h"
#include "cpu/vec_rows.h"
#include "kern/elementwise_ops.h"

namespace sinter::cpu::vec {

// sigmoid, silu and gelu's tanh form on Note [cpu vector math]'s exp, for their rows alone (the
// scalar sigmoid of the functors is kern::scalar::sigmoid). gelu's is x / (1 + exp(-2u)), the same
// value as 0.5 x (1 + tanh(u)) without its cancellation for negative x. Against the functors: on
// [-100, 100] sigmoid and silu are within a few ulp but for x < -88.7, where exp(-x) overflows and
// they give 0 for the functors' subnormals; gelu's differs more where the functor's form cancels
// (x from -10 to -1; below about -5 the functor gives -0), and it is the accurate one there.
// Functions rather than expressions written into the rows: the AVX2 clones call them out of line,
// compiled for the baseline, so where they are written decides whether their multiply-adds fuse.
inline float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

inline float silu(float x) { return x / (1.0f + exp(-x)); }

inline float gelu_tanh(float x) {
  const float u = 0.797884560802865355f * (x + 0.044715f * x * x * x);
  return x / (1.0f + exp(-2.0f * u));
}

namespace {

// name_row: y[i] = vec::name(a[i]), in a loop that vectorizes.
#define SINTER_VECTOR_ROW(name)                                               \
  SINTER_VECTOR_CLONES void name##_row(const float* a, float* y, int64_t n) { \
    for (int64_t i = 0; i < n; ++i) {                                         \
      const float x = a[i];                                                   \
      y[i] = vec::name(x);                                                    \
    }                                                                         \
  }
SINTER_VECTOR_ROW(exp)
SINTER_VECTOR_ROW(tanh)
SINTER_VECTOR_ROW(sigmoid)
SINTER_VECTOR_ROW(silu)
SINTER_VECTOR_ROW(gelu_tanh)
#undef SINTER_VECTOR_ROW

// The Vec column of SINTER_UNARY_OPS, by UnaryOp: `name` reads name_row, and `none` none_row.
constexpr RowFn none_row = nullptr;
#define SINTER_UNARY_ROW(name, form, vec) vec##_row,
constexpr RowFn kUnaryRows[] = {SINTER_UNARY_OPS(SINTER_UNARY_ROW)};
#undef SINTER_UNARY_ROW
static_assert(std::size(kUnaryRows) == kern::kOpCount<kern::UnaryOp>);

}  // namespace

RowFn unary_row(kern::UnaryOp op) { return kUnaryRows[static_cast<int>(op)]; }

namespace {

// y = g gelu_tanh'(x): the GeluTanhBackward functor's formula (f' = (1 + t) / 2 + x / 2 (1 - t^2)
// k (1 + 3 c x^2), t = tanh(k (x + c x^3))) on Note [cpu vector math]'s tanh.
SINTER_VECTOR_CLONES void gelu_tanh_backward_row(const float* g, const float* x, float* y,
                                                 int64_t n) {
  const float k = static_cast<float>(kern::fn::kSqrt2OverPi),
              c = static_cast<float>(kern::fn::kGeluCubic);
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i], v2 = v * v;
    const float t = vec::tanh(k * (v + c * v2 * v));
    const float dinner = k * (1.0F + 3.0F * c * v2);
    y[i] = g[i] * (0.5F * (1.0F + t) + 0.5F * v * (1.0F - t * t) * dinner);
  }
}

}  // namespace

BinaryRowFn binary_row(kern::BinaryOp op) {
  return op == kern::BinaryOp::GeluTanhBackward ? gelu_tanh_backward_row : nullptr;
}

}  // namespace sinter::cpu::vec
