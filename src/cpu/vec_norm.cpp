// The rows of batch norm and layer norm (src/cpu/vec_rows.h), each compiled for AVX-512, AVX2 and
// the baseline (src/cpu/vec_clones.h); batch norm's bf16 normalization and input gradient also in
// AVX512-BF16 where the CPU has it (src/cpu/vec_bf16.h). The f32 rows promise the bits of the
// double formulas of the generic code in src/cpu/norm.cpp, summed by lane_sum (Note [lane sums]),
// on every CPU: this file is compiled without contraction into fused multiply-adds
// (CMakeLists.txt), which the baseline does not have and which would round differently in the
// AVX2 and AVX-512 clones.
#include <cstdint>

#include "cpu/cpu_util.h"
#include "cpu/vec_bf16.h"
#include "cpu/vec_clones.h"
#include "cpu/vec_rows.h"

namespace sinter::cpu::vec {
namespace {

// Eight floats widened to doubles in one load, for the two sums of grad_sums_planes: written with
// vector types, since the compiler loaded the floats of lane_sum's array form one at a time where
// two rows were summed in one loop (a single row's lane_sum it keeps in vector registers, and runs
// faster than this form). No function takes or returns these vectors by value: the baseline clone
// has no 512-bit registers to pass them in (Clang refuses such a call, GCC warns).
using Floats = float __attribute__((vector_size(32)));
using Doubles = double __attribute__((vector_size(64)));

// The lanes of one lane_sum (Note [lane sums]): kSumLanes doubles as vectors of eight, held in a
// plain array (Clang left the constructor of a struct of them undefined in the clones).
constexpr int kLaneVectors = kSumLanes / 8;
static_assert(kLaneVectors * 8 == kSumLanes, "lane_sum's lanes fill whole vectors of eight");
using Lanes = Doubles[kLaneVectors];

[[gnu::always_inline]] inline void widen8(const float* p, Doubles& out) {
  Floats v;
  __builtin_memcpy(&v, p, sizeof v);
  out = __builtin_convertvector(v, Doubles);
}

// The lanes added in lane_sum's order, then the tail.
[[gnu::always_inline]] inline double lanes_total(const Lanes& acc, double tail) {
  double s = 0;
  for (int h = 0; h < kLaneVectors; ++h) {
    for (int l = 0; l < 8; ++l) s += acc[h][l];
  }
  return s + tail;
}

// Note [bf16 norm rows]
// The batch norm rows take bf16 planes too, widened in registers as they are read and rounded as
// BFloat16 rounds (to nearest even, NaN quieted) as they are written. The sums are the f32 rows'
// sums of the same values, in double. The elementwise passes (the normalization and the input
// gradient) run in f32, as (x - mean) a + b and g a + (x - mean) b + c with coefficients formed
// in double and the mean as two floats: twice the lanes of the double formulas, which held the
// bf16 steps back (a fifth of resnet20's bf16 step). Their f32 rounding, relative to the terms,
// sits far below bf16's step (a constant channel gives exactly its shift); a result within a hair
// of a bf16 rounding boundary may round to the other neighbour than the double formula's would.
// S is float, or uint16_t for bf16's bits.
using Shorts = uint16_t __attribute__((vector_size(16)));
using Uints = uint32_t __attribute__((vector_size(32)));

[[gnu::always_inline]] inline float load(const float* p, int64_t i) { return p[i]; }
[[gnu::always_inline]] inline float load(const uint16_t* p, int64_t i) {
  const uint32_t u = static_cast<uint32_t>(p[i]) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

[[gnu::always_inline]] inline void store(float v, float* p) { *p = v; }
[[gnu::always_inline]] inline void store(float v, uint16_t* p) {
  uint32_t u;
  __builtin_memcpy(&u, &v, 4);
  const auto rounded = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  *p = (u & 0x7fffffffu) > 0x7f800000u ? static_cast<uint16_t>((u >> 16) | 0x40u) : rounded;
}

[[gnu::always_inline]] inline void widen8(const uint16_t* p, Doubles& out) {
  Shorts v;
  __builtin_memcpy(&v, p, sizeof v);
  const Uints u = __builtin_convertvector(v, Uints) << 16;
  Floats f;
  __builtin_memcpy(&f, &u, sizeof f);
  out = __builtin_convertvector(f, Doubles);
}

template <class S>
[[gnu::always_inline]] inline double sum_body(const S* x, int64_t n) {
  return lane_sum(n, [&](int64_t i) { return static_cast<double>(load(x, i)); });
}

template <class S>
[[gnu::always_inline]] inline double sq_dev_body(const S* x, int64_t n, double mu) {
  return lane_sum(n, [&](int64_t i) {
    const double d = static_cast<double>(load(x, i)) - mu;
    return d * d;
  });
}

template <class S>
[[gnu::always_inline]] inline void grad_sums_body(const S* g, const S* x, int64_t n, double mu,
                                                  double* sum_g, double* sum_g_xc) {
  // Two lane_sums (Note [lane sums]) in one pass: each keeps its own lanes, tail and order.
  const Doubles m = {mu, mu, mu, mu, mu, mu, mu, mu};
  Lanes acc_g = {}, acc_gx = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int h = 0; h < kLaneVectors; ++h) {
      Doubles gv, xv;
      widen8(g + i + 8 * h, gv);
      widen8(x + i + 8 * h, xv);
      acc_g[h] += gv;
      acc_gx[h] += gv * (xv - m);
    }
  }
  double tail_g = 0, tail_gx = 0;
  for (; i < n; ++i) {
    const double gv = static_cast<double>(load(g, i));
    tail_g += gv;
    tail_gx += gv * (static_cast<double>(load(x, i)) - mu);
  }
  *sum_g = lanes_total(acc_g, tail_g);
  *sum_g_xc = lanes_total(acc_gx, tail_gx);
}

template <class S>
[[gnu::always_inline]] inline void affine_body(const S* x, int64_t n, double mu, double scale,
                                               double shift, S* y) {
  for (int64_t i = 0; i < n; ++i) {
    store(static_cast<float>((static_cast<double>(load(x, i)) - mu) * scale + shift), y + i);
  }
}

template <class S>
[[gnu::always_inline]] inline void grad_body(const S* g, const S* x, int64_t n,
                                             const BatchNormGrad& p, S* dx) {
  for (int64_t i = 0; i < n; ++i) {
    const double xhat = (static_cast<double>(load(x, i)) - p.mean) * p.rstd;
    store(static_cast<float>(p.scale *
                             (static_cast<double>(load(g, i)) - p.mean_dy - xhat * p.mean_dy_xhat)),
          dx + i);
  }
}

SINTER_VECTOR_CLONES double sum_row_clone(const float* x, int64_t n) { return sum_body(x, n); }

SINTER_VECTOR_CLONES double sq_dev_sum_row_clone(const float* x, int64_t n, double mu) {
  return sq_dev_body(x, n, mu);
}

// Batch norm's sums over a channel's planes (n values each, `stride` apart): each plane's sums as
// the rows above, added in plane order, in one call a channel: a call a plane (through the clones'
// resolver, each plane's lanes added up apart from the next plane's loop) cost as much as the
// planes' vector loops on the 8 x 8 planes of resnet20's last stage.
// The first pass over a channel's planes (the mean's sum; the gradient's sums) reads them from
// memory: planes of 256 B to 4 KiB in f32 on resnet20's shapes (half that in bf16), an image
// apart, each too short a stream for the hardware's prefetchers to pick up in time. These passes
// prefetch the plane about kPlanePrefetchBytes ahead of the one they sum (at least the next):
// batch norm's self time in resnet20's bf16 step went down by 7% forward and 13% backward
// (medians of 4 alternated profiles of 5 steps).
constexpr int64_t kPlanePrefetchBytes = 4096;

// How many planes of n values ahead the sums prefetch (0: none, for empty planes).
template <class S>
[[gnu::always_inline]] inline int64_t planes_ahead(int64_t n) {
  const int64_t bytes = n * static_cast<int64_t>(sizeof(S));
  if (bytes <= 0) return 0;
  return bytes >= kPlanePrefetchBytes ? 1 : (kPlanePrefetchBytes + bytes - 1) / bytes;
}

// Prefetches plane p + ahead where it exists, every cache line it touches.
template <class S>
[[gnu::always_inline]] inline void prefetch_plane(const S* x, int64_t p, int64_t ahead,
                                                  int64_t planes, int64_t n, int64_t stride) {
  if (ahead == 0 || p + ahead >= planes) return;
  const S* plane = x + (p + ahead) * stride;
  const auto first = reinterpret_cast<uintptr_t>(plane) & ~uintptr_t{63};
  const auto end = reinterpret_cast<uintptr_t>(plane + n);
  for (uintptr_t line = first; line < end; line += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
}

template <class S>
[[gnu::always_inline]] inline double sum_planes_body(const S* x, int64_t planes, int64_t n,
                                                     int64_t stride) {
  const int64_t ahead = planes_ahead<S>(n);
  double s = 0;
  for (int64_t p = 0; p < planes; ++p) {
    prefetch_plane(x, p, ahead, planes, n, stride);
    s += sum_body(x + p * stride, n);
  }
  return s;
}

template <class S>
[[gnu::always_inline]] inline double sq_dev_planes_body(const S* x, int64_t planes, int64_t n,
                                                        int64_t stride, double mu) {
  double q = 0;
  for (int64_t p = 0; p < planes; ++p) q += sq_dev_body(x + p * stride, n, mu);
  return q;
}

template <class S>
[[gnu::always_inline]] inline void grad_sums_planes_body(const S* g, const S* x, int64_t planes,
                                                         int64_t n, int64_t stride, double mu,
                                                         double* sum_g, double* sum_g_xc) {
  const int64_t ahead = planes_ahead<S>(n);
  double sg = 0, sgx = 0;
  for (int64_t p = 0; p < planes; ++p) {
    double a = 0, b = 0;
    prefetch_plane(g, p, ahead, planes, n, stride);
    prefetch_plane(x, p, ahead, planes, n, stride);
    grad_sums_body(g + p * stride, x + p * stride, n, mu, &a, &b);
    sg += a;
    sgx += b;
  }
  *sum_g = sg;
  *sum_g_xc = sgx;
}

SINTER_VECTOR_CLONES double sum_planes_clone(const float* x, int64_t planes, int64_t n,
                                             int64_t stride) {
  return sum_planes_body(x, planes, n, stride);
}
SINTER_VECTOR_CLONES double sum_planes_bf16(const uint16_t* x, int64_t planes, int64_t n,
                                            int64_t stride) {
  return sum_planes_body(x, planes, n, stride);
}

SINTER_VECTOR_CLONES double sq_dev_planes_clone(const float* x, int64_t planes, int64_t n,
                                                int64_t stride, double mu) {
  return sq_dev_planes_body(x, planes, n, stride, mu);
}
SINTER_VECTOR_CLONES double sq_dev_planes_bf16(const uint16_t* x, int64_t planes, int64_t n,
                                               int64_t stride, double mu) {
  return sq_dev_planes_body(x, planes, n, stride, mu);
}

SINTER_VECTOR_CLONES void grad_sums_planes_clone(const float* g, const float* x, int64_t planes,
                                                 int64_t n, int64_t stride, double mu,
                                                 double* sum_g, double* sum_g_xc) {
  grad_sums_planes_body(g, x, planes, n, stride, mu, sum_g, sum_g_xc);
}
SINTER_VECTOR_CLONES void grad_sums_planes_bf16(const uint16_t* g, const uint16_t* x,
                                                int64_t planes, int64_t n, int64_t stride,
                                                double mu, double* sum_g, double* sum_g_xc) {
  grad_sums_planes_body(g, x, planes, n, stride, mu, sum_g, sum_g_xc);
}

SINTER_VECTOR_CLONES void affine_row_clone(const float* x, int64_t n, double mu, double scale,
                                           double shift, float* y) {
  affine_body(x, n, mu, scale, shift, y);
}
// bf16 in and out: y = (x - mu) a + shift in f32, the mean as two floats (mu_hi + mu_lo = mu to
// about 2^-48 of it), subtracted one after the other, so that the difference keeps f32's relative
// precision even where x is close to a large mean (Note [bf16 norm rows]).
struct SplitMean {
  float hi, lo;
};

[[gnu::always_inline]] inline SplitMean split(double mu) {
  const auto hi = static_cast<float>(mu);
  return {hi, static_cast<float>(mu - static_cast<double>(hi))};
}

// The bf16 rows' f32 coefficients, formed once for the clones and the AVX512-BF16 rows alike:
// y = ((x - m.hi) - m.lo) a + b, and dx = g a + (((x - m.hi) - m.lo) b + c).
struct AffineCoefficients {
  SplitMean m;
  float a, b;
};

[[gnu::always_inline]] inline AffineCoefficients affine_coefficients(double mu, double scale,
                                                                     double shift) {
  return {split(mu), static_cast<float>(scale), static_cast<float>(shift)};
}

struct GradCoefficients {
  SplitMean m;
  float a, b, c;
};

[[gnu::always_inline]] inline GradCoefficients grad_coefficients(const BatchNormGrad& p) {
  return {split(p.mean), static_cast<float>(p.scale),
          static_cast<float>(-p.scale * p.rstd * p.mean_dy_xhat),
          static_cast<float>(-p.scale * p.mean_dy)};
}

SINTER_VECTOR_CLONES void affine_row_bf16(const uint16_t* x, int64_t n, double mu, double scale,
                                          double shift, uint16_t* y) {
  const AffineCoefficients k = affine_coefficients(mu, scale, shift);
  for (int64_t i = 0; i < n; ++i) store(((load(x, i) - k.m.hi) - k.m.lo) * k.a + k.b, y + i);
}

SINTER_VECTOR_CLONES void batch_norm_grad_row_clone(const float* g, const float* x, int64_t n,
                                                    const BatchNormGrad& p, float* dx) {
  grad_body(g, x, n, p, dx);
}
// bf16 in and out: dx = g a + (x - mean) b + c in f32, the mean split as affine_row_bf16's, the
// coefficients formed in double (Note [bf16 norm rows]).
SINTER_VECTOR_CLONES void batch_norm_grad_row_bf16(const uint16_t* g, const uint16_t* x, int64_t n,
                                                   const BatchNormGrad& p, uint16_t* dx) {
  const GradCoefficients k = grad_coefficients(p);
  for (int64_t i = 0; i < n; ++i) {
    store(load(g, i) * k.a + (((load(x, i) - k.m.hi) - k.m.lo) * k.b + k.c), dx + i);
  }
}

#ifdef SINTER_BF16_INSTRUCTION
// The two bf16 rows above, 16 lanes at a time on a CPU with AVX512-BF16: the same f32 operations
// in the same order (this file does not contract them), rounded by the instruction (Note [bf16
// rounding instruction] in src/cpu/vec_bf16.h), so the same bits (but for which NaN's payload
// comes out where both terms of the gradient's sum are NaN: the order of an add's operands is the
// compiler's). Their integer rounding was most of the rows' instructions. The last n % 16 go to
// the rows above.
SINTER_BF16_TARGET void affine_row_avx512bf16(const uint16_t* x, int64_t n, double mu, double scale,
                                              double shift, uint16_t* y) {
  const AffineCoefficients k = affine_coefficients(mu, scale, shift);
  const __m512 hi = _mm512_set1_ps(k.m.hi), lo = _mm512_set1_ps(k.m.lo), a = _mm512_set1_ps(k.a),
               b = _mm512_set1_ps(k.b);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 xc = _mm512_sub_ps(_mm512_sub_ps(widen16(x + i), hi), lo);
    const __m512 v = _mm512_add_ps(_mm512_mul_ps(xc, a), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), round16(v));
  }
  affine_row_bf16(x + i, n - i, mu, scale, shift, y + i);
}

SINTER_BF16_TARGET void batch_norm_grad_row_avx512bf16(const uint16_t* g, const uint16_t* x,
                                                       int64_t n, const BatchNormGrad& p,
                                                       uint16_t* dx) {
  const GradCoefficients k = grad_coefficients(p);
  const __m512 hi = _mm512_set1_ps(k.m.hi), lo = _mm512_set1_ps(k.m.lo), a = _mm512_set1_ps(k.a),
               b = _mm512_set1_ps(k.b), c = _mm512_set1_ps(k.c);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 xc = _mm512_sub_ps(_mm512_sub_ps(widen16(x + i), hi), lo);
    const __m512 v =
        _mm512_add_ps(_mm512_mul_ps(widen16(g + i), a), _mm512_add_ps(_mm512_mul_ps(xc, b), c));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dx + i), round16(v));
  }
  batch_norm_grad_row_bf16(g + i, x + i, n - i, p, dx + i);
}
#endif

// y = ((x - mu) rs) w + b in double, w and b each present or not (has_w, has_b): 1 and 0 stand in
// for them, as in the generic code, so that -0 still comes out +0 without a bias.
template <bool has_w, bool has_b>
[[gnu::always_inline]] inline void layer_norm_apply(const float* x, int64_t n, const float* w,
                                                    const float* b, double mu, double rs,
                                                    float* y) {
  // In chunks, each after the prefetch of as much of the next row (Note [row prefetch]).
  for (int64_t c = 0; c < n; c += kPrefetchChunk) {
    const int64_t end = c + kPrefetchChunk < n ? c + kPrefetchChunk : n;
    prefetch_floats(x + n + c, end - c);
    for (int64_t i = c; i < end; ++i) {
      const double v = (static_cast<double>(x[i]) - mu) * rs;
      y[i] = static_cast<float>(v * (has_w ? static_cast<double>(w[i]) : 1.0) +
                                (has_b ? static_cast<double>(b[i]) : 0.0));
    }
  }
}

SINTER_VECTOR_CLONES void layer_norm_row_clone(const float* x, int64_t n, bool rms, const float* w,
                                               const float* b, double eps, float* y, double* mean,
                                               double* rstd) {
  const double mu = rms ? 0.0 : sum_row_clone(x, n) / static_cast<double>(n);
  const double q = sq_dev_sum_row_clone(x, n, mu);
  const double rs = 1.0 / __builtin_sqrt(q / static_cast<double>(n) + eps);
  *mean = mu;
  *rstd = rs;
  if (w && b) {
    layer_norm_apply<true, true>(x, n, w, b, mu, rs, y);
  } else if (w) {
    layer_norm_apply<true, false>(x, n, w, b, mu, rs, y);
  } else if (b) {
    layer_norm_apply<false, true>(x, n, w, b, mu, rs, y);
  } else {
    layer_norm_apply<false, false>(x, n, w, b, mu, rs, y);
  }
}

// Eight doubles at p, and back (the column sums of layer norm's gradient).
[[gnu::always_inline]] inline void load8(const double* p, Doubles& out) {
  __builtin_memcpy(&out, p, sizeof out);
}
[[gnu::always_inline]] inline void store8(const Doubles& v, double* p) {
  __builtin_memcpy(p, &v, sizeof v);
}

// One row of layer norm's gradient (vec_rows.h): g = dy w (w = 1 when has_w is false), the two
// sums by lane_sum's lanes and order, the column sums and dx in the generic code's double formulas.
// The sums and the column sums in one pass over the row (as four passes, layer norm's backward
// took an eighth longer on rows of 64 and of 384), each accumulator adding its terms in lane_sum's
// order (Note [lane sums]).
template <bool has_w>
[[gnu::always_inline]] inline void layer_norm_grad_apply(const float* dy, const float* x, int64_t n,
                                                         bool rms, double mu, double rs,
                                                         const float* w, double* cdw, double* cdb,
                                                         float* dx) {
  auto wt = [&](int64_t j) { return has_w ? static_cast<double>(w[j]) : 1.0; };
  const Doubles m = {mu, mu, mu, mu, mu, mu, mu, mu}, r = {rs, rs, rs, rs, rs, rs, rs, rs};
  Lanes acc_g = {}, acc_gx = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int h = 0; h < kLaneVectors; ++h) {
      const int64_t j = i + 8 * h;
      Doubles d, xv;
      widen8(dy + j, d);
      widen8(x + j, xv);
      const Doubles xhat = (xv - m) * r;
      Doubles g = d;
      if constexpr (has_w) {
        Doubles wv;
        widen8(w + j, wv);
        g = d * wv;
      }
      acc_g[h] += g;
      acc_gx[h] += g * xhat;
      if (cdw != nullptr) {
        Doubles c;
        load8(cdw + j, c);
        c += d * xhat;
        store8(c, cdw + j);
      }
      if (cdb != nullptr) {
        Doubles c;
        load8(cdb + j, c);
        c += d;
        store8(c, cdb + j);
      }
    }
  }
  double tail_g = 0, tail_gx = 0;
  for (; i < n; ++i) {
    const double d = static_cast<double>(dy[i]);
    const double xhat = (static_cast<double>(x[i]) - mu) * rs;
    const double g = d * wt(i);
    tail_g += g;
    tail_gx += g * xhat;
    if (cdw != nullptr) cdw[i] += d * xhat;
    if (cdb != nullptr) cdb[i] += d;
  }
  const double sum_g = lanes_total(acc_g, tail_g), sum_g_xhat = lanes_total(acc_gx, tail_gx);
  if (dx == nullptr) return;
  const double mean_g = rms ? 0.0 : sum_g / static_cast<double>(n);
  const double mean_g_xhat = sum_g_xhat / static_cast<double>(n);
  for (int64_t j = 0; j < n; ++j) {
    const double xhat = (static_cast<double>(x[j]) - mu) * rs;
    const double g = static_cast<double>(dy[j]) * wt(j);
    dx[j] = static_cast<float>(rs * (g - mean_g - xhat * mean_g_xhat));
  }
}

SINTER_VECTOR_CLONES void layer_norm_grad_row_clone(const float* dy, const float* x, int64_t n,
                                                    bool rms, double mu, double rs, const float* w,
                                                    double* cdw, double* cdb, float* dx) {
  if (w != nullptr) {
    layer_norm_grad_apply<true>(dy, x, n, rms, mu, rs, w, cdw, cdb, dx);
  } else {
    layer_norm_grad_apply<false>(dy, x, n, rms, mu, rs, w, cdw, cdb, dx);
  }
}

}  // namespace

double sum_planes(const float* x, int64_t planes, int64_t n, int64_t stride) {
  return sum_planes_clone(x, planes, n, stride);
}

double sq_dev_sum_planes(const float* x, int64_t planes, int64_t n, int64_t stride, double mu) {
  return sq_dev_planes_clone(x, planes, n, stride, mu);
}

void grad_sums_planes(const float* g, const float* x, int64_t planes, int64_t n, int64_t stride,
                      double mu, double* sum_g, double* sum_g_xc) {
  grad_sums_planes_clone(g, x, planes, n, stride, mu, sum_g, sum_g_xc);
}

void affine_row(const float* x, int64_t n, double mu, double scale, double shift, float* y) {
  affine_row_clone(x, n, mu, scale, shift, y);
}

void batch_norm_grad_row(const float* g, const float* x, int64_t n, const BatchNormGrad& p,
                         float* dx) {
  batch_norm_grad_row_clone(g, x, n, p, dx);
}

// bf16 planes (Note [bf16 norm rows]).
namespace {
const uint16_t* bits(const BFloat16* p) { return reinterpret_cast<const uint16_t*>(p); }
uint16_t* bits(BFloat16* p) { return reinterpret_cast<uint16_t*>(p); }
}  // namespace

double sum_planes(const BFloat16* x, int64_t planes, int64_t n, int64_t stride) {
  return sum_planes_bf16(bits(x), planes, n, stride);
}

double sq_dev_sum_planes(const BFloat16* x, int64_t planes, int64_t n, int64_t stride, double mu) {
  return sq_dev_planes_bf16(bits(x), planes, n, stride, mu);
}

void grad_sums_planes(const BFloat16* g, const BFloat16* x, int64_t planes, int64_t n,
                      int64_t stride, double mu, double* sum_g, double* sum_g_xc) {
  grad_sums_planes_bf16(bits(g), bits(x), planes, n, stride, mu, sum_g, sum_g_xc);
}

void affine_row(const BFloat16* x, int64_t n, double mu, double scale, double shift, BFloat16* y) {
#ifdef SINTER_BF16_INSTRUCTION
  if (has_avx512bf16()) return affine_row_avx512bf16(bits(x), n, mu, scale, shift, bits(y));
#endif
  affine_row_bf16(bits(x), n, mu, scale, shift, bits(y));
}

void batch_norm_grad_row(const BFloat16* g, const BFloat16* x, int64_t n, const BatchNormGrad& p,
                         BFloat16* dx) {
#ifdef SINTER_BF16_INSTRUCTION
  if (has_avx512bf16()) return batch_norm_grad_row_avx512bf16(bits(g), bits(x), n, p, bits(dx));
#endif
  batch_norm_grad_row_bf16(bits(g), bits(x), n, p, bits(dx));
}

void layer_norm_row(const float* x, int64_t n, bool rms, const float* w, const float* b, double eps,
                    float* y, double* mean, double* rstd) {
  layer_norm_row_clone(x, n, rms, w, b, eps, y, mean, rstd);
}

void layer_norm_grad_row(const float* dy, const float* x, int64_t n, bool rms, double mu, double rs,
                         const float* w, double* cdw, double* cdb, float* dx) {
  layer_norm_grad_row_clone(dy, x, n, rms, mu, rs, w, cdw, cdb, dx);
}

}  // namespace sinter::cpu::vec
