// CPU reference for topk_rows: each row's first k elements in Note [topk order], by a partial sort
// of its positions.
#include "kern/sort.h"

#include <algorithm>
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

}  // namespace sinter::cpu
