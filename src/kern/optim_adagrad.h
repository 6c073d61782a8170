// Adagrad's update (sinter/optim/adagrad.h) as a rule of the fused optimizer kernels (Note
// [optimizer rules] in src/kern/optim.h, which includes this after the helpers it uses).
#pragma once

#include "sinter/optim/adagrad_options.h"

namespace sinter::kern {

// buf[0]: sum, the running sum of squared gradients.
struct AdagradRule : RuleOf<optim::AdagradOptions, 1, true> {
  template <class C>
  struct Scalars {
    C lr_decay, eps, weight_decay;
    bool use_weight_decay, maximize;
    explicit Scalars(const Hyper& h)
        : lr_decay(static_cast<C>(h.o.lr_decay)),
          eps(static_cast<C>(h.o.eps)),
          weight_decay(static_cast<C>(h.o.weight_decay)),
          use_weight_decay(h.o.weight_decay != 0.0),
          maximize(h.o.maximize) {}
  };

  // st[0]: lr / (1 + (t - 1) lr_decay), the learning rate of the tensor's step t.
  template <class C>
  SINTER_HD static void step(const Scalars<C>& s, C lr, C t, C* st) {
    st[0] = lr / add_rn(C(1), mul_rn(add_rn(t, C(-1)), s.lr_decay));
  }

  template <class C>
  SINTER_HD static void element(const Scalars<C>& s, const C* st, bool, C& p, C g, C* buf) {
    const C lr = st[0];
    g = decayed_grad(s, p, g);
    C& sum = buf[0];
    sum = add_rn(sum, mul_rn(g, g));
    const C std = add_rn(Math<C>::sqrt(sum), s.eps);
    p = add_rn(p, mul_rn(g / std, -lr));
  }
};

}  // namespace sinter::kern
