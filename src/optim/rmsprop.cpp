// RMSprop: the update of rmsprop.h as one fused kernel call per device and dtype of a group's
// parameters (Note [optimizer rules]).
#include "sinter/optim/rmsprop.h"

#include "internal/dispatch.h"
#include "kern/optim.h"
#include "sinter/autograd.h"

namespace sinter::optim {

RMSprop::RMSprop(const std::vector<Tensor>& params, const RMSpropOptions& options)
    : RMSprop(std::vector<RMSpropGroup>{RMSpropGroup{.params = params}}, options) {}

RMSprop::RMSprop(const std::vector<RMSpropGroup>& groups, const RMSpropOptions& defaults)
    : OptimizerWithOptions("RMSprop", defaults) {
  add_param_groups(groups);
}

void RMSprop::step() {
  NoGradGuard ng;
  for (size_t g = 0; g < params_.size(); ++g) {
    const RMSpropOptions& o = options_[g];
    using Rule = kern::RmspropRule;
    Rule::Hyper h{.lr = o.lr,
                  .alpha = o.alpha,
                  .eps = o.eps,
                  .weight_decay = o.weight_decay,
                  .momentum = o.momentum,
                  .centered = o.centered,
                  .maximize = o.maximize};
    rule_step(
        g,
        {{"square_avg"},
         {o.momentum > 0.0 ? "momentum_buffer" : ""},
         {o.centered ? "grad_avg" : ""}},
        o.capturable, [&](double t) { return Rule::step_lr(Rule::Scalars<double>(h), o.lr, t); },
        [&](const Tensor& first, std::vector<kern::RuleTensor>& list, const double* lr_device) {
          h.lr_device = lr_device;
          SINTER_DISPATCH(first.device(), rmsprop_step, first.dtype(), list.data(),
                          static_cast<int64_t>(list.size()), h);
        });
  }
}

}  // namespace sinter::optim
