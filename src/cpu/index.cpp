// CPU reference for index_select (gather of whole slices along one dim) and index_add (its adjoint,
// a scatter-add where repeated indices accumulate).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/cpu_util.h"
#include "internal/kernels.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

// bf16/f16 add in float and round once per addition, as the CUDA atomics do.
template <typename T>
void index_add_typed(T* out, int64_t outer, int64_t out_dim, int64_t inner, const int64_t* idx,
                     int64_t nidx, const T* src) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < nidx; ++j) {
      T* dst = out + (o * out_dim + idx[j]) * inner;
      const T* s = src + (o * nidx + j) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          dst[i] += s[i];
        } else {
          dst[i] = T(static_cast<float>(dst[i]) + static_cast<float>(s[i]));
        }
      }
    }
  }
}

}  // namespace

// Every dtype is a plain copy of bytes here: a slice (one index, all of inner) is contiguous.
void index_select(const Ctx&, const void* in, DType dtype, int64_t outer, int64_t in_dim,
                  int64_t inner, const int64_t* idx, int64_t nidx, void* out) {
  const size_t slice = static_cast<size_t>(inner) * element_size(dtype);
  if (slice == 0) return;
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < nidx; ++j) {
      std::memcpy(dst + static_cast<size_t>(o * nidx + j) * slice,
                  src + static_cast<size_t>(o * in_dim + idx[j]) * slice, slice);
    }
  }
}

void index_add(const Ctx&, void* out, DType dtype, int64_t outer, int64_t out_dim, int64_t inner,
               const int64_t* idx, int64_t nidx, const void* src) {
  visit_float(dtype, "index_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_add_typed(static_cast<T*>(out), outer, out_dim, inner, idx, nidx,
                    static_cast<const T*>(src));
  });
}

}  // namespace sinter::cpu
