// Platform-independent shuffling for the data loader and the distributed sampler: every rank and
// every build must produce the same order for the same (seed, epoch), which std's distributions do
// not promise, so the randomness is splitmix64 and integer rejection sampling.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace sinter::detail {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// One 64-bit stream per (seed, epoch, purpose): different purposes draw from unrelated streams.
inline uint64_t mix_seed(uint64_t seed, int64_t epoch, uint64_t purpose) {
  uint64_t s = seed;
  uint64_t h = splitmix64(s) ^ static_cast<uint64_t>(epoch);
  h = splitmix64(h) ^ purpose;
  return splitmix64(h);
}

// Uniform in [0, n), n >= 1, by rejection.
inline uint64_t uniform_below(uint64_t& state, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do {
    r = splitmix64(state);
  } while (r >= limit);
  return r % n;
}

// 0 .. n-1 in the order of epoch `epoch` for `seed` (Fisher-Yates), as the DataLoader shuffles.
inline std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  uint64_t state = mix_seed(seed, epoch, 1);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniform_below(state, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

}  // namespace sinter::detail
