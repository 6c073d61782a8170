// Activation checkpointing (Note [activation checkpointing] in include/sinter/autograd.h).
#include <optional>
#include <utility>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "sinter/autocast.h"
#include "sinter/autograd.h"
#include "sinter/core/generator.h"
#include "sinter/fp8.h"

namespace sinter::autograd {

namespace {

constexpr const char* kOp = "checkpoint";

// Grad mode on for a scope (the recomputation runs inside backward, which turns it off).
class EnableGrad : NonCopyable {
 public:
  EnableGrad() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGrad() { GradMode::set_enabled(previous_); }

 private:
  bool previous_;
};

// Sets the default generator to `state` for a scope and back to where it was.
class GeneratorAt : NonCopyable {
 public:
  explicit GeneratorAt(const GeneratorState& state) : previous_(default_generator().state()) {
    default_generator().set_state(state);
  }
  ~GeneratorAt() { default_generator().set_state(previous_); }

 private:
  GeneratorState previous_;
};

}  // namespace

std::vector<Tensor> checkpoint(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs) {
  SINTER_CHECK(fn != nullptr, "checkpoint: empty function");
  for (size_t i = 0; i < inputs.size(); ++i) {
    SINTER_CHECK(inputs[i].defined(), "checkpoint: input ", i, " is an undefined tensor");
  }
  if (!GradMode::is_enabled()) return fn(inputs);  // no graph to keep anyway
  SINTER_CHECK(needs_grad(inputs), "checkpoint: none of the ", inputs.size(),
               " inputs requires grad, so the parameters fn uses would get no gradient; make an "
               "input require grad or call fn directly");
  const GeneratorState rng = default_generator().state();
  const std::optional<DType> amp_cpu = autocast::dtype(DeviceType::cpu);
  const std::optional<DType> amp_cuda = autocast::dtype(DeviceType::cuda);
  // fp8::Autocast too (Note [fp8 training]): the recomputation runs in backward, outside it.
  const bool fp8_on = fp8::is_enabled();
  const fp8::Recipe fp8_recipe = fp8::recipe();
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  std::vector<Tensor*> recorded;  // the floating outputs: the ones a gradient can reach
  std::vector<size_t> which;
  for (size_t i = 0; i < outputs.size(); ++i) {
    SINTER_CHECK(outputs[i].defined(), "checkpoint: output ", i, " is an undefined tensor");
    if (is_floating(outputs[i].dtype())) {
      recorded.push_back(&outputs[i]);
      which.push_back(i);
    }
  }
  if (recorded.empty()) return outputs;
  std::vector<SavedTensor> saved;
  std::vector<bool> wants;
  for (const Tensor& x : inputs) {
    saved.emplace_back(x, kOp);
    wants.push_back(x.requires_grad());
  }
  record(kOp, recorded, inputs,
         [fn, saved, wants, which, rng, amp_cpu, amp_cuda, fp8_on, fp8_recipe](const Grads& grads) {
           std::vector<Tensor> xs;
           for (size_t i = 0; i < saved.size(); ++i) {
             Tensor x = saved[i].get().detach();
             if (wants[i]) x.requires_grad_(true);
             xs.push_back(std::move(x));
           }
           std::vector<Tensor> ys;
           {
             const EnableGrad grad_on;
             const GeneratorAt replay(rng);
             const autocast::detail::Suspend autocast_on(false);
             std::optional<autocast::Guard> on_cpu, on_cuda;
             if (amp_cpu) on_cpu.emplace(DeviceType::cpu, *amp_cpu);
             if (amp_cuda) on_cuda.emplace(DeviceType::cuda, *amp_cuda);
             const fp8::Autocast in_fp8(fp8_recipe, fp8_on);
             ys = fn(xs);
           }
           SINTER_CHECK(ys.size() > which.back(), "checkpoint: the recomputation gave ", ys.size(),
                        " outputs, the forward more");
           std::vector<Tensor> roots, seeds;
           for (size_t k = 0; k < which.size(); ++k) {
             const Tensor& y = ys[which[k]];
             if (!grads[k].defined() || !y.requires_grad()) continue;
             SINTER_CHECK(y.shape() == grads[k].shape(), "checkpoint: the recomputed output ",
                          which[k], " has shape ", shape_str(y.shape()), ", the forward's ",
                          shape_str(grads[k].shape()));
             roots.push_back(y);
             seeds.push_back(grads[k]);
           }
           if (!roots.empty()) backward(roots, seeds);
           Grads out;
           for (const Tensor& x : xs) out.push_back(x.requires_grad() ? x.grad() : Tensor());
           return out;
         });
  return outputs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input) {
  SINTER_CHECK(fn != nullptr, "checkpoint: empty function");
  // fn by value: the node calls it again during backward, after this returns.
  return checkpoint([fn](const std::vector<Tensor>& x) { return std::vector<Tensor>{fn(x[0])}; },
                    std::vector<Tensor>{input})[0];
}

}  // namespace sinter::autograd
