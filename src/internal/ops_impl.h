// Op building blocks that one op family lends another: forward kernels without autograd records.
#pragma once

#include "kern/act.h"
#include "kern/elementwise.h"
#include "sinter/ops.h"
#include "sinter/tensor.h"

namespace sinter {

namespace kern {
struct GatherGeom;
}  // namespace kern

// Self-attention on a fused projection qkv (B, T, 3E): q, k and v side by side, each E = heads x D
// split into heads, as MultiheadAttention's, with the default scale 1 / sqrt(D), no mask and no
// dropout, on the CPU's attention tiles (Note [cpu attention tiles]): (B, T, E), the heads side by
// side, and qkv's gradient written in one piece (no stack of dq, dk and dv, no copy of the split's
// views). The same values as scaled_dot_product_attention on the split heads. Undefined where the
// tiles do not take it (not on the CPU, its dtype, T = 0): the caller then splits the heads.
Tensor packed_self_attention(const Tensor& qkv, int64_t heads, bool causal);

// dim wrapped into [0, ndim) (a 0-d tensor takes dims -1 and 0), or an error naming op and dim.
int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim);
// A new tensor of a factory (empty, zeros, rand, ...), made to require grad when opts asks.
Tensor finish_factory(Tensor t, const TensorOptions& opts);
// An error naming op when t is undefined.
void check_defined(const char* op, const Tensor& t);

// The epilogue activation of the GEMM and convolution kernels for an Activation.
inline kern::GemmAct kernel_act(Activation act) {
  switch (act) {
    case Activation::Relu:
      return kern::GemmAct::Relu;
    case Activation::Gelu:
      return kern::GemmAct::Gelu;
    case Activation::GeluTanh:
      return kern::GemmAct::GeluTanh;
    default:
      return kern::GemmAct::None;
  }
}

// op(a, b) elementwise with broadcasting through the binary kernel (e.g. the activation backward
// helpers BinaryOp::ReluBackward, GeluBackward); records nothing for autograd.
Tensor binary_kernel(const char* name, const Tensor& a, const Tensor& b, kern::BinaryOp op,
                     double p0 = 0);
// op(a) elementwise through the unary kernel (a floating, or integral where op takes it); records
// nothing for autograd.
Tensor unary_kernel(const char* name, const Tensor& a, kern::UnaryOp op);

// A tensor of shape `s` viewed as contiguous (outer, dim, inner) around dim d (wrapped, in range),
// as the row kernels take it (Note [softmax rows]); a 0-d tensor is one row of one element.
struct RowView {
  int64_t outer = 1, dim = 1, inner = 1;
};
RowView row_view(const Shape& s, int64_t d);

// The index family's shared pieces (src/ops/index.cpp, used by src/ops/scatter.cpp): the kernels'
// view of an op along dim d over an index of `index_shape` into an operand of `strides` (Note
// [gather layout]); the checks of a gather or scatter index against a (returns the wrapped dim);
// a scatter's src checked against a and index and narrowed to index's shape; a gathered along d
// at idx (checked, contiguous), recording nothing.
kern::GatherGeom gather_geom(const char* op, const Shape& index_shape, const Shape& strides,
                             int64_t d);
int64_t check_gather_index(const char* op, const Tensor& a, int64_t dim, const Tensor& index);
Tensor scatter_source(const char* op, const Tensor& a, const Tensor& index, const Tensor& src);
Tensor gather_kernel(const Tensor& a, int64_t d, const Tensor& idx);

// Zeros of `shape` with src added along dim d (wrapped) at `index` (contiguous i64 of src's shape,
// in range), as scatter_add: the backward of gather and of topk's values. Records nothing.
Tensor scatter_into_zeros(const Shape& shape, int64_t d, const Tensor& index, const Tensor& src);

// A loss's elements reduced as `reduction` asks (None: as they are), and the check that it is
// one of the three (src/ops/loss.cpp).
Tensor reduce_loss(const char* op, const Tensor& loss, Reduction reduction);
void check_reduction(const char* op, Reduction r);

// A pooling input: defined, floating, (N, C, H, W) or (C, H, W); else an error naming `op` (the
// op, or the nn layer that calls it). src/ops/pool.cpp.
void check_pool_input(const char* op, const Tensor& x);
// A 3-D pooling's kernel_size, stride (0: the kernel size), padding (at most half the kernel) and
// dilation, without an input; else an error naming `op`. src/ops/pool.cpp.
void check_pool3d_options(const char* op, Size3 kernel_size, Size3 stride, Size3 padding,
                          Size3 dilation);

// unfold's and fold's kernel_size and options, each positive (padding non-negative); else an error
// naming `op` (the op, or the nn layer built with them). src/ops/shape.cpp.
void check_fold_options(const char* op, Size2 kernel_size, const FoldOptions& opts);

}  // namespace sinter
