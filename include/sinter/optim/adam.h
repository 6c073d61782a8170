// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), with AMSGrad,
// bias correction and maximize, following PyTorch's formulas.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "sinter/optim/adam_options.h"
#include "sinter/optim/optimizer.h"

namespace sinter::optim {

// The parameter groups of the options in adam_options.h.
SINTER_OPTIMIZER_GROUP(Adam, SINTER_ADAM_OPTIONS)
SINTER_OPTIMIZER_GROUP(AdamW, SINTER_ADAMW_OPTIONS)

// Per parameter p with gradient g, at this parameter's step t = 1, 2, ...:
//   g <- -g if maximize
//   g <- g + weight_decay * p, or with decoupled_weight_decay (AdamW) p <- p * (1 - lr *
//   weight_decay)
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   v_max <- max(v_max, v) if amsgrad (the denominator then uses v_max in place of v)
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State: "step" (a 0-dim f64 host tensor, so reading it never waits on the device; with capturable,
// a 0-dim f32 tensor on the parameter's device), "exp_avg" (m), "exp_avg_sq" (v), "max_exp_avg_sq"
// (v_max, with amsgrad); the buffers live with the parameter. Adam and AdamW share all of it.
template <class Options, class Group>
class AdamUpdate : public OptimizerWithOptions<Options, Group> {
 public:
  using OptimizerWithOptions<Options, Group>::OptimizerWithOptions;
  std::string momentum_name() const override { return "beta1"; }

 protected:
  void step_group(size_t group, const Options& o) override;
  std::vector<std::string> state_names() const override {
    return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  }
  // A state dict from before decoupled_weight_decay keeps the optimizer's own.
  std::vector<std::string> optional_hyperparameters() const override {
    return {"capturable", "decoupled_weight_decay"};
  }
};

class Adam : public AdamUpdate<AdamOptions, AdamGroup> {
 public:
  using AdamUpdate::AdamUpdate;
};

// Adam with decoupled weight decay; its groups are AdamWGroups, whose unset options take AdamW's
// defaults.
class AdamW : public AdamUpdate<AdamWOptions, AdamWGroup> {
 public:
  using AdamUpdate::AdamUpdate;
};

extern template class AdamUpdate<AdamOptions, AdamGroup>;
extern template class AdamUpdate<AdamWOptions, AdamWGroup>;

}  // namespace sinter::optim
