// The step() of an optimizer written as a rule (Note [optimizer rules] in src/kern/optim.h).
#pragma once

#include <cstdint>
#include <vector>

#include "internal/dispatch.h"
#include "kern/optim.h"

// Optimizer::rule_step over group `group` for the row X(name, Rule) of SINTER_OPTIM_RULES, with the
// call's hyperparameters h (a Rule::Hyper variable, whose lr_device each launch sets): the host
// fills the tensors' step scalars with Rule::step in the default mode, and each bucket of one
// device and dtype runs name##_step there.
#define SINTER_RULE_STEP(name, Rule, group, buffers, capturable, h)                    \
  rule_step(                                                                           \
      group, buffers, capturable, Rule::kCountsSteps,                                  \
      [&](double t, double* out) { ::sinter::kern::rule_host_step<Rule>(h, t, out); }, \
      [&](const Tensor& first, std::vector<::sinter::kern::RuleTensor>& list,          \
          const double* lr_device) {                                                   \
        h.lr_device = lr_device;                                                       \
        SINTER_DISPATCH(first.device(), name##_step, first.dtype(), list.data(),       \
                        static_cast<int64_t>(list.size()), h);                         \
      })
