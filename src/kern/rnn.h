// The kernel interface of the recurrent cells' pointwise steps (LSTM and GRU), in sinter::cpu
// (src/cpu/rnn.cpp) and sinter::cudak (kernels/rnn.cu), Note [kernel interfaces]; and each unit's
// math, one __host__ __device__ function that both backends run.
#pragma once

#include <cstdint>

#include "kern/ctx.h"
#include "kern/scalar_ops.h"

namespace sinter::kern {

// Note [rnn cell steps]
// A recurrent layer runs the input projection of its whole sequence as one GEMM and then, per
// step, one GEMM of the state (h W_hh^T + b_hh) and one pointwise kernel: the units below, each
// element of the batch and hidden size on its own. Gates come in PyTorch's order and layout,
// blocks of `hidden` columns: LSTM (i, f, g, o), GRU (r, z, n). The backward recomputes the
// activations from the saved pre-activation gates in the compute type instead of saving them.

template <class C>
struct LstmUnit {
  C h, c;
};

// c = sigmoid(f) c_prev + sigmoid(i) tanh(g), h = sigmoid(o) tanh(c).
template <class C>
SINTER_HD LstmUnit<C> lstm_unit(C gi, C gf, C gg, C go, C c_prev) {
  const C i = scalar::sigmoid(gi), f = scalar::sigmoid(gf), o = scalar::sigmoid(go);
  const C c = f * c_prev + i * Math<C>::tanh(gg);
  return {o * Math<C>::tanh(c), c};
}

template <class C>
struct LstmUnitGrad {
  C di, df, dg, dout, dc_prev;
};

// The pre-activation gates' gradients and c_prev's, from dh and dc (the gradients of h and c).
template <class C>
SINTER_HD LstmUnitGrad<C> lstm_unit_backward(C gi, C gf, C gg, C go, C c_prev, C dh, C dc) {
  const C i = scalar::sigmoid(gi), f = scalar::sigmoid(gf), o = scalar::sigmoid(go);
  const C g = Math<C>::tanh(gg);
  const C c = f * c_prev + i * g;
  const C tc = Math<C>::tanh(c);
  const C dct = dc + dh * o * (C(1) - tc * tc);
  return {dct * g * i * (C(1) - i), dct * c_prev * f * (C(1) - f), dct * i * (C(1) - g * g),
          dh * tc * o * (C(1) - o), dct * f};
}

// r = sigmoid(xr + hr), z = sigmoid(xz + hz), n = tanh(xn + r hn), h = (1 - z) n + z h_prev: x*
// from the input's projection, h* from the state's (each with its bias), as PyTorch's GRU.
template <class C>
SINTER_HD C gru_unit(C xr, C xz, C xn, C hr, C hz, C hn, C h_prev) {
  const C r = scalar::sigmoid(xr + hr), z = scalar::sigmoid(xz + hz);
  const C n = Math<C>::tanh(xn + r * hn);
  return (C(1) - z) * n + z * h_prev;
}

template <class C>
struct GruUnitGrad {
  C dr, dz, dn, dhn, dh_prev;  // dr, dz, dn: of the pre-activation sums; dhn: of hn
};

template <class C>
SINTER_HD GruUnitGrad<C> gru_unit_backward(C xr, C xz, C xn, C hr, C hz, C hn, C h_prev, C dh) {
  const C r = scalar::sigmoid(xr + hr), z = scalar::sigmoid(xz + hz);
  const C n = Math<C>::tanh(xn + r * hn);
  const C dn = dh * (C(1) - z) * (C(1) - n * n);
  return {dn * hn * r * (C(1) - r), dh * (h_prev - n) * z * (C(1) - z), dn, dn * r, dh * z};
}

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/rnn.inc"
#include "kern/declare.h"
