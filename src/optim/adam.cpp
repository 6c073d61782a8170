// Adam and AdamW: the update of adam.h as one fused kernel call per device and dtype of a group's
// parameters (Note [optimizer rules]).
#include "sinter/optim/adam.h"

#include <string>
#include <utility>

#include "internal/optim_rule.h"
#include "sinter/autograd.h"

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
    using Rule = kern::AdamRule;
    Rule::Hyper h{.lr = o.lr,
                  .beta1 = o.betas.first,
                  .beta2 = o.betas.second,
                  .eps = o.eps,
                  .weight_decay = o.weight_decay,
                  .decoupled = decoupled_,
                  .amsgrad = o.amsgrad,
                  .maximize = o.maximize};
    // Turning amsgrad on midway starts the running maximum at zero.
    SINTER_RULE_STEP(adam, Rule, g,
                     (std::vector<RuleBuffer>{{"exp_avg", 0.0, true},
                                              {"exp_avg_sq", 0.0, true},
                                              {o.amsgrad ? "max_exp_avg_sq" : ""}}),
                     o.capturable, h);
  }
}

}  // namespace sinter::optim
