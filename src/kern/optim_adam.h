// Adam's and AdamW's update (sinter/optim/adam.h) as a rule of the fused optimizer kernels (Note
// [optimizer rules] in src/kern/optim.h, which includes this after the helpers it uses).
#pragma once

#include "sinter/optim/adam_options.h"

namespace sinter::kern {

// buf[0]: exp_avg (m); buf[1]: exp_avg_sq (v); buf[2]: max_exp_avg_sq (amsgrad).
struct AdamRule : RuleOf<optim::AdamOptions, 3, true> {
  template <class C>
  struct Scalars {
    C beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
    bool use_weight_decay, decay_param, amsgrad, maximize;
    explicit Scalars(const Hyper& h)
        : beta1(static_cast<C>(h.o.betas.first)),
          one_minus_beta1(static_cast<C>(1.0 - h.o.betas.first)),
          beta2(static_cast<C>(h.o.betas.second)),
          one_minus_beta2(static_cast<C>(1.0 - h.o.betas.second)),
          eps(static_cast<C>(h.o.eps)),
          weight_decay(static_cast<C>(h.o.weight_decay)),
          use_weight_decay(h.o.weight_decay != 0.0 && !h.o.decoupled_weight_decay),
          decay_param(h.o.weight_decay != 0.0 && h.o.decoupled_weight_decay),
          amsgrad(h.o.amsgrad),
          maximize(h.o.maximize) {}
  };

  // The bias corrections of the tensor's step t: st[0] = -lr / (1 - beta1^t), st[1] =
  // sqrt(1 - beta2^t); st[2] = 1 - lr * weight_decay, AdamW's decay of the parameter.
  template <class C>
  SINTER_HD static void step(const Scalars<C>& s, C lr, C t, C* st) {
    const C bc1 = C(1) - Math<C>::pow(s.beta1, t);
    st[0] = -(lr / bc1);
    st[1] = Math<C>::sqrt(C(1) - Math<C>::pow(s.beta2, t));
    st[2] = C(1) - lr * s.weight_decay;
  }

  template <class C>
  SINTER_HD static void element(const Scalars<C>& s, const C* st, bool, C& p, C g, C* buf) {
    if (s.decay_param) p = mul_rn(p, st[2]);  // AdamW
    g = decayed_grad(s, p, g);
    C& m = buf[0];
    C& v = buf[1];
    m = add_rn(mul_rn(m, s.beta1), mul_rn(g, s.one_minus_beta1));
    v = add_rn(mul_rn(v, s.beta2), mul_rn(mul_rn(g, g), s.one_minus_beta2));
    C second = v;
    if (s.amsgrad) {
      C& vmax = buf[2];
      vmax = scalar::maximum(vmax, v);
      second = vmax;
    }
    const C denom = add_rn(Math<C>::sqrt(second) / st[1], s.eps);
    p = add_rn(p, mul_rn(m / denom, st[0]));
  }
};

}  // namespace sinter::kern
