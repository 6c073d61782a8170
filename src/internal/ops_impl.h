// Op building blocks that one op family lends another: forward kernels without autograd records.
#pragma once

#include "internal/kernels.h"
#include "sinter/tensor.h"

namespace sinter {

// op(a, b) elementwise with broadcasting through the binary kernel (e.g. the activation backward
// helpers BinaryOp::ReluBackward, GeluBackward); records nothing for autograd.
Tensor binary_kernel(const char* name, const Tensor& a, const Tensor& b, kern::BinaryOp op,
                     double p0 = 0);

// A tensor of shape `s` viewed as contiguous (outer, dim, inner) around dim d (wrapped, in range),
// as the row kernels take it (Note [softmax rows]); a 0-d tensor is one row of one element.
struct RowView {
  int64_t outer = 1, dim = 1, inner = 1;
};
RowView row_view(const Shape& s, int64_t d);

// Zeros of `shape` with src added along dim d (wrapped) at `index` (contiguous i64 of src's shape,
// in range), as scatter_add: the backward of gather and of topk's values. Records nothing.
Tensor scatter_into_zeros(const Shape& shape, int64_t d, const Tensor& index, const Tensor& src);

}  // namespace sinter
