// The kernel interface of batch_norm, layer_norm, rms_norm and dropout (src/ops/norm.cpp): in
// sinter::cpu
// (src/cpu/norm.cpp) and sinter::cudak (kernels/norm.cu), Note [kernel interfaces].
#pragma once

#include "kern/ctx.h"
#include "kern/philox.h"

namespace sinter::kern {

// The row normalizations of layer_norm_forward and layer_norm_backward: Layer centres each row on
// its mean; Rms does not (its mean is 0, and rstd = 1 / sqrt(mean(x^2) + eps)).
enum class RowNorm : int { Layer, Rms };

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/norm.inc"
#include "kern/declare.h"
