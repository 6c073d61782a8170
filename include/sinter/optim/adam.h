// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), with AMSGrad,
// bias correction and maximize, following PyTorch's formulas.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "sinter/optim/optimizer.h"

namespace sinter::optim {

// The options in PyTorch's order (Note [optimizer options]): AdamOptions{.lr = 1e-3, .betas =
// {0.9, 0.95}, .weight_decay = 0.1}. AdamW's differ in the defaults of weight_decay and
// decoupled_weight_decay, which AdamW keeps true, as PyTorch's AdamW is Adam with
// decoupled_weight_decay. Each beta is in [0, 1). capturable: the step count and learning rate
// live on the parameters' device (Note [capturable adam] in src/kern/optim.h), so that a step can
// be captured in a CUDA graph and replayed.
#define SINTER_ADAM_OPTIONS_WITH(X, default_weight_decay, default_decoupled) \
  X(double, lr, 1e-3, NonNegative)                                           \
  X(Betas, betas, (Betas{0.9, 0.999}), Unit)                                 \
  X(double, eps, 1e-8, NonNegative)                                          \
  X(double, weight_decay, default_weight_decay, NonNegative)                 \
  X(bool, amsgrad, false, Flag)                                              \
  X(bool, maximize, false, Flag)                                             \
  X(bool, capturable, false, Flag)                                           \
  X(bool, decoupled_weight_decay, default_decoupled, Flag)
#define SINTER_ADAM_OPTIONS(X) SINTER_ADAM_OPTIONS_WITH(X, 0.0, false)
#define SINTER_ADAMW_OPTIONS(X) SINTER_ADAM_OPTIONS_WITH(X, 1e-2, true)
SINTER_OPTIMIZER_OPTIONS(Adam, SINTER_ADAM_OPTIONS)
SINTER_OPTIMIZER_OPTIONS(AdamW, SINTER_ADAMW_OPTIONS)

// AdamW's decoupled_weight_decay is true (Note [optimizer options]).
void check_options(const AdamWOptions& o, size_t group);

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
