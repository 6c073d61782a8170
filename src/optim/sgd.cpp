// SGD: the update of sgd.h as one fused kernel call per device and dtype of a group's parameters
// (Note [optimizer rules]).
#include "sinter/optim/sgd.h"

#include "internal/optim_rule.h"
#include "sinter/autograd.h"

namespace sinter::optim {

SGD::SGD(const std::vector<Tensor>& params, const SGDOptions& options)
    : SGD(std::vector<SGDGroup>{SGDGroup{.params = params}}, options) {}

SGD::SGD(const std::vector<SGDGroup>& groups, const SGDOptions& defaults)
    : OptimizerWithOptions("SGD", defaults) {
  add_param_groups(groups);
}

void SGD::check_options(const SGDOptions& o, size_t group) const {
  SINTER_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
               "SGD: nesterov momentum needs momentum > 0 and dampening = 0, got momentum ",
               o.momentum, " and dampening ", o.dampening, " in group ", group);
}

void SGD::step() {
  NoGradGuard ng;
  for (size_t g = 0; g < params_.size(); ++g) {
    const SGDOptions& o = options_[g];
    using Rule = kern::SgdRule;
    Rule::Hyper h{.lr = o.lr,
                  .momentum = o.momentum,
                  .dampening = o.dampening,
                  .weight_decay = o.weight_decay,
                  .nesterov = o.nesterov,
                  .maximize = o.maximize};
    // PyTorch's first momentum step: the buffer starts as the update itself, undampened.
    SINTER_RULE_STEP(sgd, Rule, g,
                     (std::vector<RuleBuffer>{{o.momentum != 0.0 ? "momentum_buffer" : ""}}),
                     o.capturable, h);
  }
}

}  // namespace sinter::optim
