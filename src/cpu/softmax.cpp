// CPU reference for softmax, log_softmax and the fused cross entropy over the rows of Note
// [softmax rows] in src/kern/softmax.h. Everything accumulates in double, so that the
// reference is the more accurate side of a parity test. The outer blocks are split over the CPU
// threads; each block's arithmetic is the same on any thread.
#include "kern/softmax.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/attention_softmax.h"
#include "cpu/cpu_util.h"
#include "cpu/vec_rows.h"
#include "internal/parallel.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

// Calls f.template operator()<T>() for the floating dtype `dtype`.
template <class F>
void visit_floating(const char* name, DType dtype, F&& f) {
  visit_float(dtype, name,
              [&](auto tag) { f.template operator()<typename decltype(tag)::type>(); });
}

// Per block o of (outer, dim, inner), the row maxima and the sums of exp(x - max) of its `inner`
// rows, walking the block in memory order. NaN never becomes the maximum, so it reaches the sum
// and makes its row NaN.
template <typename T>
void max_and_sum(const T* block, int64_t dim, int64_t inner, std::vector<double>& m,
                 std::vector<double>& s) {
  m.assign(inner, -std::numeric_limits<double>::infinity());
  s.assign(inner, 0.0);
  for (int64_t k = 0; k < dim; ++k) {
    for (int64_t i = 0; i < inner; ++i) {
      const double v = widen(block[k * inner + i]);
      if (v > m[i]) m[i] = v;
    }
  }
  for (int64_t k = 0; k < dim; ++k) {
    for (int64_t i = 0; i < inner; ++i) s[i] += std::exp(widen(block[k * inner + i]) - m[i]);
  }
}

// Note [half softmax rows]
// A bf16 or f16 row (inner == 1) is widened to f32, runs the f32 row (vec::softmax_row, or the
// gradient's row_backward), and is rounded to its dtype once: softmax of a half tensor is the f32
// softmax of its widened values, rounded, as autocast's f32 softmax followed by the cast gives it.
// Attention's composed form runs its softmax in the half dtype (autocast runs attention in bf16):
// widened, it runs at the f32 row's speed (the double loop below took twenty times as long).
template <typename T>
void softmax_typed(const T* x, int64_t outer, int64_t dim, int64_t inner, bool log, T* y) {
  if constexpr (std::is_same_v<T, float>) {
    if (inner == 1) {  // rows with the vector exp (Note [cpu vector math])
      detail::parallel_blocks(outer, dim, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) vec::softmax_row(x + o * dim, dim, log, y + o * dim);
      });
      return;
    }
  } else if constexpr (is_half_type<T>) {
    if (inner == 1) {  // Note [half softmax rows]
      detail::parallel_blocks(outer, dim, [&](int64_t o0, int64_t o1) {
        std::vector<float> in(static_cast<size_t>(dim)), out(static_cast<size_t>(dim));
        for (int64_t o = o0; o < o1; ++o) {
          widen_row(x + o * dim, dim, in.data());
          vec::softmax_row(in.data(), dim, log, out.data());
          narrow_row(out.data(), dim, y + o * dim);
        }
      });
      return;
    }
  }
  detail::parallel_blocks(outer, dim * inner, [&](int64_t o0, int64_t o1) {
    std::vector<double> m, s;
    for (int64_t o = o0; o < o1; ++o) {
      const T* xb = x + o * dim * inner;
      T* yb = y + o * dim * inner;
      max_and_sum(xb, dim, inner, m, s);
      for (int64_t k = 0; k < dim; ++k) {
        for (int64_t i = 0; i < inner; ++i) {
          const double v = widen(xb[k * inner + i]) - m[i];
          yb[k * inner + i] = narrow<T>(log ? v - std::log(s[i]) : std::exp(v) / s[i]);
        }
      }
    }
  });
}

// One row of the gradient (inner == 1): its dot product in lanes (Note [lane sums]), then the
// row, in double.
template <typename T>
void row_backward(const T* g, const T* y, int64_t dim, bool log, T* dx) {
  if constexpr (std::is_same_v<T, float>) {
    if (!log) return vec::softmax_grad_row(g, y, dim, 1.0f, dx);  // the same sums, vectorized
  }
  const double d =
      lane_sum(dim, [&](int64_t k) { return log ? widen(g[k]) : widen(g[k]) * widen(y[k]); });
  if (log) {
    for (int64_t k = 0; k < dim; ++k) dx[k] = narrow<T>(widen(g[k]) - std::exp(widen(y[k])) * d);
  } else {
    for (int64_t k = 0; k < dim; ++k) dx[k] = narrow<T>(widen(y[k]) * (widen(g[k]) - d));
  }
}

template <typename T>
void softmax_backward_typed(const T* g, const T* y, int64_t outer, int64_t dim, int64_t inner,
                            bool log, T* dx) {
  detail::parallel_blocks(outer, dim * inner, [&](int64_t o0, int64_t o1) {
    std::vector<double> dot;
    std::vector<float> wide;
    if (is_half_type<T> && inner == 1) wide.resize(static_cast<size_t>(3 * dim));
    for (int64_t o = o0; o < o1; ++o) {
      const int64_t base = o * dim * inner;
      if (inner == 1) {
        if constexpr (is_half_type<T>) {  // Note [half softmax rows]
          float *wg = wide.data(), *wy = wg + dim, *wdx = wy + dim;
          widen_row(g + base, dim, wg);
          widen_row(y + base, dim, wy);
          row_backward(wg, wy, dim, log, wdx);
          narrow_row(wdx, dim, dx + base);
        } else {
          row_backward(g + base, y + base, dim, log, dx + base);
        }
        continue;
      }
      dot.assign(inner, 0.0);
      for (int64_t k = 0; k < dim; ++k) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t e = base + k * inner + i;
          dot[i] += log ? widen(g[e]) : widen(g[e]) * widen(y[e]);
        }
      }
      for (int64_t k = 0; k < dim; ++k) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t e = base + k * inner + i;
          const double gv = widen(g[e]), yv = widen(y[e]);
          dx[e] = narrow<T>(log ? gv - std::exp(yv) * dot[i] : yv * (gv - dot[i]));
        }
      }
    }
  });
}

// Note [cross entropy sums]
// The smoothing term needs sum_k (m - x[k]) with m the row maximum; it is formed as (m - x0) -
// sum_k (x[k] - x0) / c around the row's first element x0, so that logits far from zero (1e4) do
// not cancel catastrophically in f32. The CUDA kernel uses the same form.
template <typename T, typename A>
void cross_entropy_typed(const CrossEntropyArgs& a, A* loss, A* lse_out) {
  const T* x = static_cast<const T*>(a.logits);
  const double eps = a.label_smoothing;
  detail::parallel_blocks(a.n, a.c * a.inner, [&](int64_t o0, int64_t o1) {
    std::vector<double> m, s;
    for (int64_t o = o0; o < o1; ++o) {
      const T* xb = x + o * a.c * a.inner;
      max_and_sum(xb, a.c, a.inner, m, s);
      for (int64_t i = 0; i < a.inner; ++i) {
        const int64_t row = o * a.inner + i;
        const int64_t t = a.target[row];
        lse_out[row] = static_cast<A>(m[i] + std::log(s[i]));
        if (t == a.ignore_index) {
          loss[row] = A(0);
          continue;
        }
        double l = std::log(s[i]) + (1.0 - eps) * (m[i] - widen(xb[t * a.inner + i]));
        if (eps > 0) {
          const double x0 = widen(xb[i]);
          const double shift = std::isfinite(x0) ? x0 : 0.0;
          double shifted = 0;
          for (int64_t k = 0; k < a.c; ++k) shifted += widen(xb[k * a.inner + i]) - shift;
          l += eps * ((m[i] - shift) - shifted / static_cast<double>(a.c));
        }
        loss[row] = static_cast<A>(l);
      }
    }
  });
}

template <typename T, typename A>
void cross_entropy_backward_typed(const CrossEntropyArgs& a, const A* lse, const A* grad,
                                  int64_t grad_stride, T* dx) {
  const T* x = static_cast<const T*>(a.logits);
  const double eps = a.label_smoothing, uniform = eps / static_cast<double>(a.c);
  detail::parallel_blocks(a.n, a.c * a.inner, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      for (int64_t k = 0; k < a.c; ++k) {
        for (int64_t i = 0; i < a.inner; ++i) {
          const int64_t e = (o * a.c + k) * a.inner + i, row = o * a.inner + i;
          const int64_t t = a.target[row];
          if (t == a.ignore_index) {
            dx[e] = narrow<T>(0.0);
            continue;
          }
          const double p = std::exp(widen(x[e]) - static_cast<double>(lse[row]));
          const double onehot = k == t ? 1.0 - eps : 0.0;
          dx[e] = narrow<T>(static_cast<double>(grad[row * grad_stride]) * (p - onehot - uniform));
        }
      }
    }
  });
}

// Note [attention softmax]
// Attention's composed form on the CPU (src/ops/attention.cpp) takes its scores' softmax in one
// pass: row r of (rows, n) scores is query i = r % tq, and with `causal` only its first
// min(i + 1, n) keys (triu(1) masks the rest, as the composed form's masked_fill) are read; each
// is scaled in f32 (s * scale, the mul op's rounding in f32), the f32 softmax row runs on them,
// the masked keys get 0. The gradient reads g and y of the same keys:
// dx = (y (g - sum(g y))) scale, as softmax's gradient and then mul's, and 0 on the masked keys.
// Against the three ops (mul, masked_fill, softmax) it reads the scores once, not three times,
// skips the masked half of a causal row, and the backward has no where pass. bf16 and f16 rows
// are widened to f32 and rounded once at the end, where the three ops round the scaled scores to
// bf16 first, and the sum of a causal row's exp terms has fewer lanes: the results agree with the
// composed form's within the rounding of the dtype, not to the bit.
template <typename T>
void attention_softmax_typed(const T* x, int64_t rows, int64_t tq, int64_t n, double scale,
                             bool causal, T* y) {
  const auto s = static_cast<float>(scale);
  detail::parallel_blocks(rows, n, [&](int64_t r0, int64_t r1) {
    std::vector<float> z(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t keys = causal ? std::min(r % tq + 1, n) : n;
      const T* xr = x + r * n;
      T* yr = y + r * n;
      for (int64_t j = 0; j < keys; ++j) z[j] = static_cast<float>(xr[j]) * s;
      if constexpr (std::is_same_v<T, float>) {
        vec::softmax_row(z.data(), keys, false, yr);
      } else {
        vec::softmax_row(z.data(), keys, false, out.data());
        narrow_row(out.data(), keys, yr);
      }
      for (int64_t j = keys; j < n; ++j) yr[j] = T(0.0f);
    }
  });
}

template <typename T>
void attention_softmax_backward_typed(const T* g, const T* y, int64_t rows, int64_t tq, int64_t n,
                                      double scale, bool causal, T* dx) {
  const auto s = static_cast<float>(scale);
  detail::parallel_blocks(rows, n, [&](int64_t r0, int64_t r1) {
    std::vector<float> wide(is_half_type<T> ? static_cast<size_t>(3 * n) : 0);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t keys = causal ? std::min(r % tq + 1, n) : n;
      const int64_t at = r * n;
      if constexpr (std::is_same_v<T, float>) {
        vec::softmax_grad_row(g + at, y + at, keys, s, dx + at);
      } else {
        float *wg = wide.data(), *wy = wg + n, *wdx = wy + n;
        widen_row(g + at, keys, wg);
        widen_row(y + at, keys, wy);
        vec::softmax_grad_row(wg, wy, keys, s, wdx);
        narrow_row(wdx, keys, dx + at);
      }
      for (int64_t j = keys; j < n; ++j) dx[at + j] = T(0.0f);
    }
  });
}

// Calls f.template operator()<T>() for f32, bf16 and f16, the dtypes of Note [attention softmax].
template <class F>
void visit_attention_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f.template operator()<float>();
    case DType::bf16:
      return f.template operator()<BFloat16>();
    case DType::f16:
      return f.template operator()<Half>();
    default:
      SINTER_THROW("attention_softmax: f32, bf16 or f16 only, got ", dtype);
  }
}

}  // namespace

void attention_softmax_rows(const void* x, DType dtype, int64_t rows, int64_t tq, int64_t n,
                            double scale, bool causal, void* y) {
  if (rows * n == 0) return;
  visit_attention_dtype(dtype, [&]<typename T>() {
    attention_softmax_typed(static_cast<const T*>(x), rows, tq, n, scale, causal,
                            static_cast<T*>(y));
  });
}

void attention_softmax_rows_backward(const void* g, const void* y, DType dtype, int64_t rows,
                                     int64_t tq, int64_t n, double scale, bool causal, void* dx) {
  if (rows * n == 0) return;
  visit_attention_dtype(dtype, [&]<typename T>() {
    attention_softmax_backward_typed(static_cast<const T*>(g), static_cast<const T*>(y), rows, tq,
                                     n, scale, causal, static_cast<T*>(dx));
  });
}

void softmax_rows(const Ctx&, const void* x, DType dtype, int64_t outer, int64_t dim, int64_t inner,
                  bool log, void* y) {
  if (outer * dim * inner == 0) return;
  visit_floating("softmax_rows", dtype, [&]<typename T>() {
    softmax_typed(static_cast<const T*>(x), outer, dim, inner, log, static_cast<T*>(y));
  });
}

void softmax_rows_backward(const Ctx&, const void* g, const void* y, DType dtype, int64_t outer,
                           int64_t dim, int64_t inner, bool log, void* dx) {
  if (outer * dim * inner == 0) return;
  visit_floating("softmax_rows_backward", dtype, [&]<typename T>() {
    softmax_backward_typed(static_cast<const T*>(g), static_cast<const T*>(y), outer, dim, inner,
                           log, static_cast<T*>(dx));
  });
}

void cross_entropy_rows(const Ctx&, const CrossEntropyArgs& args, void* loss, void* lse) {
  if (args.n * args.inner == 0) return;
  visit_floating("cross_entropy_rows", args.dtype, [&]<typename T>() {
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    cross_entropy_typed<T>(args, static_cast<A*>(loss), static_cast<A*>(lse));
  });
}

void cross_entropy_rows_backward(const Ctx&, const CrossEntropyArgs& args, const void* lse,
                                 const void* grad, int64_t grad_stride, void* dlogits) {
  if (args.n * args.c * args.inner == 0) return;
  visit_floating("cross_entropy_rows_backward", args.dtype, [&]<typename T>() {
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    cross_entropy_backward_typed<T>(args, static_cast<const A*>(lse), static_cast<const A*>(grad),
                                    grad_stride, static_cast<T*>(dlogits));
  });
}

}  // namespace sinter::cpu
