// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), with AMSGrad,
// bias correction and maximize, following PyTorch's formulas.
#pragma once

#include <utility>
#include <vector>

#include "sinter/optim/optimizer.h"

namespace sinter::optim {

// The options in PyTorch's order (Note [optimizer options]): AdamOptions{.lr = 1e-3, .betas =
// {0.9, 0.95}, .weight_decay = 0.1}; AdamW's differ in the default weight decay only. Each beta is
// in [0, 1). capturable: the step count and learning rate live on the parameters' device (Note
// [capturable adam] in src/kern/optim.h), so that a step can be captured in a CUDA
// graph and replayed.
#define SINTER_ADAM_OPTIONS_WITH(X, default_weight_decay)    \
  X(double, lr, 1e-3, NonNegative)                           \
  X(Betas, betas, (Betas{0.9, 0.999}), Unit)                 \
  X(double, eps, 1e-8, NonNegative)                          \
  X(double, weight_decay, default_weight_decay, NonNegative) \
  X(bool, amsgrad, false, Flag)                              \
  X(bool, maximize, false, Flag)                             \
  X(bool, capturable, false, Flag)
#define SINTER_ADAM_OPTIONS(X) SINTER_ADAM_OPTIONS_WITH(X, 0.0)
#define SINTER_ADAMW_OPTIONS(X) SINTER_ADAM_OPTIONS_WITH(X, 1e-2)
SINTER_OPTIMIZER_OPTIONS(AdamOptions, AdamGroup, SINTER_ADAM_OPTIONS)
SINTER_OPTIMIZER_OPTIONS(AdamWOptions, AdamWGroup, SINTER_ADAMW_OPTIONS)

// Per parameter p with gradient g, at this parameter's step t = 1, 2, ...:
//   g <- -g if maximize
//   Adam:  g <- g + weight_decay * p            AdamW:  p <- p * (1 - lr * weight_decay)
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   v_max <- max(v_max, v) if amsgrad (the denominator then uses v_max in place of v)
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State: "step" (a 0-dim f64 host tensor, so reading it never waits on the device; with capturable,
// a 0-dim f32 tensor on the parameter's device), "exp_avg" (m), "exp_avg_sq" (v), "max_exp_avg_sq"
// (v_max, with amsgrad); the buffers live with the parameter.
class Adam : public OptimizerWithOptions<AdamOptions, AdamGroup> {
 public:
  explicit Adam(const std::vector<Tensor>& params, const AdamOptions& options = {});
  Adam(const std::vector<AdamGroup>& groups, const AdamOptions& defaults = {});

  void step() override;
  std::string momentum_name() const override { return "beta1"; }

 protected:
  Adam(std::string name, bool decoupled, const AdamOptions& defaults);

  std::vector<std::string> state_names() const override {
    return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  }

 private:
  bool decoupled_;
};

// Adam with decoupled weight decay. Its groups are AdamGroups: the options a group leaves unset
// take AdamW's defaults given here.
class AdamW : public Adam {
 public:
  explicit AdamW(const std::vector<Tensor>& params, const AdamWOptions& options = {});
  AdamW(const std::vector<AdamGroup>& groups, const AdamWOptions& defaults = {});
};

}  // namespace sinter::optim
