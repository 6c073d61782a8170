// CPU reference for index_select (gather of whole slices along one dim) and index_add (its adjoint,
// a scatter-add where repeated indices accumulate), and for gather and scatter_add, their
// elementwise counterparts (Note [gather layout]).
#include "kern/index.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <unordered_map>

#include "cpu/cpu_util.h"
#include "internal/parallel.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

// dst += v; bf16/f16 add in float and round once per addition, as the CUDA atomics do (the
// deterministic CUDA path rounds once per target: Note [deterministic algorithms]).
template <typename T>
void add_into(T& dst, T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    dst += v;
  } else {
    dst = T(static_cast<float>(dst) + static_cast<float>(v));
  }
}

template <typename T>
void index_add_typed(T* out, int64_t outer, int64_t out_dim, int64_t inner, const int64_t* idx,
                     int64_t nidx, const T* src) {
  // Columns (o, i) of the output split over the threads: each takes its sources in index order,
  // so repeated indices add in the same order on any thread count.
  detail::parallel_blocks(outer * inner, nidx, [&](int64_t c0, int64_t c1) {
    for (int64_t o = c0 / inner; o * inner < c1; ++o) {
      const int64_t i0 = std::max<int64_t>(c0 - o * inner, 0);
      const int64_t i1 = std::min<int64_t>(c1 - o * inner, inner);
      for (int64_t j = 0; j < nidx; ++j) {
        T* dst = out + (o * out_dim + idx[j]) * inner;
        const T* s = src + (o * nidx + j) * inner;
        for (int64_t i = i0; i < i1; ++i) add_into(dst[i], s[i]);
      }
    }
  });
}

}  // namespace

// Every dtype is a plain copy of bytes here: a slice (one index, all of inner) is contiguous.
void check_indices(const Ctx&, const int64_t* idx, int64_t n, int64_t lo, int64_t hi, int64_t skip,
                   DeviceCheck what) {
  for (int64_t k = 0; k < n; ++k) {
    if (idx[k] == skip || (idx[k] >= lo && idx[k] < hi)) continue;
    throw Error(device_check_message({1, static_cast<int32_t>(what), idx[k], lo, hi, skip, 1}));
  }
}

void index_select(const Ctx&, const void* in, DType dtype, int64_t outer, int64_t in_dim,
                  int64_t inner, const int64_t* idx, int64_t nidx, void* out) {
  const size_t slice = static_cast<size_t>(inner) * element_size(dtype);
  if (slice == 0) return;
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  detail::parallel_blocks(outer * nidx, inner, [&](int64_t s0, int64_t s1) {
    for (int64_t sl = s0; sl < s1; ++sl) {
      const int64_t o = sl / nidx, j = sl % nidx;
      std::memcpy(dst + static_cast<size_t>(sl) * slice,
                  src + static_cast<size_t>(o * in_dim + idx[j]) * slice, slice);
    }
  });
}

void index_add(const Ctx&, void* out, DType dtype, int64_t outer, int64_t out_dim, int64_t inner,
               const int64_t* idx, int64_t nidx, const void* src) {
  visit_float(dtype, "index_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_add_typed(static_cast<T*>(out), outer, out_dim, inner, idx, nidx,
                    static_cast<const T*>(src));
  });
}

void gather(const Ctx&, const void* in, DType dtype, const GatherGeom& g, const int64_t* idx,
            void* out) {
  visit_storage(dtype, "gather", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    detail::parallel_blocks(g.numel, 2, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) y[e] = x[gather_offset(g, e, idx[e])];
    });
  });
}

void scatter_add(const Ctx&, void* out, DType dtype, const GatherGeom& g, const int64_t* idx,
                 const void* src) {
  visit_float(dtype, "scatter_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = static_cast<T*>(out);
    const T* s = static_cast<const T*>(src);
    for (int64_t e = 0; e < g.numel; ++e) add_into(y[gather_offset(g, e, idx[e])], s[e]);
  });
}

// Sequential in element order (Note [scatter reduce]). f32, f64, the integers and bool combine
// in place (an integer wraps alike whether it is narrowed at each step or at the end); bf16 and
// f16 targets gather in f32 and round once, as CUDA's sorted runs do.
void scatter_reduce(const Ctx&, void* out, int64_t, DType dtype, const GatherGeom& g,
                    const int64_t* idx, const void* src, ScatterMode mode) {
  visit_storage(dtype, "scatter_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kern::visit_compute_type(dtype, [&](auto ctag) {
      using C = typename decltype(ctag)::type;
      T* y = static_cast<T*>(out);
      const T* s = static_cast<const T*>(src);
      if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
        std::unordered_map<int64_t, C> acc;
        for (int64_t e = 0; e < g.numel; ++e) {
          const int64_t off = gather_offset(g, e, idx[e]);
          const auto [it, fresh] = acc.try_emplace(off, static_cast<C>(y[off]));
          it->second = kern::scatter_combine(it->second, static_cast<C>(s[e]), mode);
        }
        for (const auto& [off, v] : acc) y[off] = T(v);
      } else {
        for (int64_t e = 0; e < g.numel; ++e) {
          T& t = y[gather_offset(g, e, idx[e])];
          t = kern::convert<T>(
              kern::scatter_combine(static_cast<C>(t), static_cast<C>(s[e]), mode));
        }
      }
    });
  });
}

}  // namespace sinter::cpu
