// The activations a kernel's epilogue applies after the bias: GEMM (kern/gemm.h) and the
// convolution's forward pass (kern/conv.h).
#pragma once

#include <cstdint>

#include "kern/elementwise_ops.h"

namespace sinter::kern {

enum class GemmAct : int { None, Relu, Gelu, GeluTanh };

// act(v) in the accumulation type A, as the elementwise ops compute it (relu, gelu, gelu_tanh).
template <typename A>
SINTER_HD inline A activate(GemmAct act, A v) {
  switch (act) {
    case GemmAct::Relu:
      return unary_fn<UnaryOp::Relu, A>(v, A(0), A(0));
    case GemmAct::Gelu:
      return unary_fn<UnaryOp::Gelu, A>(v, A(0), A(0));
    case GemmAct::GeluTanh:
      return unary_fn<UnaryOp::GeluTanh, A>(v, A(0), A(0));
    default:
      return v;
  }
}

// v[i] = activate(act, v[i]) for i < n, on the host: the switch is taken once, outside the loops,
// so that each loop vectorizes (through the switch, one element at a time, relu costs as much as
// the GEMM's output pass).
template <typename A>
inline void activate_all(GemmAct act, A* v, int64_t n) {
  switch (act) {
    case GemmAct::Relu:
      for (int64_t i = 0; i < n; ++i) v[i] = unary_fn<UnaryOp::Relu, A>(v[i], A(0), A(0));
      break;
    case GemmAct::Gelu:
      for (int64_t i = 0; i < n; ++i) v[i] = unary_fn<UnaryOp::Gelu, A>(v[i], A(0), A(0));
      break;
    case GemmAct::GeluTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = unary_fn<UnaryOp::GeluTanh, A>(v[i], A(0), A(0));
      break;
    default:
      break;
  }
}

}  // namespace sinter::kern
