// The options of RMSprop (rmsprop.h), apart from the optimizer so that its kernel rule
// (src/kern/optim_rmsprop.h) reads them without the tensor API (Note [optimizer options]).
#pragma once

#include <cstddef>

#include "sinter/optim/options.h"

namespace sinter::optim {

// The options in PyTorch's order (Note [optimizer options]): RMSpropOptions{.lr = 1e-2, .momentum
// = 0.9}. alpha is the smoothing constant, in [0, 1). capturable: the learning rate and step count
// live on the parameters' device, for a step captured in a CUDA graph.
#define SINTER_RMSPROP_OPTIONS(X)           \
  X(double, lr, 1e-2, NonNegative)          \
  X(double, alpha, 0.99, Unit)              \
  X(double, eps, 1e-8, NonNegative)         \
  X(double, weight_decay, 0.0, NonNegative) \
  X(double, momentum, 0.0, NonNegative)     \
  X(bool, centered, false, Flag)            \
  X(bool, maximize, false, Flag)            \
  X(bool, capturable, false, Flag)
SINTER_OPTIMIZER_OPTIONS_STRUCT(RMSprop, SINTER_RMSPROP_OPTIONS)

}  // namespace sinter::optim
