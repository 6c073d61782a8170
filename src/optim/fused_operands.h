// The tensors one fused optimizer kernel call reads and writes (Note [fused optimizer step] in
// src/kern/optim.h), for Optimizer::rule_step (src/optim/optimizer.cpp).
#pragma once

#include <utility>
#include <vector>

#include "sinter/tensor.h"

namespace sinter::optim::detail {

// Contiguous copies of non-contiguous parameters and gradients, kept alive through the call, and
// every tensor the kernel writes.
class FusedOperands {
 public:
  // Registers parameter p (written) and its gradient; returns their contiguous versions, whose
  // data pointers the kernel takes.
  std::pair<Tensor, Tensor> add(const Tensor& p);
  // A state tensor the kernel writes (already contiguous, see Optimizer::fit_state).
  void written(const Tensor& t) { written_.push_back(t); }
  // After the kernel call: copies results into non-contiguous parameters and bumps the version of
  // everything written, as in-place ops would.
  void finish();

 private:
  std::vector<std::pair<Tensor, Tensor>> params_;  // (parameter, what the kernel updated)
  std::vector<Tensor> grads_;
  std::vector<Tensor> written_;
};

}  // namespace sinter::optim::detail
