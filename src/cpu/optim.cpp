// CPU reference of the fused optimizer steps (src/kern/optim.h): a loop over the
// tensors and their elements with the element math the CUDA kernel shares (Note [fused optimizer
// step]). Each tensor's elements are split over the CPU threads (every element's update is
// independent of the others).
#include "kern/optim.h"

#include <atomic>
#include <cstdint>
#include <type_traits>

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

// Elements [i0, i1) of one tensor's step where its dtype is the compute type and its first NB
// buffers are there and the others are not (Adam's max_exp_avg_sq without amsgrad): the element
// math of the loop in rule_step on restrict pointers, without a test per element.
template <class Rule, int NB, class C>
void dense_rule_steps(const RuleCall<Rule, C>& s, const C* st, const RuleTensor& t, int64_t i0,
                      int64_t i1) {
  static_assert(NB <= 3 && NB <= kMaxRuleBuffers);
  C* __restrict p = static_cast<C*>(t.param);
  const C* __restrict g = static_cast<const C*>(t.grad);
  C* __restrict b0 = NB > 0 ? static_cast<C*>(t.buffers[0]) : nullptr;
  C* __restrict b1 = NB > 1 ? static_cast<C*>(t.buffers[1]) : nullptr;
  C* __restrict b2 = NB > 2 ? static_cast<C*>(t.buffers[2]) : nullptr;
  const bool fresh = t.fresh;
  for (int64_t i = i0; i < i1; ++i) {
    C pv = p[i];
    C buf[kMaxRuleBuffers] = {};
    if constexpr (NB > 0) buf[0] = b0[i];
    if constexpr (NB > 1) buf[1] = b1[i];
    if constexpr (NB > 2) buf[2] = b2[i];
    Rule::element(s, st, fresh, pv, g[i], buf);
    p[i] = pv;
    if constexpr (NB > 0) b0[i] = buf[0];
    if constexpr (NB > 1) b1[i] = buf[1];
    if constexpr (NB > 2) b2[i] = buf[2];
  }
}

// The NB of dense_rule_steps for t: how many buffers lead before the first missing one, or -1
// where a buffer comes after a missing one.
template <class Rule>
int leading_buffers(const RuleTensor& t) {
  int nb = 0;
  while (nb < Rule::kBuffers && t.buffers[nb] != nullptr) ++nb;
  for (int j = nb; j < Rule::kBuffers; ++j) {
    if (t.buffers[j] != nullptr) return -1;
  }
  return nb;
}

// dense_rule_steps<Rule, nb> for nb in [0, Rule::kBuffers]; false for any other nb.
template <class Rule, class C>
bool dense_rule_steps_for(int nb, const RuleCall<Rule, C>& s, const C* st, const RuleTensor& t,
                          int64_t i0, int64_t i1) {
  bool done = false;
  auto one = [&](auto tag) {
    constexpr int kNb = decltype(tag)::value;
    if constexpr (kNb <= Rule::kBuffers) {
      if (nb == kNb) {
        dense_rule_steps<Rule, kNb>(s, st, t, i0, i1);
        done = true;
      }
    }
  };
  one(std::integral_constant<int, 0>{});
  one(std::integral_constant<int, 1>{});
  one(std::integral_constant<int, 2>{});
  one(std::integral_constant<int, 3>{});
  return done;
}

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
      const int nb = leading_buffers<Rule>(t);
      detail::parallel_blocks(t.numel, 16, [&](int64_t i0, int64_t i1) {
        if constexpr (std::is_same_v<T, C>) {
          // f32 and f64 (the usual case): a loop without a test per element, which vectorizes.
          if (dense_rule_steps_for<Rule, C>(nb, s, st, t, i0, i1)) return;
        }
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
