// The f32 rows of batch norm and layer norm (Note [cpu vector math]), each compiled for AVX-512,
// AVX2 and the baseline (src/cpu/vec_clones.h). They promise the bits of the double formulas of
// the generic code in src/cpu/norm.cpp, summed by lane_sum (Note [lane sums]), on every CPU: this
// file is compiled without contraction into fused multiply-adds (CMakeLists.txt), which the
// baseline does not have and which would round differently in the AVX2 and AVX-512 clones.
#include <cstdint>

#include "cpu/cpu_util.h"
#include "cpu/vec_clones.h"
#include "cpu/vec_math.h"

namespace sinter::cpu::vec {
namespace {

// Eight floats widened to doubles in one load: one step of lane_sum's eight lanes (Note [lane
// sums]) in vector registers. Written with vector types, since the compiler loaded the floats of
// lane_sum's array form one at a time where two rows were summed in one loop. No function takes or
// returns these vectors by value: the baseline clone has no 512-bit registers to pass them in
// (Clang refuses such a call, GCC warns).
using Floats = float __attribute__((vector_size(32)));
using Doubles = double __attribute__((vector_size(64)));
static_assert(kSumLanes == 8, "Doubles holds one set of lane_sum's lanes");

[[gnu::always_inline]] inline void widen8(const float* p, Doubles& out) {
  Floats v;
  __builtin_memcpy(&v, p, sizeof v);
  out = __builtin_convertvector(v, Doubles);
}

// lane_sum of the f32 row terms: add_block(i, acc) adds terms i..i+7 into the lanes acc, one(i)
// gives term i alone; the lanes, the tail and the order are lane_sum's.
template <class AddBlock, class One>
[[gnu::always_inline]] inline double lane_sum8(int64_t n, AddBlock add_block, One one) {
  Doubles acc{};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) add_block(i, acc);
  double tail = 0;
  for (; i < n; ++i) tail += one(i);
  double s = 0;
  for (int l = 0; l < kSumLanes; ++l) s += acc[l];
  return s + tail;
}

SINTER_VECTOR_CLONES double sum_row_clone(const float* x, int64_t n) {
  return lane_sum8(
      n,
      [&](int64_t i, Doubles& acc) {
        Doubles v;
        widen8(x + i, v);
        acc += v;
      },
      [&](int64_t i) { return static_cast<double>(x[i]); });
}

SINTER_VECTOR_CLONES double sq_dev_sum_row_clone(const float* x, int64_t n, double mu) {
  const Doubles m = {mu, mu, mu, mu, mu, mu, mu, mu};
  return lane_sum8(
      n,
      [&](int64_t i, Doubles& acc) {
        Doubles d;
        widen8(x + i, d);
        d -= m;
        acc += d * d;
      },
      [&](int64_t i) {
        const double d = static_cast<double>(x[i]) - mu;
        return d * d;
      });
}

SINTER_VECTOR_CLONES void grad_sums_row_clone(const float* g, const float* x, int64_t n, double mu,
                                              double* sum_g, double* sum_g_xc) {
  // Two lane_sums (Note [lane sums]) in one pass: each keeps its own lanes, tail and order.
  const Doubles m = {mu, mu, mu, mu, mu, mu, mu, mu};
  Doubles acc_g{}, acc_gx{};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    Doubles gv, xv;
    widen8(g + i, gv);
    widen8(x + i, xv);
    acc_g += gv;
    acc_gx += gv * (xv - m);
  }
  double tail_g = 0, tail_gx = 0;
  for (; i < n; ++i) {
    const double gv = static_cast<double>(g[i]);
    tail_g += gv;
    tail_gx += gv * (static_cast<double>(x[i]) - mu);
  }
  double s_g = 0, s_gx = 0;
  for (int l = 0; l < kSumLanes; ++l) {
    s_g += acc_g[l];
    s_gx += acc_gx[l];
  }
  *sum_g = s_g + tail_g;
  *sum_g_xc = s_gx + tail_gx;
}

SINTER_VECTOR_CLONES void affine_row_clone(const float* x, int64_t n, double mu, double scale,
                                           double shift, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>((static_cast<double>(x[i]) - mu) * scale + shift);
  }
}

SINTER_VECTOR_CLONES void batch_norm_grad_row_clone(const float* g, const float* x, int64_t n,
                                                    const BatchNormGrad& p, float* dx) {
  for (int64_t i = 0; i < n; ++i) {
    const double xhat = (static_cast<double>(x[i]) - p.mean) * p.rstd;
    dx[i] = static_cast<float>(p.scale *
                               (static_cast<double>(g[i]) - p.mean_dy - xhat * p.mean_dy_xhat));
  }
}

SINTER_VECTOR_CLONES void layer_norm_row_clone(const float* x, int64_t n, const float* w,
                                               const float* b, double eps, float* y, double* mean,
                                               double* rstd) {
  const double mu =
      lane_sum(n, [&](int64_t i) { return static_cast<double>(x[i]); }) / static_cast<double>(n);
  const double q = lane_sum(n, [&](int64_t i) {
    const double d = static_cast<double>(x[i]) - mu;
    return d * d;
  });
  const double rs = 1.0 / __builtin_sqrt(q / static_cast<double>(n) + eps);
  *mean = mu;
  *rstd = rs;
  for (int64_t i = 0; i < n; ++i) {
    const double v = (static_cast<double>(x[i]) - mu) * rs;
    y[i] = static_cast<float>(v * (w ? static_cast<double>(w[i]) : 1.0) +
                              (b ? static_cast<double>(b[i]) : 0.0));
  }
}

}  // namespace

double sum_row(const float* x, int64_t n) { return sum_row_clone(x, n); }

double sq_dev_sum_row(const float* x, int64_t n, double mu) {
  return sq_dev_sum_row_clone(x, n, mu);
}

void grad_sums_row(const float* g, const float* x, int64_t n, double mu, double* sum_g,
                   double* sum_g_xc) {
  grad_sums_row_clone(g, x, n, mu, sum_g, sum_g_xc);
}

void affine_row(const float* x, int64_t n, double mu, double scale, double shift, float* y) {
  affine_row_clone(x, n, mu, scale, shift, y);
}

void batch_norm_grad_row(const float* g, const float* x, int64_t n, const BatchNormGrad& p,
                         float* dx) {
  batch_norm_grad_row_clone(g, x, n, p, dx);
}

void layer_norm_row(const float* x, int64_t n, const float* w, const float* b, double eps, float* y,
                    double* mean, double* rstd) {
  layer_norm_row_clone(x, n, w, b, eps, y, mean, rstd);
}

}  // namespace sinter::cpu::vec
