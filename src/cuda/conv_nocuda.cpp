// The sinter::cudak convolution and pooling kernels of src/internal/kernels_conv.h in a build
// without CUDA: each throws, so a CUDA tensor reaching them fails with a clear message.
#include "internal/kernels_conv.h"
#include "sinter/core/error.h"

namespace sinter::cudak {

void conv2d_forward(const Ctx&, const Conv2dGeom&, DType, const void*, const void*, const void*,
                    void*) {
  SINTER_THROW("conv2d_forward: built without CUDA");
}

void conv2d_backward_input(const Ctx&, const Conv2dGeom&, DType, const void*, const void*, void*) {
  SINTER_THROW("conv2d_backward_input: built without CUDA");
}

void conv2d_backward_weight(const Ctx&, const Conv2dGeom&, DType, const void*, const void*, void*) {
  SINTER_THROW("conv2d_backward_weight: built without CUDA");
}

void max_pool2d_forward(const Ctx&, const Pool2dGeom&, DType, const void*, void*, int64_t*) {
  SINTER_THROW("max_pool2d_forward: built without CUDA");
}

void max_pool2d_backward(const Ctx&, const Pool2dGeom&, DType, const void*, const int64_t*, void*) {
  SINTER_THROW("max_pool2d_backward: built without CUDA");
}

void avg_pool2d_forward(const Ctx&, const Pool2dGeom&, DType, const void*, void*) {
  SINTER_THROW("avg_pool2d_forward: built without CUDA");
}

void avg_pool2d_backward(const Ctx&, const Pool2dGeom&, DType, const void*, void*) {
  SINTER_THROW("avg_pool2d_backward: built without CUDA");
}

void adaptive_avg_pool2d_forward(const Ctx&, const Pool2dGeom&, DType, const void*, void*) {
  SINTER_THROW("adaptive_avg_pool2d_forward: built without CUDA");
}

void adaptive_avg_pool2d_backward(const Ctx&, const Pool2dGeom&, DType, const void*, void*) {
  SINTER_THROW("adaptive_avg_pool2d_backward: built without CUDA");
}

}  // namespace sinter::cudak
