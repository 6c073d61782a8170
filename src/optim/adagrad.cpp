// Adagrad: the update of adagrad.h as one fused kernel call per device and dtype of a group's
// parameters (Note [optimizer rules]).
#include "sinter/optim/adagrad.h"

#include "optim/rule.h"

namespace sinter::optim {

void Adagrad::step_group(size_t group, const AdagradOptions& o) {
  SINTER_RULE_STEP(adagrad, kern::AdagradRule, group, o,
                   {"sum", o.initial_accumulator_value, true});
}

}  // namespace sinter::optim
