// The interface between the ops layer and the compute kernels. Every function here exists twice,
// with the same signature: in namespace sinter::cpu (src/cpu/, the reference) and in sinter::cudak
// (kernels/*.cu, or src/cuda/kernels_nocuda.cpp when built without CUDA). Ops check their arguments
// before calling in, so kernels trust them: shapes agree, indices are in range, dtypes are the ones
// named.
#pragma once

#include <cstdint>

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
};

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
// types and bool, float for f32, bf16 and f16. Results are converted to op[0]'s dtype.
enum class UnaryOp : int {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Relu,
  LeakyRelu,  // p0: negative slope
  Gelu,       // exact, with erf
  GeluTanh,   // tanh approximation
  Silu,
  Sign,
  Clamp,  // min(max(x, p0), p1)
};

// Floating-only except the arithmetic and comparisons, which also accept integral operands.
// Comparisons write bool (b8) outputs.
enum class BinaryOp : int {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  // Backward helpers: (grad, x) -> grad * f'(x), or (grad, y) with y the forward's output.
  ReluBackward,       // (g, x)
  LeakyReluBackward,  // (g, x), p0: negative slope
  GeluBackward,       // (g, x)
  GeluTanhBackward,   // (g, x)
  SiluBackward,       // (g, x)
  SigmoidBackward,    // (g, y): g * y * (1 - y)
  TanhBackward,       // (g, y): g * (1 - y * y)
};

void unary(const Ctx& ctx, const ElementwiseIter& it, UnaryOp op, double p0, double p1);
void binary(const Ctx& ctx, const ElementwiseIter& it, BinaryOp op, double p0);
// out = cond ? a : b; op[1] is the b8 condition, op[2] and op[3] share op[0]'s dtype.
void where(const Ctx& ctx, const ElementwiseIter& it);
// out = in with dtype conversion (any dtype to any dtype); op[1] may be a scalar (fill).
void copy(const Ctx& ctx, const ElementwiseIter& it);

enum class ReduceOp : int { Sum, Max, Min };

// in: contiguous (outer, r) of dtype `dtype`; out[i] = reduce(in[i, :]), written as `out_dtype`
// (the same as dtype, except Sum of integral types, which writes i64). For Max/Min, indices (if not
// null) receives the position of the first extremum in each row; NaN counts as the extremum.
// Sum accumulates in f32 (f64 for f64, i64 for integral types). r >= 1 for Max/Min; Sum of r == 0
// is 0.
void reduce_rows(const Ctx& ctx, const void* in, DType dtype, int64_t outer, int64_t r, ReduceOp op,
                 void* out, DType out_dtype, int64_t* indices);

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
void gemm(const Ctx& ctx, const GemmArgs& args);

// in: contiguous (outer, in_dim, inner); idx: nidx int64 indices in [0, in_dim), on the same
// device. out: contiguous (outer, nidx, inner), out[o, j, i] = in[o, idx[j], i].
void index_select(const Ctx& ctx, const void* in, DType dtype, int64_t outer, int64_t in_dim,
                  int64_t inner, const int64_t* idx, int64_t nidx, void* out);
// out: contiguous (outer, out_dim, inner); src: contiguous (outer, nidx, inner);
// out[o, idx[j], i] += src[o, j, i], repeated indices accumulate. dtype is floating.
void index_add(const Ctx& ctx, void* out, DType dtype, int64_t outer, int64_t out_dim,
               int64_t inner, const int64_t* idx, int64_t nidx, const void* src);

// Counter-based random numbers (Note [philox streams] in src/internal/philox.h): element i of a
// request depends only on (seed, offset, i), so CPU and CUDA produce the same values.
// out is contiguous with n elements of dtype (floating for uniform/normal; any for randint).
void random_uniform(const Ctx& ctx, void* out, DType dtype, int64_t n, uint64_t seed,
                    uint64_t offset, double lo, double hi);
void random_normal(const Ctx& ctx, void* out, DType dtype, int64_t n, uint64_t seed,
                   uint64_t offset, double mean, double std);
void random_int(const Ctx& ctx, void* out, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                int64_t lo, int64_t hi);  // uniform in [lo, hi)
// out[i] = start + i * step, contiguous, n elements.
void arange(const Ctx& ctx, void* out, DType dtype, int64_t n, double start, double step);

}  // namespace sinter::kern

namespace sinter::cpu {
using namespace sinter::kern;  // NOLINT
void unary(const Ctx&, const ElementwiseIter&, UnaryOp, double, double);
void binary(const Ctx&, const ElementwiseIter&, BinaryOp, double);
void where(const Ctx&, const ElementwiseIter&);
void copy(const Ctx&, const ElementwiseIter&);
void reduce_rows(const Ctx&, const void*, DType, int64_t, int64_t, ReduceOp, void*, DType,
                 int64_t*);
void gemm(const Ctx&, const GemmArgs&);
void index_select(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, const int64_t*,
                  int64_t, void*);
void index_add(const Ctx&, void*, DType, int64_t, int64_t, int64_t, const int64_t*, int64_t,
               const void*);
void random_uniform(const Ctx&, void*, DType, int64_t, uint64_t, uint64_t, double, double);
void random_normal(const Ctx&, void*, DType, int64_t, uint64_t, uint64_t, double, double);
void random_int(const Ctx&, void*, DType, int64_t, uint64_t, uint64_t, int64_t, int64_t);
void arange(const Ctx&, void*, DType, int64_t, double, double);
}  // namespace sinter::cpu

namespace sinter::cudak {
using namespace sinter::kern;  // NOLINT
void unary(const Ctx&, const ElementwiseIter&, UnaryOp, double, double);
void binary(const Ctx&, const ElementwiseIter&, BinaryOp, double);
void where(const Ctx&, const ElementwiseIter&);
void copy(const Ctx&, const ElementwiseIter&);
void reduce_rows(const Ctx&, const void*, DType, int64_t, int64_t, ReduceOp, void*, DType,
                 int64_t*);
void gemm(const Ctx&, const GemmArgs&);
void index_select(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, const int64_t*,
                  int64_t, void*);
void index_add(const Ctx&, void*, DType, int64_t, int64_t, int64_t, const int64_t*, int64_t,
               const void*);
void random_uniform(const Ctx&, void*, DType, int64_t, uint64_t, uint64_t, double, double);
void random_normal(const Ctx&, void*, DType, int64_t, uint64_t, uint64_t, double, double);
void random_int(const Ctx&, void*, DType, int64_t, uint64_t, uint64_t, int64_t, int64_t);
void arange(const Ctx&, void*, DType, int64_t, double, double);
}  // namespace sinter::cudak
