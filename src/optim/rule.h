// The step() of an optimizer written as a rule (Note [optimizer rules] in src/kern/optim.h).
#pragma once

#include <cstdint>
#include <vector>

#include "internal/dispatch.h"
#include "kern/optim.h"

// Optimizer::rule_step over group `group` for the row X(name, Rule) of SINTER_OPTIM_RULES, with
// the group's options `o` and its buffers, the RuleBuffers after `o`: the host fills the tensors'
// step scalars with Rule::step in the default mode, and each bucket of one device and dtype runs
// name##_step there. Called through this->, so that it also resolves in class templates (Adam's).
#define SINTER_RULE_STEP(name, Rule, group, o, ...)                                            \
  this->rule_step(                                                                             \
      group, std::vector<::sinter::optim::Optimizer::RuleBuffer>{__VA_ARGS__}, (o).capturable, \
      Rule::kCountsSteps,                                                                      \
      [&](double t, double* out) {                                                             \
        ::sinter::kern::rule_host_step<Rule>(Rule::Hyper{o}, t, out);                          \
      },                                                                                       \
      [&](const Tensor& first, std::vector<::sinter::kern::RuleTensor>& list,                  \
          const double* lr_device) {                                                           \
        SINTER_DISPATCH(first.device(), name##_step, first.dtype(), list.data(),               \
                        static_cast<int64_t>(list.size()), Rule::Hyper{o, lr_device});         \
      })
