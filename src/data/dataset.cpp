// Dataset's default batching (stack the examples) and TensorDataset's gather-based batching.
#include "sinter/data/dataset.h"

#include <utility>

#include "sinter/autograd.h"
#include "sinter/ops.h"

namespace sinter::data {

Batch Dataset::get_batch(const std::vector<int64_t>& indices) const {
  SINTER_CHECK(!indices.empty(), "Dataset::get_batch: no indices");
  std::vector<Tensor> inputs, targets;
  inputs.reserve(indices.size());
  targets.reserve(indices.size());
  for (int64_t i : indices) {
    Example e = get(i);
    inputs.push_back(std::move(e.input));
    targets.push_back(std::move(e.target));
  }
  return {stack(inputs), stack(targets)};
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets) {
  reset(std::move(inputs), std::move(targets));
}

void TensorDataset::reset(Tensor inputs, Tensor targets) {
  SINTER_CHECK(inputs.defined() && targets.defined(), "TensorDataset: undefined tensor");
  SINTER_CHECK(inputs.dim() >= 1 && targets.dim() >= 1,
               "TensorDataset: inputs and targets need a leading example dim, got shapes ",
               shape_str(inputs.shape()), " and ", shape_str(targets.shape()));
  SINTER_CHECK(inputs.size(0) == targets.size(0), "TensorDataset: ", inputs.size(0), " inputs but ",
               targets.size(0), " targets");
  SINTER_CHECK(inputs.device() == targets.device(), "TensorDataset: inputs on ", inputs.device(),
               ", targets on ", targets.device());
  inputs_ = inputs.detach();
  targets_ = targets.detach();
}

Example TensorDataset::get(int64_t index) const {
  SINTER_CHECK(index >= 0 && index < size(), "TensorDataset::get: index ", index,
               " out of range for ", size(), " examples");
  return {inputs_.select(0, index), targets_.select(0, index)};
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  SINTER_CHECK(!indices.empty(), "TensorDataset::get_batch: no indices");
  for (int64_t i : indices) {
    SINTER_CHECK(i >= 0 && i < size(), "TensorDataset::get_batch: index ", i, " out of range for ",
                 size(), " examples");
  }
  NoGradGuard no_grad;
  Tensor idx = from_vector(indices);
  if (!inputs_.device().is_cpu()) idx = idx.to(inputs_.device());
  return {index_select(inputs_, 0, idx), index_select(targets_, 0, idx)};
}

}  // namespace sinter::data
