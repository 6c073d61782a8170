// The kernel interface of row reductions (sum, prod, max, min) and of scans (cumsum, cumprod): in
// sinter::cpu (src/cpu/reduce.cpp) and sinter::cudak (kernels/reduce.cu), Note [kernel interfaces].
#pragma once

#include <cstdint>

#include "kern/ctx.h"
#include "sinter/core/dtype.h"

namespace sinter::kern {

// Sum and Prod also name the scans of scan_rows (cumsum, cumprod).
enum class ReduceOp : int { Sum, Max, Min, Prod };

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/reduce.inc"
#include "kern/declare.h"
