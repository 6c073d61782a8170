// RMSprop: the update of rmsprop.h as one fused kernel call per device and dtype of a group's
// parameters (Note [optimizer rules]).
#include "sinter/optim/rmsprop.h"

#include "optim/rule.h"

namespace sinter::optim {

void RMSprop::step_group(size_t group, const RMSpropOptions& o) {
  SINTER_RULE_STEP(rmsprop, kern::RmspropRule, group, o, {"square_avg", 0.0, true},
                   {o.momentum > 0.0 ? "momentum_buffer" : ""}, {o.centered ? "grad_avg" : ""});
}

}  // namespace sinter::optim
