// CPU reference of the fused optimizer steps (src/kern/optim.h): a loop over the
// tensors and their elements with the element math the CUDA kernel shares (Note [fused optimizer
// step]). Each tensor's elements are split over the CPU threads (every element's update is
// independent of the others).
#include "kern/optim.h"

#include <atomic>
#include <cstdint>

#include "cpu/cpu_util.h"
#include "internal/parallel.h"
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

}  // namespace

void unscale_grads(const Ctx&, DType dtype, const UnscaleTensor* tensors, int64_t count,
                   const UnscaleHyper& h) {
  visit_float(dtype, "unscale_grads", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    const C inv = static_cast<C>(*h.inv_scale);
    std::atomic<bool> found{false};
    for (int64_t k = 0; k < count; ++k) {
      detail::parallel_blocks(tensors[k].numel, 4, [&](int64_t i0, int64_t i1) {
        bool finite = true;
        for (int64_t i = i0; i < i1; ++i) {
          C g = load<T>(tensors[k].grad, i);
          finite = unscale_element(g, inv) && finite;
          store<T>(tensors[k].grad, i, g);
        }
        if (!finite) found.store(true, std::memory_order_relaxed);
      });
    }
    if (found.load()) *h.found_inf = 1.0f;
  });
}

namespace {

// One step of a rule's optimizer (Note [optimizer rules]), element by element.
template <class Rule>
void rule_step(const char* op, DType dtype, const RuleTensor* tensors, int64_t count,
               const typename Rule::Hyper& h) {
  visit_float(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Acc<T>;
    const RuleCall<Rule, C> s(h);
    for (int64_t k = 0; k < count; ++k) {
      const RuleTensor& t = tensors[k];
      C st[kMaxRuleStep];
      rule_step_scalars<Rule, C>(s, t, st);
      detail::parallel_blocks(t.numel, 16, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          C p = load<T>(t.param, i);
          C buf[kMaxRuleBuffers] = {};
          for (int j = 0; j < Rule::kBuffers; ++j) {
            if (t.buffers[j]) buf[j] = load<T>(t.buffers[j], i);
          }
          Rule::element(s, st, t.fresh, p, load<T>(t.grad, i), buf);
          store<T>(t.param, i, p);
          for (int j = 0; j < Rule::kBuffers; ++j) {
            if (t.buffers[j]) store<T>(t.buffers[j], i, buf[j]);
          }
        }
      });
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
