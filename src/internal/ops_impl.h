// Op building blocks that one op family lends another: forward kernels without autograd records.
#pragma once

#include "internal/kernels.h"
#include "sinter/tensor.h"

namespace sinter {

// op(a, b) elementwise with broadcasting through the binary kernel (e.g. the activation backward
// helpers BinaryOp::ReluBackward, GeluBackward); records nothing for autograd.
Tensor binary_kernel(const char* name, const Tensor& a, const Tensor& b, kern::BinaryOp op,
                     double p0 = 0);

}  // namespace sinter
