// The options of Adam and AdamW (adam.h), apart from the optimizer so that its kernel rule
// (src/kern/optim_adam.h) reads them without the tensor API (Note [optimizer options]).
#pragma once

#include <cstddef>

#include "sinter/optim/options.h"

namespace sinter::optim {

// The options in PyTorch's order (Note [optimizer options]): AdamOptions{.lr = 1e-3, .betas =
// {0.9, 0.95}, .weight_decay = 0.1}. AdamW's differ in the defaults of weight_decay and
// decoupled_weight_decay, which AdamW keeps true, as PyTorch's AdamW is Adam with
// decoupled_weight_decay. Each beta is in [0, 1). capturable: the step count and learning rate
// live on the parameters' device (Note [capturable adam] in src/kern/optim.h), so that a step can
// be captured in a CUDA graph and replayed.
#define SINTER_ADAM_OPTIONS_WITH(X, default_weight_decay, default_decoupled) \
  X(double, lr, 1e-3, NonNegative)                                           \
  X(Betas, betas, (Betas{0.9, 0.999}), Unit)                                 \
  X(double, eps, 1e-8, NonNegative)                                          \
  X(double, weight_decay, default_weight_decay, NonNegative)                 \
  X(bool, amsgrad, false, Flag)                                              \
  X(bool, maximize, false, Flag)                                             \
  X(bool, capturable, false, Flag)                                           \
  X(bool, decoupled_weight_decay, default_decoupled, Flag)
#define SINTER_ADAM_OPTIONS(X) SINTER_ADAM_OPTIONS_WITH(X, 0.0, false)
#define SINTER_ADAMW_OPTIONS(X) SINTER_ADAM_OPTIONS_WITH(X, 1e-2, true)
SINTER_OPTIMIZER_OPTIONS_STRUCT(Adam, SINTER_ADAM_OPTIONS)
SINTER_OPTIMIZER_OPTIONS_STRUCT(AdamW, SINTER_ADAMW_OPTIONS)

// AdamW's decoupled_weight_decay is true (Note [optimizer options]).
void check_options(const AdamWOptions& o, size_t group);

}  // namespace sinter::optim
