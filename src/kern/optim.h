// The kernel interface of the fused optimizer steps (src/optim/sgd.cpp, adam.cpp, rmsprop.cpp,
// adagrad.cpp) and of GradScaler's unscale: one call updates every tensor of a list. In
// sinter::cpu (src/cpu/optim.cpp) and sinter::cudak (kernels/optim.cu), Note [kernel interfaces].
#pragma once

#include <cstdint>

#include "kern/ctx.h"
#include "kern/scalar_ops.h"

namespace sinter::kern {

// Note [fused optimizer step]
// Every tensor of one call is contiguous, on the call's device, and has the call's dtype (f32, f64,
// bf16, f16): the parameter, its gradient and its state buffers alike. The math runs in double for
// f64 and in float otherwise, and follows the unfused tensor-op formulas of sgd.h, adam.h,
// rmsprop.h and adagrad.h one operation at a time: every product and sum is rounded on its own
// (mul_rn/add_rn, no FMA contraction), scalars are converted to the compute type as the
// elementwise ops convert them, and a term with a zero coefficient (weight decay 0) is skipped as
// the unfused code skips it. So for f32 and f64 the fused step gives the unfused step's bits on
// CPU and CUDA alike; bf16 and f16 round once per stored value instead of once per operation.

// Note [capturable adam]
// Inside a CUDA graph the host code of a step runs once, at capture, so a step count or learning
// rate passed by value would be replayed forever. In capturable mode the step count is a device
// tensor that a kernel advances and the learning rate a device tensor the optimizer refills when
// it changes; the kernels derive the step's scalars from them in the compute type (Adam's step_size
// = lr / (1 - beta1^t), sqrt(1 - beta2^t) and AdamW's 1 - lr * weight_decay), so the bits differ
// from the host-computed doubles of the default mode by rounding.

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

// Note [optimizer rules]
// An optimizer whose update is elementwise over the parameter, its gradient and up to
// kMaxRuleBuffers state buffers is written once, as a rule in src/kern/optim_<name>.h (SGD, Adam,
// RMSprop, Adagrad), and its kernels come from the list SINTER_OPTIM_RULES below: each row
// X(name, Rule) declares name##_step in the kernel interface, which the CPU loop and the CUDA
// multi-tensor launch define by running the rule's element. A rule has
//   RuleOf<Options, kBuffers, kCountsSteps> as its base: its optimizer's options struct (Note
//                                [optimizer options]: the hyperparameters are declared there
//                                alone), how many of the tensor's buffers it may read and write,
//                                and whether the tensor keeps a step count t ("step" in its
//                                state); Hyper, the call's arguments, is RuleArgs<Options>
//   template <class C> Scalars   built from Hyper, in the compute type C
//   step(s, lr, t, out)          the tensor's scalars of this step, out[0, kMaxRuleStep), from
//                                the learning rate and the step count (SINTER_HD)
//   element(s, st, fresh, p, g, buf)  one element's update, with st the step's scalars and buf
//                                the buffers [0, kBuffers); fresh when they were just made
// step runs on the host in double in the default mode (RuleTensor::step) and on the device in C
// in the capturable mode, from the device's lr and step count (Note [capturable adam]). The
// element follows the unfused tensor-op formulas as Note [fused optimizer step] asks.
constexpr int kMaxRuleBuffers = 3;
constexpr int kMaxRuleStep = 3;

// A rule's call: the group's options and, in the capturable mode, its learning rate on the call's
// device (else nullptr).
template <class Options>
struct RuleArgs {
  Options o;
  const double* lr_device = nullptr;
};

template <class Options, int Buffers, bool CountsSteps>
struct RuleOf {
  using Hyper = RuleArgs<Options>;
  static constexpr int kBuffers = Buffers;
  static constexpr bool kCountsSteps = CountsSteps;
};

// The gradient most rules update with: negated with maximize, plus weight_decay * p (PyTorch's L2
// weight decay) where s.use_weight_decay.
template <class S, class C>
SINTER_HD inline C decayed_grad(const S& s, C p, C g) {
  if (s.maximize) g = -g;
  return s.use_weight_decay ? add_rn(g, mul_rn(p, s.weight_decay)) : g;
}

struct RuleTensor {
  void* param = nullptr;
  const void* grad = nullptr;
  void* buffers[kMaxRuleBuffers] = {};  // the rule's state buffers; nullptr where unused
  int64_t numel = 0;
  double step[kMaxRuleStep] = {};      // Rule::step of this tensor's step, in the default mode
  const float* step_device = nullptr;  // capturable, counting rules: the step count t on the device
  bool fresh = false;                  // the tensor's buffers were made for this step
};

// What a rule's kernels take: its scalars in C and the call's device learning rate (capturable;
// else nullptr).
template <class Rule, class C>
struct RuleCall : Rule::template Scalars<C> {
  const double* lr_device;
  explicit RuleCall(const typename Rule::Hyper& h)
      : Rule::template Scalars<C>(h), lr_device(h.lr_device) {}
};
// RuleCall<Rule, C> as a template of C alone.
template <class Rule>
struct RuleCallOf {
  template <class C>
  using type = RuleCall<Rule, C>;
};

// The step's scalars of one tensor in C, as Note [optimizer rules] says.
template <class Rule, class C>
SINTER_HD inline void rule_step_scalars(const RuleCall<Rule, C>& s, const RuleTensor& t, C* out) {
  if (s.lr_device) {
    const C count = t.step_device ? static_cast<C>(*t.step_device) : C(0);
    Rule::step(s, static_cast<C>(*s.lr_device), count, out);
    return;
  }
  for (int j = 0; j < kMaxRuleStep; ++j) out[j] = static_cast<C>(t.step[j]);
}

// The default mode's step scalars, on the host in double: Rule::step at count t.
template <class Rule>
inline void rule_host_step(const typename Rule::Hyper& h, double t, double* out) {
  Rule::step(typename Rule::template Scalars<double>(h), h.o.lr, t, out);
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
#include "kern/optim_adam.h"     // IWYU pragma: export
#include "kern/optim_rmsprop.h"  // IWYU pragma: export
#include "kern/optim_sgd.h"      // IWYU pragma: export

// X(name, Rule): the optimizers written as rules (Note [optimizer rules]).
#define SINTER_OPTIM_RULES(X) \
  X(sgd, SgdRule)             \
  X(adam, AdamRule)           \
  X(rmsprop, RmspropRule)     \
  X(adagrad, AdagradRule)

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/optim.inc"
#include "kern/declare.h"
