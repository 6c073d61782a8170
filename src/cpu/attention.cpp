// CPU reference for the fused attention (Note [fused attention]): one query row at a time, in
// double, with the row's scores in a buffer of tk values (the CUDA kernels keep only a tile). The
// heads are split over the CPU threads.
#include "kern/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu/cpu_util.h"
#include "internal/parallel.h"

namespace sinter::cpu {
namespace {

double dot(const std::vector<double>& a, int64_t ia, const std::vector<double>& b, int64_t ib,
           int64_t d) {
  double s = 0;
  for (int64_t c = 0; c < d; ++c) s += a[ia * d + c] * b[ib * d + c];
  return s;
}

// One head's (rows, d) block of a contiguous (bh, rows, d) tensor, widened.
template <class T>
std::vector<double> head(const void* p, int64_t h, int64_t rows, int64_t d) {
  const T* x = static_cast<const T*>(p) + h * rows * d;
  std::vector<double> out(static_cast<size_t>(rows * d));
  for (int64_t i = 0; i < rows * d; ++i) out[i] = widen(x[i]);
  return out;
}

template <class T>
void store_head(void* p, int64_t h, const std::vector<double>& v) {
  T* x = static_cast<T*>(p) + h * static_cast<int64_t>(v.size());
  for (size_t i = 0; i < v.size(); ++i) x[i] = narrow<T>(v[i]);
}

// Row i's probabilities p_ij = exp(s_ij - lse_i) for j < attention_key_end(a, i).
void probabilities(const AttentionArgs& a, const std::vector<double>& q,
                   const std::vector<double>& k, int64_t i, double lse, std::vector<double>& p) {
  const int64_t end = attention_key_end(a, i);
  for (int64_t j = 0; j < end; ++j) p[j] = std::exp(a.scale * dot(q, i, k, j, a.d) - lse);
}

}  // namespace

void attention_forward(const Ctx&, const AttentionArgs& a, const void* q, const void* k,
                       const void* v, void* out, void* lse) {
  visit_float(a.dtype, "attention_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::parallel_blocks(a.bh, 2 * a.tq * a.tk * a.d, [&](int64_t h0, int64_t h1) {
      std::vector<double> s(static_cast<size_t>(a.tk));
      for (int64_t h = h0; h < h1; ++h) {
        const int64_t g = attention_kv_head(a, h);
        const auto qh = head<T>(q, h, a.tq, a.d), kh = head<T>(k, g, a.tk, a.d),
                   vh = head<T>(v, g, a.tk, a.d);
        std::vector<double> o(static_cast<size_t>(a.tq * a.d), 0.0);
        for (int64_t i = 0; i < a.tq; ++i) {
          const int64_t end = attention_key_end(a, i);
          double m = -INFINITY;
          for (int64_t j = 0; j < end; ++j) {
            s[j] = a.scale * dot(qh, i, kh, j, a.d);
            m = std::max(m, s[j]);
          }
          double z = 0;
          for (int64_t j = 0; j < end; ++j) z += std::exp(s[j] - m);
          const double row_lse = m + std::log(z);
          for (int64_t j = 0; j < end; ++j) {
            if (!attention_keep(a, h, i, j)) continue;
            const double w = std::exp(s[j] - row_lse) * a.keep_scale;
            for (int64_t c = 0; c < a.d; ++c) o[i * a.d + c] += w * vh[j * a.d + c];
          }
          static_cast<Acc<T>*>(lse)[h * a.tq + i] = static_cast<Acc<T>>(row_lse);
        }
        store_head<T>(out, h, o);
      }
    });
  });
}

void attention_backward(const Ctx&, const AttentionArgs& a, const void* q, const void* k,
                        const void* v, const void* out, const void* dout, const void* lse, void* dq,
                        void* dk, void* dv) {
  visit_float(a.dtype, "attention_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // By K/V head: its query heads in order, their dk and dv summed (grouped-query attention).
    const int64_t kv_heads = a.bh / a.group;
    detail::parallel_blocks(kv_heads, 4 * a.group * a.tq * a.tk * a.d, [&](int64_t g0, int64_t g1) {
      std::vector<double> p(static_cast<size_t>(a.tk));
      for (int64_t g = g0; g < g1; ++g) {
        const auto kh = head<T>(k, g, a.tk, a.d), vh = head<T>(v, g, a.tk, a.d);
        std::vector<double> gk(kh.size(), 0.0), gv(vh.size(), 0.0);
        const int64_t first = attention_first_query_head(a, g);
        for (int64_t h = first; h < first + a.group; ++h) {
          const auto qh = head<T>(q, h, a.tq, a.d), oh = head<T>(out, h, a.tq, a.d),
                     gh = head<T>(dout, h, a.tq, a.d);
          std::vector<double> gq(qh.size(), 0.0);
          for (int64_t i = 0; i < a.tq; ++i) {
            const double row_lse = static_cast<const Acc<T>*>(lse)[h * a.tq + i];
            probabilities(a, qh, kh, i, row_lse, p);
            const double di = dot(gh, i, oh, i, a.d);
            const int64_t end = attention_key_end(a, i);
            for (int64_t j = 0; j < end; ++j) {
              const double keep = attention_keep(a, h, i, j) ? a.keep_scale : 0.0;
              const double ds = p[j] * (keep * dot(gh, i, vh, j, a.d) - di) * a.scale;
              for (int64_t c = 0; c < a.d; ++c) {
                gv[j * a.d + c] += p[j] * keep * gh[i * a.d + c];
                gq[i * a.d + c] += ds * kh[j * a.d + c];
                gk[j * a.d + c] += ds * qh[i * a.d + c];
              }
            }
          }
          store_head<T>(dq, h, gq);
        }
        store_head<T>(dk, g, gk);
        store_head<T>(dv, g, gv);
      }
    });
  });
}

void rope_apply(const Ctx&, const RopeArgs& a, const void* x, const int64_t* positions, void* y) {
  const int64_t half = a.d / 2;
  if (a.outer == 0 || a.t == 0 || half == 0) return;
  // The turns of every (position, pair) once, in double (Note [rotary embedding]).
  std::vector<double> cos_t(static_cast<size_t>(a.t * half)), sin_t(cos_t.size());
  for (int64_t j = 0; j < a.t; ++j) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = rope_angle(a, positions[j], i);
      cos_t[static_cast<size_t>(j * half + i)] = std::cos(angle);
      sin_t[static_cast<size_t>(j * half + i)] = a.inverse ? -std::sin(angle) : std::sin(angle);
    }
  }
  visit_float(a.dtype, "rope", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    detail::parallel_blocks(a.outer * a.t, 4 * a.d, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t j = r % a.t;
        const T* row = px + r * a.d;
        T* out = py + r * a.d;
        for (int64_t i = 0; i < half; ++i) {
          int64_t first = 0, second = 0;
          rope_pair(a, i, &first, &second);
          const double c = cos_t[static_cast<size_t>(j * half + i)];
          const double sn = sin_t[static_cast<size_t>(j * half + i)];
          const double u = widen(row[first]), v = widen(row[second]);
          out[first] = narrow<T>(u * c - v * sn);
          out[second] = narrow<T>(u * sn + v * c);
        }
      }
    });
  });
}

}  // namespace sinter::cpu
