// The kernel interface of random numbers (Note [philox streams]) and arange: in sinter::cpu
// (src/cpu/random.cpp) and sinter::cudak (kernels/random.cu), Note [kernel interfaces].
#pragma once

#include <cstdint>

#include "kern/ctx.h"
#include "kern/philox.h"
#include "sinter/core/dtype.h"

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/random.inc"
#include "kern/declare.h"
