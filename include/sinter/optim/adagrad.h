// Adagrad, with learning-rate decay, an initial accumulator, L2 weight decay and maximize,
// following PyTorch's formulas.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sinter/optim/optimizer.h"

namespace sinter::optim {

// The options in PyTorch's order (Note [optimizer options]): AdagradOptions{.lr = 0.1, .lr_decay =
// 1e-4}. capturable (not in PyTorch's Adagrad): the learning rate and step count live on the
// parameters' device, for a step captured in a CUDA graph.
#define SINTER_ADAGRAD_OPTIONS(X)                        \
  X(double, lr, 1e-2, NonNegative)                       \
  X(double, lr_decay, 0.0, NonNegative)                  \
  X(double, weight_decay, 0.0, NonNegative)              \
  X(double, initial_accumulator_value, 0.0, NonNegative) \
  X(double, eps, 1e-10, NonNegative)                     \
  X(bool, maximize, false, Flag)                         \
  X(bool, capturable, false, Flag)
SINTER_OPTIMIZER_OPTIONS(Adagrad, SINTER_ADAGRAD_OPTIONS)

// Per parameter p with gradient g, at this parameter's step t = 1, 2, ...:
//   g <- -g if maximize;  g <- g + weight_decay * p
//   s <- s + g^2   (s starts at initial_accumulator_value)
//   p <- p - lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps)
// State: "step", "sum" (s).
class Adagrad : public OptimizerWithOptions<AdagradOptions, AdagradGroup> {
 public:
  using OptimizerWithOptions::OptimizerWithOptions;

 protected:
  void step_group(size_t group, const AdagradOptions& o) override;
  std::vector<std::string> state_names() const override { return {"step", "sum"}; }
};

}  // namespace sinter::optim
