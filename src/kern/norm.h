// The kernel interface of batch_norm, layer_norm and dropout (src/ops/norm.cpp): in sinter::cpu
// (src/cpu/norm.cpp) and sinter::cudak (kernels/norm.cu), Note [kernel interfaces].
#pragma once

#include "kern/ctx.h"

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/norm.inc"
#include "kern/declare.h"
