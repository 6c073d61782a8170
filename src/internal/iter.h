// Building the ElementwiseIter of an op: broadcasting, per-operand strides, merging of dims.
#pragma once

#include <vector>

#include "kern/elementwise.h"
#include "sinter/tensor.h"

namespace sinter {

// One input of an elementwise op: a tensor, or a scalar standing for a tensor of any shape.
struct IterArg {
  IterArg(const Tensor& t) : tensor(&t) {}  // NOLINT(google-explicit-constructor)
  IterArg(Scalar s) : scalar(s) {}          // NOLINT(google-explicit-constructor)
  const Tensor* tensor = nullptr;
  Scalar scalar = 0;
};

// The NumPy broadcast of two shapes; `op` names the caller in the error.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

// `out` has the broadcast shape of the inputs; every input is broadcast to it. A scalar input takes
// `scalar_dtype` (the dtype its value is read as).
kern::ElementwiseIter make_iter(const char* op, const Tensor& out,
                                const std::vector<IterArg>& inputs, DType scalar_dtype);

}  // namespace sinter
