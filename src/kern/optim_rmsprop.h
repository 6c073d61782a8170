// RMSprop's update (sinter/optim/rmsprop.h) as a rule of the fused optimizer kernels (Note
// [optimizer rules] in src/kern/optim.h, which includes this after the helpers it uses).
#pragma once

#include "sinter/optim/rmsprop_options.h"

namespace sinter::kern {

// buf[0]: square_avg; buf[1]: momentum_buffer (momentum > 0); buf[2]: grad_avg (centered).
struct RmspropRule : RuleOf<optim::RMSpropOptions, 3, true> {
  template <class C>
  struct Scalars {
    C alpha, one_minus_alpha, eps, weight_decay, momentum;
    bool use_weight_decay, use_momentum, centered, maximize;
    explicit Scalars(const Hyper& h)
        : alpha(static_cast<C>(h.o.alpha)),
          one_minus_alpha(static_cast<C>(1.0 - h.o.alpha)),
          eps(static_cast<C>(h.o.eps)),
          weight_decay(static_cast<C>(h.o.weight_decay)),
          momentum(static_cast<C>(h.o.momentum)),
          use_weight_decay(h.o.weight_decay != 0.0),
          use_momentum(h.o.momentum > 0.0),
          centered(h.o.centered),
          maximize(h.o.maximize) {}
  };

  // st[0]: lr.
  template <class C>
  SINTER_HD static void step(const Scalars<C>& /*s*/, C lr, C /*t*/, C* st) {
    st[0] = lr;
  }

  template <class C>
  SINTER_HD static void element(const Scalars<C>& s, const C* st, bool, C& p, C g, C* buf) {
    const C lr = st[0];
    g = decayed_grad(s, p, g);
    C& v = buf[0];
    v = add_rn(mul_rn(v, s.alpha), mul_rn(mul_rn(g, g), s.one_minus_alpha));
    C avg;
    if (s.centered) {
      C& mean = buf[2];
      mean = add_rn(mul_rn(mean, s.alpha), mul_rn(g, s.one_minus_alpha));
      avg = add_rn(Math<C>::sqrt(add_rn(v, -mul_rn(mean, mean))), s.eps);
    } else {
      avg = add_rn(Math<C>::sqrt(v), s.eps);
    }
    if (s.use_momentum) {
      C& b = buf[1];
      b = add_rn(mul_rn(b, s.momentum), g / avg);
      p = add_rn(p, mul_rn(b, -lr));
    } else {
      p = add_rn(p, mul_rn(g / avg, -lr));
    }
  }
};

}  // namespace sinter::kern
