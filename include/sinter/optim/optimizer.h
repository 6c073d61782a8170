// Optimizer: the base of every optimizer. Parameter groups, per-parameter state, zero_grad, and
// state_dict/load_state_dict (Note [optimizer state dict]); OptimizerWithOptions keeps the options.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sinter/state_dict.h"
#include "sinter/tensor.h"

namespace sinter::optim {

// One group of parameters with its own hyperparameters. An option left unset takes the optimizer's
// default; setting an option the optimizer does not have (betas for SGD) is an error.
struct ParamGroup {
  std::vector<Tensor> params{};
  std::optional<double> lr{};
  std::optional<double> momentum{};
  std::optional<double> dampening{};
  std::optional<double> weight_decay{};
  std::optional<bool> nesterov{};
  std::optional<std::pair<double, double>> betas{};
  std::optional<double> eps{};
  std::optional<bool> amsgrad{};
  std::optional<bool> maximize{};
  std::optional<bool> capturable{};
};

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
class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient (parameters whose grad is undefined are
  // skipped). Runs under NoGradGuard.
  virtual void step() = 0;
  // Drops every gradient (set_to_none) or fills it with zeros.
  void zero_grad(bool set_to_none = true);

  // Adds a group; unset options take the optimizer's defaults. A parameter may be in one group
  // only.
  void add_param_group(const ParamGroup& group);
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

  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);

  const std::string& name() const { return name_; }

 protected:
  explicit Optimizer(std::string name);

  // --- what each optimizer provides ---
  // `defaults` overridden by the options `group` sets; throws for options it does not have.
  virtual Hyperparameters resolve(const ParamGroup& group) const = 0;
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
  virtual std::vector<std::string> optional_hyperparameters() const { return {}; }

  // Adds the groups a constructor was given, which must hold at least one parameter among them.
  void add_param_groups(const std::vector<ParamGroup>& groups);

  // --- helpers for check() ---
  // h[key]; an Error naming the optimizer and group when it is missing.
  double require(const Hyperparameters& h, const std::string& key, size_t group) const;
  // h[key], which must be 0 or 1.
  bool require_bool(const Hyperparameters& h, const std::string& key, size_t group) const;
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

  // Per-parameter state, state_[group][index][name].
  std::vector<std::vector<std::map<std::string, Tensor>>> state_;
  std::vector<std::vector<Tensor>> params_;

  // The capturable mode's learning rate of `group` on `device`: a 0-dim f32 tensor that the fused
  // kernels read (Note [capturable adam] in src/internal/kernels_optim.h), made at first use and
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
// and options(), and converts them to and from Hyperparameters for the rest of the base.
template <class Options>
class OptimizerWithOptions : public Optimizer {
 public:
  const Options& options(size_t group = 0) const {
    params(group);
    return options_[group];
  }

 protected:
  OptimizerWithOptions(std::string name, const Options& defaults)
      : Optimizer(std::move(name)), defaults_(defaults) {}

  // Checked hyperparameters as Options, and back.
  virtual Options to_options(const Hyperparameters& h) const = 0;
  virtual Hyperparameters from_options(const Options& o) const = 0;

  void store(size_t group, const Hyperparameters& h) override {
    const Options o = to_options(h);
    if (group == options_.size()) {
      options_.push_back(o);
    } else {
      options_.at(group) = o;
    }
    refresh_device_lrs(group);
  }
  Hyperparameters load(size_t group) const override { return from_options(options_.at(group)); }

  Options defaults_;  // for the options a group leaves unset
  std::vector<Options> options_;
};

}  // namespace sinter::optim
