// CPU reference 2-D pooling: max (with indices), average and adaptive average, forward and
// backward, plane by plane. Sums accumulate in double, so the reference is the more accurate side
// of a parity test.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpu/cpu_util.h"
#include "internal/kernels_pool.h"
#include "internal/pool_windows.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

// Calls fn(T{}) with T the storage type of the floating `dtype`.
template <class Fn>
void by_dtype(const char* op, DType dtype, Fn fn) {
  visit_float(dtype, op, [&](auto tag) { fn(typename decltype(tag)::type{}); });
}

}  // namespace

void max_pool2d_forward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* x, void* y,
                        int64_t* indices) {
  by_dtype("max_pool2d_forward", dtype, [&](auto t) {
    using T = decltype(t);
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    for (int64_t p = 0; p < g.planes; ++p) {
      const T* plane = in + p * g.h * g.w;
      for (int64_t oh = 0; oh < g.h_out; ++oh) {
        for (int64_t ow = 0; ow < g.w_out; ++ow) {
          const int64_t best =
              kern::max_window_argmax(g, plane, oh, ow, [](T v) { return widen(v); });
          const int64_t o = (p * g.h_out + oh) * g.w_out + ow;
          out[o] = plane[best];
          indices[o] = best;
        }
      }
    }
  });
}

void max_pool2d_backward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* dy,
                         const int64_t* indices, void* dx) {
  by_dtype("max_pool2d_backward", dtype, [&](auto t) {
    using T = decltype(t);
    const T* gy = static_cast<const T*>(dy);
    T* gx = static_cast<T*>(dx);
    std::vector<double> acc(static_cast<size_t>(g.h * g.w));
    for (int64_t p = 0; p < g.planes; ++p) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const int64_t hw_out = g.h_out * g.w_out;
      for (int64_t o = 0; o < hw_out; ++o) {
        acc[indices[p * hw_out + o]] += widen(gy[p * hw_out + o]);
      }
      for (int64_t i = 0; i < g.h * g.w; ++i) gx[p * g.h * g.w + i] = narrow<T>(acc[i]);
    }
  });
}

void avg_pool2d_forward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* x, void* y) {
  by_dtype("avg_pool2d_forward", dtype, [&](auto t) {
    using T = decltype(t);
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    for (int64_t p = 0; p < g.planes; ++p) {
      const T* plane = in + p * g.h * g.w;
      for (int64_t oh = 0; oh < g.h_out; ++oh) {
        for (int64_t ow = 0; ow < g.w_out; ++ow) {
          const AvgWindow win = avg_window(g, oh, ow);
          double s = 0;
          for (int64_t ih = win.h0; ih < win.h1; ++ih) {
            for (int64_t iw = win.w0; iw < win.w1; ++iw) s += widen(plane[ih * g.w + iw]);
          }
          out[(p * g.h_out + oh) * g.w_out + ow] = narrow<T>(s / static_cast<double>(win.divisor));
        }
      }
    }
  });
}

void avg_pool2d_backward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* dy, void* dx) {
  by_dtype("avg_pool2d_backward", dtype, [&](auto t) {
    using T = decltype(t);
    const T* gy = static_cast<const T*>(dy);
    T* gx = static_cast<T*>(dx);
    std::vector<double> acc(static_cast<size_t>(g.h * g.w));
    for (int64_t p = 0; p < g.planes; ++p) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t oh = 0; oh < g.h_out; ++oh) {
        for (int64_t ow = 0; ow < g.w_out; ++ow) {
          const AvgWindow win = avg_window(g, oh, ow);
          const double v =
              widen(gy[(p * g.h_out + oh) * g.w_out + ow]) / static_cast<double>(win.divisor);
          for (int64_t ih = win.h0; ih < win.h1; ++ih) {
            for (int64_t iw = win.w0; iw < win.w1; ++iw) acc[ih * g.w + iw] += v;
          }
        }
      }
      for (int64_t i = 0; i < g.h * g.w; ++i) gx[p * g.h * g.w + i] = narrow<T>(acc[i]);
    }
  });
}

void adaptive_avg_pool2d_forward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* x,
                                 void* y) {
  by_dtype("adaptive_avg_pool2d_forward", dtype, [&](auto t) {
    using T = decltype(t);
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    for (int64_t p = 0; p < g.planes; ++p) {
      const T* plane = in + p * g.h * g.w;
      for (int64_t oh = 0; oh < g.h_out; ++oh) {
        const int64_t h0 = adaptive_start(oh, g.h, g.h_out), h1 = adaptive_end(oh, g.h, g.h_out);
        for (int64_t ow = 0; ow < g.w_out; ++ow) {
          const int64_t w0 = adaptive_start(ow, g.w, g.w_out);
          const int64_t w1 = adaptive_end(ow, g.w, g.w_out);
          double s = 0;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) s += widen(plane[ih * g.w + iw]);
          }
          out[(p * g.h_out + oh) * g.w_out + ow] =
              narrow<T>(s / static_cast<double>((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
}

void adaptive_avg_pool2d_backward(const Ctx&, const Pool2dGeom& g, DType dtype, const void* dy,
                                  void* dx) {
  by_dtype("adaptive_avg_pool2d_backward", dtype, [&](auto t) {
    using T = decltype(t);
    const T* gy = static_cast<const T*>(dy);
    T* gx = static_cast<T*>(dx);
    std::vector<double> acc(static_cast<size_t>(g.h * g.w));
    for (int64_t p = 0; p < g.planes; ++p) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t oh = 0; oh < g.h_out; ++oh) {
        const int64_t h0 = adaptive_start(oh, g.h, g.h_out), h1 = adaptive_end(oh, g.h, g.h_out);
        for (int64_t ow = 0; ow < g.w_out; ++ow) {
          const int64_t w0 = adaptive_start(ow, g.w, g.w_out);
          const int64_t w1 = adaptive_end(ow, g.w, g.w_out);
          const double v = widen(gy[(p * g.h_out + oh) * g.w_out + ow]) /
                           static_cast<double>((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) acc[ih * g.w + iw] += v;
          }
        }
      }
      for (int64_t i = 0; i < g.h * g.w; ++i) gx[p * g.h * g.w + i] = narrow<T>(acc[i]);
    }
  });
}

}  // namespace sinter::cpu
