// The sinter::cudak kernels of src/internal/kernels.h in a build without CUDA: each one throws, so
// the library links and a CUDA tensor op fails with a clear message instead of a missing symbol.
#include "internal/kernels.h"
#include "sinter/core/error.h"

namespace sinter::cudak {

void unary(const Ctx&, const ElementwiseIter&, UnaryOp, double, double) {
  SINTER_THROW("unary: built without CUDA");
}

void binary(const Ctx&, const ElementwiseIter&, BinaryOp, double) {
  SINTER_THROW("binary: built without CUDA");
}

void where(const Ctx&, const ElementwiseIter&) { SINTER_THROW("where: built without CUDA"); }

void copy(const Ctx&, const ElementwiseIter&) { SINTER_THROW("copy: built without CUDA"); }

void reduce_rows(const Ctx&, const void*, DType, int64_t, int64_t, ReduceOp, void*, DType,
                 int64_t*) {
  SINTER_THROW("reduce_rows: built without CUDA");
}

void gemm(const Ctx&, const GemmArgs&) { SINTER_THROW("gemm: built without CUDA"); }

void index_select(const Ctx&, const void*, DType, int64_t, int64_t, int64_t, const int64_t*,
                  int64_t, void*) {
  SINTER_THROW("index_select: built without CUDA");
}

void index_add(const Ctx&, void*, DType, int64_t, int64_t, int64_t, const int64_t*, int64_t,
               const void*) {
  SINTER_THROW("index_add: built without CUDA");
}

void random_uniform(const Ctx&, void*, DType, int64_t, uint64_t, uint64_t, double, double) {
  SINTER_THROW("random_uniform: built without CUDA");
}

void random_normal(const Ctx&, void*, DType, int64_t, uint64_t, uint64_t, double, double) {
  SINTER_THROW("random_normal: built without CUDA");
}

void random_int(const Ctx&, void*, DType, int64_t, uint64_t, uint64_t, int64_t, int64_t) {
  SINTER_THROW("random_int: built without CUDA");
}

void arange(const Ctx&, void*, DType, int64_t, double, double) {
  SINTER_THROW("arange: built without CUDA");
}

}  // namespace sinter::cudak
