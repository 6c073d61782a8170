// Optimizer: the base of every optimizer. Parameter groups, per-parameter state, zero_grad, and
// state_dict/load_state_dict (Note [optimizer state dict]); OptimizerWithOptions keeps the options.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sinter/autograd.h"
#include "sinter/core/noncopyable.h"
#include "sinter/optim/options.h"
#include "sinter/profiler.h"
#include "sinter/state_dict.h"
#include "sinter/tensor.h"

namespace sinter::kern {
struct RuleTensor;
}  // namespace sinter::kern

namespace sinter::optim {

// The parameter group of an optimizer's X-macro list (Note [optimizer options] in
// include/sinter/optim/options.h): `params` and an optional override of each field.
#define SINTER_OPTION_OVERRIDE_(type, name, value, rule) std::optional<type> name{};
#define SINTER_OPTION_APPLY_(type, name, value, rule) \
  if (name) o.name = *name;
#define SINTER_OPTIMIZER_GROUP(Name, LIST)      \
  struct Name##Group {                          \
    std::vector<::sinter::Tensor> params{};     \
    LIST(SINTER_OPTION_OVERRIDE_)               \
    Name##Options over(Name##Options o) const { \
      LIST(SINTER_OPTION_APPLY_)                \
      return o;                                 \
    }                                           \
  };
// Both at once, for an optimizer whose options need not be read without the tensor API.
#define SINTER_OPTIMIZER_OPTIONS(Name, LIST) \
  SINTER_OPTIMIZER_OPTIONS_STRUCT(Name, LIST) SINTER_OPTIMIZER_GROUP(Name, LIST)

// A group's hyperparameters by name, all as doubles (bools as 0 or 1): the form they take in a
// state dict and the form schedulers change them through.
using Hyperparameters = std::map<std::string, double>;

// Note [optimizer state dict]
// An optimizer's StateDict holds, for group g and parameter i of that group (in the order the
// parameters were given):
//   "param_groups.<g>.<name>"  every hyperparameter (lr, momentum, beta1, ...), a 0-dim f64 tensor
//   "param_groups.<g>.num_params"  the group's size, a 0-dim f64 tensor
//   "state.<g>.<i>.<name>"     the parameter's state: buffers of the parameter's shape (exp_avg,
//                              momentum_buffer, ...) and "step", a 0-dim f64 tensor
// A parameter that has not been stepped yet has no state entries. Loading checks every key, the
// group sizes, the shapes and the hyperparameter values before it changes anything, so a bad dict
// leaves the optimizer as it was; buffers are copied to the parameter's device and dtype.
class Optimizer : NonCopyable {
 public:
  virtual ~Optimizer();

  // One update of every parameter that has a gradient (parameters whose grad is undefined are
  // skipped). Runs under NoGradGuard.
  virtual void step() = 0;
  // Drops every gradient (set_to_none) or fills it with zeros.
  virtual void zero_grad(bool set_to_none = true);

  size_t num_param_groups() const { return params_.size(); }
  const std::vector<Tensor>& params(size_t group) const;
  // Every parameter, group by group.
  std::vector<Tensor> parameters() const;

  double lr(size_t group = 0) const { return hyperparameter(group, "lr"); }
  void set_lr(double lr);  // every group
  void set_lr(size_t group, double lr) { set_hyperparameter(group, "lr", lr); }
  Hyperparameters hyperparameters(size_t group) const;
  double hyperparameter(size_t group, const std::string& name) const;
  // Checks the value as the constructor would.
  void set_hyperparameter(size_t group, const std::string& name, double value);
  // The hyperparameter a one-cycle schedule cycles as momentum ("momentum" for SGD, "beta1" for
  // Adam); empty when there is none.
  virtual std::string momentum_name() const { return ""; }

  // The state of parameter `index` of `group` (empty before its first step).
  const std::map<std::string, Tensor>& state(size_t group, size_t index) const;

  virtual StateDict state_dict() const;
  virtual void load_state_dict(const StateDict& dict);

  const std::string& name() const { return name_; }

 protected:
  explicit Optimizer(std::string name);

  // --- what each optimizer provides (OptimizerWithOptions derives the first three) ---
  // Throws sinter::Error (naming the optimizer, the group and the value) unless `h` holds exactly
  // this optimizer's hyperparameters with valid values.
  virtual void check(const Hyperparameters& h, size_t group) const = 0;
  // Stores checked hyperparameters for `group` (== num_param_groups() appends).
  virtual void store(size_t group, const Hyperparameters& h) = 0;
  virtual Hyperparameters load(size_t group) const = 0;
  // Names of the per-parameter state entries; those in `scalar_state` are 0-dim, the rest have the
  // parameter's shape.
  virtual std::vector<std::string> state_names() const = 0;
  virtual std::vector<std::string> scalar_state() const { return {"step"}; }
  // Hyperparameters a state dict may lack (it predates them): loading keeps the current value.
  virtual std::vector<std::string> optional_hyperparameters() const { return {"capturable"}; }

  // Adds a group of parameters with checked hyperparameters `h`. A parameter may be in one group
  // only.
  void add_group(const std::vector<Tensor>& params, const Hyperparameters& h);
  // An Error naming the optimizer, the group and the value unless `value` of hyperparameter `key`
  // passes `rule`.
  void check_value(const std::string& key, double value, Rule rule, size_t group) const;

  // --- helpers for check() ---
  // h[key]; an Error naming the optimizer and group when it is missing.
  double require(const Hyperparameters& h, const std::string& key, size_t group) const;
  // An Error when h holds a name not in `keys`.
  void check_names(const Hyperparameters& h, const std::vector<std::string>& keys,
                   size_t group) const;

  // --- helper for step() ---
  // The indices of group `group`'s parameters that have a gradient, in buckets of one device and
  // dtype (in the order the parameters were given), so that a fused step makes one kernel call per
  // bucket.
  std::vector<std::vector<size_t>> grad_buckets(size_t group) const;

  // Makes the per-parameter state tensor `buf` (named `state` in errors) fit what a fused kernel
  // reads next to parameter `p`: contiguous, on p's device, of p's dtype (state made before a
  // Module::to() follows the parameter there, values kept), with p's shape, else an error.
  void fit_state(Tensor& buf, const Tensor& p, const std::string& state) const;
  // An Error, naming the optimizer, the parameter and `state`, when called inside a CUDA graph
  // capture: state made (or moved) there would be made again on every replay, from the values it
  // had at capture time. step() calls it before it creates or converts a state tensor.
  void check_not_capturing(size_t group, size_t index, const std::string& state) const;

  // The step of an optimizer written as a rule (Note [optimizer rules] in src/kern/optim.h) over
  // group `group`. Each parameter with a gradient gets its state at its first step: "step" when
  // `counts_steps`, and the buffers named in `buffers` (slot by slot; an empty name leaves its
  // slot unused), each filled with its init value. Its step count t advances (on the device when
  // `capturable`); else host_step(t, out) fills the tensor's step scalars on the host (t is 0 for
  // a rule without a count). launch(first parameter, tensors, lr_device) then runs once per
  // bucket of one device and dtype, with lr_device the group's learning rate there when
  // capturable.
  // A buffer that is `required` is part of the state from the first step: a state without it (a
  // partial state dict) starts over at step 0. Another one (a momentum turned on midway) starts at
  // its init value alone.
  struct RuleBuffer {
    std::string name;
    double init = 0.0;
    bool required = false;
  };
  void rule_step(size_t group, const std::vector<RuleBuffer>& buffers, bool capturable,
                 bool counts_steps, const std::function<void(double, double*)>& host_step,
                 const std::function<void(const Tensor&, std::vector<kern::RuleTensor>&,
                                          const double*)>& launch);

  // Per-parameter state, state_[group][index][name].
  std::vector<std::vector<std::map<std::string, Tensor>>> state_;
  std::vector<std::vector<Tensor>> params_;

  // The capturable mode's learning rate of `group` on `device`: a 0-dim f64 tensor that the fused
  // kernels read (Note [capturable adam] in src/kern/optim.h), made at first use and
  // refilled whenever the group's lr changes (set_lr, a schedule, load_state_dict), so that a
  // replayed CUDA graph follows it.
  Tensor& device_lr(size_t group, Device device);
  // Refills the group's device learning rates from its lr; store() implementations call it.
  void refresh_device_lrs(size_t group);

 private:
  std::string name_;
  std::map<std::pair<size_t, int>, Tensor> device_lrs_;  // by (group, device index; -1: CPU)
};

// An optimizer that keeps each group's hyperparameters as its own Options struct, read by step()
// and options(), and derives the rest of the base from Options::visit (Note [optimizer options]).
// An optimizer takes its constructors (`using OptimizerWithOptions::OptimizerWithOptions;`) and
// writes step_group: the update of one group with its options.
template <class Options, class Group>
class OptimizerWithOptions : public Optimizer {
 public:
  // One group of `params` with `options`.
  explicit OptimizerWithOptions(const std::vector<Tensor>& params, const Options& options = {})
      : OptimizerWithOptions(std::vector<Group>{Group{.params = params}}, options) {}
  // Parameter groups, which must hold at least one parameter among them; the options a group
  // leaves unset take `defaults`.
  OptimizerWithOptions(const std::vector<Group>& groups, const Options& defaults = {})
      : Optimizer(Options::kOptimizer), defaults_(defaults) {
    size_t total = 0;
    for (const Group& g : groups) total += g.params.size();
    SINTER_CHECK(total > 0, name(), ": got an empty parameter list");
    for (const Group& g : groups) add_param_group(g);
  }

  const Options& options(size_t group = 0) const {
    params(group);
    return options_[group];
  }
  // Adds a group; the options it leaves unset take the optimizer's defaults.
  void add_param_group(const Group& group) {
    add_group(group.params, to_hyper(group.over(defaults_)));
  }

  void step() final {
    const profiler::Range range("optimizer.step");
    NoGradGuard ng;
    for (size_t g = 0; g < params_.size(); ++g) step_group(g, options_[g]);
  }

 protected:
  // One update of group `group`'s parameters that have a gradient (Optimizer::step), under
  // NoGradGuard.
  virtual void step_group(size_t group, const Options& o) = 0;

  static Hyperparameters to_hyper(const Options& o) {
    Hyperparameters h;
    Options::visit(o, [&](const char* name, const auto& v, Rule) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<V, Betas>) {
        h[pair_name(name, 1)] = v.first;
        h[pair_name(name, 2)] = v.second;
      } else {
        h[name] = static_cast<double>(v);
      }
    });
    return h;
  }
  static Options from_hyper(const Hyperparameters& h) {
    Options o;
    Options::visit(o, [&](const char* name, auto& v, Rule) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<V, Betas>) {
        v = {h.at(pair_name(name, 1)), h.at(pair_name(name, 2))};
      } else if constexpr (std::is_same_v<V, bool>) {
        v = h.at(name) == 1.0;
      } else {
        v = h.at(name);
      }
    });
    return o;
  }

  void check(const Hyperparameters& h, size_t group) const override {
    std::vector<std::string> names;
    for (const auto& [name, value] : to_hyper(defaults_)) names.push_back(name);
    check_names(h, names, group);
    Options::visit(defaults_, [&](const char* name, const auto& v, Rule rule) {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, Betas>) {
        for (int k : {1, 2}) {
          const std::string key = pair_name(name, k);
          check_value(key, require(h, key, group), rule, group);
        }
      } else {
        check_value(name, require(h, name, group), rule, group);
      }
    });
    check_options(from_hyper(h), group);  // Note [optimizer options]
  }
  void store(size_t group, const Hyperparameters& h) override {
    const Options o = from_hyper(h);
    if (group == options_.size()) {
      options_.push_back(o);
    } else {
      options_.at(group) = o;
    }
    refresh_device_lrs(group);
  }
  Hyperparameters load(size_t group) const override { return to_hyper(options_.at(group)); }

  Options defaults_;  // for the options a group leaves unset
  std::vector<Options> options_;

 private:
  // betas -> beta1, beta2.
  static std::string pair_name(const std::string& name, int k) {
    return (name.back() == 's' ? name.substr(0, name.size() - 1) : name) + std::to_string(k);
  }
};

}  // namespace sinter::optim
