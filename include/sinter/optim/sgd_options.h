// The options of SGD (sgd.h), apart from the optimizer so that its kernel rule
// (src/kern/optim_sgd.h) reads them without the tensor API (Note [optimizer options]).
#pragma once

#include <cstddef>

#include "sinter/optim/options.h"

namespace sinter::optim {

// The options in PyTorch's order (Note [optimizer options]): SGDOptions{.lr = 0.1, .momentum =
// 0.9}, and SGDGroup{.params = ..., .lr = 0.01} for a group of its own. nesterov needs momentum > 0
// and dampening == 0. capturable: the learning rate lives on the parameters' device, so that a
// step captured in a CUDA graph follows later changes of it (a schedule).
#define SINTER_SGD_OPTIONS(X)               \
  X(double, lr, 1e-3, NonNegative)          \
  X(double, momentum, 0.0, NonNegative)     \
  X(double, dampening, 0.0, Finite)         \
  X(double, weight_decay, 0.0, NonNegative) \
  X(bool, nesterov, false, Flag)            \
  X(bool, maximize, false, Flag)            \
  X(bool, capturable, false, Flag)
SINTER_OPTIMIZER_OPTIONS_STRUCT(SGD, SINTER_SGD_OPTIONS)

// The nesterov check (Note [optimizer options]).
void check_options(const SGDOptions& o, size_t group);

}  // namespace sinter::optim
