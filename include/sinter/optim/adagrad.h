// Adagrad, with learning-rate decay, an initial accumulator, L2 weight decay and maximize,
// following PyTorch's formulas.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sinter/optim/adagrad_options.h"
#include "sinter/optim/optimizer.h"

namespace sinter::optim {

// The parameter groups of the options in adagrad_options.h.
SINTER_OPTIMIZER_GROUP(Adagrad, SINTER_ADAGRAD_OPTIONS)

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
