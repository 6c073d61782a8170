// The CPU's f32 elementwise rows, one per name in the Vec column of SINTER_UNARY_OPS
// (Note [elementwise op list]), each compiled for AVX-512, AVX2 and the baseline
// (src/cpu/vec_clones.h), and the table from UnaryOp to its row, generated from that column.
#include <algorithm>
#include <bit>
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

// Note [exact gelu row]
// gelu(x) = x Phi(x), Phi the normal distribution's CDF, and its gradient Phi(x) + x phi(x), from
// the upper tail Q(a) = P(X > a) = erfc(a / sqrt 2) / 2 at a = |x|: Phi(x) = Q(a) for x < 0, else
// 1 - Q(a). erfc(z) = t exp(-z^2 + c(t)), t = 1 / (1 + z / 2), with the degree-9 polynomial c of
// Numerical Recipes' erfcc (Press et al., section 6.2: relative error below 1.2e-7 for every
// z >= 0). z^2 = a^2 / 2 goes in two parts: a is cut into a 12-bit head, whose square is exact,
// and the rest, and exp_sum takes the exact head and the small rest (Note [cpu vector math]), so
// that the rounding of a^2 (4e-6 relative at a = 10) stays out of the tail. Against the f64
// formula on [-120, 120] the row is within 3.4 f32 ulp where the result is above 1e-35 (near
// x = -13, where the tail is subnormal but x times it is not, up to about 6.4 ulp), the gradient
// within 2e-7. The functor's
// 0.5 x (1 + erf(x / sqrt 2)) cancels for negative x (about 4e5 ulp off at x = -5, and -0 below
// about -5.9 where the row gives the tail's value) and calls erff an element at a time, a
// fifth of the row's speed. a is clamped to 20, where Q is 0 in f32: gelu(inf) = inf,
// gelu(-inf) = NaN (-inf times 0, as the functor and PyTorch), NaN stays NaN.
namespace {

// Q(a) (above) and exp(-a^2 / 2) for a = |x| clamped to [0, 20]; *pdf_exp only when asked.
inline float gauss_tail(float x, float* pdf_exp) {
  const float abs_x = x < 0.0f ? -x : x;
  const float a = abs_x < 20.0f ? abs_x : 20.0f;  // NaN: 20, and x carries the NaN
  const float head = std::bit_cast<float>(std::bit_cast<uint32_t>(a) & 0xFFFFF000u);
  const float rest = a - head;
  const float h = 0.5f * (head * head), l = 0.5f * rest * (head + head + rest);  // a^2/2 = h + l
  const float t = 1.0f / (1.0f + 0.5f * (a * 0.707106781186547524f));
  float c = 0.17087277f;
  c = c * t + -0.82215223f;
  c = c * t + 1.48851587f;
  c = c * t + -1.13520398f;
  c = c * t + 0.27886807f;
  c = c * t + -0.18628806f;
  c = c * t + 0.09678418f;
  c = c * t + 0.37409196f;
  c = c * t + 1.00002368f;
  c = c * t + -1.26551223f;
  if (pdf_exp != nullptr) *pdf_exp = exp_sum(-h, -l);
  return 0.5f * t * exp_sum(-h, c - l);
}

}  // namespace

inline float gelu(float x) {
  const float q = gauss_tail(x, nullptr);
  return x * (x < 0.0f ? q : 1.0f - q);
}

namespace {

// Note [row blocks]
// A row runs in blocks of kRowBlock elements: each whole block read in place into a loop of
// kRowBlock results in a local array, then stored (so a row may run in place), the last partial
// block copied into local arrays padded with zeros first. No loop over a whole row: its versions
// for overlapping pointers and its scalar tail could round apart from the vector body, and where
// a row ends depends on how the elementwise loop was cut over the threads, so the bits would then
// depend on the thread count (tests/test_parallel.cpp). The partial block's loop is the same
// function of each element as the whole blocks' (the compiler contracts the same multiply-adds
// whether it vectorizes a loop or not): tests/test_cpu_vec_math.cpp holds them to the same bits.
// That holds for GCC. Clang vectorizes a partial block's loop so that it rounds apart from the
// whole blocks' (the sanitizer builds' tests of the row bits found it): its builds (the
// sanitizers') copy every block (kWholeBlocksInPlace). Copying every block into local arrays, as
// the rows once did, cost most of their time: a copy of m elements compiles to pieces of 8 and 4
// bytes, and the block's vector load then waits for their stores (exp's row at a quarter of its
// speed).
constexpr int64_t kRowBlock = 16;
#if defined(__clang__)
constexpr bool kWholeBlocksInPlace = false;
#else
constexpr bool kWholeBlocksInPlace = true;
#endif

// name_row: y[i] = vec::name(a[i]), block by block (Note [row blocks]).
#define SINTER_VECTOR_ROW(name)                                                \
  SINTER_VECTOR_CLONES void name##_row(const float* a, float* y, int64_t n) {  \
    const int64_t whole = kWholeBlocksInPlace ? n / kRowBlock * kRowBlock : 0; \
    for (int64_t b = 0; b < whole; b += kRowBlock) {                           \
      float py[kRowBlock];                                                     \
      for (int64_t i = 0; i < kRowBlock; ++i) py[i] = vec::name(a[b + i]);     \
      for (int64_t i = 0; i < kRowBlock; ++i) y[b + i] = py[i];                \
    }                                                                          \
    for (int64_t b = whole; b < n; b += kRowBlock) {                           \
      const int64_t m = std::min(kRowBlock, n - b);                            \
      float pa[kRowBlock] = {}, py[kRowBlock];                                 \
      for (int64_t i = 0; i < m; ++i) pa[i] = a[b + i];                        \
      for (int64_t i = 0; i < kRowBlock; ++i) py[i] = vec::name(pa[i]);        \
      for (int64_t i = 0; i < m; ++i) y[b + i] = py[i];                        \
    }                                                                          \
  }
SINTER_VECTOR_ROW(exp)
SINTER_VECTOR_ROW(tanh)
SINTER_VECTOR_ROW(sigmoid)
SINTER_VECTOR_ROW(silu)
SINTER_VECTOR_ROW(gelu_tanh)
SINTER_VECTOR_ROW(gelu)
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
inline float gelu_tanh_backward(float g, float v) {
  const float k = static_cast<float>(kern::fn::kSqrt2OverPi),
              c = static_cast<float>(kern::fn::kGeluCubic);
  const float v2 = v * v;
  const float t = vec::tanh(k * (v + c * v2 * v));
  const float dinner = k * (1.0F + 3.0F * c * v2);
  return g * (0.5F * (1.0F + t) + 0.5F * v * (1.0F - t * t) * dinner);
}

// y = g gelu'(x) = g (Phi(x) + x phi(x)) (Note [exact gelu row]).
inline float gelu_backward(float g, float v) {
  float e;
  const float q = gauss_tail(v, &e);
  return g * ((v < 0.0f ? q : 1.0f - q) + v * (0.398942280401432678f * e));
}

// name_row: y[i] = name(g[i], x[i]), in blocks as the unary rows (Note [row blocks]).
#define SINTER_VECTOR_BINARY_ROW(name)                                                        \
  SINTER_VECTOR_CLONES void name##_row(const float* g, const float* x, float* y, int64_t n) { \
    const int64_t whole = kWholeBlocksInPlace ? n / kRowBlock * kRowBlock : 0;                \
    for (int64_t b = 0; b < whole; b += kRowBlock) {                                          \
      float py[kRowBlock];                                                                    \
      for (int64_t i = 0; i < kRowBlock; ++i) py[i] = name(g[b + i], x[b + i]);               \
      for (int64_t i = 0; i < kRowBlock; ++i) y[b + i] = py[i];                               \
    }                                                                                         \
    for (int64_t b = whole; b < n; b += kRowBlock) {                                          \
      const int64_t m = std::min(kRowBlock, n - b);                                           \
      float pg[kRowBlock] = {}, px[kRowBlock] = {}, py[kRowBlock];                            \
      for (int64_t i = 0; i < m; ++i) {                                                       \
        pg[i] = g[b + i];                                                                     \
        px[i] = x[b + i];                                                                     \
      }                                                                                       \
      for (int64_t i = 0; i < kRowBlock; ++i) py[i] = name(pg[i], px[i]);                     \
      for (int64_t i = 0; i < m; ++i) y[b + i] = py[i];                                       \
    }                                                                                         \
  }
SINTER_VECTOR_BINARY_ROW(gelu_tanh_backward)
SINTER_VECTOR_BINARY_ROW(gelu_backward)
#undef SINTER_VECTOR_BINARY_ROW

}  // namespace

SINTER_VECTOR_CLONES void add_into_row(const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += b[i];
}

BinaryRowFn binary_row(kern::BinaryOp op) {
  switch (op) {
    case kern::BinaryOp::GeluTanhBackward:
      return gelu_tanh_backward_row;
    case kern::BinaryOp::GeluBackward:
      return gelu_backward_row;
    default:
      return nullptr;
  }
}

}  // namespace sinter::cpu::vec
