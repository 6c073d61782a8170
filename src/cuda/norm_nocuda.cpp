// The sinter::cudak kernels of src/internal/kernels_norm.h in a build without CUDA: each throws, so
// a CUDA batch_norm, layer_norm or dropout fails with a clear message instead of a missing symbol.
#include "internal/kernels_norm.h"
#include "sinter/core/error.h"

namespace sinter::cudak {

void batch_norm_stats(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, double, void*,
                      void*, void*) {
  SINTER_THROW("batch_norm_stats: built without CUDA");
}

void batch_norm_apply(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, const void*,
                      const void*, const void*, const void*, void*) {
  SINTER_THROW("batch_norm_apply: built without CUDA");
}

void batch_norm_backward(const Ctx&, const void*, const void*, DType, int64_t, int64_t, int64_t,
                         const void*, const void*, const void*, bool, void*, void*, void*) {
  SINTER_THROW("batch_norm_backward: built without CUDA");
}

void layer_norm_forward(const Ctx&, const void*, DType, int64_t, int64_t, const void*, const void*,
                        double, void*, void*, void*) {
  SINTER_THROW("layer_norm_forward: built without CUDA");
}

void layer_norm_backward(const Ctx&, const void*, const void*, DType, int64_t, int64_t, const void*,
                         const void*, const void*, void*, void*, void*) {
  SINTER_THROW("layer_norm_backward: built without CUDA");
}

void dropout_apply(const Ctx&, const void*, DType, int64_t, uint64_t, uint64_t, uint32_t, double,
                   void*) {
  SINTER_THROW("dropout_apply: built without CUDA");
}

}  // namespace sinter::cudak
