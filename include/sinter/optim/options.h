// The options of an optimizer (Note [optimizer options]): the struct an optimizer's X-macro list of
// hyperparameters makes, without the tensor API, so that the optimizers' kernel rules read it too.
#pragma once

#include <cstddef>
#include <utility>

namespace sinter::optim {

// Note [optimizer options]
// An optimizer declares its hyperparameters once, as the rows X(type, name, default, rule) of an
// X-macro list (SINTER_SGD_OPTIONS in sgd_options.h). SINTER_OPTIMIZER_OPTIONS(Name, LIST) makes
// from it (SINTER_OPTIMIZER_OPTIONS_STRUCT here the first, SINTER_OPTIMIZER_GROUP in optimizer.h
// the second):
//   NameOptions  the fields with their defaults, in the list's order, for designated initializers
//                ({.lr = 0.1, .momentum = 0.9}); NameOptions::visit(o, f), which calls f(name,
//                field, rule) for each; and kOptimizer, the name "Name" that errors give;
//   NameGroup    a parameter group: `params` and an optional override of each field; a field the
//                optimizer does not have does not compile ({.params = ps, .lr = 0.01}).
// OptimizerWithOptions derives the rest from visit: the constructors, the group's options (its
// overrides over the optimizer's defaults), the checks and their messages (the rule), the
// state-dict keys and the access by name that schedulers use (Hyperparameters). type is double,
// bool (a 0/1 flag in the state dict) or Betas, a pair that is two hyperparameters named by the
// field's stem and 1, 2 (betas: beta1 and beta2). The options struct is also what the optimizer's
// update rule reads, on the host and in its kernels (Note [optimizer rules] in src/kern/optim.h):
// a hyperparameter is a row of the list and nothing else. The list and the options struct live in
// <name>_options.h, which includes nothing of the tensor API, so that the kernels' rules
// (src/kern/optim_<name>.h, compiled by nvcc too) read the struct without it.
// Checks between hyperparameters beyond each one's rule are a function
// check_options(const NameOptions&, size_t group) next to the options (SGD's nesterov needs
// momentum), found by argument-dependent lookup.
enum class Rule {
  NonNegative,  // >= 0 (NaN fails)
  Unit,         // in [0, 1)
  Finite,
  Flag,  // a bool
};
using Betas = std::pair<double, double>;

#define SINTER_OPTION_FIELD_(type, name, value, rule) type name = value;
#define SINTER_OPTION_VISIT_(type, name, value, rule) f(#name, o.name, ::sinter::optim::Rule::rule);
#define SINTER_OPTIMIZER_OPTIONS_STRUCT(Name, LIST)  \
  struct Name##Options {                             \
    static constexpr const char* kOptimizer = #Name; \
    LIST(SINTER_OPTION_FIELD_)                       \
    template <class O, class F>                      \
    static void visit(O& o, F&& f) {                 \
      LIST(SINTER_OPTION_VISIT_)                     \
    }                                                \
  };

// Options with no checks beyond each hyperparameter's rule (Note [optimizer options]).
template <class Options>
void check_options(const Options& /*o*/, size_t /*group*/) {}

}  // namespace sinter::optim
