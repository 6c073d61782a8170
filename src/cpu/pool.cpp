// CPU reference 2-D pooling: max (with indices), average and adaptive average, forward and
// backward, plane by plane, the planes split over the CPU threads (each plane's arithmetic is the
// same on any thread). Sums accumulate in double, so the reference is the more accurate side of a
// parity test.
#include "kern/pool.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpu/cpu_util.h"
#include "internal/parallel.h"
#include "kern/pool_windows.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

// The adaptive window of output (oh, ow) as an AvgWindow: it divides by its own element count.
AvgWindow adaptive_window(const Pool2dGeom& g, int64_t oh, int64_t ow) {
  const int64_t h0 = adaptive_start(oh, g.h, g.h_out), h1 = adaptive_end(oh, g.h, g.h_out);
  const int64_t w0 = adaptive_start(ow, g.w, g.w_out), w1 = adaptive_end(ow, g.w, g.w_out);
  return {h0, h1, w0, w1, (h1 - h0) * (w1 - w0)};
}

// How many planes a thread takes at least: about 32768 window elements' work.
int64_t plane_grain(const Pool2dGeom& g) {
  const int64_t work = std::max<int64_t>(1, std::max(g.h * g.w, g.h_out * g.w_out * g.kh * g.kw));
  return std::max<int64_t>(1, (int64_t{1} << 15) / work);
}

// Calls fn(plane, oh, ow, y[o], o) for every output position, o its offset in y and plane its input
// plane, both as the storage type of the floating `dtype`.
template <class Fn>
void for_each_output(const char* op, const Pool2dGeom& g, DType dtype, const void* x, void* y,
                     Fn fn) {
  visit_float(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::parallel_for(g.planes, plane_grain(g), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const T* plane = static_cast<const T*>(x) + p * g.h * g.w;
        for (int64_t oh = 0; oh < g.h_out; ++oh) {
          for (int64_t ow = 0; ow < g.w_out; ++ow) {
            const int64_t o = (p * g.h_out + oh) * g.w_out + ow;
            fn(plane, oh, ow, static_cast<T*>(y)[o], o);
          }
        }
      }
    });
  });
}

// dx of each plane: scatter(acc, oh, ow, o, dy[o] as double) adds the gradient of output (oh, ow)
// into acc, that plane's input positions (zeroed first, summed in double), rounded once into dx.
template <class Scatter>
void scatter_planes(const char* op, const Pool2dGeom& g, DType dtype, const void* dy, void* dx,
                    Scatter scatter) {
  visit_float(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gy = static_cast<const T*>(dy);
    T* gx = static_cast<T*>(dx);
    detail::parallel_for(g.planes, plane_grain(g), [&](int64_t p0, int64_t p1) {
      std::vector<double> acc(static_cast<size_t>(g.h * g.w));
      for (int64_t p = p0; p < p1; ++p) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t oh = 0; oh < g.h_out; ++oh) {
          for (int64_t ow = 0; ow < g.w_out; ++ow) {
            const int64_t o = (p * g.h_out + oh) * g.w_out + ow;
            scatter(acc.data(), oh, ow, o, widen(gy[o]));
          }
        }
        for (int64_t i = 0; i < g.h * g.w; ++i) gx[p * g.h * g.w + i] = narrow<T>(acc[i]);
      }
    });
  });
}

// Each dy element added at the position its index names, in double, rounded once into dx.
void scatter_to_indices(const char* op, const Pool2dGeom& g, DType dtype, const void* dy,
                        const int64_t* indices, void* dx) {
  scatter_planes(op, g, dtype, dy, dx,
                 [&](double* acc, int64_t, int64_t, int64_t o, double d) { acc[indices[o]] += d; });
}

// dst = v, rounded once to dst's storage type.
template <class T>
void round_into(T& dst, double v) {
  dst = narrow<T>(v);
}

// Average pooling over the windows window(g, oh, ow) gives: avg_window or adaptive_window.
template <class Window>
void avg_forward(const char* op, const Pool2dGeom& g, DType dtype, const void* x, void* y,
                 Window window) {
  const auto mean = [&](const auto* plane, int64_t oh, int64_t ow, auto& out, int64_t) {
    const AvgWindow win = window(g, oh, ow);
    double s = 0;
    for (int64_t ih = win.h0; ih < win.h1; ++ih) {
      for (int64_t iw = win.w0; iw < win.w1; ++iw) s += widen(plane[ih * g.w + iw]);
    }
    round_into(out, s / static_cast<double>(win.divisor));
  };
  for_each_output(op, g, dtype, x, y, mean);
}

template <class Window>
void avg_backward(const char* op, const Pool2dGeom& g, DType dtype, const void* dy, void* dx,
                  Window window) {
  scatter_planes(op, g, dtype, dy, dx, [&](double* acc, int64_t oh, int64_t ow, int64_t, double d) {
    const AvgWindow win = window(g, oh, ow);
    const double v = d / static_cast<double>(win.divisor);
    for (int64_t ih = win.h0; ih < win.h1; ++ih) {
      for (int64_t iw = win.w0; iw < win.w1; ++iw) acc[ih * g.w + iw] += v;
    }
  });
}

}  // namespace

namespace {

// Max pooling of planes [p0, p1): the same pick as kern::max_window_argmax (the first NaN, else
// the first maximum in row-major window order). Output columns whose windows lie inside the row
// go a window element at a time across the whole output row, branch-free: element e of the window
// replaces the best so far when it is greater, or NaN where the best is not (a NaN best stays);
// that is the sequential pick, without a branch per element. The edge columns go
// window by window, the window clipped to the input once.
template <class T>
void max_planes(const Pool2dGeom& g, const T* x, T* y, int64_t* indices, int64_t p0, int64_t p1) {
  // Columns [a, b) have every window column inside [0, w).
  int64_t a = 0;
  while (a < g.w_out && a * g.stride_w - g.pad_w < 0) ++a;
  int64_t b = g.w_out;
  while (b > a && (b - 1) * g.stride_w - g.pad_w + (g.kw - 1) * g.dil_w >= g.w) --b;
  std::vector<float> best_v(static_cast<size_t>(g.w_out));
  for (int64_t p = p0; p < p1; ++p) {
    const T* plane = x + p * g.h * g.w;
    for (int64_t oh = 0; oh < g.h_out; ++oh) {
      const int64_t h_first = oh * g.stride_h - g.pad_h;
      // Window rows i with h_first + i dil_h in [0, h).
      int64_t i0 = 0, i1 = g.kh;
      while (i0 < i1 && h_first + i0 * g.dil_h < 0) ++i0;
      while (i1 > i0 && h_first + (i1 - 1) * g.dil_h >= g.h) --i1;
      const int64_t o_row = (p * g.h_out + oh) * g.w_out;
      T* y_row = y + o_row;
      int64_t* idx = indices + o_row;
      const auto edge = [&](int64_t ow) {
        const int64_t w_first = ow * g.stride_w - g.pad_w;
        int64_t j0 = 0, j1 = g.kw;
        while (j0 < j1 && w_first + j0 * g.dil_w < 0) ++j0;
        while (j1 > j0 && w_first + (j1 - 1) * g.dil_w >= g.w) --j1;
        int64_t best = (h_first + i0 * g.dil_h) * g.w + w_first + j0 * g.dil_w;
        float bv = static_cast<float>(plane[best]);
        for (int64_t i = i0; i < i1 && bv == bv; ++i) {
          const T* row = plane + (h_first + i * g.dil_h) * g.w + w_first;
          for (int64_t j = j0; j < j1; ++j) {
            const float v = static_cast<float>(row[j * g.dil_w]);
            if (v > bv || v != v) {
              best = (h_first + i * g.dil_h) * g.w + w_first + j * g.dil_w;
              bv = v;
              if (v != v) break;
            }
          }
        }
        y_row[ow] = plane[best];
        idx[ow] = best;
      };
      for (int64_t ow = 0; ow < a; ++ow) edge(ow);
      for (int64_t ow = b; ow < g.w_out; ++ow) edge(ow);
      if (a >= b) continue;
      float* bv = best_v.data();
      // In locals: the stores to idx could otherwise alias g's fields, reloaded every element.
      const int64_t stride = g.stride_w;
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = 0; j < g.kw; ++j) {
          // Input offset of window element (i, j) of column ow: base + ow stride.
          const int64_t base = (h_first + i * g.dil_h) * g.w - g.pad_w + j * g.dil_w;
          if (i == i0 && j == 0) {
            for (int64_t ow = a; ow < b; ++ow) {
              const int64_t off = base + ow * stride;
              bv[ow] = static_cast<float>(plane[off]);
              idx[ow] = off;
            }
            continue;
          }
          for (int64_t ow = a; ow < b; ++ow) {
            const int64_t off = base + ow * stride;
            const float v = static_cast<float>(plane[off]), cur = bv[ow];
            // Selected through masks: compilers turned the conditional form into branches, which
            // mispredict on data in no order (three times slower).
            const int64_t take = -static_cast<int64_t>((v > cur) | ((v != v) & (cur == cur)));
            bv[ow] =
                std::bit_cast<float>((std::bit_cast<uint32_t>(v) & static_cast<uint32_t>(take)) |
                                     (std::bit_cast<uint32_t>(cur) & ~static_cast<uint32_t>(take)));
            idx[ow] = (off & take) | (idx[ow] & ~take);
          }
        }
      }
      for (int64_t ow = a; ow < b; ++ow) y_row[ow] = plane[idx[ow]];
    }
  }
}

}  // namespace

void max_pool2d_forward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* x, void* y,
                        int64_t* indices) {
  if (dtype != DType::f64) {
    // f32, bf16 and f16 compare exactly as float.
    visit_float(dtype, "max_pool2d_forward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, double>) {
        detail::parallel_for(g.planes, plane_grain(g), [&](int64_t p0, int64_t p1) {
          max_planes(g, static_cast<const T*>(x), static_cast<T*>(y), indices, p0, p1);
        });
      }
    });
    return;
  }
  const auto max = [&](const auto* plane, int64_t oh, int64_t ow, auto& out, int64_t o) {
    const int64_t best = kern::max_window_argmax(g, plane, oh, ow, [](auto v) { return widen(v); });
    out = plane[best];
    indices[o] = best;
  };
  for_each_output("max_pool2d_forward", g, dtype, x, y, max);
}

void max_pool2d_backward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* dy,
                         const int64_t* indices, void* dx) {
  if (g.stride_h > (g.kh - 1) * g.dil_h && g.stride_w > (g.kw - 1) * g.dil_w) {
    // Windows that cannot overlap (MaxPool2d(2) and the like): an input element is the maximum of
    // at most one window, so its gradient is 0 + that window's, as the sum below would give it,
    // written in place of a plane of double sums.
    visit_float(dtype, "max_pool2d_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* gy = static_cast<const T*>(dy);
      T* gx = static_cast<T*>(dx);
      const int64_t outs = g.h_out * g.w_out;
      detail::parallel_for(g.planes, plane_grain(g), [&](int64_t p0, int64_t p1) {
        std::fill(gx + p0 * g.h * g.w, gx + p1 * g.h * g.w, narrow<T>(0.0));
        for (int64_t p = p0; p < p1; ++p) {
          T* plane = gx + p * g.h * g.w;
          for (int64_t o = p * outs; o < (p + 1) * outs; ++o) {
            plane[indices[o]] = narrow<T>(0.0 + widen(gy[o]));
          }
        }
      });
    });
    return;
  }
  scatter_to_indices("max_pool2d_backward", g, dtype, dy, indices, dx);
}

void avg_pool2d_forward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* x, void* y) {
  avg_forward("avg_pool2d_forward", g, dtype, x, y, avg_window);
}

void avg_pool2d_backward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* dy, void* dx) {
  avg_backward("avg_pool2d_backward", g, dtype, dy, dx, avg_window);
}

void adaptive_avg_pool2d_forward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* x,
                                 void* y) {
  avg_forward("adaptive_avg_pool2d_forward", g, dtype, x, y, adaptive_window);
}

void adaptive_avg_pool2d_backward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* dy,
                                  void* dx) {
  avg_backward("adaptive_avg_pool2d_backward", g, dtype, dy, dx, adaptive_window);
}

void adaptive_max_pool2d_forward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* x,
                                 void* y, int64_t* indices) {
  const auto max = [&](const auto* plane, int64_t oh, int64_t ow, auto& out, int64_t o) {
    const int64_t best =
        kern::adaptive_window_argmax(g, plane, oh, ow, [](auto v) { return widen(v); });
    out = plane[best];
    indices[o] = best;
  };
  for_each_output("adaptive_max_pool2d_forward", g, dtype, x, y, max);
}

void adaptive_max_pool2d_backward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* dy,
                                  const int64_t* indices, void* dx) {
  scatter_to_indices("adaptive_max_pool2d_backward", g, dtype, dy, indices, dx);
}

}  // namespace sinter::cpu
