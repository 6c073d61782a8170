// CPU reference of the recurrent cells' pointwise steps (Note [rnn cell steps] in src/kern/rnn.h):
// each (row, unit) through the shared unit functions, in the compute type of the CUDA kernels.
#include "kern/rnn.h"

#include <cstdint>

#include "cpu/cpu_util.h"
#include "internal/parallel.h"
#include "kern/scalar_ops.h"

namespace sinter::cpu {
namespace {

// fn(row, unit) over a batch x hidden grid, in parallel over rows.
template <class F>
void each_unit(int64_t batch, int64_t hidden, F&& fn) {
  detail::parallel_blocks(batch, hidden * 8, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      for (int64_t j = 0; j < hidden; ++j) fn(b, j);
    }
  });
}

}  // namespace

void lstm_cell(const Ctx& /*ctx*/, DType dtype, int64_t batch, int64_t hidden, const void* gates,
               const void* c_prev, void* h, void* c) {
  visit_float(dtype, "lstm_cell", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    const T* g = static_cast<const T*>(gates);
    const T* cp = static_cast<const T*>(c_prev);
    T* ho = static_cast<T*>(h);
    T* co = static_cast<T*>(c);
    each_unit(batch, hidden, [&](int64_t b, int64_t j) {
      const T* row = g + b * 4 * hidden;
      const auto u = kern::lstm_unit<C>(static_cast<C>(to_value(row[j])),
                                        static_cast<C>(to_value(row[hidden + j])),
                                        static_cast<C>(to_value(row[2 * hidden + j])),
                                        static_cast<C>(to_value(row[3 * hidden + j])),
                                        static_cast<C>(to_value(cp[b * hidden + j])));
      ho[b * hidden + j] = from_value<T>(u.h);
      co[b * hidden + j] = from_value<T>(u.c);
    });
  });
}

void lstm_cell_backward(const Ctx& /*ctx*/, DType dtype, int64_t batch, int64_t hidden,
                        const void* gates, const void* c_prev, const void* dh, const void* dc,
                        void* dgates, void* dc_prev) {
  visit_float(dtype, "lstm_cell_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    const T* g = static_cast<const T*>(gates);
    const T* cp = static_cast<const T*>(c_prev);
    const T* gh = static_cast<const T*>(dh);
    const T* gc = static_cast<const T*>(dc);
    T* dg = static_cast<T*>(dgates);
    T* dcp = static_cast<T*>(dc_prev);
    each_unit(batch, hidden, [&](int64_t b, int64_t j) {
      const T* row = g + b * 4 * hidden;
      const int64_t k = b * hidden + j;
      const auto d = kern::lstm_unit_backward<C>(
          static_cast<C>(to_value(row[j])), static_cast<C>(to_value(row[hidden + j])),
          static_cast<C>(to_value(row[2 * hidden + j])),
          static_cast<C>(to_value(row[3 * hidden + j])), static_cast<C>(to_value(cp[k])),
          static_cast<C>(to_value(gh[k])), static_cast<C>(to_value(gc[k])));
      T* out = dg + b * 4 * hidden;
      out[j] = from_value<T>(d.di);
      out[hidden + j] = from_value<T>(d.df);
      out[2 * hidden + j] = from_value<T>(d.dg);
      out[3 * hidden + j] = from_value<T>(d.dout);
      dcp[k] = from_value<T>(d.dc_prev);
    });
  });
}

void gru_cell(const Ctx& /*ctx*/, DType dtype, int64_t batch, int64_t hidden, const void* gi,
              const void* gh, const void* h_prev, void* h) {
  visit_float(dtype, "gru_cell", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    const T* x = static_cast<const T*>(gi);
    const T* s = static_cast<const T*>(gh);
    const T* hp = static_cast<const T*>(h_prev);
    T* ho = static_cast<T*>(h);
    each_unit(batch, hidden, [&](int64_t b, int64_t j) {
      const T* xr = x + b * 3 * hidden;
      const T* sr = s + b * 3 * hidden;
      const auto v = [&](const T* p, int64_t gate) {
        return static_cast<C>(to_value(p[gate * hidden + j]));
      };
      ho[b * hidden + j] =
          from_value<T>(kern::gru_unit<C>(v(xr, 0), v(xr, 1), v(xr, 2), v(sr, 0), v(sr, 1),
                                          v(sr, 2), static_cast<C>(to_value(hp[b * hidden + j]))));
    });
  });
}

void gru_cell_backward(const Ctx& /*ctx*/, DType dtype, int64_t batch, int64_t hidden,
                       const void* gi, const void* gh, const void* h_prev, const void* dh,
                       void* dgi, void* dgh, void* dh_prev) {
  visit_float(dtype, "gru_cell_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    const T* x = static_cast<const T*>(gi);
    const T* s = static_cast<const T*>(gh);
    const T* hp = static_cast<const T*>(h_prev);
    const T* g = static_cast<const T*>(dh);
    T* dx = static_cast<T*>(dgi);
    T* ds = static_cast<T*>(dgh);
    T* dhp = static_cast<T*>(dh_prev);
    each_unit(batch, hidden, [&](int64_t b, int64_t j) {
      const int64_t row = b * 3 * hidden, k = b * hidden + j;
      const auto v = [&](const T* p, int64_t gate) {
        return static_cast<C>(to_value(p[row + gate * hidden + j]));
      };
      const auto d = kern::gru_unit_backward<C>(v(x, 0), v(x, 1), v(x, 2), v(s, 0), v(s, 1),
                                                v(s, 2), static_cast<C>(to_value(hp[k])),
                                                static_cast<C>(to_value(g[k])));
      dx[row + j] = from_value<T>(d.dr);
      dx[row + hidden + j] = from_value<T>(d.dz);
      dx[row + 2 * hidden + j] = from_value<T>(d.dn);
      ds[row + j] = from_value<T>(d.dr);
      ds[row + hidden + j] = from_value<T>(d.dz);
      ds[row + 2 * hidden + j] = from_value<T>(d.dhn);
      dhp[k] = from_value<T>(d.dh_prev);
    });
  });
}

}  // namespace sinter::cpu
