// The options of Muon (muon.h), apart from the optimizer as the others' are (Note [optimizer
// options]).
#pragma once

#include <cstddef>

#include "sinter/optim/options.h"

namespace sinter::optim {

// PyTorch's torch.optim.Muon options, in its order, and its defaults: MuonOptions{.lr = 0.02},
// MuonGroup{.params = ..., .lr = 3e-4, .adamw = true} for a group of AdamW's. ns_a, ns_b and ns_c
// are PyTorch's ns_coefficients (a, b, c); ns_steps an integer in [0, 100); match_rms_adamw its
// adjust_lr_fn ("original" false, "match_rms_adamw" true). ns_bf16: the orthogonalization in
// bf16, as PyTorch runs it whatever the parameters' dtype; false runs it in the update's dtype
// (an f64 update checks the formulas to rounding). adamw: the group is AdamW's (PyTorch's AdamW
// with lr, betas, adamw_eps and weight_decay; decoupled, no amsgrad), for the parameters Muon does
// not take (embeddings, norms, biases, the output head).
#define SINTER_MUON_OPTIONS(X)               \
  X(double, lr, 1e-3, NonNegative)           \
  X(double, weight_decay, 0.1, NonNegative)  \
  X(double, momentum, 0.95, NonNegative)     \
  X(bool, nesterov, true, Flag)              \
  X(double, ns_a, 3.4445, Finite)            \
  X(double, ns_b, -4.775, Finite)            \
  X(double, ns_c, 2.0315, Finite)            \
  X(double, eps, 1e-7, NonNegative)          \
  X(double, ns_steps, 5.0, NonNegative)      \
  X(bool, match_rms_adamw, false, Flag)      \
  X(bool, ns_bf16, true, Flag)               \
  X(bool, adamw, false, Flag)                \
  X(Betas, betas, (Betas{0.9, 0.999}), Unit) \
  X(double, adamw_eps, 1e-8, NonNegative)
SINTER_OPTIMIZER_OPTIONS_STRUCT(Muon, SINTER_MUON_OPTIONS)

// ns_steps a whole number under 100, as PyTorch's (Note [optimizer options]).
void check_options(const MuonOptions& o, size_t group);

}  // namespace sinter::optim
