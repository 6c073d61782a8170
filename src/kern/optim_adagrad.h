// Adagrad's update (sinter/optim/adagrad.h) as a rule of the fused optimizer kernels (Note
// [optimizer rules] in kern/optim.h, which includes this after the helpers it uses).
#pragma once

namespace sinter::kern {

struct AdagradRule {
  struct Hyper {
    double lr = 0.0;
    double lr_decay = 0.0;
    double eps = 0.0;
    double weight_decay = 0.0;
    bool maximize = false;
    const double* lr_device = nullptr;  // capturable: the group's lr on the call's device
  };

  template <class C>
  struct Scalars {
    C lr_decay, eps, weight_decay;
    bool use_weight_decay, maximize;
    const double* lr_device;
    explicit Scalars(const Hyper& h)
        : lr_decay(static_cast<C>(h.lr_decay)),
          eps(static_cast<C>(h.eps)),
          weight_decay(static_cast<C>(h.weight_decay)),
          use_weight_decay(h.weight_decay != 0.0),
          maximize(h.maximize),
          lr_device(h.lr_device) {}
  };

  // buf[0]: sum, the running sum of squared gradients.
  static constexpr int kBuffers = 1;

  static constexpr bool kCountsSteps = true;

  // st[0]: lr / (1 + (t - 1) lr_decay), the learning rate of the tensor's step t.
  template <class C>
  SINTER_HD static void step(const Scalars<C>& s, C lr, C t, C* st) {
    st[0] = lr / add_rn(C(1), mul_rn(add_rn(t, C(-1)), s.lr_decay));
  }

  template <class C>
  SINTER_HD static void element(const Scalars<C>& s, const C* st, bool /*fresh*/, C& p, C g,
                                C* buf) {
    const C lr = st[0];
    if (s.maximize) g = -g;
    if (s.use_weight_decay) g = add_rn(g, mul_rn(p, s.weight_decay));
    C& sum = buf[0];
    sum = add_rn(sum, mul_rn(g, g));
    const C std = add_rn(Math<C>::sqrt(sum), s.eps);
    p = add_rn(p, mul_rn(g / std, -lr));
  }
};

}  // namespace sinter::kern
