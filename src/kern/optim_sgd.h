// SGD's update (sinter/optim/sgd.h) as a rule of the fused optimizer kernels (Note [optimizer
// rules] in kern/optim.h, which includes this after the helpers it uses).
#pragma once

namespace sinter::kern {

struct SgdRule {
  struct Hyper {
    double lr = 0.0;
    double momentum = 0.0;  // 0: no buffer
    double dampening = 0.0;
    double weight_decay = 0.0;
    bool nesterov = false;
    bool maximize = false;
    const double* lr_device = nullptr;  // capturable: the group's lr on the call's device
  };

  template <class C>
  struct Scalars {
    C momentum, one_minus_dampening, weight_decay;
    bool use_momentum, use_weight_decay, nesterov, maximize;
    const double* lr_device;
    explicit Scalars(const Hyper& h)
        : momentum(static_cast<C>(h.momentum)),
          one_minus_dampening(static_cast<C>(1.0 - h.dampening)),
          weight_decay(static_cast<C>(h.weight_decay)),
          use_momentum(h.momentum != 0.0),
          use_weight_decay(h.weight_decay != 0.0),
          nesterov(h.nesterov),
          maximize(h.maximize),
          lr_device(h.lr_device) {}
  };

  // buf[0]: momentum_buffer (momentum != 0). SGD keeps no step count, as PyTorch's.
  static constexpr int kBuffers = 1;
  static constexpr bool kCountsSteps = false;

  // st[0]: -lr.
  template <class C>
  SINTER_HD static void step(const Scalars<C>& /*s*/, C lr, C /*t*/, C* st) {
    st[0] = -lr;
  }

  // A fresh buffer takes d itself, undampened (PyTorch's first step).
  template <class C>
  SINTER_HD static void element(const Scalars<C>& s, const C* st, bool fresh, C& p, C g, C* buf) {
    C d = s.maximize ? -g : g;
    if (s.use_weight_decay) d = add_rn(d, mul_rn(p, s.weight_decay));
    if (s.use_momentum) {
      C& b = buf[0];
      b = fresh ? d : add_rn(mul_rn(b, s.momentum), mul_rn(d, s.one_minus_dampening));
      d = s.nesterov ? add_rn(d, mul_rn(b, s.momentum)) : b;
    }
    p = add_rn(p, mul_rn(d, st[0]));
  }
};

}  // namespace sinter::kern
