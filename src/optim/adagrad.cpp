// Adagrad: the update of adagrad.h as one fused kernel call per device and dtype of a group's
// parameters (Note [optimizer rules]).
#include "sinter/optim/adagrad.h"

#include "internal/optim_rule.h"
#include "sinter/autograd.h"

namespace sinter::optim {

Adagrad::Adagrad(const std::vector<Tensor>& params, const AdagradOptions& options)
    : Adagrad(std::vector<AdagradGroup>{AdagradGroup{.params = params}}, options) {}

Adagrad::Adagrad(const std::vector<AdagradGroup>& groups, const AdagradOptions& defaults)
    : OptimizerWithOptions("Adagrad", defaults) {
  add_param_groups(groups);
}

void Adagrad::step() {
  NoGradGuard ng;
  for (size_t g = 0; g < params_.size(); ++g) {
    const AdagradOptions& o = options_[g];
    using Rule = kern::AdagradRule;
    Rule::Hyper h{.lr = o.lr,
                  .lr_decay = o.lr_decay,
                  .eps = o.eps,
                  .weight_decay = o.weight_decay,
                  .maximize = o.maximize};
    SINTER_RULE_STEP(adagrad, Rule, g,
                     (std::vector<RuleBuffer>{{"sum", o.initial_accumulator_value, true}}),
                     o.capturable, h);
  }
}

}  // namespace sinter::optim
