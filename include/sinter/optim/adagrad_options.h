// The options of Adagrad (adagrad.h), apart from the optimizer so that its kernel rule
// (src/kern/optim_adagrad.h) reads them without the tensor API (Note [optimizer options]).
#pragma once

#include <cstddef>

#include "sinter/optim/options.h"

namespace sinter::optim {

// The options in PyTorch's order (Note [optimizer options]): AdagradOptions{.lr = 0.1, .lr_decay =
// 1e-4}. capturable (not in PyTorch's Adagrad): the learning rate and step count live on the
// parameters' device, for a step captured in a CUDA graph.
#define SINTER_ADAGRAD_OPTIONS(X)                        \
  X(double, lr, 1e-2, NonNegative)                       \
  X(double, lr_decay, 0.0, NonNegative)                  \
  X(double, weight_decay, 0.0, NonNegative)              \
  X(double, initial_accumulator_value, 0.0, NonNegative) \
  X(double, eps, 1e-10, NonNegative)                     \
  X(bool, maximize, false, Flag)                         \
  X(bool, capturable, false, Flag)
SINTER_OPTIMIZER_OPTIONS_STRUCT(Adagrad, SINTER_ADAGRAD_OPTIONS)

}  // namespace sinter::optim
