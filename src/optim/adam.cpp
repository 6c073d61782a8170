// Adam and AdamW: the update of adam.h as one fused kernel call per device and dtype of a group's
// parameters (Note [optimizer rules]).
#include "sinter/optim/adam.h"

#include "optim/rule.h"

namespace sinter::optim {

void check_options(const AdamWOptions& o, size_t group) {
  SINTER_CHECK(o.decoupled_weight_decay,
               "AdamW: decoupled_weight_decay must be true (Adam with decoupled_weight_decay = "
               "false is Adam), got false in group ",
               group);
}

template <class Options, class Group>
void AdamUpdate<Options, Group>::step_group(size_t group, const Options& w) {
  // AdamWOptions as AdamOptions: the same fields (Note [optimizer options]).
  AdamOptions o;
#define SINTER_COPY_OPTION_(type, name, value, rule) o.name = w.name;
  SINTER_ADAM_OPTIONS(SINTER_COPY_OPTION_)
#undef SINTER_COPY_OPTION_
  // Turning amsgrad on midway starts the running maximum at zero.
  SINTER_RULE_STEP(adam, kern::AdamRule, group, o, {"exp_avg", 0.0, true},
                   {"exp_avg_sq", 0.0, true}, {o.amsgrad ? "max_exp_avg_sq" : ""});
}

template class AdamUpdate<AdamOptions, AdamGroup>;
template class AdamUpdate<AdamWOptions, AdamWGroup>;

}  // namespace sinter::optim
