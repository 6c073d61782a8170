// CPU reference GEMM on OpenBLAS: batched row-major C = alpha * op(A) @ op(B) + beta * C.
// bf16 and f16 operands are widened to f32, multiplied with sgemm and rounded back; bf16 runs in
// oneDNN's bf16 kernels instead where the build has it and they are the faster path (its bf16 dot
// products, f32 sums: Note [bf16 products] in src/cpu/onednn_dnnl.cpp), and the larger f32
// products, widened or not, in oneDNN's f32 kernels (Note [f32 gemm in onednn]). OpenBLAS runs
// on one thread (Note [cpu threads]); gemm() splits a large problem over the CPU threads itself:
// batch entries when there are several, else blocks of rows or columns of C cut by the shape alone
// (Note [gemm blocks]), so the result does not depend on the thread count.
#include "kern/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpu/onednn.h"
#include "cpu/vec_rows.h"
#include "internal/cache_aligned.h"
#include "internal/parallel.h"
#include "kern/elementwise.h"
#include "kern/scalar_ops.h"
#include "sinter/core/dtype.h"
#include "sinter/core/error.h"
#include "sinter/core/parallel.h"
#include "sinter/core/storage.h"

namespace sinter::cpu {
namespace {

// The type BLAS computes in for storage type T.
template <typename T>
using BlasT = std::conditional_t<std::is_same_v<T, double>, double, float>;

// One row of C (m == 1, a batch-1 Linear): c = alpha a op(B) + beta c as a matrix-vector product,
// which reads B in place; sgemm would first copy (pack) all of B, the larger part of the time when
// B is a weight read once. beta == 0 must not read C (it may hold NaN): C is zeroed first.
template <typename T, typename Gemv>
void row_gemv(Gemv gemv, bool ta, bool tb, int n, int k, T alpha, const T* a, int lda, const T* b,
              int ldb, T beta, T* c) {
  if (beta == T(0)) std::fill(c, c + n, T(0));
  const int inc_a = ta ? lda : 1;
  if (tb) {
    gemv(CblasRowMajor, CblasNoTrans, n, k, alpha, b, ldb, a, inc_a, beta, c, 1);
  } else {
    gemv(CblasRowMajor, CblasTrans, k, n, alpha, b, ldb, a, inc_a, beta, c, 1);
  }
}

void blas_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 1 && k > 0) return row_gemv(cblas_sgemv, ta, tb, n, k, alpha, a, lda, b, ldb, beta, c);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void blas_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
               const double* b, int ldb, double beta, double* c, int ldc) {
  if (m == 1 && k > 0) return row_gemv(cblas_dgemv, ta, tb, n, k, alpha, a, lda, b, ldb, beta, c);
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// BLAS wants a stored (rows, cols) matrix to have ld >= max(1, cols). A single row may come with
// any ld since its stride is never followed, so it is raised to that minimum. Returns false when
// the layout cannot go to BLAS as it is (rows that overlap, e.g. a broadcast with ld 0).
bool blas_ld(int64_t rows, int64_t cols, int64_t ld, int64_t* out) {
  const int64_t need = std::max<int64_t>(1, cols);
  if (ld >= need || rows == 1) {
    *out = std::max(ld, need);
    return *out <= INT_MAX;
  }
  return false;
}

// (rows, cols) with row stride ld -> dense (rows, cols) of another type.
template <typename U, typename T>
void pack(const T* src, int64_t rows, int64_t cols, int64_t ld, U* dst) {
  if constexpr (std::is_same_v<T, BFloat16> && std::is_same_v<U, float>) {
    for (int64_t i = 0; i < rows; ++i) vec::widen_bf16_row(src + i * ld, cols, dst + i * cols);
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = static_cast<U>(src[i * ld + j]);
  }
}

template <typename T, typename U>
void unpack(const U* src, int64_t rows, int64_t cols, T* dst, int64_t ld) {
  if constexpr (std::is_same_v<T, BFloat16> && std::is_same_v<U, float>) {
    for (int64_t i = 0; i < rows; ++i) vec::narrow_bf16_row(src + i * cols, cols, dst + i * ld);
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[i * ld + j] = T(src[i * cols + j]);
  }
}

// v[i] = act(v[i]) for i < n: f32 gelu and gelu_tanh through the vector rows their ops run
// (src/cpu/vec_elementwise.cpp: the same values as the separate op, at vector speed; the scalar
// functor's tanh was twice the GEMM's time in gpt-mini's MLP, its erf five times the GEMM's in
// vit-tiny's), the rest by activate_all.
template <typename U>
void activate_row(GemmAct act, U* v, int64_t n) {
  if constexpr (std::is_same_v<U, float>) {
    if (act == GemmAct::GeluTanh || act == GemmAct::Gelu) {
      const auto op = act == GemmAct::Gelu ? kern::UnaryOp::Gelu : kern::UnaryOp::GeluTanh;
      if (const vec::RowFn row = vec::unary_row(op)) return row(v, v, n);
    }
  }
  activate_all(act, v, n);
}

// The GemmArgs epilogue on one computed (m, n) block pc (row stride ldc, in BlasT), batch index b:
// bias, pre-activation and activation; alpha and beta were applied by BLAS already. With `c`, each
// row then goes to C's (batch entry b's) row in T, while it is still in the core's cache.
template <typename T>
void epilogue(const GemmArgs& g, int64_t b, BlasT<T>* pc, int64_t ldc, T* c = nullptr) {
  using U = BlasT<T>;
  if (!g.bias && !g.pre_act && g.act == GemmAct::None) {
    if (c == nullptr) return;
    for (int64_t i = 0; i < g.m; ++i) unpack(pc + i * ldc, 1, g.n, c + i * g.ldc, g.ldc);
    return;
  }
  const T* bias = static_cast<const T*>(g.bias);
  T* pre = g.pre_act ? static_cast<T*>(g.pre_act) + b * g.stride_c : nullptr;
  // A bf16 or f16 bias widened once for all rows, so that the rows' sums are vector adds.
  thread_local std::vector<U> wide_bias;
  const U* add = nullptr;
  if constexpr (std::is_same_v<T, U>) {
    add = bias;
  } else if (bias) {
    wide_bias.resize(static_cast<size_t>(g.n));
    pack(bias, 1, g.n, g.n, wide_bias.data());
    add = wide_bias.data();
  }
  for (int64_t i = 0; i < g.m; ++i) {
    U* row = pc + i * ldc;
    if (add) {
      if constexpr (std::is_same_v<U, float>) {
        vec::add_into_row(add, row, g.n);
      } else {
        for (int64_t j = 0; j < g.n; ++j) row[j] += add[j];
      }
    }
    if (pre) unpack(row, 1, g.n, pre + i * g.ldc, g.ldc);
    activate_row(g.act, row, g.n);
    if (c != nullptr) unpack(row, 1, g.n, c + i * g.ldc, g.ldc);
  }
}

// k == 0: the product is empty, so C = beta * C (and exactly 0 when beta == 0, without reading C).
template <typename T>
void scale_c(const GemmArgs& g) {
  using U = BlasT<T>;
  for (int64_t b = 0; b < g.batch; ++b) {
    T* c = static_cast<T*>(g.c) + b * g.stride_c;
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        T& x = c[i * g.ldc + j];
        x = g.beta == 0 ? T(U(0)) : T(static_cast<U>(g.beta) * static_cast<U>(x));
      }
    }
  }
}

// A thread's buffers for gemm_typed's dense copies (of A, of B, of C, and the dense C oneDNN writes
// where C's rows are longer), kept for its next products up to kKeepScratch elements each, so that
// the blocks of a bf16 product (each a widened copy of its part of A and a C in f32) do not
// allocate and fill their buffers every time.
template <typename U>
struct GemmScratch {
  static constexpr size_t kKeepScratch = size_t{1} << 20;
  detail::AlignedVector<U> a, b, c, dense;
  static GemmScratch& of_thread() {
    thread_local GemmScratch s;
    return s;
  }
  // v with room for n elements (filled only as it grows).
  static U* room(detail::AlignedVector<U>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    return v.data();
  }
  void trim() {
    for (detail::AlignedVector<U>* v : {&a, &b, &c, &dense}) {
      if (v->capacity() > kKeepScratch) detail::AlignedVector<U>().swap(*v);
    }
  }
};

// One operand as BLAS will see it: the caller's memory when the dtype and layout allow, else a
// dense copy in BlasT in `scratch` (made once when the batch stride is 0).
template <typename T>
class BlasOperand {
 public:
  using U = BlasT<T>;
  // `widened`: the operand already in U, dense (cols a row), for a product of one batch entry.
  BlasOperand(const void* base, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
              detail::AlignedVector<U>& scratch, const U* widened = nullptr)
      : base_(static_cast<const T*>(base)),
        rows_(rows),
        cols_(cols),
        ld_(ld),
        stride_(stride),
        widened_(widened) {
    if (widened_ != nullptr) {
      blas_ld_ = std::max<int64_t>(1, cols);
      return;
    }
    direct_ = std::is_same_v<T, U> && blas_ld(rows, cols, ld, &blas_ld_);
    if (!direct_) {
      blas_ld_ = std::max<int64_t>(1, cols);
      buf_ = GemmScratch<U>::room(scratch, rows * cols);
    }
  }
  int ld() const { return static_cast<int>(blas_ld_); }
  const U* get(int64_t b) {
    if (widened_ != nullptr) return widened_;
    const T* p = base_ + b * stride_;
    if (direct_) {
      if constexpr (std::is_same_v<T, U>) return p;
    }
    if (b == 0 || stride_ != 0) pack(p, rows_, cols_, ld_, buf_);
    return buf_;
  }

 private:
  const T* base_;
  int64_t rows_, cols_, ld_, stride_, blas_ld_ = 0;
  const U* widened_ = nullptr;
  bool direct_ = false;
  U* buf_ = nullptr;
};

// bf16 products in oneDNN (on the CPU's bf16 dot products, no widening copies of A and B), alpha,
// beta and the epilogue in f32 as on the sgemm path; false, having written nothing, where oneDNN
// does not take the product. The batch entries of a call are one oneDNN call (a batched matmul):
// attention's many small products spent most of their time in the calls' overhead. gemm() hands
// this runs of entries fixed by the shape alone (Note [gemm blocks]), so each call, and with it
// every entry's bits, is the same at any thread count.
bool gemm_bf16_library(const GemmArgs& g) {
  // Elsewhere the widened operands' f32 product (Note [bf16 products] in src/cpu/onednn_dnnl.cpp).
  if (!onednn_enabled() || !onednn::bf16_dot_products()) return false;
  // The thread's buffers, kept between calls up to kKeepFloats each (a large product's are freed).
  constexpr size_t kKeepFloats = size_t{1} << 20;
  thread_local detail::AlignedVector<float> prod, cbuf;
  prod.resize(static_cast<size_t>(g.batch * g.m * g.n));
  cbuf.resize(static_cast<size_t>(g.m * g.n));
  struct Trim {
    ~Trim() {
      for (detail::AlignedVector<float>* v : {&prod, &cbuf}) {
        if (v->capacity() > kKeepFloats) *v = detail::AlignedVector<float>();
      }
    }
  } trim;
  const onednn::GemmBatch batch{.count = g.batch, .stride_a = g.stride_a, .stride_b = g.stride_b};
  if (!onednn::gemm(DType::bf16, g.trans_a, g.trans_b, g.m, g.n, g.k, g.a, g.lda, g.b, g.ldb,
                    prod.data(), g.n, batch)) {
    return false;
  }
  const auto alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  for (int64_t i = 0; i < g.batch; ++i) {
    const float* pi = prod.data() + i * g.m * g.n;
    BFloat16* c = static_cast<BFloat16*>(g.c) + i * g.stride_c;
    if (g.beta != 0) pack(c, g.m, g.n, g.ldc, cbuf.data());
    for (int64_t e = 0; e < g.m * g.n; ++e) {
      cbuf[e] = g.beta != 0 ? alpha * pi[e] + beta * cbuf[e] : alpha * pi[e];
    }
    epilogue<BFloat16>(g, i, cbuf.data(), g.n, c);
  }
  return true;
}

// Note [f32 gemm in onednn]
// An f32 product of at least kLibraryMacs multiply-adds with alpha 1 and beta 0 (every Linear and
// matmul, forward and input gradient) runs as one single-threaded oneDNN matmul on the operands in
// place (bf16 and f16 ones on their widened copies), where the build has oneDNN and it is enabled:
// its blocked kernels (brgemm on AVX-512) run 10 to 20% faster than OpenBLAS's sgemm on the
// reference workloads' shapes (256 x 1024 x 1024: 5.2 against 6.2 ms on one core of the AMD EPYC).
// The epilogue stays the GEMM's own, as on the sgemm path. Each call's primitive depends on the
// shape, transposes and strides alone, and each block of Note [gemm blocks] is one call on one
// thread, so the bits do not depend on the thread count. Smaller products (their primitives would
// fill the plan cache), one-row products (the matrix-vector path reads B in place) and those with
// alpha or beta stay on OpenBLAS.
constexpr int64_t kLibraryMacs = int64_t{1} << 18;

// A bf16 or f16 product's operand that all its blocks read whole, widened to f32 once for them
// (Note [bf16 products] in src/cpu/onednn_dnnl.cpp): a, or b, or neither.
struct Widened {
  const float* a = nullptr;
  const float* b = nullptr;
};

template <typename T>
void gemm_typed(const GemmArgs& g, const Widened& wide) {
  using U = BlasT<T>;
  if (g.k == 0) {
    // Rare enough to take the epilogue through a dense BlasT copy of C.
    scale_c<T>(g);
    if (!g.bias && !g.pre_act && g.act == GemmAct::None) return;
    std::vector<U> tmp(static_cast<size_t>(g.m * g.n));
    for (int64_t i = 0; i < g.batch; ++i) {
      T* c = static_cast<T*>(g.c) + i * g.stride_c;
      pack(c, g.m, g.n, g.ldc, tmp.data());
      epilogue<T>(g, i, tmp.data(), g.n);
      unpack(tmp.data(), g.m, g.n, c, g.ldc);
    }
    return;
  }
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (gemm_bf16_library(g)) return;
  }
  // Stored shapes: A is (m, k), or (k, m) when transposed; B is (k, n), or (n, k) when transposed.
  SINTER_CHECK((wide.a == nullptr && wide.b == nullptr) || g.batch == 1,
               "gemm: a widened shared operand serves one batch entry, got ", g.batch);
  const auto widened = [](const float* w) {
    if constexpr (std::is_same_v<BlasT<T>, float> && !std::is_same_v<T, float>) return w;
    return static_cast<const BlasT<T>*>(nullptr);
  };
  GemmScratch<U>& scratch = GemmScratch<U>::of_thread();
  struct Trim {
    GemmScratch<U>& s;
    ~Trim() { s.trim(); }
  } trim{scratch};
  BlasOperand<T> a(g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a, scratch.a,
                   widened(wide.a));
  BlasOperand<T> b(g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b, scratch.b,
                   widened(wide.b));
  int64_t ldc = 0;
  const bool direct_c = std::is_same_v<T, U> && blas_ld(g.m, g.n, g.ldc, &ldc);
  U* cbuf = nullptr;
  if (!direct_c) {
    ldc = g.n;
    cbuf = GemmScratch<U>::room(scratch.c, g.m * g.n);
  }
  const U alpha = static_cast<U>(g.alpha), beta = static_cast<U>(g.beta);
  // The larger f32 products in oneDNN (Note [f32 gemm in onednn]), and those of bf16 and f16
  // operands widened to f32.
  const bool library_f32 = std::is_same_v<U, float> && g.alpha == 1 && g.beta == 0 && g.m > 1 &&
                           g.m * g.n * g.k >= kLibraryMacs && onednn_enabled();
  for (int64_t i = 0; i < g.batch; ++i) {
    T* c = static_cast<T*>(g.c) + i * g.stride_c;
    U* pc = cbuf;
    if constexpr (std::is_same_v<T, U>) {
      if (direct_c) pc = c;
    }
    if (!direct_c && g.beta != 0) pack(c, g.m, g.n, g.ldc, pc);
    if constexpr (std::is_same_v<U, float>) {
      // Into C where it is dense f32, else into a dense block then to C (oneDNN takes a slower
      // kernel for a C with longer rows); a widened product into its dense cbuf.
      const bool in_place = (direct_c && ldc == g.n) || !std::is_same_v<T, float>;
      float* out = in_place || !library_f32 ? pc : GemmScratch<U>::room(scratch.dense, g.m * g.n);
      if (library_f32 && onednn::gemm(DType::f32, g.trans_a, g.trans_b, g.m, g.n, g.k, a.get(i),
                                      a.ld(), b.get(i), b.ld(), out, g.n)) {
        epilogue<T>(g, i, out, g.n, out != pc || !direct_c ? c : nullptr);
        continue;
      }
    }
    blas_gemm(g.trans_a, g.trans_b, static_cast<int>(g.m), static_cast<int>(g.n),
              static_cast<int>(g.k), alpha, a.get(i), a.ld(), b.get(i), b.ld(), beta, pc,
              static_cast<int>(ldc));
    epilogue<T>(g, i, pc, ldc, direct_c ? nullptr : c);
  }
}

void gemm_one_thread(const GemmArgs& g, const Widened& wide = {}) {
  switch (g.dtype) {
    case DType::f32:
      return gemm_typed<float>(g, wide);
    case DType::f64:
      return gemm_typed<double>(g, wide);
    case DType::bf16:
      return gemm_typed<BFloat16>(g, wide);
    case DType::f16:
      return gemm_typed<Half>(g, wide);
    default:
      break;
  }
  SINTER_THROW("gemm: unsupported dtype ", g.dtype);
}

// The fewest multiply-adds worth a thread of their own: about a tenth of a millisecond of one
// core's sgemm, far above the cost of waking a worker.
constexpr int64_t kMinMacsPerPiece = int64_t{1} << 21;
// The same for a one-row product: a few microseconds of reading its B.
constexpr int64_t kMinRowMacsPerPiece = int64_t{1} << 17;
// The narrowest block of rows or columns one product is cut into (Note [gemm blocks]): OpenBLAS
// packs the whole other operand for each block, which this keeps to a few percent of the work.
constexpr int64_t kMinBlockSide = 128;

// Advances a typed pointer by `elems` elements of `g.dtype`.
template <typename P>
P* advance(P* p, int64_t elems, size_t elem) {
  if (p == nullptr) return p;
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<P*>(reinterpret_cast<Byte*>(p) + elems * static_cast<int64_t>(elem));
}

// Batch entries [b0, b1) of g.
GemmArgs batch_part(const GemmArgs& g, int64_t b0, int64_t b1) {
  const size_t e = element_size(g.dtype);
  GemmArgs p = g;
  p.batch = b1 - b0;
  p.a = advance(g.a, b0 * g.stride_a, e);
  p.b = advance(g.b, b0 * g.stride_b, e);
  p.c = advance(g.c, b0 * g.stride_c, e);
  p.pre_act = advance(g.pre_act, b0 * g.stride_c, e);
  return p;
}

// Rows [r0, r1) of C, or its columns when `cols`: the same sums over k on part of op(A) or op(B).
GemmArgs block_part(const GemmArgs& g, bool cols, int64_t r0, int64_t r1) {
  const size_t e = element_size(g.dtype);
  GemmArgs p = g;
  if (cols) {
    p.n = r1 - r0;
    p.b = advance(g.b, g.trans_b ? r0 * g.ldb : r0, e);
    p.c = advance(g.c, r0, e);
    p.pre_act = advance(g.pre_act, r0, e);
    p.bias = advance(g.bias, r0, e);
  } else {
    p.m = r1 - r0;
    p.a = advance(g.a, g.trans_a ? r0 : r0 * g.lda, e);
    p.c = advance(g.c, r0 * g.ldc, e);
    p.pre_act = advance(g.pre_act, r0 * g.ldc, e);
  }
  return p;
}

// Terms [k0, k1) of each sum of g: the same C from part of op(A)'s columns and op(B)'s rows.
GemmArgs depth_part(const GemmArgs& g, int64_t k0, int64_t k1) {
  const size_t e = element_size(g.dtype);
  GemmArgs p = g;
  p.k = k1 - k0;
  p.a = advance(g.a, g.trans_a ? k0 * g.lda : k0, e);
  p.b = advance(g.b, g.trans_b ? k0 : k0 * g.ldb, e);
  return p;
}

// Whether gemm_typed runs a product of this dtype on operands widened to f32: f16 always, bf16
// where gemm_bf16_library does not take it (Note [bf16 products]).
bool widens_operands(DType dtype) {
  if (dtype == DType::f16) return true;
  return dtype == DType::bf16 && !(onednn_enabled() && onednn::bf16_dot_products());
}

// rows x cols of a bf16 or f16 operand (row stride ld) into dst, dense f32.
void widen_operand(DType dtype, const void* src, int64_t rows, int64_t cols, int64_t ld,
                   float* dst) {
  if (dtype == DType::bf16) return pack(static_cast<const BFloat16*>(src), rows, cols, ld, dst);
  pack(static_cast<const Half*>(src), rows, cols, ld, dst);
}

// True when several threads may call OpenBLAS at once: a build with threads (pthreads or OpenMP)
// locks its shared buffers; a serial build may not, and then the blocks run on the caller.
bool blas_reentrant() {
  static const bool reentrant = openblas_get_parallel() != 0;
  return reentrant;
}

// Note [deep products]
// A product whose sums are much longer than C is wide or tall (a weight gradient dY^T X, its sums
// over the 8192 rows of a batch of tokens) is cut along k as well: into `chunks` runs of terms
// (a multiple of four from 4 to kDeepMaxChunks, so that 2 or 4 threads get the same work: about
// k / kDeepChunkK of them, or k / kDeepHalfChunkK for bf16 and f16, fewer and longer where a run
// would be too small a piece of work or their Cs too large), each multiplied into a C of
// its own (whole, or in blocks of kDeepBlockSide rows or columns or more where C is larger), and
// the chunks' Cs added in chunk order. The blocks of Note [gemm blocks] alone cut such a product
// into 128-row blocks that each packed the whole other operand (8192 x 384 for gpt-mini's MLP): a
// fifth of the time went to packing, and 1152 rows made 9 blocks, one thread doing five. Both cuts
// and the order of the sum depend on the shape alone, so the bits do not depend on the thread
// count. Products with alpha 1, beta 0 and no epilogue only (the weight gradients). A bf16 or f16
// product runs each run into an f32 C (the f32 product of its parts widened, dense, or the CPU's
// bf16 dot products with f32 sums, as gemm_bf16_library would: Note [bf16 products]) and rounds
// their sum once: on the widened path the sum of the f32 products of its runs' widened parts, in
// run order, rounded (not the f32 deep product's result rounded: its runs are longer).
constexpr int64_t kDeepMinK = 4096;
constexpr int64_t kDeepChunkK = 2048;
// bf16 and f16 products run shorter runs, so that a run's widened parts stay in the core's cache
// (vit-tiny's weight gradients, 256 x 64 over 8320 rows: parts of 2080 rows took 2.5 MiB of
// widened copies a run, and the product 2.8 ms on one core against 2.4 in runs of 520 rows).
constexpr int64_t kDeepHalfChunkK = 512;
constexpr int64_t kDeepMaxChunks = 16;
constexpr int64_t kDeepBlockSide = 2048;
// The most floats the chunks' own Cs take (16 MiB).
constexpr int64_t kDeepMaxPartials = int64_t{4} << 20;

// How many of a deep product's chunks have a dense f32 C of their own: all but the first (which
// goes into C) for f32, all of them for bf16 and f16 (their sum is rounded into C once).
int64_t own_partials(DType dtype, int64_t chunks) {
  return dtype == DType::f32 ? chunks - 1 : chunks;
}

}  // namespace

int64_t gemm_depth_chunks(const GemmArgs& g) {
  const bool f32_sums = g.dtype == DType::f32 || g.dtype == DType::bf16 || g.dtype == DType::f16;
  if (!f32_sums || g.batch != 1 || g.alpha != 1 || g.beta != 0 || g.bias != nullptr ||
      g.pre_act != nullptr || g.act != GemmAct::None) {
    return 0;
  }
  if (g.k < kDeepMinK || g.k < 2 * std::max(g.m, g.n) || std::min(g.m, g.n) < 16) return 0;
  const int64_t run = g.dtype == DType::f32 ? kDeepChunkK : kDeepHalfChunkK;
  int64_t chunks = std::clamp<int64_t>(g.k / run / 4 * 4, 4, kDeepMaxChunks);
  while (chunks >= 4 && own_partials(g.dtype, chunks) * g.m * g.n > kDeepMaxPartials) chunks -= 4;
  // Fewer, longer runs where each would be too small a piece of work.
  while (chunks > 4 && g.m * g.n * (g.k / chunks) < kMinMacsPerPiece) chunks -= 4;
  if (chunks < 4 || g.m * g.n * (g.k / chunks) < kMinMacsPerPiece) return 0;
  return chunks;
}

namespace {

// A bf16 or f16 part of a deep product into f32 C (p.c, rows p.ldc apart): on the CPU's bf16 dot
// products where gemm_bf16_library would run them, else the f32 product of the widened operands.
void deep_part_in_f32(const GemmArgs& p) {
  auto* c = static_cast<float*>(p.c);
  if (p.dtype == DType::bf16 && !widens_operands(p.dtype) &&
      onednn::gemm(DType::bf16, p.trans_a, p.trans_b, p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb, c,
                   p.ldc)) {
    return;
  }
  // The thread's widened operands, kept between calls up to kKeepFloats each.
  constexpr size_t kKeepFloats = size_t{1} << 20;
  thread_local detail::AlignedVector<float> wa, wb;
  GemmArgs q = p;
  q.dtype = DType::f32;
  // Stored shapes: A (m, k), or (k, m) when transposed; B (k, n), or (n, k) when transposed.
  q.lda = p.trans_a ? p.m : p.k;
  q.ldb = p.trans_b ? p.k : p.n;
  wa.resize(static_cast<size_t>(p.m * p.k));
  wb.resize(static_cast<size_t>(p.k * p.n));
  widen_operand(p.dtype, p.a, p.trans_a ? p.k : p.m, q.lda, p.lda, wa.data());
  widen_operand(p.dtype, p.b, p.trans_b ? p.n : p.k, q.ldb, p.ldb, wb.data());
  q.a = wa.data();
  q.b = wb.data();
  gemm_one_thread(q);
  for (detail::AlignedVector<float>* v : {&wa, &wb}) {
    if (v->capacity() > kKeepFloats) *v = detail::AlignedVector<float>();
  }
}

void gemm_deep(const GemmArgs& g, int64_t chunks) {
  const int64_t depth = (g.k + chunks - 1) / chunks;
  const bool cols = g.n > g.m;
  const int64_t side = cols ? g.n : g.m;
  const int64_t want = std::max<int64_t>(1, side / kDeepBlockSide);
  const int64_t block = ((side + want - 1) / want + 15) / 16 * 16;
  const int64_t blocks = (side + block - 1) / block;
  // The partial Cs are not zeroed: beta is 0.
  const bool f32 = g.dtype == DType::f32;
  const int64_t own = own_partials(g.dtype, chunks);
  const Storage scratch =
      Storage::allocate(static_cast<size_t>(own * g.m * g.n) * sizeof(float), Device::cpu());
  auto* const partials = static_cast<float*>(scratch.data());
  const auto partial = [&](int64_t j) { return partials + (j - (chunks - own)) * g.m * g.n; };
  auto item = [&](int64_t i) {
    const int64_t j = i / blocks, r = i % blocks;
    GemmArgs p = depth_part(g, j * depth, std::min(g.k, (j + 1) * depth));
    if (j >= chunks - own) {
      p.c = partial(j);
      p.ldc = g.n;
    }
    // block_part offsets c by g.dtype's element size: the partial Cs' rows are floats.
    const GemmArgs part = block_part(p, cols, r * block, std::min(side, (r + 1) * block));
    if (f32) return gemm_one_thread(part);
    GemmArgs in_f32 = part;
    in_f32.c = static_cast<float*>(p.c) + (cols ? r * block : r * block * g.n);
    deep_part_in_f32(in_f32);
  };
  if (!blas_reentrant()) {
    for (int64_t i = 0; i < chunks * blocks; ++i) item(i);
  } else {
    detail::parallel_for(chunks * blocks, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) item(i);
    });
  }
  // C += each chunk's C in chunk order (f32); C = the chunks' sum, rounded (bf16, f16).
  auto add_rows = [&](int64_t r0, int64_t r1) {
    std::vector<float> sum(f32 ? 0 : static_cast<size_t>(g.n));
    for (int64_t r = r0; r < r1; ++r) {
      float* row = f32 ? static_cast<float*>(g.c) + r * g.ldc : sum.data();
      if (!f32) std::copy_n(partial(0) + r * g.n, g.n, row);
      for (int64_t j = 1; j < chunks; ++j) {
        const float* add = partial(j) + r * g.n;
        for (int64_t x = 0; x < g.n; ++x) row[x] += add[x];
      }
      if (g.dtype == DType::bf16) unpack(row, 1, g.n, static_cast<BFloat16*>(g.c) + r * g.ldc, 1);
      if (g.dtype == DType::f16) unpack(row, 1, g.n, static_cast<Half*>(g.c) + r * g.ldc, 1);
    }
  };
  detail::parallel_blocks(g.m, g.n * chunks, add_rows);
}

}  // namespace

void gemm(const Ctx&, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  SINTER_CHECK(g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX, "gemm: sizes m=", g.m,
               " n=", g.n, " k=", g.k, " exceed the BLAS int range");
  // The pool sets OpenBLAS to one thread when it starts (Note [cpu threads]): before any BLAS call,
  // so that even the first small product does not run on OpenBLAS's own threads.
  static const int pool_started = get_num_threads();
  (void)pool_started;
  if (const int64_t chunks = gemm_depth_chunks(g); chunks > 0) {
    return gemm_deep(g, chunks);  // Note [deep products]
  }
  // Note [gemm blocks]
  // Each product of the batch is cut along the longer side of C into blocks whose size depends on
  // the shape alone (whole 16-wide panels, at least kMinBlockSide wide and kMinMacsPerPiece deep;
  // one block when the product is small), one BLAS call each, and the threads share the (batch
  // entry, block) items. OpenBLAS's result for an element may depend on where its call's edges
  // fall, so the cut must not depend on the thread count: at one thread the same calls run one
  // after another, and the bits are the same.
  // A one-row product (batch-1 Linear) goes to the matrix-vector path, bound by reading B, not by
  // its multiply-adds: its pieces are smaller, so that its columns are shared among the threads.
  const bool row = g.m == 1;
  const int64_t min_piece = row ? kMinRowMacsPerPiece : kMinMacsPerPiece;
  const int64_t min_side = row ? 16 : kMinBlockSide;
  const int64_t macs = g.m * g.n * std::max<int64_t>(g.k, 1);
  const bool cols = g.n > g.m;
  const int64_t side = cols ? g.n : g.m, per_line = macs / side;
  int64_t block = side;
  if (macs >= 2 * min_piece) {
    const int64_t want = std::max(min_side, min_piece / std::max<int64_t>(per_line, 1));
    block = std::min(side, (want + 15) / 16 * 16);
  }
  const int64_t blocks = (side + block - 1) / block;
  if (blocks == 1) {
    // Whole products, several batch entries to a call when they are small: runs of `grain`
    // entries from entry 0, so that a call's entries do not depend on the thread count either.
    const int64_t grain = std::max<int64_t>(1, kMinMacsPerPiece / macs);
    const int64_t runs = (g.batch + grain - 1) / grain;
    auto run = [&](int64_t r) {
      gemm_one_thread(batch_part(g, r * grain, std::min(g.batch, (r + 1) * grain)));
    };
    if (!blas_reentrant()) {
      for (int64_t r = 0; r < runs; ++r) run(r);
      return;
    }
    return detail::parallel_for(runs, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) run(r);
    });
  }
  // A bf16 or f16 product on widened operands: the operand every block reads whole (b where the
  // blocks are rows of C, a where they are columns), widened once here rather than once a block.
  detail::AlignedVector<float> shared;
  Widened wide;
  if (g.batch == 1 && widens_operands(g.dtype)) {
    const bool whole_b = !cols;
    // Stored shapes: A (m, k), or (k, m) when transposed; B (k, n), or (n, k) when transposed.
    const int64_t rows = whole_b ? (g.trans_b ? g.n : g.k) : (g.trans_a ? g.k : g.m);
    const int64_t width = whole_b ? (g.trans_b ? g.k : g.n) : (g.trans_a ? g.m : g.k);
    shared.resize(static_cast<size_t>(rows * width));
    widen_operand(g.dtype, whole_b ? g.b : g.a, rows, width, whole_b ? g.ldb : g.lda,
                  shared.data());
    (whole_b ? wide.b : wide.a) = shared.data();
  }
  auto item = [&](int64_t i) {
    const int64_t b = i / blocks, c = i % blocks;
    gemm_one_thread(
        block_part(batch_part(g, b, b + 1), cols, c * block, std::min(side, (c + 1) * block)),
        wide);
  };
  if (!blas_reentrant()) {
    for (int64_t i = 0; i < g.batch * blocks; ++i) item(i);
    return;
  }
  detail::parallel_for(g.batch * blocks, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) item(i);
  });
}

}  // namespace sinter::cpu
