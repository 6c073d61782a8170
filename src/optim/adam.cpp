// Adam and AdamW: the update of adam.h as one fused kernel call per device and dtype of a group's
// parameters (Note [fused optimizer step]).
#include "sinter/optim/adam.h"

#include <cmath>
#include <string>
#include <utility>

#include "internal/dispatch.h"
#include "internal/fused_operands.h"
#include "internal/kernels_optim.h"
#include "sinter/autograd.h"
#include "sinter/cuda.h"

namespace sinter::optim {

namespace {

AdamOptions as_adam(const AdamWOptions& o) {
  return {.lr = o.lr,
          .betas = o.betas,
          .eps = o.eps,
          .weight_decay = o.weight_decay,
          .amsgrad = o.amsgrad,
          .maximize = o.maximize,
          .capturable = o.capturable};
}

}  // namespace

Adam::Adam(std::string name, bool decoupled, const AdamOptions& defaults)
    : OptimizerWithOptions(std::move(name), defaults), decoupled_(decoupled) {}

Adam::Adam(const std::vector<Tensor>& params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{ParamGroup{.params = params}}, options) {}

Adam::Adam(const std::vector<ParamGroup>& groups, const AdamOptions& defaults)
    : Adam("Adam", false, defaults) {
  add_param_groups(groups);
}

AdamW::AdamW(const std::vector<Tensor>& params, const AdamWOptions& options)
    : AdamW(std::vector<ParamGroup>{ParamGroup{.params = params}}, options) {}

AdamW::AdamW(const std::vector<ParamGroup>& groups, const AdamWOptions& defaults)
    : Adam("AdamW", true, as_adam(defaults)) {
  add_param_groups(groups);
}

Hyperparameters Adam::resolve(const ParamGroup& group) const {
  SINTER_CHECK(!group.momentum && !group.dampening && !group.nesterov, name(),
               ": a param group sets ",
               group.momentum    ? "momentum"
               : group.dampening ? "dampening"
                                 : "nesterov",
               ", which ", name(), " does not have (use betas)");
  const std::pair<double, double> betas = group.betas.value_or(defaults_.betas);
  return {{"lr", group.lr.value_or(defaults_.lr)},
          {"beta1", betas.first},
          {"beta2", betas.second},
          {"eps", group.eps.value_or(defaults_.eps)},
          {"weight_decay", group.weight_decay.value_or(defaults_.weight_decay)},
          {"amsgrad", group.amsgrad.value_or(defaults_.amsgrad) ? 1.0 : 0.0},
          {"maximize", group.maximize.value_or(defaults_.maximize) ? 1.0 : 0.0},
          {"capturable", group.capturable.value_or(defaults_.capturable) ? 1.0 : 0.0}};
}

void Adam::check(const Hyperparameters& h, size_t group) const {
  check_names(h,
              {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize", "capturable"},
              group);
  const double lr = require(h, "lr", group);
  const double beta1 = require(h, "beta1", group);
  const double beta2 = require(h, "beta2", group);
  const double eps = require(h, "eps", group);
  const double weight_decay = require(h, "weight_decay", group);
  require_bool(h, "amsgrad", group);
  require_bool(h, "maximize", group);
  require_bool(h, "capturable", group);
  SINTER_CHECK(lr >= 0.0, name(), ": invalid learning rate ", lr, " in group ", group,
               " (must be >= 0)");
  SINTER_CHECK(beta1 >= 0.0 && beta1 < 1.0, name(), ": invalid beta1 ", beta1, " in group ", group,
               " (must be in [0, 1))");
  SINTER_CHECK(beta2 >= 0.0 && beta2 < 1.0, name(), ": invalid beta2 ", beta2, " in group ", group,
               " (must be in [0, 1))");
  SINTER_CHECK(eps >= 0.0, name(), ": invalid eps ", eps, " in group ", group, " (must be >= 0)");
  SINTER_CHECK(weight_decay >= 0.0, name(), ": invalid weight_decay ", weight_decay, " in group ",
               group, " (must be >= 0)");
}

AdamOptions Adam::to_options(const Hyperparameters& h) const {
  return {.lr = h.at("lr"),
          .betas = {h.at("beta1"), h.at("beta2")},
          .eps = h.at("eps"),
          .weight_decay = h.at("weight_decay"),
          .amsgrad = h.at("amsgrad") == 1.0,
          .maximize = h.at("maximize") == 1.0,
          .capturable = h.at("capturable") == 1.0};
}

Hyperparameters Adam::from_options(const AdamOptions& o) const {
  return {{"lr", o.lr},
          {"beta1", o.betas.first},
          {"beta2", o.betas.second},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"amsgrad", o.amsgrad ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0},
          {"capturable", o.capturable ? 1.0 : 0.0}};
}

void Adam::step() {
  NoGradGuard ng;
  for (size_t g = 0; g < params_.size(); ++g) {
    const AdamOptions& o = options_[g];
    const auto [beta1, beta2] = o.betas;
    kern::AdamHyper h{.lr = o.lr,
                      .beta1 = beta1,
                      .beta2 = beta2,
                      .eps = o.eps,
                      .weight_decay = o.weight_decay,
                      .decoupled = decoupled_,
                      .amsgrad = o.amsgrad,
                      .maximize = o.maximize};
    for (const std::vector<size_t>& bucket : grad_buckets(g)) {
      std::vector<kern::AdamTensor> list;
      detail::FusedOperands ops;
      for (size_t i : bucket) {
        const Tensor& p = params_[g][i];
        auto& st = state_[g][i];
        // A parameter's first step, or a state dict that held only part of its state.
        if (!st.count("step") || !st.count("exp_avg") || !st.count("exp_avg_sq")) {
          check_not_capturing(g, i, "step");
          st.clear();
          st["step"] = o.capturable ? zeros({}, {.dtype = DType::f32, .device = p.device()})
                                    : zeros({}, {.dtype = DType::f64});
          st["exp_avg"] = zeros_like(p);
          st["exp_avg_sq"] = zeros_like(p);
        }
        // Turning amsgrad on midway starts the running maximum at zero.
        if (o.amsgrad && !st.count("max_exp_avg_sq")) {
          check_not_capturing(g, i, "max_exp_avg_sq");
          st["max_exp_avg_sq"] = zeros_like(p);
        }
        for (auto& [name, buf] : st) {
          if (name != "step") fit_state(buf, p, name);
        }

        const auto [pw, grad] = ops.add(p);
        kern::AdamTensor k{.param = pw.data_ptr(),
                           .grad = grad.data_ptr(),
                           .exp_avg = st["exp_avg"].data_ptr(),
                           .exp_avg_sq = st["exp_avg_sq"].data_ptr(),
                           .numel = p.numel()};
        Tensor& step_t = st["step"];
        if (o.capturable) {
          // Note [capturable adam]: the count advances on the device. A count that is not there
          // yet (a fresh state, a loaded state dict) moves once, before any capture.
          if (step_t.device() != p.device() || step_t.dtype() != DType::f32) {
            check_not_capturing(g, i, "step");
            step_t = step_t.to(DType::f32).to(p.device());
          }
          step_t.add_(1.0);
          k.step_device = static_cast<const float*>(step_t.data_ptr());
          h.lr_device = static_cast<const double*>(device_lr(g, p.device()).data_ptr());
        } else {
          // The step count and the bias corrections are host values: a graph would replay them.
          SINTER_CHECK(!cuda::is_capturing(), name(),
                       ": a step inside a CUDA graph capture needs capturable = true (the step "
                       "count and learning rate would otherwise be baked into the graph)");
          // A count left on the device by the capturable mode comes back once.
          if (step_t.device().is_cuda() || step_t.dtype() != DType::f64) {
            step_t = step_t.to(Device::cpu()).to(DType::f64);
          }
          const double t = step_t.item<double>() + 1.0;
          step_t.fill_(t);
          k.step_size = o.lr / (1.0 - std::pow(beta1, t));
          k.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2, t));
        }
        ops.written(st["exp_avg"]);
        ops.written(st["exp_avg_sq"]);
        if (o.amsgrad) {
          k.max_exp_avg_sq = st["max_exp_avg_sq"].data_ptr();
          ops.written(st["max_exp_avg_sq"]);
        }
        list.push_back(k);
      }
      const Tensor& first = params_[g][bucket[0]];
      SINTER_DISPATCH(first.device(), adam_step, first.dtype(), list.data(),
                      static_cast<int64_t>(list.size()), h);
      ops.finish();
    }
  }
}

}  // namespace sinter::optim
