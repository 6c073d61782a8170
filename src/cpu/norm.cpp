// CPU reference for batch_norm, layer_norm, rms_norm and dropout (src/kern/norm.h). Sums run in
// double, more accurately than the f32 the CUDA kernels use, so this is the better side of a parity
// test; statistics are stored in the accumulation dtype of Note [norm statistics]. Channels
// (batch norm), rows (layer norm) and elements (dropout) are split over the CPU threads; layer
// norm's parameter gradients sum fixed chunks of rows (Note [layer norm chunks]), so that no result
// depends on the thread count.
#include "kern/norm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpu/cpu_util.h"
#include "cpu/vec_rows.h"
#include "internal/cache_aligned.h"
#include "internal/parallel.h"
#include "kern/philox.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

template <class T>
double weight_at(const void* w, int64_t k, double absent) {
  return w ? widen(static_cast<const T*>(w)[k]) : absent;
}

// Statistics are stored in Acc<T> (Note [norm statistics]) and used in double.
template <class T>
double stat_at(const void* stats, int64_t k) {
  return static_cast<const Acc<T>*>(stats)[k];
}

template <class T>
void set_stat(void* stats, int64_t k, double v) {
  static_cast<Acc<T>*>(stats)[k] = static_cast<Acc<T>>(v);
}

// Calls fn(e) with the offset e of each element of channel k of an (n, c, hw) tensor, in memory
// order.
template <class Fn>
void for_channel(int64_t n, int64_t c, int64_t hw, int64_t k, Fn fn) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < hw; ++j) fn((i * c + k) * hw + j);
  }
}

// Note [half norm rows]
// bf16 and f16 planes (batch norm) and rows (layer norm) are widened to f32 in a buffer of the
// thread's and run the f32 vector rows, whose sums and formulas are the generic code's: the same
// bits as the generic loops, at the vector rows' speed (autocast on the CPU runs the norms in
// bf16). The results are rounded to the half dtype once, as the generic loops round them. Batch
// norm's bf16 planes skip the copy: its rows read bf16 themselves, and normalize in f32 (Note [bf16
// norm rows] in src/cpu/vec_norm.cpp).
template <class T>
const float* widened(const T* p, int64_t n, std::vector<float>& buf) {
  if constexpr (std::is_same_v<T, float>) {
    return p;
  } else {
    buf.resize(static_cast<size_t>(n));
    widen_row(p, n, buf.data());
    return buf.data();
  }
}

// The dtypes whose batch norm channels the vector rows take whole (src/cpu/vec_rows.h).
template <class T>
constexpr bool kChannelRows = std::is_same_v<T, float> || std::is_same_v<T, BFloat16>;

// Layer norm's parameter gradients sum at most this many chunks of rows (Note [layer norm chunks]).
constexpr int64_t kLayerNormChunks = 16;

}  // namespace

void batch_norm_stats(const Ctx&, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      double eps, void* mean, void* var, void* rstd) {
  visit_float(dtype, "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = static_cast<const T*>(x);
    const double m = static_cast<double>(n * hw);
    detail::parallel_blocks(c, n * hw, [&](int64_t k0, int64_t k1) {
      std::vector<float> buf;
      for (int64_t k = k0; k < k1; ++k) {
        // Each image's plane of channel k summed in lanes (Note [lane sums]), the planes in order;
        // f32 and bf16 channels in the vector rows, one call each, which sum the same way (bf16:
        // Note [bf16 norm rows]); f16 planes widened (Note [half norm rows]).
        const T* channel = px + k * hw;
        const int64_t stride = c * hw;
        double s = 0;
        if constexpr (kChannelRows<T>) {
          s = vec::sum_planes(channel, n, hw, stride);
        } else {
          for (int64_t i = 0; i < n; ++i) {
            const T* plane = channel + i * stride;
            if constexpr (is_half_type<T>) {
              s += vec::sum_planes(widened(plane, hw, buf), 1, hw, hw);
            } else {
              s += lane_sum(hw, [&](int64_t j) { return widen(plane[j]); });
            }
          }
        }
        const double mu = s / m;
        double q = 0;
        if constexpr (kChannelRows<T>) {
          q = vec::sq_dev_sum_planes(channel, n, hw, stride, mu);
        } else {
          for (int64_t i = 0; i < n; ++i) {
            const T* plane = channel + i * stride;
            if constexpr (is_half_type<T>) {
              q += vec::sq_dev_sum_planes(widened(plane, hw, buf), 1, hw, hw, mu);
            } else {
              q += lane_sum(hw, [&](int64_t j) {
                const double d = widen(plane[j]) - mu;
                return d * d;
              });
            }
          }
        }
        const double v = q / m;
        set_stat<T>(mean, k, mu);
        set_stat<T>(var, k, v);
        set_stat<T>(rstd, k, 1.0 / std::sqrt(v + eps));
      }
    });
  });
}

void batch_norm_apply(const Ctx&, const void* x, DType dtype, int64_t n, int64_t c, int64_t hw,
                      const void* mean, const void* rstd, const void* weight, const void* bias,
                      void* y) {
  visit_float(dtype, "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    detail::parallel_blocks(c, n * hw, [&](int64_t k0, int64_t k1) {
      std::vector<float> buf, out(is_half_type<T> ? static_cast<size_t>(hw) : 0);
      for (int64_t k = k0; k < k1; ++k) {
        const double mu = stat_at<T>(mean, k), rs = stat_at<T>(rstd, k);
        const double scale = rs * weight_at<Acc<T>>(weight, k, 1.0),
                     shift = weight_at<Acc<T>>(bias, k, 0.0);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
          for (int64_t i = 0; i < n; ++i) {
            const int64_t e = (i * c + k) * hw;
            vec::affine_row(px + e, hw, mu, scale, shift, py + e);
          }
          continue;
        } else if constexpr (is_half_type<T>) {  // Note [half norm rows]
          for (int64_t i = 0; i < n; ++i) {
            const int64_t e = (i * c + k) * hw;
            vec::affine_row(widened(px + e, hw, buf), hw, mu, scale, shift, out.data());
            narrow_row(out.data(), hw, py + e);
          }
          continue;
        }
        for_channel(n, c, hw, k,
                    [&](int64_t e) { py[e] = narrow<T>((widen(px[e]) - mu) * scale + shift); });
      }
    });
  });
}

void batch_norm_backward(const Ctx&, const void* dy, const void* x, DType dtype, int64_t n,
                         int64_t c, int64_t hw, const void* mean, const void* rstd,
                         const void* weight, bool training, void* dx, void* dweight, void* dbias) {
  visit_float(dtype, "batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = static_cast<const T*>(x);
    const T* pdy = static_cast<const T*>(dy);
    const double m = static_cast<double>(n * hw);
    detail::parallel_blocks(c, 2 * n * hw, [&](int64_t k0, int64_t k1) {
      std::vector<float> gbuf, xbuf, out(is_half_type<T> ? static_cast<size_t>(hw) : 0);
      for (int64_t k = k0; k < k1; ++k) {
        const double mu = stat_at<T>(mean, k), rs = stat_at<T>(rstd, k);
        double sum_dy = 0, sum_dy_xc = 0;
        if constexpr (kChannelRows<T>) {
          const int64_t e = k * hw;
          vec::grad_sums_planes(pdy + e, px + e, n, hw, c * hw, mu, &sum_dy, &sum_dy_xc);
        } else {
          for (int64_t i = 0; i < n; ++i) {
            const T* gp = pdy + (i * c + k) * hw;
            const T* xp = px + (i * c + k) * hw;
            if constexpr (is_half_type<T>) {
              double s_g = 0, s_g_xc = 0;
              vec::grad_sums_planes(widened(gp, hw, gbuf), widened(xp, hw, xbuf), 1, hw, hw, mu,
                                    &s_g, &s_g_xc);
              sum_dy += s_g;
              sum_dy_xc += s_g_xc;
            } else {
              sum_dy += lane_sum(hw, [&](int64_t j) { return widen(gp[j]); });
              sum_dy_xc +=
                  lane_sum(hw, [&](int64_t j) { return widen(gp[j]) * (widen(xp[j]) - mu); });
            }
          }
        }
        const double sum_dy_xhat = sum_dy_xc * rs;
        if (dbias) set_stat<T>(dbias, k, sum_dy);
        if (dweight) set_stat<T>(dweight, k, sum_dy_xhat);
        if (!dx) continue;
        const double scale = rs * weight_at<Acc<T>>(weight, k, 1.0);
        const double mean_dy = sum_dy / m, mean_dy_xhat = sum_dy_xhat / m;
        T* pdx = static_cast<T*>(dx);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
          if (training) {
            const vec::BatchNormGrad p{mu, rs, scale, mean_dy, mean_dy_xhat};
            for (int64_t i = 0; i < n; ++i) {
              const int64_t e = (i * c + k) * hw;
              vec::batch_norm_grad_row(pdy + e, px + e, hw, p, pdx + e);
            }
            continue;
          }
        } else if constexpr (is_half_type<T>) {  // Note [half norm rows]
          if (training) {
            const vec::BatchNormGrad p{mu, rs, scale, mean_dy, mean_dy_xhat};
            for (int64_t i = 0; i < n; ++i) {
              const int64_t e = (i * c + k) * hw;
              vec::batch_norm_grad_row(widened(pdy + e, hw, gbuf), widened(px + e, hw, xbuf), hw, p,
                                       out.data());
              narrow_row(out.data(), hw, pdx + e);
            }
            continue;
          }
        }
        for_channel(n, c, hw, k, [&](int64_t e) {
          const double g = widen(pdy[e]);
          if (training) {
            const double xhat = (widen(px[e]) - mu) * rs;
            pdx[e] = narrow<T>(scale * (g - mean_dy - xhat * mean_dy_xhat));
          } else {
            pdx[e] = narrow<T>(scale * g);
          }
        });
      }
    });
  });
}

void layer_norm_forward(const Ctx&, const void* x, DType dtype, int64_t rows, int64_t cols,
                        kern::RowNorm kind, const void* weight, const void* bias, double eps,
                        void* y, void* mean, void* rstd) {
  const bool rms = kind == kern::RowNorm::Rms;
  visit_float(dtype, "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::parallel_blocks(rows, 3 * cols, [&](int64_t r0, int64_t r1) {
      std::vector<float> buf, wide_out(is_half_type<T> ? static_cast<size_t>(cols) : 0);
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = static_cast<const T*>(x) + r * cols;
        T* out = static_cast<T*>(y) + r * cols;
        if constexpr (std::is_same_v<T, float> || is_half_type<T>) {
          // The same sums and formula in a vectorized row (src/cpu/vec_norm.cpp); bf16 and f16
          // widened (Note [half norm rows]).
          double mu = 0, rs = 0;
          float* dst = nullptr;
          if constexpr (std::is_same_v<T, float>) {
            dst = out;
          } else {
            dst = wide_out.data();
          }
          vec::layer_norm_row(widened(row, cols, buf), cols, rms, static_cast<const float*>(weight),
                              static_cast<const float*>(bias), eps, dst, &mu, &rs);
          if constexpr (is_half_type<T>) narrow_row(dst, cols, out);
          set_stat<T>(mean, r, mu);
          set_stat<T>(rstd, r, rs);
          continue;
        }
        const double mu = rms ? 0.0 : lane_sum(cols, [&](int64_t j) {
                                        return widen(row[j]);
                                      }) / static_cast<double>(cols);
        const double q = lane_sum(cols, [&](int64_t j) {
          const double d = widen(row[j]) - mu;
          return d * d;
        });
        const double rs = 1.0 / std::sqrt(q / static_cast<double>(cols) + eps);
        set_stat<T>(mean, r, mu);
        set_stat<T>(rstd, r, rs);
        for (int64_t j = 0; j < cols; ++j) {
          out[j] = narrow<T>((widen(row[j]) - mu) * rs * weight_at<Acc<T>>(weight, j, 1.0) +
                             weight_at<Acc<T>>(bias, j, 0.0));
        }
      }
    });
  });
}

void layer_norm_backward(const Ctx&, const void* dy, const void* x, DType dtype, int64_t rows,
                         int64_t cols, kern::RowNorm kind, const void* mean, const void* rstd,
                         const void* weight, void* dx, void* dweight, void* dbias) {
  const bool rms = kind == kern::RowNorm::Rms;
  visit_float(dtype, "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    const T* px = static_cast<const T*>(x);
    const T* pdy = static_cast<const T*>(dy);
    // Note [layer norm chunks]
    // The column sums of dweight and dbias go in double over fixed chunks of rows
    // (kLayerNormChunks, fewer when there are fewer rows; chunk c holds rows [rows c / chunks, rows
    // (c + 1) / chunks)), each chunk's sum in its own buffer in row order, and the chunks are added
    // in chunk order: the same bits at any thread count.
    const bool sums = dweight || dbias;
    // Without them, every row is a chunk of its own.
    const int64_t chunks = std::max<int64_t>(1, sums ? std::min(rows, kLayerNormChunks) : rows);
    // Each chunk's sums start on a cache line of their own (src/internal/cache_aligned.h): the
    // rows add into them in vectors of eight doubles.
    const int64_t stride = detail::cache_line_pitch<double>(cols);
    const auto sums_size = static_cast<size_t>(chunks * stride);
    detail::AlignedVector<double> dw(dweight ? sums_size : 0, 0.0), db(dbias ? sums_size : 0, 0.0);
    const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
    detail::parallel_blocks(chunks, 4 * cols * rows_per_chunk, [&](int64_t c0, int64_t c1) {
      std::vector<float> gbuf, xbuf, out(is_half_type<T> ? static_cast<size_t>(cols) : 0);
      for (int64_t chunk = c0; chunk < c1; ++chunk) {
        double* cdw = dweight ? dw.data() + chunk * stride : nullptr;
        double* cdb = dbias ? db.data() + chunk * stride : nullptr;
        for (int64_t r = rows * chunk / chunks; r < rows * (chunk + 1) / chunks; ++r) {
          const double mu = stat_at<T>(mean, r), rs = stat_at<T>(rstd, r);
          const int64_t base = r * cols;
          if constexpr (std::is_same_v<T, float> || is_half_type<T>) {
            // The same double formulas in a vectorized row, its sums by lane_sum (half rows
            // widened, Note [half norm rows]).
            T* pdx = dx ? static_cast<T*>(dx) + base : nullptr;
            float* fdx = nullptr;
            if constexpr (std::is_same_v<T, float>) {
              fdx = pdx;
            } else {
              fdx = pdx ? out.data() : nullptr;
            }
            vec::layer_norm_grad_row(widened(pdy + base, cols, gbuf),
                                     widened(px + base, cols, xbuf), cols, rms, mu, rs,
                                     static_cast<const float*>(weight), cdw, cdb, fdx);
            if constexpr (is_half_type<T>) {
              if (pdx) narrow_row(out.data(), cols, pdx);
            }
            continue;
          }
          // f64: the row's formulas and lane_sum's order in plain loops.
          auto xhat_at = [&](int64_t j) { return (widen(px[base + j]) - mu) * rs; };
          auto g_at = [&](int64_t j) {
            return widen(pdy[base + j]) * weight_at<Acc<T>>(weight, j, 1.0);
          };
          const double sum_g = lane_sum(cols, g_at);
          const double sum_g_xhat = lane_sum(cols, [&](int64_t j) { return g_at(j) * xhat_at(j); });
          for (int64_t j = 0; j < cols; ++j) {
            const double d = widen(pdy[base + j]);
            if (cdw) cdw[j] += d * xhat_at(j);
            if (cdb) cdb[j] += d;
          }
          if (!dx) continue;
          const double mean_g = rms ? 0.0 : sum_g / static_cast<double>(cols);
          const double mean_g_xhat = sum_g_xhat / static_cast<double>(cols);
          T* pdx = static_cast<T*>(dx);
          for (int64_t j = 0; j < cols; ++j) {
            const double xhat = (widen(px[base + j]) - mu) * rs;
            const double g = widen(pdy[base + j]) * weight_at<Acc<T>>(weight, j, 1.0);
            pdx[base + j] = narrow<T>(rs * (g - mean_g - xhat * mean_g_xhat));
          }
        }
      }
    });
    // Added once to the caller's arrays.
    for (int64_t j = 0; j < cols; ++j) {
      double w = 0, b = 0;
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        if (dweight) w += dw[chunk * stride + j];
        if (dbias) b += db[chunk * stride + j];
      }
      if (dweight) static_cast<A*>(dweight)[j] += static_cast<A>(w);
      if (dbias) static_cast<A*>(dbias)[j] += static_cast<A>(b);
    }
  });
}

void dropout_apply(const Ctx&, const void* in, DType dtype, int64_t numel, uint64_t seed,
                   uint64_t offset, uint32_t threshold, double scale,
                   const kern::DropoutBlock& block, void* out) {
  visit_float(dtype, "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The product is formed in the compute type of the CUDA kernel (float, or double for f64).
    using C = Acc<T>;
    const C s = static_cast<C>(scale);
    const T* pin = static_cast<const T*>(in);
    T* pout = static_cast<T*>(out);
    detail::parallel_blocks(numel, 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const bool keep = (philox_element(seed, offset, block.index(i)).w[0] >> 8) >= threshold;
        pout[i] = keep ? narrow<T>(static_cast<C>(widen(pin[i])) * s) : narrow<T>(0.0);
      }
    });
  });
}

}  // namespace sinter::cpu
