// Adam's and AdamW's update (sinter/optim/adam.h) as a rule of the fused optimizer kernels (Note
// [optimizer rules] in kern/optim.h, which includes this after the helpers it uses).
#pragma once

namespace sinter::kern {

struct AdamRule {
  struct Hyper {
    double lr = 0.0;
    double beta1 = 0.0;
    double beta2 = 0.0;
    double eps = 0.0;
    double weight_decay = 0.0;
    bool decoupled = false;  // AdamW
    bool amsgrad = false;
    bool maximize = false;
    const double* lr_device = nullptr;  // capturable: the group's lr on the call's device
  };

  template <class C>
  struct Scalars {
    C beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
    bool use_weight_decay, decoupled, amsgrad, maximize;
    const double* lr_device;
    explicit Scalars(const Hyper& h)
        : beta1(static_cast<C>(h.beta1)),
          one_minus_beta1(static_cast<C>(1.0 - h.beta1)),
          beta2(static_cast<C>(h.beta2)),
          one_minus_beta2(static_cast<C>(1.0 - h.beta2)),
          eps(static_cast<C>(h.eps)),
          weight_decay(static_cast<C>(h.weight_decay)),
          use_weight_decay(h.weight_decay != 0.0),
          decoupled(h.decoupled),
          amsgrad(h.amsgrad),
          maximize(h.maximize),
          lr_device(h.lr_device) {}
  };

  // buf[0]: exp_avg (m); buf[1]: exp_avg_sq (v); buf[2]: max_exp_avg_sq (amsgrad).
  static constexpr int kBuffers = 3;
  static constexpr bool kCountsSteps = true;

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
  SINTER_HD static void element(const Scalars<C>& s, const C* st, bool /*fresh*/, C& p, C g,
                                C* buf) {
    if (s.maximize) g = -g;
    if (s.use_weight_decay) {
      if (s.decoupled) {
        p = mul_rn(p, st[2]);
      } else {
        g = add_rn(g, mul_rn(p, s.weight_decay));
      }
    }
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
