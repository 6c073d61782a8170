// SGD with momentum, dampening, Nesterov momentum, L2 weight decay and maximize, with PyTorch's
// update rules.
#pragma once

#include <vector>

#include "sinter/optim/optimizer.h"

namespace sinter::optim {

// The fields are in PyTorch's order, for designated initializers: {.lr = 0.1, .momentum = 0.9}.
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
  bool maximize = false;
  // The learning rate lives on the parameters' device, so that a step captured in a CUDA graph
  // follows later changes of it (a schedule).
  bool capturable = false;
};

// Per parameter p with gradient g (t counts this parameter's steps):
//   g <- -g if maximize;  g <- g + weight_decay * p
//   if momentum != 0:  b <- g at t = 1 (no dampening), else b <- momentum * b + (1 - dampening) g
//                      g <- g + momentum * b if nesterov, else g <- b
//   p <- p - lr * g
// State: "momentum_buffer" (when momentum != 0).
class SGD : public OptimizerWithOptions<SGDOptions> {
 public:
  explicit SGD(const std::vector<Tensor>& params, const SGDOptions& options = {});
  SGD(const std::vector<ParamGroup>& groups, const SGDOptions& defaults = {});

  void step() override;
  std::string momentum_name() const override { return "momentum"; }
  std::vector<std::string> optional_hyperparameters() const override { return {"capturable"}; }

 protected:
  Hyperparameters resolve(const ParamGroup& group) const override;
  void check(const Hyperparameters& h, size_t group) const override;
  SGDOptions to_options(const Hyperparameters& h) const override;
  Hyperparameters from_options(const SGDOptions& o) const override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  std::vector<std::string> scalar_state() const override { return {}; }
};

}  // namespace sinter::optim
