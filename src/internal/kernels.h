// The interface between the ops layer and the compute kernels: the elementwise, reduction, GEMM,
// indexing and random kernels here, the other families in internal/kernels_<family>.h. Ops check
// their arguments before calling in, so kernels trust them: shapes agree, indices are in range,
// dtypes are the ones named.
//
// Note [kernel interfaces]
// Each family's types live in sinter::kern, and its functions are declared once, with their
// documentation, in internal/kernels_<family>.inc, which the family's header includes (through
// internal/declare_kernels.h) into namespace sinter::cpu (the reference, src/cpu/) and into
// sinter::cudak (kernels/*.cu): both define every function with that one signature.
// SINTER_DISPATCH (internal/dispatch.h) picks one by the tensors' device; in a build without CUDA
// it never names sinter::cudak, so nothing there needs a stand-in. Adding a kernel: its
// declaration in the .inc, a definition in each backend.
#pragma once

#include <cstdint>
#include <string>

#include "internal/elementwise_ops.h"
#include "sinter/core/dtype.h"

struct CUstream_st;
namespace sinter::kern {

constexpr int kMaxDims = 8;
constexpr int kMaxOperands = 4;

// Where a kernel runs: the CUDA device and stream (ignored by the CPU kernels).
struct Ctx {
  int device = 0;
  CUstream_st* stream = nullptr;
};

// One operand of an elementwise op. data == nullptr means a scalar: every element reads `scalar`.
struct Operand {
  void* data = nullptr;  // points at the operand's first element (storage offset already applied)
  DType dtype = DType::f32;
  int64_t strides[kMaxDims] = {};  // in elements, per iteration dim; 0 for a broadcast dim
  double scalar = 0.0;
  // The scalar exactly, when it holds an integer (Note [scalar kinds] in sinter/core/scalar.h):
  // what integral compute and storage types read, so an i64 scalar above 2^53 is not rounded.
  // make_iter has already wrapped it to the dtype it is read as (an i32 or u8 tensor's scalar is
  // that dtype's value, as PyTorch casts a scalar to the tensor's dtype).
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
// UnaryOp and BinaryOp, are generated from the list in internal/elementwise_ops.h (Note
// [elementwise op list]).

enum class ReduceOp : int { Sum, Max, Min };

// Note [gather layout]
// gather and scatter_add walk the elements of a contiguous index whose shape is sizes[0, ndim);
// their other small operand (gather's out, scatter_add's src) is contiguous of that shape too.
// Element e, at coordinates c of that shape, reads (gather) or adds into (scatter_add) the element
// of the large operand at offset sum over d != dim of c[d] * strides[d], plus index[e] *
// strides[dim] (strides in elements; the large operand may be any strided view).
// Note [deferred device checks]
// On CUDA, an op whose arguments are known only on the device (class targets, embedding indices)
// does not read them back to validate them, which would make the host wait for the device (and
// rule out CUDA graphs). check_indices looks at them on the device instead: the first value out of
// range goes to the device's check record, in host-mapped memory, and the op's kernels treat such
// values as absent (a loss term of 0, a row of zeros), never reading out of bounds. The host looks
// at the record at its next synchronization with that device (item(), a copy to the host,
// synchronize()) and throws the error there, naming the op and the value. On the CPU the check
// throws at once.
enum class DeviceCheck : int32_t {
  CrossEntropyTarget = 1,  // skip: ignore_index
  EmbeddingIndex = 2,      // skip: none (a value outside [lo, hi))
};
struct DeviceCheckRecord {
  int32_t flag = 0;  // nonzero once a value failed; the first failure's fields are kept
  int32_t what = 0;  // DeviceCheck
  int64_t value = 0, lo = 0, hi = 0, skip = 0;
  // On CUDA: the failing thread claims the record (claim 0 -> 1), writes the fields, then sets
  // flag; the host reads the fields only once flag is set, then clears flag and claim.
  int32_t claim = 0;
};
// "cross_entropy: target 12 is out of range [0, 10) and is not ignore_index (-100)".
std::string device_check_message(const DeviceCheckRecord& r);

struct GatherGeom {
  int ndim = 0;
  int dim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

// The large operand's offset of element e, whose index value is i (Note [gather layout]).
SINTER_HD inline int64_t gather_offset(const GatherGeom& g, int64_t e, int64_t i) {
  int64_t off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t q = e / g.sizes[d];
    off += (d == g.dim ? i : e - q * g.sizes[d]) * g.strides[d];
    e = q;
  }
  return off;
}

// Row-major batched GEMM: C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b], with
// op(A) of shape (m, k), op(B) of shape (k, n), C of shape (m, n).
// A not transposed: op(A)(i, p) = a[i * lda + p]; transposed: op(A)(i, p) = a[p * lda + i]. Same
// for B. C(i, j) = c[i * ldc + j]. Batch b adds b * stride_x to each pointer (stride 0 broadcasts).
// dtype is f32, f64, bf16 or f16 for all three; accumulation is f32 (f64 for f64).
// When beta == 0, C is not read (it may hold NaN).
// The epilogue, in order: v = alpha * acc + beta * C(i, j); v += bias[j] when bias is set (n
// elements of dtype, shared by the batch); pre_act(i, j) = v when pre_act is set (same layout as
// C); then C(i, j) = act(v). allow_tf32 lets f32 products run on tensor cores with TF32 inputs
// (10-bit mantissa). path forces one kernel family (tests and benchmarks); Auto picks by dtype,
// shape, alignment and GPU.
enum class GemmAct : int { None, Relu, Gelu, GeluTanh };
enum class GemmPath : int { Auto, Simt, MmaSync, Wgmma };
struct GemmArgs {
  DType dtype = DType::f32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  double alpha = 1.0, beta = 0.0;
  bool allow_tf32 = false;
  const void* bias = nullptr;
  void* pre_act = nullptr;
  GemmAct act = GemmAct::None;
  GemmPath path = GemmPath::Auto;
};

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "internal/kernels.inc"
#include "internal/declare_kernels.h"
