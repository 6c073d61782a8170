// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), with AMSGrad,
// bias correction and maximize, following PyTorch's formulas.
#pragma once

#include <utility>
#include <vector>

#include "sinter/optim/optimizer.h"

namespace sinter::optim {

// The fields are in PyTorch's order, for designated initializers: {.lr = 1e-3, .betas = {0.9,
// 0.95}, .weight_decay = 0.1}.
struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};  // each in [0, 1)
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
  // The step count and learning rate live on the parameters' device (Note [capturable adam] in
  // src/internal/kernels_optim.h), so that a step can be captured in a CUDA graph and replayed.
  bool capturable = false;
};

// AdamW's options differ from Adam's in the default weight decay only.
struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  bool capturable = false;
};

// Per parameter p with gradient g, at this parameter's step t = 1, 2, ...:
//   g <- -g if maximize
//   Adam:  g <- g + weight_decay * p            AdamW:  p <- p * (1 - lr * weight_decay)
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   v_max <- max(v_max, v) if amsgrad (the denominator then uses v_max in place of v)
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State: "step" (a 0-dim f64 host tensor, so reading it never waits on the device; with capturable,
// a 0-dim f32 tensor on the parameter's device), "exp_avg" (m), "exp_avg_sq" (v), "max_exp_avg_sq"
// (v_max, with amsgrad); the buffers live with the parameter.
class Adam : public OptimizerWithOptions<AdamOptions> {
 public:
  explicit Adam(const std::vector<Tensor>& params, const AdamOptions& options = {});
  Adam(const std::vector<ParamGroup>& groups, const AdamOptions& defaults = {});

  void step() override;
  std::string momentum_name() const override { return "beta1"; }

 protected:
  Adam(std::string name, bool decoupled, const AdamOptions& defaults);

  Hyperparameters resolve(const ParamGroup& group) const override;
  void check(const Hyperparameters& h, size_t group) const override;
  AdamOptions to_options(const Hyperparameters& h) const override;
  Hyperparameters from_options(const AdamOptions& o) const override;
  std::vector<std::string> state_names() const override {
    return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  }
  std::vector<std::string> optional_hyperparameters() const override { return {"capturable"}; }

 private:
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  explicit AdamW(const std::vector<Tensor>& params, const AdamWOptions& options = {});
  AdamW(const std::vector<ParamGroup>& groups, const AdamWOptions& defaults = {});
};

}  // namespace sinter::optim
