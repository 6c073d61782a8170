// Adam and AdamW: the update of adam.h as one fused kernel call per device and dtype of a group's
// parameters (Note [fused optimizer step]).
#include "sinter/optim/adam.h"

#include <cmath>
#include <string>
#include <utility>

#include "internal/dispatch.h"
#include "internal/fused_operands.h"
#include "kern/optim.h"
#include "sinter/autograd.h"
#include "sinter/cuda.h"

namespace sinter::optim {

namespace {

// AdamW's options as Adam's: the same fields (Note [optimizer options]).
AdamOptions as_adam(const AdamWOptions& w) {
  AdamOptions o;
#define SINTER_COPY_OPTION_(type, name, value, rule) o.name = w.name;
  SINTER_ADAMW_OPTIONS(SINTER_COPY_OPTION_)
#undef SINTER_COPY_OPTION_
  return o;
}

}  // namespace

Adam::Adam(std::string name, bool decoupled, const AdamOptions& defaults)
    : OptimizerWithOptions(std::move(name), defaults), decoupled_(decoupled) {}

Adam::Adam(const std::vector<Tensor>& params, const AdamOptions& options)
    : Adam(std::vector<AdamGroup>{AdamGroup{.params = params}}, options) {}

Adam::Adam(const std::vector<AdamGroup>& groups, const AdamOptions& defaults)
    : Adam("Adam", false, defaults) {
  add_param_groups(groups);
}

AdamW::AdamW(const std::vector<Tensor>& params, const AdamWOptions& options)
    : AdamW(std::vector<AdamGroup>{AdamGroup{.params = params}}, options) {}

AdamW::AdamW(const std::vector<AdamGroup>& groups, const AdamWOptions& defaults)
    : Adam("AdamW", true, as_adam(defaults)) {
  add_param_groups(groups);
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
