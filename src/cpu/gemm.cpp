// CPU reference GEMM on OpenBLAS: batched row-major C = alpha * op(A) @ op(B) + beta * C.
// bf16 and f16 operands are widened to f32, multiplied with sgemm and rounded back.
#include "kern/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kern/elementwise.h"
#include "kern/scalar_ops.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

// The type BLAS computes in for storage type T.
template <typename T>
using BlasT = std::conditional_t<std::is_same_v<T, double>, double, float>;

void blas_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void blas_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
               const double* b, int ldb, double beta, double* c, int ldc) {
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
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = static_cast<U>(src[i * ld + j]);
  }
}

template <typename T, typename U>
void unpack(const U* src, int64_t rows, int64_t cols, T* dst, int64_t ld) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[i * ld + j] = T(src[i * cols + j]);
  }
}

// The GemmArgs epilogue on one computed (m, n) block pc (row stride ldc, in BlasT), batch index b:
// bias, pre-activation and activation. alpha and beta were applied by BLAS already.
template <typename T>
void epilogue(const GemmArgs& g, int64_t b, BlasT<T>* pc, int64_t ldc) {
  using U = BlasT<T>;
  if (!g.bias && !g.pre_act && g.act == GemmAct::None) return;
  const T* bias = static_cast<const T*>(g.bias);
  T* pre = g.pre_act ? static_cast<T*>(g.pre_act) + b * g.stride_c : nullptr;
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      U v = pc[i * ldc + j];
      if (bias) v += static_cast<U>(bias[j]);
      if (pre) pre[i * g.ldc + j] = T(v);
      switch (g.act) {
        case GemmAct::Relu:
          v = unary_fn<UnaryOp::Relu, U>(v, U(0), U(0));
          break;
        case GemmAct::Gelu:
          v = unary_fn<UnaryOp::Gelu, U>(v, U(0), U(0));
          break;
        case GemmAct::GeluTanh:
          v = unary_fn<UnaryOp::GeluTanh, U>(v, U(0), U(0));
          break;
        case GemmAct::None:
          break;
      }
      pc[i * ldc + j] = v;
    }
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

// One operand as BLAS will see it: the caller's memory when the dtype and layout allow, else a
// dense copy in BlasT (made once when the batch stride is 0).
template <typename T>
class BlasOperand {
 public:
  using U = BlasT<T>;
  BlasOperand(const void* base, int64_t rows, int64_t cols, int64_t ld, int64_t stride)
      : base_(static_cast<const T*>(base)), rows_(rows), cols_(cols), ld_(ld), stride_(stride) {
    direct_ = std::is_same_v<T, U> && blas_ld(rows, cols, ld, &blas_ld_);
    if (!direct_) {
      blas_ld_ = std::max<int64_t>(1, cols);
      buf_.resize(static_cast<size_t>(rows * cols));
    }
  }
  int ld() const { return static_cast<int>(blas_ld_); }
  const U* get(int64_t b) {
    const T* p = base_ + b * stride_;
    if (direct_) {
      if constexpr (std::is_same_v<T, U>) return p;
    }
    if (b == 0 || stride_ != 0) pack(p, rows_, cols_, ld_, buf_.data());
    return buf_.data();
  }

 private:
  const T* base_;
  int64_t rows_, cols_, ld_, stride_, blas_ld_ = 0;
  bool direct_ = false;
  std::vector<U> buf_;
};

template <typename T>
void gemm_typed(const GemmArgs& g) {
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
  // Stored shapes: A is (m, k), or (k, m) when transposed; B is (k, n), or (n, k) when transposed.
  BlasOperand<T> a(g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a);
  BlasOperand<T> b(g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b);
  int64_t ldc = 0;
  const bool direct_c = std::is_same_v<T, U> && blas_ld(g.m, g.n, g.ldc, &ldc);
  std::vector<U> cbuf;
  if (!direct_c) {
    ldc = g.n;
    cbuf.resize(static_cast<size_t>(g.m * g.n));
  }
  const U alpha = static_cast<U>(g.alpha), beta = static_cast<U>(g.beta);
  for (int64_t i = 0; i < g.batch; ++i) {
    T* c = static_cast<T*>(g.c) + i * g.stride_c;
    U* pc = cbuf.data();
    if constexpr (std::is_same_v<T, U>) {
      if (direct_c) pc = c;
    }
    if (!direct_c && g.beta != 0) pack(c, g.m, g.n, g.ldc, pc);
    blas_gemm(g.trans_a, g.trans_b, static_cast<int>(g.m), static_cast<int>(g.n),
              static_cast<int>(g.k), alpha, a.get(i), a.ld(), b.get(i), b.ld(), beta, pc,
              static_cast<int>(ldc));
    epilogue<T>(g, i, pc, ldc);
    if (!direct_c) unpack(pc, g.m, g.n, c, g.ldc);
  }
}

}  // namespace

void gemm(const Ctx&, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  SINTER_CHECK(g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX, "gemm: sizes m=", g.m,
               " n=", g.n, " k=", g.k, " exceed the BLAS int range");
  switch (g.dtype) {
    case DType::f32:
      return gemm_typed<float>(g);
    case DType::f64:
      return gemm_typed<double>(g);
    case DType::bf16:
      return gemm_typed<BFloat16>(g);
    case DType::f16:
      return gemm_typed<Half>(g);
    default:
      break;
  }
  SINTER_THROW("gemm: unsupported dtype ", g.dtype);
}

}  // namespace sinter::cpu
