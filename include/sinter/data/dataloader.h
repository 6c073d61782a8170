// DataLoader: batches from a Dataset, shuffled per epoch with a seed, prepared ahead by a
// background thread, and delivered on a target device (pinned host buffers and asynchronous copies
// for CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <vector>

#include "sinter/core/device.h"
#include "sinter/core/generator.h"
#include "sinter/core/noncopyable.h"
#include "sinter/data/dataset.h"

namespace sinter::data {

// Runs on the prefetch thread, on the host batch, before it is pinned and copied to the device.
// `gen` is seeded from (seed, epoch), so the augmentation of an epoch is reproducible.
using BatchTransform = std::function<void(Batch& batch, Generator& gen)>;

// Returns the dataset indices an epoch visits, in order (any count, repeats allowed, each in
// [0, dataset size)). Called on the consumer's thread when the epoch starts, and by size().
using Sampler = std::function<std::vector<int64_t>(int64_t epoch)>;

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_last = false;  // drop a last batch smaller than batch_size
  // Batches the background thread prepares ahead of the consumer; 0 prepares each batch in the
  // consumer's thread when it is asked for (no thread).
  int64_t prefetch = 2;
  Device device = Device::cpu();  // where batches are delivered
  // For a CUDA device: gather into page-locked host memory so that the copies are asynchronous.
  bool pin_memory = true;
  BatchTransform transform = nullptr;
  // When set, decides each epoch's order instead of shuffle (which must then be false): e.g. the
  // shard of this rank in data-parallel training (see "Sampler" below).
  Sampler sampler = nullptr;
};

namespace detail {
class EpochRun;
}

// Iterating over the loader runs one epoch:
//
//   DataLoader loader(dataset, {.batch_size = 64, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const Batch& b : loader) train_step(b.input, b.target);
//
// Each begin() starts the next epoch (0, 1, 2, ... unless set_epoch says otherwise); with shuffle
// the order is a permutation that depends only on (seed, epoch). Starting an epoch ends the
// previous one and invalidates its iterators. The destructor stops the prefetch thread cleanly,
// also mid-epoch. An exception thrown while preparing a batch is rethrown by the iterator when that
// batch is due.
//
// Sampler: options.sampler(epoch) gives the order instead, e.g. one rank's shard of the data set,
// reshuffled per epoch, from sinter::dist::DistributedSampler (sinter/dist.h):
//
//   dist::DistributedSampler shard(train->size(), pg->size(), pg->rank(), true, seed);
//   DataLoader loader(train, {.batch_size = 64, .sampler = [shard](int64_t epoch) mutable {
//                               shard.set_epoch(epoch);
//                               return shard.indices();
//                             }});
class DataLoader : NonCopyable {
 public:
  // The loader shares ownership of the dataset.
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);
  // The caller keeps `dataset` alive for as long as the loader.
  DataLoader(const Dataset& dataset, DataLoaderOptions options);
  ~DataLoader();

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;

    Iterator() = default;
    const Batch& operator*() const { return current_; }
    const Batch* operator->() const { return &current_; }
    Iterator& operator++();
    // Iterators compare equal when both are at the end.
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.done_ == b.done_; }

   private:
    friend class DataLoader;
    explicit Iterator(detail::EpochRun* run);
    detail::EpochRun* run_ = nullptr;
    Batch current_;
    bool done_ = true;
  };

  Iterator begin();
  Iterator end() { return Iterator(); }

  // Batches in the next epoch (with a sampler: of the order it returns for that epoch).
  int64_t size() const;
  // The epoch the next begin() runs.
  int64_t epoch() const { return next_epoch_; }
  void set_epoch(int64_t epoch);
  // The order in which an epoch visits the dataset: the sampler's, else a permutation with
  // shuffle, else the identity. A sampler's indices are checked against the dataset's size.
  std::vector<int64_t> indices(int64_t epoch) const;
  const DataLoaderOptions& options() const { return options_; }

 private:
  int64_t num_batches(int64_t num_indices) const;

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t next_epoch_ = 0;
  std::unique_ptr<detail::EpochRun> run_;
};

}  // namespace sinter::data
