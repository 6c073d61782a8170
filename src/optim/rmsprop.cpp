// RMSprop: the update of rmsprop.h as one fused kernel call per device and dtype of a group's
// parameters (Note [optimizer rules]).
#include "sinter/optim/rmsprop.h"

#include "internal/optim_rule.h"
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
    SINTER_RULE_STEP(rmsprop, Rule, g,
                     (std::vector<RuleBuffer>{{"square_avg", 0.0, true},
                                              {o.momentum > 0.0 ? "momentum_buffer" : ""},
                                              {o.centered ? "grad_avg" : ""}}),
                     o.capturable, h);
  }
}

}  // namespace sinter::optim
