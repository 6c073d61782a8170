// The activations a kernel's epilogue applies after the bias: GEMM (kern/gemm.h) and the
// convolution's forward pass (kern/conv.h).
#pragma once

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

}  // namespace sinter::kern
