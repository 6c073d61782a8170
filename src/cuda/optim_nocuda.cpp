// The sinter::cudak kernels of src/internal/kernels_optim.h in a build without CUDA: each throws,
// so stepping an optimizer over CUDA parameters fails with a clear message instead of a missing
// symbol.
#include "internal/kernels_optim.h"
#include "sinter/core/error.h"

namespace sinter::cudak {

void sgd_step(const Ctx&, DType, const SgdTensor*, int64_t, const SgdHyper&) {
  SINTER_THROW("sgd_step: built without CUDA");
}

void adam_step(const Ctx&, DType, const AdamTensor*, int64_t, const AdamHyper&) {
  SINTER_THROW("adam_step: built without CUDA");
}

}  // namespace sinter::cudak
