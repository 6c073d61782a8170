// DistributedSampler: one rank's shard of a data set, reshuffled per epoch from a seed. Pure index
// arithmetic, so it is built with or without MPI.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "internal/shuffle.h"
#include "sinter/core/error.h"
#include "sinter/dist.h"

namespace sinter::dist {
namespace {

using detail::splitmix64;
using detail::uniform_below;

// Every rank must compute the same permutation, so it depends on (seed, epoch) only and is built
// from integer arithmetic that is the same on every platform (std's distributions are not
// specified bit for bit, and ranks may run different builds).
uint64_t epoch_state(uint64_t seed, int64_t epoch) {
  uint64_t s = seed;
  uint64_t h = splitmix64(s) ^ static_cast<uint64_t>(epoch);
  return splitmix64(h) ^ 0x5d15ull;  // differs from the DataLoader's own stream for (seed, epoch)
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t size, int num_replicas, int rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : size_(size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  SINTER_CHECK(size >= 0, "DistributedSampler: size must be >= 0, got ", size);
  SINTER_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be >= 1, got ",
               num_replicas);
  SINTER_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: rank ", rank,
               " is outside [0, ", num_replicas, ")");
}

int64_t DistributedSampler::num_samples() const {
  const int64_t r = num_replicas_;
  // drop_last cuts the list down to a multiple of num_replicas; otherwise it is padded up to one.
  return drop_last_ ? size_ / r : (size_ + r - 1) / r;
}

std::vector<int64_t> DistributedSampler::indices() const {
  SINTER_CHECK(epoch_ >= 0, "DistributedSampler::indices: epoch must be >= 0, got ", epoch_);
  std::vector<int64_t> order(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order[static_cast<size_t>(i)] = i;
  if (shuffle_) {
    // Fisher-Yates.
    uint64_t state = epoch_state(seed_, epoch_);
    for (int64_t i = size_ - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(uniform_below(state, static_cast<uint64_t>(i) + 1));
      std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    }
  }
  const int64_t per_rank = num_samples();
  const int64_t total = per_rank * num_replicas_;
  std::vector<int64_t> shard;
  shard.reserve(static_cast<size_t>(per_rank));
  // Element k of the padded list is order[k % size]: the padding repeats the list from its start
  // (more than once when num_replicas > size).
  for (int64_t k = rank_; k < total; k += num_replicas_) {
    shard.push_back(order[static_cast<size_t>(k % size_)]);
  }
  return shard;
}

}  // namespace sinter::dist
