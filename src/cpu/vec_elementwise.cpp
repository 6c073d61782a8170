// The CPU's f32 elementwise rows, one per name in the Vec column of SINTER_UNARY_OPS
// (Note [elementwise op list]), each compiled for AVX-512, AVX2 and the baseline
// (src/cpu/vec_clones.h), and the table from UnaryOp to its row, generated from that column.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <iterator>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu/vec_clones.h"
#include "cpu/vec_exp.h"
#include "cpu/vec_gelu_tables.h"
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
// within 2.1e-7. The functor's
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

RowFn gelu_formula_row() { return gelu_row; }

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

BinaryRowFn gelu_backward_formula_row() { return gelu_backward_row; }

#if defined(__x86_64__)

// Note [gelu tables]
// Where the CPU has AVX-512F, the exact gelu's rows evaluate tables instead of Note [exact gelu
// row]'s formula, whose tail, exp and division take about 70 vector instructions for 16 elements
// (1.60 ms for 1.57M floats of standard deviation 1 on one core of the Intel machine of
// benchmarks/README.md; PyTorch's gelu 0.57, a copy 0.47). A table cuts [lo, lo + 32 w) into 32
// intervals of width w, each with a polynomial in s = v - c (v the table's variable, c the
// interval's centre): a lane's interval i is floor((v - lo) / w), each coefficient comes from its
// 32-entry table by one two-register permute (vpermt2ps) of i, and the polynomial is Horner's
// multiply-adds. c = i w + (lo + w / 2) is exact in f32 (a multiple of 1/32 under 10), and
// so is s but within w / 4 of 0, where its rounding moves the result by under 0.1 ulp.
// The first tables hold Phi(-b) and gelu'(-b) = Phi(-b) - b phi(b) at b = |x| in [0, 6), degree 6:
// Phi(x) and gelu'(x) are p for negative x and 1 - p for positive x (Phi(x) = 1 - Phi(-x),
// gelu'(x) = 1 - gelu'(-x)), and from 6 on gelu(x) is x (+inf included: it rounds to x from about
// 5.4) and the gradient g (gelu' rounds to 1; not at +inf, where the formula's x phi(x) is NaN).
// About 30 instructions for 16 elements: 0.64 ms, and forward and backward together 1.85 ms
// against the formula's 4.2 and PyTorch's 2.33. A block with a lane left (-6 and below, -inf, NaN,
// the gradient's +inf) goes on to the tails, Phi(x) and gelu'(x) on [-10, -6] at degree 7, then to
// the formula for what is left of it (below -10, the infinities, NaN), all 16 lanes at once, each
// lane taking the first result that covers it. Every lane's result is a function of its own value,
// whatever its neighbours, so the bits do not depend on where the threads cut a row
// (tests/test_cpu_gelu_rows.cpp). The tails cost where the inputs are wide: at a standard
// deviation of 2, 3 and 5 the row takes 0.67, 1.16 and 2.9 ms against the formula row's 1.6, 1.6
// and 2.8 (at 5, one lane in 44 lies below -10, and results below about -13 are subnormal, slow in
// both). scripts/gelu_tables.py writes the tables (src/cpu/vec_gelu_tables.h). Over every f32
// from -10 to 6.5, against the f64 formulas, gelu is within 2.6 f32 ulp from -6 on and 3.3 ulp
// below (at -9.9975), its derivative within 7.4e-8 and, from -10 to -1.5, within 2.3 ulp of its
// value. The rows on other CPUs keep the formula; the two agree within their bounds, not to the
// bit.
namespace {

namespace gt = gelu_tables;

// A lane's interval i (from 0 to 31 where x lies in [lo, lo + 32 w), or in [lo, lo + 32 w] when
// `closed`) and s = x - its centre; `inside` has the lanes whose i is one of the 32 (not a NaN's
// or an infinity's). (|x| = 6 falls outside the first tables: 6 / 0.1875 rounds to 32.)
struct Located {
  __m512i i;
  __m512 s;
  __mmask16 inside;
};

[[gnu::target("avx512f"), gnu::always_inline]] inline Located locate(__m512 x, float lo, float w,
                                                                     bool closed = false) {
  const __m512 u = _mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / w), _mm512_set1_ps(-lo / w));
  // The zero-masked forms with every lane: the plain ones start from GCC's "undefined" vectors,
  // which its -Wmaybe-uninitialized reports.
  const __mmask16 all = 0xFFFF;
  __m512i i = _mm512_maskz_cvt_roundps_epi32(all, u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  if (closed) {  // the right end, lo + 32 w, in the last interval
    const __m512i last = _mm512_set1_epi32(31);
    i = _mm512_mask_mov_epi32(i, _mm512_cmpeq_epi32_mask(i, _mm512_set1_epi32(32)), last);
  }
  const __m512 c = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(all, i), _mm512_set1_ps(w),
                                   _mm512_set1_ps(lo + 0.5f * w));
  return {i, _mm512_sub_ps(x, c), _mm512_cmplt_epu32_mask(i, _mm512_set1_epi32(32))};
}

// Coefficient j of each lane's interval.
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 coef(const float (*t)[32], int j,
                                                                  __m512i i) {
  return _mm512_permutex2var_ps(_mm512_load_ps(t[j]), i, _mm512_load_ps(t[j] + 16));
}

// The polynomial (of degree N - 1) of each lane's interval at s, by Horner's rule.
template <int N>
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 table_poly(const float (&t)[N][32],
                                                                        const Located& at) {
  __m512 p = coef(t, N - 1, at.i);
  for (int j = N - 2; j >= 0; --j) p = _mm512_fmadd_ps(p, at.s, coef(t, j, at.i));
  return p;
}

// The lanes of the first n of a block of 16 (n >= 1).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// Note [exact gelu row]'s formula on a block's 16 lanes, as the blend below takes them.
[[gnu::target("avx512f"), gnu::noinline]] void gelu_formula_block(const float* x, float* y) {
  for (int i = 0; i < 16; ++i) y[i] = gelu(x[i]);
}

[[gnu::target("avx512f"), gnu::noinline]] void gelu_backward_formula_block(const float* g,
                                                                           const float* x,
                                                                           float* y) {
  for (int i = 0; i < 16; ++i) y[i] = gelu_backward(g[i], x[i]);
}

// Phi(x) (kPhi) or gelu'(x) (kGeluGrad) from the table's value p at b = |x| (Phi(-b), gelu'(-b)):
// p for negative x, else 1 - p (Phi(x) = 1 - Phi(-x), gelu'(x) = 1 - gelu'(-x)); *inside: the
// lanes with |x| < 6.
template <int N>
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 mirrored(const float (&t)[N][32],
                                                                      float w, __m512 x,
                                                                      __mmask16* inside) {
  const Located at = locate(_mm512_abs_ps(x), 0.0f, w);
  const __m512 p = table_poly(t, at);
  *inside = at.inside;
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ),
                              _mm512_sub_ps(_mm512_set1_ps(1.0f), p), p);
}

// The formula's results in the lanes outside `done` (Note [exact gelu row]), v's elsewhere.
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 gelu_rest(__m512 x, __m512 v,
                                                                       __mmask16 done) {
  alignas(64) float px[16], py[16];
  _mm512_store_ps(px, x);
  gelu_formula_block(px, py);
  return _mm512_mask_blend_ps(done, _mm512_load_ps(py), v);
}

[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 gelu_backward_rest(__m512 g, __m512 x,
                                                                                __m512 v,
                                                                                __mmask16 done) {
  alignas(64) float pg[16], px[16], py[16];
  _mm512_store_ps(pg, g);
  _mm512_store_ps(px, x);
  gelu_backward_formula_block(pg, px, py);
  return _mm512_mask_blend_ps(done, _mm512_load_ps(py), v);
}

// gelu: x Phi(x) for |x| < 6, x itself from 6 on (+inf included: gelu(x) rounds to x in f32
// from about 5.4), then kPhiTail's x Phi(x) from -10 to -6, the formula below (and for -inf, NaN).
[[gnu::target("avx512f")]] void gelu_table_row(const float* a, float* y, int64_t n) {
  for (int64_t b = 0; b < n; b += 16) {
    const __mmask16 lanes = first_lanes(n - b);
    const __m512 x = _mm512_maskz_loadu_ps(lanes, a + b);
    __mmask16 done;
    __m512 v = _mm512_mul_ps(x, mirrored(gt::kPhi, gt::kPhiWidth, x, &done));
    const __mmask16 large = _mm512_cmp_ps_mask(x, _mm512_set1_ps(6.0f), _CMP_GE_OQ);
    v = _mm512_mask_blend_ps(large, v, x);
    done |= large;
    if (done != 0xFFFF) {
      const Located at = locate(x, gt::kPhiTailLo, gt::kPhiTailWidth, true);
      // The closed tail's last interval also reaches up to -5.875: those lanes stay the first's.
      const auto tail = static_cast<__mmask16>(at.inside & ~done);
      v = _mm512_mask_blend_ps(tail, v, _mm512_mul_ps(x, table_poly(gt::kPhiTail, at)));
      done |= tail;
      if (done != 0xFFFF) v = gelu_rest(x, v, done);
    }
    _mm512_mask_storeu_ps(y + b, lanes, v);
  }
}

// gelu's gradient g gelu'(x): by kGeluGrad for |x| < 6, g itself from 6 on (gelu'(x) rounds to 1
// there; +inf excepted, where the formula's x phi(x) is NaN), then kGeluGradTail's from -10 to -6,
// the formula below (and for the infinities, NaN).
[[gnu::target("avx512f")]] void gelu_backward_table_row(const float* g, const float* x, float* y,
                                                        int64_t n) {
  for (int64_t b = 0; b < n; b += 16) {
    const __mmask16 lanes = first_lanes(n - b);
    const __m512 gv = _mm512_maskz_loadu_ps(lanes, g + b), xv = _mm512_maskz_loadu_ps(lanes, x + b);
    __mmask16 done;
    __m512 v = _mm512_mul_ps(gv, mirrored(gt::kGeluGrad, gt::kGeluGradWidth, xv, &done));
    const __mmask16 large =
        _mm512_cmp_ps_mask(xv, _mm512_set1_ps(6.0f), _CMP_GE_OQ) &
        _mm512_cmp_ps_mask(xv, _mm512_set1_ps(std::numeric_limits<float>::infinity()), _CMP_LT_OQ);
    v = _mm512_mask_blend_ps(large, v, gv);
    done |= large;
    if (done != 0xFFFF) {
      const Located at = locate(xv, gt::kGeluGradTailLo, gt::kGeluGradTailWidth, true);
      const auto tail = static_cast<__mmask16>(at.inside & ~done);
      v = _mm512_mask_blend_ps(tail, v, _mm512_mul_ps(gv, table_poly(gt::kGeluGradTail, at)));
      done |= tail;
      if (done != 0xFFFF) v = gelu_backward_rest(gv, xv, v, done);
    }
    _mm512_mask_storeu_ps(y + b, lanes, v);
  }
}

bool has_gelu_tables() { return cpu_has_avx512f(); }

}  // namespace

#else
namespace {
constexpr bool has_gelu_tables() { return false; }
constexpr RowFn gelu_table_row = nullptr;
constexpr BinaryRowFn gelu_backward_table_row = nullptr;
}  // namespace
#endif

RowFn unary_row(kern::UnaryOp op) {
  if (op == kern::UnaryOp::Gelu && has_gelu_tables()) return gelu_table_row;
  return kUnaryRows[static_cast<int>(op)];
}

BinaryRowFn binary_row(kern::BinaryOp op) {
  switch (op) {
    case kern::BinaryOp::GeluTanhBackward:
      return gelu_tanh_backward_row;
    case kern::BinaryOp::GeluBackward:
      return has_gelu_tables() ? gelu_backward_table_row : gelu_backward_row;
    default:
      return nullptr;
  }
}

}  // namespace sinter::cpu::vec
