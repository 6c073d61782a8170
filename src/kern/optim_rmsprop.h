// RMSprop's update (sinter/optim/rmsprop.h) as a rule of the fused optimizer kernels (Note
// [optimizer rules] in kern/optim.h, which includes this after the helpers it uses).
#pragma once

namespace sinter::kern {

struct RmspropRule {
  struct Hyper {
    double lr = 0.0;
    double alpha = 0.0;
    double eps = 0.0;
    double weight_decay = 0.0;
    double momentum = 0.0;
    bool centered = false;
    bool maximize = false;
    const double* lr_device = nullptr;  // capturable: the group's lr on the call's device
  };

  template <class C>
  struct Scalars {
    C alpha, one_minus_alpha, eps, weight_decay, momentum;
    bool use_weight_decay, use_momentum, centered, maximize;
    const double* lr_device;
    explicit Scalars(const Hyper& h)
        : alpha(static_cast<C>(h.alpha)),
          one_minus_alpha(static_cast<C>(1.0 - h.alpha)),
          eps(static_cast<C>(h.eps)),
          weight_decay(static_cast<C>(h.weight_decay)),
          momentum(static_cast<C>(h.momentum)),
          use_weight_decay(h.weight_decay != 0.0),
          use_momentum(h.momentum > 0.0),
          centered(h.centered),
          maximize(h.maximize),
          lr_device(h.lr_device) {}
  };

  // buf[0]: square_avg; buf[1]: momentum_buffer (momentum > 0); buf[2]: grad_avg (centered).
  static constexpr int kBuffers = 3;

  static constexpr bool kCountsSteps = true;

  // st[0]: lr.
  template <class C>
  SINTER_HD static void step(const Scalars<C>& /*s*/, C lr, C /*t*/, C* st) {
    st[0] = lr;
  }

  template <class C>
  SINTER_HD static void element(const Scalars<C>& s, const C* st, bool /*fresh*/, C& p, C g,
                                C* buf) {
    const C lr = st[0];
    if (s.maximize) g = -g;
    if (s.use_weight_decay) g = add_rn(g, mul_rn(p, s.weight_decay));
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
