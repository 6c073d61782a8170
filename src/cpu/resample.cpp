// CPU reference resampling (interpolate): forward and backward, plane by plane, the planes split
// over the CPU threads. Taps come from kern::resample_taps in the coordinate type PyTorch uses;
// the sums run in double, so the reference is the more accurate side of a parity test.
#include "kern/resample.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpu/cpu_util.h"
#include "internal/parallel.h"

namespace sinter::cpu {
namespace {

// The coordinate type of storage type T (Note [resample coordinates] in src/kern/resample.h).
template <class T>
using Coord = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Every tap of one dim, for each output position along it.
template <class C>
std::vector<ResampleTaps<C>> dim_taps(const ResampleGeom& g, int k) {
  std::vector<ResampleTaps<C>> taps(static_cast<size_t>(g.out[k]));
  for (int64_t o = 0; o < g.out[k]; ++o) taps[static_cast<size_t>(o)] = resample_taps<C>(g, k, o);
  return taps;
}

// The taps of g's three dims, and a loop over the outputs of one plane.
template <class C>
struct PlaneTaps {
  std::vector<ResampleTaps<C>> t0, t1, t2;

  explicit PlaneTaps(const ResampleGeom& g)
      : t0(dim_taps<C>(g, 0)), t1(dim_taps<C>(g, 1)), t2(dim_taps<C>(g, 2)) {}

  // fn(o, taps0, taps1, taps2) for every output offset o in a plane, in order.
  template <class Fn>
  void each_output(Fn fn) const {
    int64_t o = 0;
    for (const auto& a : t0) {
      for (const auto& b : t1) {
        for (const auto& c : t2) fn(o++, a, b, c);
      }
    }
  }
};

// Planes a thread takes at least: about 16384 outputs' work.
int64_t plane_grain(const ResampleGeom& g) {
  return std::max<int64_t>(
      1, (int64_t{1} << 14) / std::max<int64_t>(1, g.out[0] * g.out[1] * g.out[2]));
}

}  // namespace

void resample_forward(const Ctx&, const ResampleGeom& g, DType dtype, const void* x, void* y) {
  visit_float(dtype, "resample_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Coord<T>;
    const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
    const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
    const PlaneTaps<C> taps(g);
    detail::parallel_for(g.planes, plane_grain(g), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const T* plane = static_cast<const T*>(x) + p * in_plane;
        T* out = static_cast<T*>(y) + p * out_plane;
        taps.each_output([&](int64_t o, const auto& t0, const auto& t1, const auto& t2) {
          double s0 = 0;
          for (int a = 0; a < t0.n; ++a) {
            double s1 = 0;
            for (int b = 0; b < t1.n; ++b) {
              const T* row = plane + (t0.index[a] * g.in[1] + t1.index[b]) * g.in[2];
              double s2 = 0;
              for (int c = 0; c < t2.n; ++c) {
                s2 += static_cast<double>(t2.weight[c]) * widen(row[t2.index[c]]);
              }
              s1 += static_cast<double>(t1.weight[b]) * s2;
            }
            s0 += static_cast<double>(t0.weight[a]) * s1;
          }
          out[o] = narrow<T>(s0);
        });
      }
    });
  });
}

void resample_backward(const Ctx&, const ResampleGeom& g, DType dtype, const void* dy, void* dx) {
  visit_float(dtype, "resample_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Coord<T>;
    const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
    const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
    const PlaneTaps<C> taps(g);
    detail::parallel_for(g.planes, plane_grain(g), [&](int64_t p0, int64_t p1) {
      std::vector<double> acc(static_cast<size_t>(in_plane));
      for (int64_t p = p0; p < p1; ++p) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const T* grad = static_cast<const T*>(dy) + p * out_plane;
        taps.each_output([&](int64_t o, const auto& t0, const auto& t1, const auto& t2) {
          const double d = widen(grad[o]);
          for (int a = 0; a < t0.n; ++a) {
            for (int b = 0; b < t1.n; ++b) {
              double* row = acc.data() + (t0.index[a] * g.in[1] + t1.index[b]) * g.in[2];
              const double w =
                  d * static_cast<double>(t0.weight[a]) * static_cast<double>(t1.weight[b]);
              for (int c = 0; c < t2.n; ++c) {
                row[t2.index[c]] += w * static_cast<double>(t2.weight[c]);
              }
            }
          }
        });
        T* plane = static_cast<T*>(dx) + p * in_plane;
        for (int64_t i = 0; i < in_plane; ++i) {
          plane[i] = narrow<T>(acc[static_cast<size_t>(i)]);
        }
      }
    });
  });
}

}  // namespace sinter::cpu
