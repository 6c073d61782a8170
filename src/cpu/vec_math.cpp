// The f32 row kernels of Note [cpu vector math], each compiled three times (AVX-512, AVX2 and the
// baseline x86-64) with the loader picking the one this CPU runs (GCC's and Clang's
// target_clones); elsewhere, and under ThreadSanitizer, once for the baseline.
#include "cpu/vec_math.h"

#include <cstdint>

#include "cpu/cpu_util.h"

namespace sinter::cpu::vec {
namespace {

// ThreadSanitizer's runtime is not up yet when the loader runs target_clones' resolvers (IFUNC),
// and an instrumented resolver crashes the program before main: a TSan build has the baseline only.
#if defined(__SANITIZE_THREAD__)
#define SINTER_VECTOR_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SINTER_VECTOR_NO_CLONES 1
#endif
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(SINTER_VECTOR_NO_CLONES)
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

SINTER_VECTOR_CLONES double exp_shifted_clone(const float* x, float shift, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vec::exp(x[i] - shift);
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

SINTER_VECTOR_CLONES double sum_row_clone(const float* x, int64_t n) {
  return lane_sum(n, [&](int64_t i) { return static_cast<double>(x[i]); });
}

SINTER_VECTOR_CLONES double sq_dev_sum_row_clone(const float* x, int64_t n, double mu) {
  return lane_sum(n, [&](int64_t i) {
    const double d = static_cast<double>(x[i]) - mu;
    return d * d;
  });
}

SINTER_VECTOR_CLONES void grad_sums_row_clone(const float* g, const float* x, int64_t n, double mu,
                                              double* sum_g, double* sum_g_xc) {
  // Two lane_sums (Note [lane sums]) in one pass: each keeps its own lanes, tail and order.
  double acc_g[kSumLanes] = {}, acc_gx[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int l = 0; l < kSumLanes; ++l) {
      const double gv = static_cast<double>(g[i + l]);
      acc_g[l] += gv;
      acc_gx[l] += gv * (static_cast<double>(x[i + l]) - mu);
    }
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

void layer_norm_row(const float* x, int64_t n, const float* w, const float* b, double eps, float* y,
                    double* mean, double* rstd) {
  layer_norm_row_clone(x, n, w, b, eps, y, mean, rstd);
}

}  // namespace sinter::cpu::vec
