// SGD with momentum, dampening, Nesterov momentum, L2 weight decay and maximize, with PyTorch's
// update rules.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sinter/optim/optimizer.h"

namespace sinter::optim {

// The options in PyTorch's order (Note [optimizer options]): SGDOptions{.lr = 0.1, .momentum =
// 0.9}, and SGDGroup{.params = ..., .lr = 0.01} for a group of its own. nesterov needs momentum > 0
// and dampening == 0. capturable: the learning rate lives on the parameters' device, so that a
// step captured in a CUDA graph follows later changes of it (a schedule).
#define SINTER_SGD_OPTIONS(X)               \
  X(double, lr, 1e-3, NonNegative)          \
  X(double, momentum, 0.0, NonNegative)     \
  X(double, dampening, 0.0, Finite)         \
  X(double, weight_decay, 0.0, NonNegative) \
  X(bool, nesterov, false, Flag)            \
  X(bool, maximize, false, Flag)            \
  X(bool, capturable, false, Flag)
SINTER_OPTIMIZER_OPTIONS(SGD, SINTER_SGD_OPTIONS)

// The nesterov check (Note [optimizer options]).
void check_options(const SGDOptions& o, size_t group);

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
