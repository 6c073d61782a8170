// Datasets: indexable collections of (input, target) examples, and TensorDataset, which holds a
// whole data set in two tensors and gathers batches from them directly.
#pragma once

#include <cstdint>
#include <vector>

#include "sinter/tensor.h"

namespace sinter::data {

struct Example {
  Tensor input;
  Tensor target;
};

// Examples stacked along a new dim 0: input (B, *input_shape), target (B, *target_shape).
struct Batch {
  Tensor input;
  Tensor target;
};

// A DataLoader calls get() / get_batch() from its prefetch thread, one call at a time; an
// implementation must not depend on the calling thread.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices`, stacked. The default stacks get(i) one by one; datasets held in
  // memory override it to gather all rows at once.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const;
};

// inputs: (N, *), targets: (N, *), on one device. Examples are views of row i; batches come from
// index_select over the whole tensors (one gather per batch, no per-example work).
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor inputs, Tensor targets);

  int64_t size() const override { return inputs_.size(0); }
  Example get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 protected:
  TensorDataset() = default;
  // For subclasses that read their tensors first; same checks as the constructor.
  void reset(Tensor inputs, Tensor targets);

 private:
  Tensor inputs_;
  Tensor targets_;
};

}  // namespace sinter::data
