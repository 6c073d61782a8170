// CPU reference of the fused optimizer steps (src/kern/optim.h): a loop over the
// tensors and their elements with the element math the CUDA kernel shares (Note [fused optimizer
// step]).
#include "kern/optim.h"

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cpu/cpu_util.h"
#include "kern/scalar_ops.h"

namespace sinter::cpu {
namespace {

template <class T>
Acc<T> load(const void* p, int64_t i) {
  return static_cast<Acc<T>>(static_cast<const T*>(p)[i]);
}

template <class T>
void store(void* p, int64_t i, Acc<T> v) {
  static_cast<T*>(p)[i] = T(v);
}

// Calls update(tag, s, t, i) for element i of each tensor t, with tag the TypeTag of the storage
// type T of `dtype` and s the step's scalars in T's compute type, Scalars<Acc<T>>(h).
template <template <class> class Scalars, class Tensor, class Hyper, class Update>
void for_each_element(DType dtype, const char* op, const Tensor* tensors, int64_t count,
                      const Hyper& h, Update update) {
  visit_float(dtype, op, [&](auto tag) {
    const Scalars<Acc<typename decltype(tag)::type>> s(h);
    for (int64_t k = 0; k < count; ++k) {
      for (int64_t i = 0; i < tensors[k].numel; ++i) update(tag, s, tensors[k], i);
    }
  });
}

}  // namespace

void sgd_step(const Ctx&, DType dtype, const SgdTensor* tensors, int64_t count, const SgdHyper& h) {
  const auto update = [](auto tag, const auto& s, const SgdTensor& t, int64_t i) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    C p = load<T>(t.param, i);
    C buf = s.use_momentum && !t.init_buffer ? load<T>(t.momentum_buffer, i) : C(0);
    sgd_element(s.with_device_lr(), t.init_buffer, p, load<T>(t.grad, i), buf);
    store<T>(t.param, i, p);
    if (s.use_momentum) store<T>(t.momentum_buffer, i, buf);
  };
  for_each_element<SgdScalars>(dtype, "sgd_step", tensors, count, h, update);
}

void adam_step(const Ctx&, DType dtype, const AdamTensor* tensors, int64_t count,
               const AdamHyper& h) {
  const auto update = [](auto tag, const auto& s, const AdamTensor& t, int64_t i) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    C p = load<T>(t.param, i);
    C m = load<T>(t.exp_avg, i);
    C v = load<T>(t.exp_avg_sq, i);
    C vmax = s.amsgrad ? load<T>(t.max_exp_avg_sq, i) : C(0);
    if (t.step_device) {  // Note [capturable adam]
      auto sc = s;
      const auto d =
          adam_device_scalars<C>(t.step_device, s.lr_device, s.beta1, s.beta2, s.weight_decay);
      sc.decay_factor = d.decay_factor;
      adam_element(sc, d.neg_step_size, d.bias_correction2_sqrt, p, load<T>(t.grad, i), m, v, vmax);
    } else {
      adam_element(s, static_cast<C>(-t.step_size), static_cast<C>(t.bias_correction2_sqrt), p,
                   load<T>(t.grad, i), m, v, vmax);
    }
    store<T>(t.param, i, p);
    store<T>(t.exp_avg, i, m);
    store<T>(t.exp_avg_sq, i, v);
    if (s.amsgrad) store<T>(t.max_exp_avg_sq, i, vmax);
  };
  for_each_element<AdamScalars>(dtype, "adam_step", tensors, count, h, update);
}

void unscale_grads(const Ctx&, DType dtype, const UnscaleTensor* tensors, int64_t count,
                   const UnscaleHyper& h) {
  const auto update = [](auto tag, const auto& s, const UnscaleTensor& t, int64_t i) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    C g = load<T>(t.grad, i);
    if (!unscale_element(g, static_cast<C>(*s.inv_scale))) *s.found_inf = 1.0f;
    store<T>(t.grad, i, g);
  };
  for_each_element<UnscaleScalars>(dtype, "unscale_grads", tensors, count, h, update);
}

namespace {

// One step of a rule's optimizer (Note [optimizer rules]), element by element.
template <class Rule>
void rule_step(const char* op, DType dtype, const RuleTensor* tensors, int64_t count,
               const typename Rule::Hyper& h) {
  visit_float(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    const typename Rule::template Scalars<C> s(h);
    for (int64_t k = 0; k < count; ++k) {
      const RuleTensor& t = tensors[k];
      const C lr = rule_lr<Rule, C>(s, t);
      for (int64_t i = 0; i < t.numel; ++i) {
        C p = load<T>(t.param, i);
        C buf[kMaxRuleBuffers] = {};
        for (int j = 0; j < Rule::kBuffers; ++j) {
          if (t.buffers[j]) buf[j] = load<T>(t.buffers[j], i);
        }
        Rule::element(s, lr, p, load<T>(t.grad, i), buf);
        store<T>(t.param, i, p);
        for (int j = 0; j < Rule::kBuffers; ++j) {
          if (t.buffers[j]) store<T>(t.buffers[j], i, buf[j]);
        }
      }
    }
  });
}

}  // namespace

#define SINTER_DEFINE_RULE_STEP_(name, Rule)                                          \
  void name##_step(const Ctx&, DType dtype, const RuleTensor* tensors, int64_t count, \
                   const Rule::Hyper& h) {                                            \
    rule_step<Rule>(#name "_step", dtype, tensors, count, h);                         \
  }
SINTER_OPTIM_RULES(SINTER_DEFINE_RULE_STEP_)
#undef SINTER_DEFINE_RULE_STEP_

}  // namespace sinter::cpu
