// The kernel interface of the fused optimizer steps (src/optim/sgd.cpp, src/optim/adam.cpp): one
// call updates every tensor of a list. In sinter::cpu (src/cpu/optim.cpp) and sinter::cudak
// (kernels/optim.cu), Note [kernel interfaces].
#pragma once

#include <cstdint>

#include "kern/ctx.h"
#include "kern/scalar_ops.h"

namespace sinter::kern {

// Note [fused optimizer step]
// Every tensor of one call is contiguous, on the call's device, and has the call's dtype (f32, f64,
// bf16, f16): the parameter, its gradient and its state buffers alike. The math runs in double for
// f64 and in float otherwise, and follows the unfused tensor-op formulas of sgd.h and adam.h one
// operation at a time: every product and sum is rounded on its own (mul_rn/add_rn, no FMA
// contraction), scalars are converted to the compute type as the elementwise ops convert them, and
// a term with a zero coefficient (weight decay 0) is skipped as the unfused code skips it. So for
// f32 and f64 the fused step gives the unfused step's bits on CPU and CUDA alike; bf16 and f16
// round once per stored value instead of once per operation.

struct SgdHyper {
  double lr = 0.0;
  double momentum = 0.0;  // 0: no buffer
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
  // Capturable mode: the group's learning rate on the call's device, f64 (Note [capturable adam]).
  const double* lr_device = nullptr;
};

struct SgdTensor {
  void* param = nullptr;
  const void* grad = nullptr;
  void* momentum_buffer = nullptr;  // nullptr exactly when momentum == 0
  int64_t numel = 0;
  bool init_buffer = false;  // the buffer was just created: it takes d, undampened
};

struct AdamHyper {
  double lr = 0.0;
  double beta1 = 0.0;
  double beta2 = 0.0;
  double eps = 0.0;
  double weight_decay = 0.0;
  bool decoupled = false;  // AdamW
  bool amsgrad = false;
  bool maximize = false;
  // Capturable mode (Note [capturable adam]): the group's learning rate on the call's device, f64.
  const double* lr_device = nullptr;
};

// The bias corrections depend on the tensor's own step count t, so they travel per tensor, computed
// on the host in double: step_size = lr / (1 - beta1^t), bias_correction2_sqrt = sqrt(1 - beta2^t).
struct AdamTensor {
  void* param = nullptr;
  const void* grad = nullptr;
  void* exp_avg = nullptr;
  void* exp_avg_sq = nullptr;
  void* max_exp_avg_sq = nullptr;  // nullptr exactly when !amsgrad
  int64_t numel = 0;
  double step_size = 0.0;
  double bias_correction2_sqrt = 1.0;
  // Capturable mode: the tensor's step count t on the device (f32, already advanced), from which
  // the kernel computes the two fields above and the decay factor with *lr_device.
  const float* step_device = nullptr;
};

// Note [capturable adam]
// Inside a CUDA graph the host code of a step runs once, at capture, so a step count or learning
// rate passed by value would be replayed forever. In capturable mode the step count is a device
// tensor that a kernel advances and the learning rate a device tensor the optimizer refills when
// it changes; the kernel derives step_size = lr / (1 - beta1^t), sqrt(1 - beta2^t) and AdamW's
// 1 - lr * weight_decay from them in the compute type (so the bits differ from the host-computed
// doubles of the default mode by rounding).
template <class C>
struct AdamDeviceScalars {
  C neg_step_size, bias_correction2_sqrt, decay_factor;
};
template <class C>
SINTER_HD inline AdamDeviceScalars<C> adam_device_scalars(const float* step, const double* lr,
                                                          C beta1, C beta2, C weight_decay) {
  const C t = static_cast<C>(*step), rate = static_cast<C>(*lr);
  const C bc1 = C(1) - Math<C>::pow(beta1, t);
  return {-(rate / bc1), Math<C>::sqrt(C(1) - Math<C>::pow(beta2, t)), C(1) - rate * weight_decay};
}

// Products and sums rounded one at a time: device code would otherwise contract a * b + c into an
// FMA, which the unfused ops (one kernel per operation) never do. The compute type C is float or
// double.
#if defined(__CUDA_ARCH__)
SINTER_HD inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
SINTER_HD inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
SINTER_HD inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
SINTER_HD inline double add_rn(double a, double b) { return __dadd_rn(a, b); }
#else
template <class C>
SINTER_HD inline C mul_rn(C a, C b) {
  return a * b;
}
template <class C>
SINTER_HD inline C add_rn(C a, C b) {
  return a + b;
}
#endif

// SgdHyper in the compute type C, as the elementwise ops convert their scalars.
template <class C>
struct SgdScalars {
  C neg_lr, momentum, one_minus_dampening, weight_decay;
  bool use_momentum, use_weight_decay, nesterov, maximize;
  const double* lr_device;

  // With lr_device, the scalars of one call: neg_lr read from the device.
  SINTER_HD SgdScalars with_device_lr() const {
    SgdScalars s = *this;
    if (lr_device) s.neg_lr = -static_cast<C>(*lr_device);
    return s;
  }

  explicit SgdScalars(const SgdHyper& h)
      : neg_lr(static_cast<C>(-h.lr)),
        momentum(static_cast<C>(h.momentum)),
        one_minus_dampening(static_cast<C>(1.0 - h.dampening)),
        weight_decay(static_cast<C>(h.weight_decay)),
        use_momentum(h.momentum != 0.0),
        use_weight_decay(h.weight_decay != 0.0),
        nesterov(h.nesterov),
        maximize(h.maximize),
        lr_device(h.lr_device) {}
};

// One element of SGD (the formula of sgd.h). buf is read and written only with momentum.
template <class C>
SINTER_HD inline void sgd_element(const SgdScalars<C>& s, bool init_buffer, C& p, C g, C& buf) {
  C d = s.maximize ? -g : g;
  if (s.use_weight_decay) d = add_rn(d, mul_rn(p, s.weight_decay));
  if (s.use_momentum) {
    buf = init_buffer ? d : add_rn(mul_rn(buf, s.momentum), mul_rn(d, s.one_minus_dampening));
    d = s.nesterov ? add_rn(d, mul_rn(buf, s.momentum)) : buf;
  }
  p = add_rn(p, mul_rn(d, s.neg_lr));
}

// AdamHyper in the compute type C.
template <class C>
struct AdamScalars {
  C beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decay_factor;
  bool use_weight_decay, decoupled, amsgrad, maximize;
  const double* lr_device;

  explicit AdamScalars(const AdamHyper& h)
      : beta1(static_cast<C>(h.beta1)),
        one_minus_beta1(static_cast<C>(1.0 - h.beta1)),
        beta2(static_cast<C>(h.beta2)),
        one_minus_beta2(static_cast<C>(1.0 - h.beta2)),
        eps(static_cast<C>(h.eps)),
        weight_decay(static_cast<C>(h.weight_decay)),
        decay_factor(static_cast<C>(1.0 - h.lr * h.weight_decay)),
        use_weight_decay(h.weight_decay != 0.0),
        decoupled(h.decoupled),
        amsgrad(h.amsgrad),
        maximize(h.maximize),
        lr_device(h.lr_device) {}
};

// One element of Adam/AdamW (the formula of adam.h). neg_step_size = -step_size and bc2_sqrt of the
// tensor, in C. vmax is read and written only with amsgrad.
template <class C>
SINTER_HD inline void adam_element(const AdamScalars<C>& s, C neg_step_size, C bc2_sqrt, C& p, C g,
                                   C& m, C& v, C& vmax) {
  if (s.maximize) g = -g;
  if (s.use_weight_decay) {
    if (s.decoupled) {
      p = mul_rn(p, s.decay_factor);
    } else {
      g = add_rn(g, mul_rn(p, s.weight_decay));
    }
  }
  m = add_rn(mul_rn(m, s.beta1), mul_rn(g, s.one_minus_beta1));
  v = add_rn(mul_rn(v, s.beta2), mul_rn(mul_rn(g, g), s.one_minus_beta2));
  C second = v;
  if (s.amsgrad) {
    vmax = scalar::maximum(vmax, v);
    second = vmax;
  }
  const C denom = add_rn(Math<C>::sqrt(second) / bc2_sqrt, s.eps);
  p = add_rn(p, mul_rn(m / denom, neg_step_size));
}

// Note [optimizer rules]
// An optimizer whose update is elementwise over the parameter, its gradient and up to
// kMaxRuleBuffers state buffers is written once, as a rule in src/kern/optim_<name>.h (RMSprop,
// Adagrad), and its kernels come from the list SINTER_OPTIM_RULES below: each row X(name, Rule)
// declares name##_step in the kernel interface, which the CPU loop and the CUDA multi-tensor
// launch (the same as SGD's and Adam's) define by running the rule's element. A rule has
//   struct Hyper                 the call's hyperparameters as doubles, with lr and lr_device
//   template <class C> Scalars   built from Hyper, in the compute type C
//   kBuffers                     how many of the tensor's buffers it may read and write
//   step_lr(s, lr, t)            the learning rate of the tensor's t-th step (SINTER_HD)
//   element(s, lr_t, p, g, buf)  one element's update, with buf[0, kBuffers) (SINTER_HD)
// step_lr runs on the host in double in the default mode (RuleTensor::lr) and on the device in C
// in the capturable mode, from the device's lr and step count (Note [capturable adam]). The
// element follows the unfused tensor-op formulas as Note [fused optimizer step] asks.
constexpr int kMaxRuleBuffers = 3;

struct RuleTensor {
  void* param = nullptr;
  const void* grad = nullptr;
  void* buffers[kMaxRuleBuffers] = {};  // the rule's state buffers; nullptr where unused
  int64_t numel = 0;
  double lr = 0.0;                     // step_lr of this tensor's step, in the default mode
  const float* step_device = nullptr;  // capturable: the tensor's step count t on the device
};

// The learning rate of one tensor's step in C, as Note [optimizer rules] says.
template <class Rule, class C>
SINTER_HD inline C rule_lr(const typename Rule::template Scalars<C>& s, const RuleTensor& t) {
  if (t.step_device) {
    return Rule::step_lr(s, static_cast<C>(*s.lr_device), static_cast<C>(*t.step_device));
  }
  return static_cast<C>(t.lr);
}

// Note [gradient unscale]
// GradScaler's unscale of one dtype's gradients in one pass: every element g becomes g * inv_scale
// (rounded once to the gradient's dtype), and *found_inf becomes 1 when any element was inf or NaN
// before the multiply (it is left alone otherwise, so one flag gathers several calls). inv_scale
// and found_inf are f32 scalars on the call's device: the host reads neither.
struct UnscaleTensor {
  void* grad = nullptr;
  int64_t numel = 0;
};
struct UnscaleHyper {
  const float* inv_scale = nullptr;
  float* found_inf = nullptr;
};
template <class C>
struct UnscaleScalars {
  const float* inv_scale;
  float* found_inf;
  explicit UnscaleScalars(const UnscaleHyper& h) : inv_scale(h.inv_scale), found_inf(h.found_inf) {}
};

// One element of the unscale: g times inv; false when g was inf or NaN (g - g is then NaN).
template <class C>
SINTER_HD inline bool unscale_element(C& g, C inv) {
  const bool finite = g - g == C(0);
  g = mul_rn(g, inv);
  return finite;
}

}  // namespace sinter::kern

// The rules, which use the helpers above.
#include "kern/optim_adagrad.h"  // IWYU pragma: export
#include "kern/optim_rmsprop.h"  // IWYU pragma: export

// X(name, Rule): the optimizers written as rules (Note [optimizer rules]).
#define SINTER_OPTIM_RULES(X) \
  X(rmsprop, RmspropRule)     \
  X(adagrad, AdagradRule)

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/optim.inc"
#include "kern/declare.h"
