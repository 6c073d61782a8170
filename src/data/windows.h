// The window numbering of Note [text windows] in include/sinter/data/text.h, shared by the byte
// windows of TextCorpus and the token windows of TokenWindows: over spans of a sequence, span s
// holding max(0, size - T) windows of T + 1 items, example i is the window Philox draws from (seed,
// split, i).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kern/philox.h"

namespace sinter::data::detail {

// ends[s]: the windows of T + 1 items in spans 0..s, so that span s holds window numbers
// [ends[s - 1], ends[s]); ends.back() is the number that fit.
inline std::vector<int64_t> window_ends(const std::vector<int64_t>& span_sizes, int64_t context) {
  std::vector<int64_t> ends;
  int64_t fit = 0;
  for (const int64_t n : span_sizes) {
    fit += std::max<int64_t>(0, n - context);
    ends.push_back(fit);
  }
  return ends;
}

// The span of example `index`'s window and the window's start in it (ends.back() > 0).
inline std::pair<size_t, int64_t> pick_window(const std::vector<int64_t>& ends, int64_t index,
                                              uint32_t split, uint64_t seed) {
  const auto i = static_cast<uint64_t>(index);
  const kern::PhiloxBlock r =
      kern::philox4x32_10(static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32), split, 0u,
                          static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const int64_t w = kern::randint_i64(r, 0, ends.back());
  // The span holding window number w: the first whose cumulative count passes w.
  const auto s = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), w) - ends.begin());
  return {s, w - (s == 0 ? 0 : ends[s - 1])};
}

}  // namespace sinter::data::detail
