// The kernel interface of elementwise ops (unary, binary, where, copy): in sinter::cpu
// (src/cpu/elementwise.cpp) and sinter::cudak (kernels/elementwise.cu), Note [kernel interfaces].
#pragma once

#include <cstdint>

#include "kern/ctx.h"
#include "kern/elementwise_ops.h"
#include "sinter/core/dtype.h"

namespace sinter::kern {

// One operand of an elementwise op. data == nullptr means a scalar: every element reads `scalar`.
struct Operand {
  void* data = nullptr;  // points at the operand's first element (storage offset already applied)
  DType dtype = DType::f32;
  int64_t strides[kMaxDims] = {};  // in elements, per iteration dim; 0 for a broadcast dim
  double scalar = 0.0;
  // The scalar exactly, when it holds an integer (Note [scalar kinds] in
  // include/sinter/core/scalar.h): what integral compute and storage types read, so an i64 scalar
  // above 2^53 is not rounded. make_iter has already wrapped it to the dtype it is read as (an i32
  // or u8 tensor's scalar is that dtype's value, as PyTorch casts a scalar to the tensor's dtype).
  bool scalar_is_int = false;
  int64_t scalar_int = 0;
  // The scalar came from a C++ integer: a floating type converts scalar_int once (a double on the
  // way would round an i64 above 2^53 twice). A float scalar keeps its double (and -0.0 its sign).
  bool scalar_int_kind = false;
};

// A scalar operand's value in type T: the integer itself for an integral T (wrapping as integer
// conversions do; bool: != 0) when the scalar holds one; for a floating T, the integer scalar
// rounded once, or the double converted as convert() does. T is a compute type or an integral
// storage type; bf16 and f16 go by way of float.
template <class T>
SINTER_HD inline T scalar_as(const Operand& o) {
  if constexpr (std::is_integral_v<T>) {
    if (o.scalar_is_int) return convert<T>(o.scalar_int);
  } else {
    if (o.scalar_int_kind) return static_cast<T>(o.scalar_int);
  }
  return convert<T>(o.scalar);
}

// v wrapped to integral dtype t and widened back (u8: modulo 256; b8: 0 or 1); v itself for i64
// and the floating dtypes.
int64_t wrap_integer(DType t, int64_t v);

// The iteration space of one elementwise op after broadcasting and merging of dims. op[0] is the
// output; op[1..noperands) are the inputs. Dim ndim-1 is the innermost (fastest varying).
// `contiguous` is set when every tensor operand is dense in iteration order: element i of operand k
// is at op[k].data + i, so kernels may take a flat (vectorized) path.
struct ElementwiseIter {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t numel = 0;
  int noperands = 0;
  Operand op[kMaxOperands];
  bool contiguous = false;
};

// The compute type of an elementwise op follows op[1]'s dtype: double for f64, int64 for integral
// types and bool, float for f32, bf16 and f16. Results are converted to op[0]'s dtype. The ops,
// UnaryOp and BinaryOp, are generated from the list in kern/elementwise_ops.h (Note
// [elementwise op list]).

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/elementwise.inc"
#include "kern/declare.h"
