// CPU reference for reduce_rows (Sum, Prod, Max and Min along the last dim of a contiguous
// (outer, r) block) and scan_rows. Floating sums and products accumulate in double here (more than
// the f32 the CUDA kernels use) so that the reference is the more accurate side of a parity test.
// Rows are split over the CPU threads, and a long row's sum is cut in fixed chunks
// (Note [sum chunks]), so that the result is the same bits at any thread count.
#include "kern/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "cpu/cpu_util.h"
#include "cpu/vec_rows.h"
#include "internal/cache_aligned.h"
#include "internal/parallel.h"
#include "sinter/core/error.h"
#include "sinter/core/parallel.h"

namespace sinter::cpu {
namespace {

template <typename T>
constexpr bool kFloating = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                           std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

// The value a sum or a comparison sees: floating types widen exactly to double, the others to
// int64.
template <typename T>
auto exact(T v) {
  if constexpr (kFloating<T>) {
    return widen(v);
  } else {
    return static_cast<int64_t>(v);
  }
}

template <typename V>
bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Note [sum chunks]
// A row longer than kSumChunk is summed in chunks of kSumChunk elements (the last one shorter),
// each chunk into its own double (by lane_sum: Note [lane sums]), and the chunk sums are then added
// in chunk order. The cut depends on the row length alone, so the chunks may go to any thread and
// the sum is the same bits at every thread count (and with use_deterministic_algorithms on, which
// the CPU needs nothing more for).
constexpr int64_t kSumChunk = int64_t{1} << 15;

// The sum of row[0, n) in order: double for floating types, wrapping uint64 for the others (so
// that an overflowing sum wraps, as on the GPU, instead of being undefined).
template <typename T>
auto row_sum(const T* row, int64_t n) {
  if constexpr (!kFloating<T>) {
    uint64_t acc = 0;
    for (int64_t j = 0; j < n; ++j) acc += static_cast<uint64_t>(exact(row[j]));
    return acc;
  } else {
    return lane_sum(n, [&](int64_t j) { return exact(row[j]); });
  }
}

template <typename T>
void store_sum(void* out, int64_t o, decltype(row_sum<T>(nullptr, 0)) acc) {
  if constexpr (!kFloating<T>) {
    static_cast<int64_t*>(out)[o] = static_cast<int64_t>(acc);
  } else {
    static_cast<T*>(out)[o] = narrow<T>(acc);
  }
}

template <typename T>
void sum_rows(const T* in, int64_t outer, int64_t r, void* out) {
  const int64_t chunks = r > kSumChunk ? (r + kSumChunk - 1) / kSumChunk : 1;
  if (chunks == 1) {
    detail::parallel_blocks(outer, r, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) store_sum<T>(out, o, row_sum(in + o * r, r));
    });
    return;
  }
  std::vector<decltype(row_sum<T>(nullptr, 0))> part(static_cast<size_t>(outer * chunks));
  detail::parallel_blocks(outer * chunks, kSumChunk, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t o = i / chunks, c = i % chunks;
      const int64_t begin = c * kSumChunk, len = std::min(kSumChunk, r - begin);
      part[i] = row_sum(in + o * r + begin, len);
    }
  });
  for (int64_t o = 0; o < outer; ++o) {
    auto acc = part[o * chunks];
    for (int64_t c = 1; c < chunks; ++c) acc += part[o * chunks + c];
    store_sum<T>(out, o, acc);
  }
}

// Note [line sums]
// sum_lines adds each line (o, i) of an (outer, r, inner) block in the order row_sum adds a row
// (Note [sum chunks], Note [lane sums]) without transposing the block. A lane's partial sum adds
// rows l, l + kSumLanes, l + 2 kSumLanes, ... of a chunk in order, and the lanes are independent:
// the lanes are then added in order as lane_sum adds them, the chunks as sum_rows does, so the
// bits are those of reduce_rows on the transposed copy at every thread count, however the work is
// cut. A task takes one chunk, a block of at most kLineBlock lines and a group of consecutive
// lanes (the last group also the chunk's tail rows), and reads the chunk's rows in order, each
// row's part of the block into its lane's partial (17 of them: 557 KB at most, in the core's
// cache). The lanes are cut into groups (of 8, 4, ... lanes, reading runs of 8, 4, ... rows) only
// where the chunks and blocks alone give fewer tasks than threads. A task used to take one lane,
// reading one row in 16, and the bias gradient of a Linear over 8192 rows of 384 ran at a third of
// a copy's speed; reading every row in order, its whole width, it runs faster than the copy (f32:
// 0.76 -> 0.36 ms, the copy 0.47, on the Intel machine of benchmarks/README.md). Blocks of a part
// of each row were slower still: 8192 x 1152 in blocks of 192 lines took 3.1 ms against 1.4.
constexpr int64_t kLineBlock = 4096;

template <typename T>
void sum_lines_typed(const T* in, int64_t outer, int64_t r, int64_t inner, void* out) {
  using Acc = decltype(row_sum<T>(nullptr, 0));
  constexpr int64_t kParts = kSumLanes + 1;  // the lanes, then the tail
  const int64_t chunks = r > kSumChunk ? (r + kSumChunk - 1) / kSumChunk : 1;
  const int64_t threads = get_num_threads();
  // Each lane's partials, and each block's part of them, start on a cache line (the partials are
  // added in whole vectors, and vectors across two cache lines cost the sums a third of their
  // time): lanes `pitch` apart, blocks a whole number of cache lines wide.
  const int64_t pitch = detail::cache_line_pitch<Acc>(inner);
  const int64_t even = (inner + kLineBlock - 1) / kLineBlock;
  const int64_t block = detail::cache_line_pitch<Acc>((inner + even - 1) / even);
  const int64_t blocks = (inner + block - 1) / block;
  int64_t groups = 1;
  while (groups < kSumLanes && outer * chunks * blocks * groups < threads) groups *= 2;
  const int64_t lanes = kSumLanes / groups;
  // Every partial is written by the task of its lane and block.
  const auto part_storage = detail::aligned_array_for_overwrite<Acc>(
      static_cast<size_t>(outer * chunks * kParts * pitch));
  Acc* const part = part_storage.get();
  const int64_t tasks = outer * chunks * groups * blocks;
  detail::parallel_blocks(
      tasks, std::min(r, kSumChunk) / groups * block, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t b = t % blocks, grp = t / blocks % groups, oc = t / (blocks * groups);
          const int64_t o = oc / chunks, c = oc % chunks;
          const int64_t i0 = b * block, width = std::min(block, inner - i0);
          const int64_t j0 = c * kSumChunk, len = std::min(kSumChunk, r - j0);
          const int64_t full = len / kSumLanes * kSumLanes;
          const bool last = grp == groups - 1;
          Acc* acc = part + oc * kParts * pitch + i0;  // lane l's at acc + l * pitch
          for (int64_t l = grp * lanes; l < (last ? kParts : (grp + 1) * lanes); ++l) {
            std::fill(acc + l * pitch, acc + l * pitch + width, Acc{});
          }
          const T* x = in + (o * r + j0) * inner + i0;
          const auto add = [&](const T* row, Acc* into) {
            if constexpr (std::is_same_v<T, float>) {
              vec::add_widened_row(row, width, into);  // in the CPU's widest vectors
            } else if constexpr (std::is_same_v<T, BFloat16>) {
              vec::add_widened_bf16_row(row, width, into);
            } else {
              for (int64_t i = 0; i < width; ++i) into[i] += static_cast<Acc>(exact(row[i]));
            }
          };
          for (int64_t j = 0; j < full; j += kSumLanes) {
            for (int64_t l = grp * lanes; l < (grp + 1) * lanes; ++l) {
              add(x + (j + l) * inner, acc + l * pitch);
            }
          }
          if (last) {
            for (int64_t j = full; j < len; ++j) add(x + j * inner, acc + kSumLanes * pitch);
          }
        }
      });
  detail::parallel_blocks(outer * inner, chunks * kParts, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t o = e / inner, i = e % inner;
      Acc total{};
      for (int64_t c = 0; c < chunks; ++c) {
        const Acc* p = part + (o * chunks + c) * kParts * pitch + i;
        Acc s{};
        for (int64_t l = 0; l < kSumLanes; ++l) s += p[l * pitch];
        s += p[kSumLanes * pitch];
        total = c == 0 ? s : total + s;
      }
      store_sum<T>(out, e, total);
    }
  });
}

// The product of each row in order: double for floating types, wrapping uint64 for the others.
template <typename T>
void prod_rows(const T* in, int64_t outer, int64_t r, void* out) {
  detail::parallel_blocks(outer, r, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const T* row = in + o * r;
      if constexpr (!kFloating<T>) {
        uint64_t acc = 1;
        for (int64_t j = 0; j < r; ++j) acc *= static_cast<uint64_t>(exact(row[j]));
        static_cast<int64_t*>(out)[o] = static_cast<int64_t>(acc);
      } else {
        double acc = 1;
        for (int64_t j = 0; j < r; ++j) acc *= exact(row[j]);
        static_cast<T*>(out)[o] = narrow<T>(acc);
      }
    }
  });
}

// The first NaN wins outright; otherwise the first element that no later one strictly beats.
template <typename T, bool kMax>
void extreme_rows(const T* in, int64_t outer, int64_t r, T* out, int64_t* indices) {
  detail::parallel_blocks(outer, r, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const T* row = in + o * r;
      int64_t best = 0;
      auto best_v = exact(row[0]);
      if (!is_nan(best_v)) {
        for (int64_t j = 1; j < r; ++j) {
          const auto v = exact(row[j]);
          if (is_nan(v)) {
            best = j;
            break;
          }
          if (kMax ? v > best_v : v < best_v) {
            best = j;
            best_v = v;
          }
        }
      }
      out[o] = row[best];
      if (indices) indices[o] = best;
    }
  });
}

template <typename T>
void reduce_typed(const void* in, int64_t outer, int64_t r, ReduceOp op, void* out,
                  int64_t* indices) {
  const T* x = static_cast<const T*>(in);
  switch (op) {
    case ReduceOp::Sum:
      sum_rows(x, outer, r, out);
      return;
    case ReduceOp::Prod:
      prod_rows(x, outer, r, out);
      return;
    case ReduceOp::Max:
      extreme_rows<T, true>(x, outer, r, static_cast<T*>(out), indices);
      return;
    case ReduceOp::Min:
      extreme_rows<T, false>(x, outer, r, static_cast<T*>(out), indices);
      return;
  }
  SINTER_THROW("reduce_rows: unknown op ", static_cast<int>(op));
}

// The running sum (kProd: product) of each line (o, i), split over the threads: double for
// floating types, wrapping uint64 for the others (an overflow wraps, as on the GPU).
template <typename T, bool kProd>
void scan_typed(const T* in, int64_t outer, int64_t len, int64_t inner, bool reverse, void* out) {
  detail::parallel_blocks(outer * inner, len, [&](int64_t l0, int64_t l1) {
    for (int64_t line = l0; line < l1; ++line) {
      const int64_t o = line / inner, i = line % inner;
      const T* x = in + o * len * inner + i;
      if constexpr (!kFloating<T>) {
        int64_t* y = static_cast<int64_t*>(out) + o * len * inner + i;
        uint64_t acc = kProd ? 1 : 0;
        for (int64_t j = 0; j < len; ++j) {
          const int64_t k = reverse ? len - 1 - j : j;
          const auto v = static_cast<uint64_t>(exact(x[k * inner]));
          acc = kProd ? acc * v : acc + v;
          y[k * inner] = static_cast<int64_t>(acc);
        }
      } else {
        T* y = static_cast<T*>(out) + o * len * inner + i;
        double acc = kProd ? 1 : 0;
        for (int64_t j = 0; j < len; ++j) {
          const int64_t k = reverse ? len - 1 - j : j;
          acc = kProd ? acc * exact(x[k * inner]) : acc + exact(x[k * inner]);
          y[k * inner] = narrow<T>(acc);
        }
      }
    }
  });
}

// The output dtype the caller allocated must be `want`, the one the kernel writes.
void check_out_dtype(const char* op, DType dtype, DType out_dtype, DType want) {
  SINTER_CHECK(out_dtype == want, op, ": output dtype ", out_dtype, " for input ", dtype,
               ", expected ", want);
}

}  // namespace

void scan_rows(const Ctx&, const void* in, DType dtype, int64_t outer, int64_t len, int64_t inner,
               ReduceOp op, bool reverse, void* out, DType out_dtype) {
  check_out_dtype("scan_rows", dtype, out_dtype, is_integral(dtype) ? DType::i64 : dtype);
  SINTER_CHECK(op == ReduceOp::Sum || op == ReduceOp::Prod, "scan_rows: op ", static_cast<int>(op),
               " is not Sum or Prod");
  visit_storage(dtype, "scan_rows", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in);
    if (op == ReduceOp::Prod) {
      scan_typed<T, true>(x, outer, len, inner, reverse, out);
    } else {
      scan_typed<T, false>(x, outer, len, inner, reverse, out);
    }
  });
}

void sum_lines(const Ctx&, const void* in, DType dtype, int64_t outer, int64_t r, int64_t inner,
               void* out, DType out_dtype) {
  check_out_dtype("sum_lines", dtype, out_dtype, is_integral(dtype) ? DType::i64 : dtype);
  if (outer == 0 || inner == 0) return;
  visit_storage(dtype, "sum_lines", [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_lines_typed<T>(static_cast<const T*>(in), outer, r, inner, out);
  });
}

void reduce_rows(const Ctx&, const void* in, DType dtype, int64_t outer, int64_t r, ReduceOp op,
                 void* out, DType out_dtype, int64_t* indices) {
  const bool arith = op == ReduceOp::Sum || op == ReduceOp::Prod;
  check_out_dtype("reduce_rows", dtype, out_dtype,
                  arith && is_integral(dtype) ? DType::i64 : dtype);
  SINTER_CHECK(arith || r >= 1, "reduce_rows: Max/Min of an empty row");
  if (outer == 0) return;
  visit_storage(dtype, "reduce_rows", [&](auto tag) {
    reduce_typed<typename decltype(tag)::type>(in, outer, r, op, out, indices);
  });
}

}  // namespace sinter::cpu
