// SGD: the update of sgd.h as one fused kernel call per device and dtype of a group's parameters
// (Note [optimizer rules]).
#include "sinter/optim/sgd.h"

#include "optim/rule.h"

namespace sinter::optim {

void check_options(const SGDOptions& o, size_t group) {
  SINTER_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
               "SGD: nesterov momentum needs momentum > 0 and dampening = 0, got momentum ",
               o.momentum, " and dampening ", o.dampening, " in group ", group);
}

// PyTorch's first momentum step: the buffer starts as the update itself, undampened (the rule's
// fresh buffer).
void SGD::step_group(size_t group, const SGDOptions& o) {
  SINTER_RULE_STEP(sgd, kern::SgdRule, group, o, {o.momentum != 0.0 ? "momentum_buffer" : ""});
}

}  // namespace sinter::optim
