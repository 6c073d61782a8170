// The op table's row type and input domains, shared by the files that contribute rows: test_ops.cpp
// (the core ops) and ops_*.cpp (one file per op family). test_ops.cpp runs every row through an
// fp64 gradcheck and CPU-vs-CUDA parity.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace sinter::testing {

using Inputs = std::vector<Tensor>;

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

// Rows of each op family, defined in tests/ops_<family>.cpp.
std::vector<OpRow> conv_pool_rows();
std::vector<OpRow> norm_rows();
std::vector<OpRow> loss_rows();
std::vector<OpRow> attention_rows();

}  // namespace sinter::testing
