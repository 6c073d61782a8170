// The kernel interface of batch_norm, layer_norm and dropout (src/ops/norm.cpp): in sinter::cpu
// (src/cpu/norm.cpp) and sinter::cudak (kernels/norm.cu), Note [kernel interfaces].
#pragma once

#include "internal/kernels.h"

// The functions of the family, declared once (Note [kernel interfaces]).
namespace sinter::cpu {
using namespace sinter::kern;  // NOLINT
#include "internal/kernels_norm.inc"
}  // namespace sinter::cpu

namespace sinter::cudak {
using namespace sinter::kern;  // NOLINT
#include "internal/kernels_norm.inc"
}  // namespace sinter::cudak
