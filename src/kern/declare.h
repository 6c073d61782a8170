// Declares the kernel functions of the .inc file named by SINTER_KERNELS_INC in both backend
// namespaces (Note [kernel interfaces] in src/kern/ctx.h). No include guard: each family header
// includes it once, after defining SINTER_KERNELS_INC, which it undefines.
#ifndef SINTER_KERNELS_INC
#error "define SINTER_KERNELS_INC as the family's .inc file before including kern/declare.h"
#endif

namespace sinter::cpu {
using namespace sinter::kern;  // NOLINT
#include SINTER_KERNELS_INC
}  // namespace sinter::cpu

namespace sinter::cudak {
using namespace sinter::kern;  // NOLINT
#include SINTER_KERNELS_INC
}  // namespace sinter::cudak

#undef SINTER_KERNELS_INC
