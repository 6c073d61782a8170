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

struct OpRow {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(const Inputs&)> fn;
  Domain domain = Domain::Any;
  bool grad = true;   // differentiable: gradchecked, and its backward compared across devices
  double tol = 1e-4;  // f32 parity tolerance (atol and rtol)
  bool bf16 = true;   // also compared in bf16
  double bf16_tol = 3e-2;
  double fd_eps = 1e-6;  // finite-difference step of the gradcheck
};

inline std::ostream& operator<<(std::ostream& os, const OpRow& r) { return os << r.name; }

// Rows of each op family, defined in tests/ops_<family>.cpp.
std::vector<OpRow> conv_pool_rows();
std::vector<OpRow> norm_rows();
std::vector<OpRow> loss_rows();

}  // namespace sinter::testing
