// CPU reference for batch_norm, layer_norm and dropout (src/internal/kernels_norm.h). Sums run in
// double, more accurately than the f32 the CUDA kernels use, so this is the better side of a parity
// test; statistics are stored in the accumulation dtype of Note [norm statistics].
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpu/cpu_util.h"
#include "internal/kernels_norm.h"
#include "internal/philox.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

template <class T>
double weight_at(const void* w, int64_t k, double absent) {
  return w ? widen(static_cast<const T*>(w)[k]) : absent;
}

}  // namespace

void batch_norm_stats(const Ctx&, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      double eps, void* mean, void* var, void* rstd) {
  visit_float(dtype, "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const T* px = static_cast<const T*>(x);
    const double m = static_cast<double>(n * hw);
    for (int64_t k = 0; k < c; ++k) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < hw; ++j) s += widen(px[(i * c + k) * hw + j]);
      }
      const double mu = s / m;
      double q = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < hw; ++j) {
          const double d = widen(px[(i * c + k) * hw + j]) - mu;
          q += d * d;
        }
      }
      const double v = q / m;
      static_cast<A*>(mean)[k] = static_cast<A>(mu);
      static_cast<A*>(var)[k] = static_cast<A>(v);
      static_cast<A*>(rstd)[k] = static_cast<A>(1.0 / std::sqrt(v + eps));
    }
  });
}

void batch_norm_apply(const Ctx&, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      const void* mean, const void* rstd, const void* weight, const void* bias,
                      void* y) {
  visit_float(dtype, "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    for (int64_t k = 0; k < c; ++k) {
      const double mu = static_cast<const A*>(mean)[k], rs = static_cast<const A*>(rstd)[k];
      const double scale = rs * weight_at<T>(weight, k, 1.0), shift = weight_at<T>(bias, k, 0.0);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < hw; ++j) {
          const int64_t e = (i * c + k) * hw + j;
          py[e] = narrow<T>((widen(px[e]) - mu) * scale + shift);
        }
      }
    }
  });
}

void batch_norm_backward(const Ctx&, const void* dy, const void* x, DType dtype, int64_t n,
                         int64_t c, int64_t hw, const void* mean, const void* rstd,
                         const void* weight, bool training, void* dx, void* dweight, void* dbias) {
  visit_float(dtype, "batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const T* px = static_cast<const T*>(x);
    const T* pdy = static_cast<const T*>(dy);
    const double m = static_cast<double>(n * hw);
    for (int64_t k = 0; k < c; ++k) {
      const double mu = static_cast<const A*>(mean)[k], rs = static_cast<const A*>(rstd)[k];
      double sum_dy = 0, sum_dy_xhat = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < hw; ++j) {
          const int64_t e = (i * c + k) * hw + j;
          const double g = widen(pdy[e]);
          sum_dy += g;
          sum_dy_xhat += g * (widen(px[e]) - mu) * rs;
        }
      }
      if (dbias) static_cast<A*>(dbias)[k] = static_cast<A>(sum_dy);
      if (dweight) static_cast<A*>(dweight)[k] = static_cast<A>(sum_dy_xhat);
      if (!dx) continue;
      const double scale = rs * weight_at<T>(weight, k, 1.0);
      const double mean_dy = sum_dy / m, mean_dy_xhat = sum_dy_xhat / m;
      T* pdx = static_cast<T*>(dx);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < hw; ++j) {
          const int64_t e = (i * c + k) * hw + j;
          const double g = widen(pdy[e]);
          if (training) {
            const double xhat = (widen(px[e]) - mu) * rs;
            pdx[e] = narrow<T>(scale * (g - mean_dy - xhat * mean_dy_xhat));
          } else {
            pdx[e] = narrow<T>(scale * g);
          }
        }
      }
    }
  });
}

void layer_norm_forward(const Ctx&, const void* x, DType dtype, int64_t rows, int64_t cols,
                        const void* weight, const void* bias, double eps, void* y, void* mean,
                        void* rstd) {
  visit_float(dtype, "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = px + r * cols;
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += widen(row[j]);
      const double mu = s / static_cast<double>(cols);
      double q = 0;
      for (int64_t j = 0; j < cols; ++j) q += (widen(row[j]) - mu) * (widen(row[j]) - mu);
      const double rs = 1.0 / std::sqrt(q / static_cast<double>(cols) + eps);
      static_cast<A*>(mean)[r] = static_cast<A>(mu);
      static_cast<A*>(rstd)[r] = static_cast<A>(rs);
      for (int64_t j = 0; j < cols; ++j) {
        py[r * cols + j] = narrow<T>((widen(row[j]) - mu) * rs * weight_at<T>(weight, j, 1.0) +
                                    weight_at<T>(bias, j, 0.0));
      }
    }
  });
}

void layer_norm_backward(const Ctx&, const void* dy, const void* x, DType dtype, int64_t rows,
                         int64_t cols, const void* mean, const void* rstd, const void* weight,
                         void* dx, void* dweight, void* dbias) {
  visit_float(dtype, "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const T* px = static_cast<const T*>(x);
    const T* pdy = static_cast<const T*>(dy);
    // Column sums in double across all rows, then added once to the caller's arrays.
    std::vector<double> dw(dweight ? cols : 0, 0.0), db(dbias ? cols : 0, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const double mu = static_cast<const A*>(mean)[r], rs = static_cast<const A*>(rstd)[r];
      const int64_t base = r * cols;
      double sum_g = 0, sum_g_xhat = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double xhat = (widen(px[base + j]) - mu) * rs;
        const double d = widen(pdy[base + j]);
        const double g = d * weight_at<T>(weight, j, 1.0);
        sum_g += g;
        sum_g_xhat += g * xhat;
        if (dweight) dw[j] += d * xhat;
        if (dbias) db[j] += d;
      }
      if (!dx) continue;
      const double mean_g = sum_g / static_cast<double>(cols);
      const double mean_g_xhat = sum_g_xhat / static_cast<double>(cols);
      T* pdx = static_cast<T*>(dx);
      for (int64_t j = 0; j < cols; ++j) {
        const double xhat = (widen(px[base + j]) - mu) * rs;
        const double g = widen(pdy[base + j]) * weight_at<T>(weight, j, 1.0);
        pdx[base + j] = narrow<T>(rs * (g - mean_g - xhat * mean_g_xhat));
      }
    }
    for (int64_t j = 0; j < static_cast<int64_t>(dw.size()); ++j) {
      static_cast<A*>(dweight)[j] += static_cast<A>(dw[j]);
    }
    for (int64_t j = 0; j < static_cast<int64_t>(db.size()); ++j) {
      static_cast<A*>(dbias)[j] += static_cast<A>(db[j]);
    }
  });
}

void dropout_apply(const Ctx&, const void* in, DType dtype, int64_t numel, uint64_t seed,
                   uint64_t offset, uint32_t threshold, double scale, void* out) {
  visit_float(dtype, "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The product is formed in the compute type of the CUDA kernel (float, or double for f64).
    using C = Acc<T>;
    const C s = static_cast<C>(scale);
    const T* pin = static_cast<const T*>(in);
    T* pout = static_cast<T*>(out);
    for (int64_t i = 0; i < numel; ++i) {
      const bool keep =
          (philox_element(seed, offset, static_cast<uint64_t>(i)).w[0] >> 8) >= threshold;
      pout[i] = keep ? narrow<T>(static_cast<C>(widen(pin[i])) * s) : narrow<T>(0.0);
    }
  });
}

}  // namespace sinter::cpu
