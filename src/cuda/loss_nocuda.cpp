// The sinter::cudak kernels of src/internal/kernels_loss.h in a build without CUDA: each one
// throws, so the library links and a CUDA tensor op fails with a clear message.
#include "internal/kernels_loss.h"
#include "sinter/core/error.h"

namespace sinter::cudak {

void softmax_rows(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, bool, void*) {
  SINTER_THROW("softmax_rows: built without CUDA");
}

void softmax_rows_backward(const Ctx&, const void*, const void*, DType, int64_t, int64_t, int64_t,
                           bool, void*) {
  SINTER_THROW("softmax_rows_backward: built without CUDA");
}

void cross_entropy_rows(const Ctx&, const CrossEntropyArgs&, void*, void*) {
  SINTER_THROW("cross_entropy_rows: built without CUDA");
}

void cross_entropy_rows_backward(const Ctx&, const CrossEntropyArgs&, const void*, const void*,
                                 int64_t, void*) {
  SINTER_THROW("cross_entropy_rows_backward: built without CUDA");
}

}  // namespace sinter::cudak
