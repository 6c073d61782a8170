// SGD's update (sinter/optim/sgd.h) as a rule of the fused optimizer kernels (Note [optimizer
// rules] in src/kern/optim.h, which includes this after the helpers it uses).
#pragma once

#include "sinter/optim/sgd_options.h"

namespace sinter::kern {

// buf[0]: momentum_buffer (momentum != 0). SGD keeps no step count, as PyTorch's.
struct SgdRule : RuleOf<optim::SGDOptions, 1, false> {
  template <class C>
  struct Scalars {
    C momentum, one_minus_dampening, weight_decay;
    bool use_momentum, use_weight_decay, nesterov, maximize;
    explicit Scalars(const Hyper& h)
        : momentum(static_cast<C>(h.o.momentum)),
          one_minus_dampening(static_cast<C>(1.0 - h.o.dampening)),
          weight_decay(static_cast<C>(h.o.weight_decay)),
          use_momentum(h.o.momentum != 0.0),
          use_weight_decay(h.o.weight_decay != 0.0),
          nesterov(h.o.nesterov),
          maximize(h.o.maximize) {}
  };

  // st[0]: -lr.
  template <class C>
  SINTER_HD static void step(const Scalars<C>& /*s*/, C lr, C /*t*/, C* st) {
    st[0] = -lr;
  }

  // A fresh buffer takes d itself, undampened (PyTorch's first step).
  template <class C>
  SINTER_HD static void element(const Scalars<C>& s, const C* st, bool fresh, C& p, C g, C* buf) {
    C d = decayed_grad(s, p, g);
    if (s.use_momentum) {
      C& b = buf[0];
      b = fresh ? d : add_rn(mul_rn(b, s.momentum), mul_rn(d, s.one_minus_dampening));
      d = s.nesterov ? add_rn(d, mul_rn(b, s.momentum)) : b;
    }
    p = add_rn(p, mul_rn(d, st[0]));
  }
};

}  // namespace sinter::kern
