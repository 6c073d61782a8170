// CPU reference for topk_rows: each row's first k elements in Note [topk order], by a partial sort
// of its positions; and for searchsorted_rows (Note [searchsorted]).
#include "kern/sort.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <numeric>
#include <vector>

#include "cpu/cpu_util.h"
#include "internal/parallel.h"

namespace sinter::cpu {

void topk_rows(const Ctx&, const void* in, DType dtype, int64_t rows, int64_t len, int64_t k,
               bool largest, void* values, int64_t* indices) {
  visit_storage(dtype, "topk_rows", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in);
    T* v = static_cast<T*>(values);
    detail::parallel_blocks(rows, 4 * len, [&](int64_t r0, int64_t r1) {
      std::vector<int64_t> order(static_cast<size_t>(len));
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = x + r * len;
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t i, int64_t j) {
          return topk_before(to_value(row[i]), i, to_value(row[j]), j, largest);
        });
        for (int64_t j = 0; j < k; ++j) {
          indices[r * k + j] = order[j];
          v[r * k + j] = row[order[j]];
        }
      }
    });
  });
}

void searchsorted_rows(const Ctx&, const void* bounds, const void* values, DType dtype,
                       int64_t rows, int64_t m, int64_t k, bool right, int64_t* out) {
  visit_storage(dtype, "searchsorted_rows", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* b = static_cast<const T*>(bounds);
    const T* v = static_cast<const T*>(values);
    // About log2(m) comparisons per value.
    const int64_t cost = 2 + static_cast<int64_t>(std::bit_width(static_cast<uint64_t>(m)));
    detail::parallel_blocks(rows * k, cost, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T* row = b + (i / k) * m;
        out[i] = searchsorted_index([&](int64_t j) { return to_value(row[j]); }, m, to_value(v[i]),
                                    right);
      }
    });
  });
}

}  // namespace sinter::cpu
