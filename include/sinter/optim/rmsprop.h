// RMSprop, with momentum, the centered variant, L2 weight decay and maximize, following PyTorch's
// formulas.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sinter/optim/optimizer.h"
#include "sinter/optim/rmsprop_options.h"

namespace sinter::optim {

// The parameter groups of the options in rmsprop_options.h.
SINTER_OPTIMIZER_GROUP(RMSprop, SINTER_RMSPROP_OPTIONS)

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
