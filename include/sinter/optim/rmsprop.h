// RMSprop, with momentum, the centered variant, L2 weight decay and maximize, following PyTorch's
// formulas.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sinter/optim/optimizer.h"

namespace sinter::optim {

// The options in PyTorch's order (Note [optimizer options]): RMSpropOptions{.lr = 1e-2, .momentum
// = 0.9}. alpha is the smoothing constant, in [0, 1). capturable: the learning rate and step count
// live on the parameters' device, for a step captured in a CUDA graph.
#define SINTER_RMSPROP_OPTIONS(X)           \
  X(double, lr, 1e-2, NonNegative)          \
  X(double, alpha, 0.99, Unit)              \
  X(double, eps, 1e-8, NonNegative)         \
  X(double, weight_decay, 0.0, NonNegative) \
  X(double, momentum, 0.0, NonNegative)     \
  X(bool, centered, false, Flag)            \
  X(bool, maximize, false, Flag)            \
  X(bool, capturable, false, Flag)
SINTER_OPTIMIZER_OPTIONS(RMSprop, SINTER_RMSPROP_OPTIONS)

// Per parameter p with gradient g:
//   g <- -g if maximize;  g <- g + weight_decay * p
//   v <- alpha v + (1 - alpha) g^2
//   centered:  m <- alpha m + (1 - alpha) g;  d = sqrt(v - m^2) + eps;  else d = sqrt(v) + eps
//   momentum > 0:  b <- momentum b + g / d;  p <- p - lr b;  else p <- p - lr g / d
// State: "step", "square_avg" (v), "momentum_buffer" (b, with momentum), "grad_avg" (m, centered).
class RMSprop : public OptimizerWithOptions<RMSpropOptions, RMSpropGroup> {
 public:
  using OptimizerWithOptions::OptimizerWithOptions;
  std::string momentum_name() const override { return "momentum"; }

 protected:
  void step_group(size_t group, const RMSpropOptions& o) override;
  std::vector<std::string> state_names() const override {
    return {"step", "square_avg", "momentum_buffer", "grad_avg"};
  }
};

}  // namespace sinter::optim
