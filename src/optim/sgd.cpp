// SGD: the update of sgd.h as one fused kernel call per device and dtype of a group's parameters
// (Note [fused optimizer step]).
#include "sinter/optim/sgd.h"

#include <cmath>

#include "internal/dispatch.h"
#include "internal/fused_operands.h"
#include "internal/kernels_optim.h"
#include "sinter/autograd.h"
#include "sinter/cuda.h"

namespace sinter::optim {

SGD::SGD(const std::vector<Tensor>& params, const SGDOptions& options)
    : SGD(std::vector<ParamGroup>{ParamGroup{.params = params}}, options) {}

SGD::SGD(const std::vector<ParamGroup>& groups, const SGDOptions& defaults)
    : OptimizerWithOptions("SGD", defaults) {
  add_param_groups(groups);
}

Hyperparameters SGD::resolve(const ParamGroup& group) const {
  SINTER_CHECK(!group.betas && !group.eps && !group.amsgrad, "SGD: a param group sets ",
               group.betas ? "betas"
               : group.eps ? "eps"
                           : "amsgrad",
               ", which SGD does not have");
  return {{"lr", group.lr.value_or(defaults_.lr)},
          {"momentum", group.momentum.value_or(defaults_.momentum)},
          {"dampening", group.dampening.value_or(defaults_.dampening)},
          {"weight_decay", group.weight_decay.value_or(defaults_.weight_decay)},
          {"nesterov", group.nesterov.value_or(defaults_.nesterov) ? 1.0 : 0.0},
          {"maximize", group.maximize.value_or(defaults_.maximize) ? 1.0 : 0.0},
          {"capturable", group.capturable.value_or(defaults_.capturable) ? 1.0 : 0.0}};
}

void SGD::check(const Hyperparameters& h, size_t group) const {
  check_names(h,
              {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "capturable"},
              group);
  const double lr = require(h, "lr", group);
  const double momentum = require(h, "momentum", group);
  const double dampening = require(h, "dampening", group);
  const double weight_decay = require(h, "weight_decay", group);
  const bool nesterov = require_bool(h, "nesterov", group);
  require_bool(h, "maximize", group);
  require_bool(h, "capturable", group);
  SINTER_CHECK(lr >= 0.0, "SGD: invalid learning rate ", lr, " in group ", group,
               " (must be >= 0)");
  SINTER_CHECK(momentum >= 0.0, "SGD: invalid momentum ", momentum, " in group ", group,
               " (must be >= 0)");
  SINTER_CHECK(std::isfinite(dampening), "SGD: invalid dampening ", dampening, " in group ", group);
  SINTER_CHECK(weight_decay >= 0.0, "SGD: invalid weight_decay ", weight_decay, " in group ", group,
               " (must be >= 0)");
  SINTER_CHECK(!nesterov || (momentum > 0.0 && dampening == 0.0),
               "SGD: nesterov momentum needs momentum > 0 and dampening = 0, got momentum ",
               momentum, " and dampening ", dampening, " in group ", group);
}

SGDOptions SGD::to_options(const Hyperparameters& h) const {
  return {.lr = h.at("lr"),
          .momentum = h.at("momentum"),
          .dampening = h.at("dampening"),
          .weight_decay = h.at("weight_decay"),
          .nesterov = h.at("nesterov") == 1.0,
          .maximize = h.at("maximize") == 1.0,
          .capturable = h.at("capturable") == 1.0};
}

Hyperparameters SGD::from_options(const SGDOptions& o) const {
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0},
          {"capturable", o.capturable ? 1.0 : 0.0}};
}

void SGD::step() {
  NoGradGuard ng;
  for (size_t g = 0; g < params_.size(); ++g) {
    const SGDOptions& o = options_[g];
    kern::SgdHyper h{.lr = o.lr,
                     .momentum = o.momentum,
                     .dampening = o.dampening,
                     .weight_decay = o.weight_decay,
                     .nesterov = o.nesterov,
                     .maximize = o.maximize};
    // The learning rate is a host value otherwise: a graph would replay the one it was captured
    // with.
    SINTER_CHECK(o.capturable || !cuda::is_capturing(), name(),
                 ": a step inside a CUDA graph capture needs capturable = true (the learning rate "
                 "would otherwise be baked into the graph)");
    for (const std::vector<size_t>& bucket : grad_buckets(g)) {
      std::vector<kern::SgdTensor> list;
      detail::FusedOperands ops;
      for (size_t i : bucket) {
        const Tensor& p = params_[g][i];
        if (o.capturable)
          h.lr_device = static_cast<const double*>(device_lr(g, p.device()).data_ptr());
        const auto [pw, grad] = ops.add(p);
        kern::SgdTensor t{.param = pw.data_ptr(), .grad = grad.data_ptr(), .numel = p.numel()};
        if (o.momentum != 0.0) {
          auto& st = state_[g][i];
          auto it = st.find("momentum_buffer");
          if (it == st.end()) {
            // PyTorch's first step: the buffer starts as the update itself, undampened (a flag a
            // captured graph would replay on every step).
            check_not_capturing(g, i, "momentum_buffer");
            it = st.emplace("momentum_buffer", empty_like(p)).first;
            t.init_buffer = true;
          } else {
            fit_state(it->second, p, "momentum_buffer");
          }
          t.momentum_buffer = it->second.data_ptr();
          ops.written(it->second);
        }
        list.push_back(t);
      }
      const Tensor& first = params_[g][bucket[0]];
      SINTER_DISPATCH(first.device(), sgd_step, first.dtype(), list.data(),
                      static_cast<int64_t>(list.size()), h);
      ops.finish();
    }
  }
}

}  // namespace sinter::optim
