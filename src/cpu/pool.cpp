// CPU reference 2-D pooling: max (with indices), average and adaptive average, forward and
// backward, plane by plane, the planes split over the CPU threads (each plane's arithmetic is the
// same on any thread). Sums accumulate in double, so the reference is the more accurate side of a
// parity test.
#include "kern/pool.h"

#include <algorithm>
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

void max_pool2d_forward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* x, void* y,
                        int64_t* indices) {
  const auto max = [&](const auto* plane, int64_t oh, int64_t ow, auto& out, int64_t o) {
    const int64_t best = kern::max_window_argmax(g, plane, oh, ow, [](auto v) { return widen(v); });
    out = plane[best];
    indices[o] = best;
  };
  for_each_output("max_pool2d_forward", g, dtype, x, y, max);
}

void max_pool2d_backward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* dy,
                         const int64_t* indices, void* dx) {
  scatter_planes("max_pool2d_backward", g, dtype, dy, dx,
                 [&](double* acc, int64_t, int64_t, int64_t o, double d) { acc[indices[o]] += d; });
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

}  // namespace sinter::cpu
