// The op table's row type and input domains, shared by the files that contribute rows:
// tests/ops_<family>.cpp, one per file of src/ops/. test_ops.cpp runs every row through an fp64
// gradcheck and CPU-vs-CUDA parity.
#pragma once

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.h"

namespace sinter::testing {

using Inputs = std::vector<Tensor>;
// Short names for the rows' shapes and reductions.
using S = Shape;
using R = Reduction;

enum class Domain {
  Any,       // standard normal
  Positive,  // [0.5, 2)
  NonZero,   // |x| in [0.3, 1.3), either sign
  Unit,      // (-0.9, 0.9)
};

using OpFn = std::function<Tensor(const Inputs&)>;

struct OpRow {
  std::string name;
  std::vector<Shape> shapes;
  OpFn fn;
  Domain domain = Domain::Any;
  bool grad = true;   // differentiable: gradchecked, and its backward compared across devices
  double tol = 1e-4;  // f32 parity tolerance (atol and rtol)
  bool bf16 = true;   // also compared in bf16
  double bf16_tol = 3e-2;
  double fd_eps = 1e-6;  // finite-difference step of the gradcheck
};

inline std::ostream& operator<<(std::ostream& os, const OpRow& r) { return os << r.name; }

// Functions of the inputs, for rows and for the larger parity checks of test_conv_pool.cpp: conv2d
// of x[0] by x[1] (with x[2] as the bias when there is a third input), and the pools of x[0].
inline OpFn conv2d_of(Conv2dOptions o) {
  return [o](const Inputs& x) { return conv2d(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), o); };
}
inline OpFn max_pool_of(Size2 kernel, MaxPool2dOptions o = {}) {
  return [kernel, o](const Inputs& x) { return max_pool2d(x[0], kernel, o); };
}
inline OpFn avg_pool_of(Size2 kernel, AvgPool2dOptions o = {}) {
  return [kernel, o](const Inputs& x) { return avg_pool2d(x[0], kernel, o); };
}
inline OpFn adaptive_pool_of(Size2 size) {
  return [size](const Inputs& x) { return adaptive_avg_pool2d(x[0], size); };
}

// The first and second of a pair of results (max's values and indices, topk's, ...).
inline Tensor first(const std::tuple<Tensor, Tensor>& t) { return std::get<0>(t); }
inline Tensor second(const std::tuple<Tensor, Tensor>& t) { return std::get<1>(t); }

// An i64 index tensor of `shape` on `like`'s device.
inline Tensor index_of(const std::vector<int64_t>& values, const Shape& shape, const Tensor& like) {
  return from_vector<int64_t>(values, shape).to(like.device());
}

// Rows of each op family, defined in tests/ops_<family>.cpp.
#define SINTER_OP_FAMILIES(X) \
  X(elementwise)              \
  X(logic)                    \
  X(reduce)                   \
  X(gemm)                     \
  X(index)                    \
  X(shape)                    \
  X(sort)                     \
  X(softmax)                  \
  X(loss)                     \
  X(norm)                     \
  X(pool)                     \
  X(resample)                 \
  X(conv)                     \
  X(attention)                \
  X(rnn)                      \
  X(inplace)
#define SINTER_DECLARE_ROWS_(family) std::vector<OpRow> family##_rows();
SINTER_OP_FAMILIES(SINTER_DECLARE_ROWS_)
#undef SINTER_DECLARE_ROWS_

// Every family's rows function, in the order above.
inline std::vector<std::vector<OpRow> (*)()> op_families() {
#define SINTER_ROWS_FN_(family) &family##_rows,
  return {SINTER_OP_FAMILIES(SINTER_ROWS_FN_)};
#undef SINTER_ROWS_FN_
}

}  // namespace sinter::testing
