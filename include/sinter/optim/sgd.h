// SGD with momentum, dampening, Nesterov momentum, L2 weight decay and maximize, with PyTorch's
// update rules.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sinter/optim/optimizer.h"
#include "sinter/optim/sgd_options.h"

namespace sinter::optim {

// The parameter groups of the options in sgd_options.h.
SINTER_OPTIMIZER_GROUP(SGD, SINTER_SGD_OPTIONS)

// Per parameter p with gradient g (t counts this parameter's steps):
//   g <- -g if maximize;  g <- g + weight_decay * p
//   if momentum != 0:  b <- g at t = 1 (no dampening), else b <- momentum * b + (1 - dampening) g
//                      g <- g + momentum * b if nesterov, else g <- b
//   p <- p - lr * g
// State: "momentum_buffer" (when momentum != 0).
class SGD : public OptimizerWithOptions<SGDOptions, SGDGroup> {
 public:
  using OptimizerWithOptions::OptimizerWithOptions;
  std::string momentum_name() const override { return "momentum"; }

 protected:
  void step_group(size_t group, const SGDOptions& o) override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  std::vector<std::string> scalar_state() const override { return {}; }
};

}  // namespace sinter::optim
