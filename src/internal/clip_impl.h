// The parts of clip_grad_norm_ that ZeroRedundancyOptimizer::clip_grad_norm_ shares, which adds an
// all-reduce of the partial over the ranks between them.
#pragma once

#include <vector>

#include "sinter/tensor.h"

namespace sinter::optim::detail {

// f64 when every gradient is f64, else f32: the dtype partials and the total are kept in.
DType norm_accumulator(const std::vector<Tensor>& grads);
// sum |g|^p over every element of `grads` (max |g| for norm_type = infinity), a 0-dim `acc` tensor
// on `device` (zero for no gradients).
Tensor grad_norm_partial(const std::vector<Tensor>& grads, double norm_type, DType acc,
                         Device device);
// The total norm from the reduced partial; scales every gradient in place by
// min(1, max_norm / (total + 1e-6)). Returns the total, on the partial's device.
Tensor scale_to_norm(const std::vector<Tensor>& grads, const Tensor& reduced, double max_norm,
                     double norm_type);
// max_norm >= 0 and norm_type > 0, else an Error naming `op`.
void check_clip_arguments(const char* op, double max_norm, double norm_type);

}  // namespace sinter::optim::detail
