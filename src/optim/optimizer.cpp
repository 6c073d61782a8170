// Optimizer: parameter groups, zero_grad, and the state dict of Note [optimizer state dict].
#include "sinter/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>

#include "kern/optim.h"
#include "optim/fused_operands.h"
#include "sinter/autograd.h"
#include "sinter/cuda.h"

namespace sinter::optim {

namespace {

std::string group_key(size_t g, const std::string& name) {
  return "param_groups." + std::to_string(g) + "." + name;
}

std::string state_key(size_t g, size_t i, const std::string& name) {
  return "state." + std::to_string(g) + "." + std::to_string(i) + "." + name;
}

Tensor scalar_tensor(double v) { return full({}, v, {.dtype = DType::f64}); }

// The value of a one-element tensor from a state dict.
double scalar_value(const std::string& op, const std::string& key, const Tensor& t) {
  SINTER_CHECK(t.defined(), op, ": \"", key, "\" is an undefined tensor");
  SINTER_CHECK(t.numel() == 1, op, ": \"", key, "\" must hold one value, got shape ",
               shape_str(t.shape()));
  return t.item<double>();
}

}  // namespace

Optimizer::Optimizer(std::string name) : name_(std::move(name)) {}

Optimizer::~Optimizer() = default;

Tensor& Optimizer::device_lr(size_t group, Device device) {
  Tensor& t = device_lrs_[{group, device.is_cuda() ? device.index : -1}];
  if (!t.defined()) {
    // Made inside a capture, its fill would be replayed over every later change of lr.
    SINTER_CHECK(!cuda::is_capturing(), name_,
                 ": the first step of a capturable optimizer must "
                 "run eagerly, before a CUDA graph capture");
    t = full({}, lr(group), {.dtype = DType::f64, .device = device});
  }
  return t;
}

void Optimizer::refresh_device_lrs(size_t group) {
  NoGradGuard ng;
  for (auto& [key, t] : device_lrs_) {
    if (key.first == group) t.fill_(lr(group));
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  const profiler::Range range("optimizer.zero_grad");
  zero_grads(parameters(), set_to_none);
}

void Optimizer::add_group(const std::vector<Tensor>& params, const Hyperparameters& h) {
  const size_t g = params_.size();
  std::unordered_set<const TensorImpl*> seen;
  for (const std::vector<Tensor>& existing : params_) {
    for (const Tensor& p : existing) seen.insert(p.impl());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    SINTER_CHECK(p.defined(), name_, ": parameter ", i, " of group ", g, " is undefined");
    SINTER_CHECK(p.is_leaf(), name_, ": parameter ", i, " of group ", g,
                 " is not a leaf tensor (it was computed by an op); optimize leaves only");
    SINTER_CHECK(is_floating(p.dtype()), name_, ": parameter ", i, " of group ", g, " has dtype ",
                 p.dtype(), "; parameters must be floating point");
    SINTER_CHECK(seen.insert(p.impl()).second, name_, ": parameter ", i, " of group ", g,
                 " (shape ", shape_str(p.shape()), ") appears more than once");
  }
  check(h, g);
  store(g, h);
  params_.push_back(params);
  state_.emplace_back(params.size());
}

const std::vector<Tensor>& Optimizer::params(size_t group) const {
  SINTER_CHECK(group < params_.size(), name_, ": group ", group, " does not exist (there are ",
               params_.size(), ")");
  return params_[group];
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> all;
  for (const std::vector<Tensor>& group : params_)
    all.insert(all.end(), group.begin(), group.end());
  return all;
}

void Optimizer::set_lr(double lr) {
  // All groups or none: check every group's new value first.
  for (size_t g = 0; g < params_.size(); ++g) {
    Hyperparameters h = load(g);
    h["lr"] = lr;
    check(h, g);
  }
  for (size_t g = 0; g < params_.size(); ++g) set_hyperparameter(g, "lr", lr);
}

Hyperparameters Optimizer::hyperparameters(size_t group) const {
  params(group);
  return load(group);
}

double Optimizer::hyperparameter(size_t group, const std::string& name) const {
  return require(hyperparameters(group), name, group);
}

void Optimizer::set_hyperparameter(size_t group, const std::string& name, double value) {
  Hyperparameters h = hyperparameters(group);
  require(h, name, group);
  h[name] = value;
  check(h, group);
  store(group, h);
}

const std::map<std::string, Tensor>& Optimizer::state(size_t group, size_t index) const {
  const std::vector<Tensor>& ps = params(group);
  SINTER_CHECK(index < ps.size(), name_, ": group ", group, " has ", ps.size(),
               " parameters, asked for state of parameter ", index);
  return state_[group][index];
}

double Optimizer::require(const Hyperparameters& h, const std::string& key, size_t group) const {
  auto it = h.find(key);
  SINTER_CHECK(it != h.end(), name_, ": group ", group, " has no hyperparameter \"", key, "\"");
  return it->second;
}

void Optimizer::check_value(const std::string& key, double v, Rule rule, size_t group) const {
  const std::string what = key == "lr" ? "learning rate" : key;
  switch (rule) {
    case Rule::NonNegative:
      SINTER_CHECK(v >= 0.0, name_, ": invalid ", what, " ", v, " in group ", group,
                   " (must be >= 0)");
      return;
    case Rule::Unit:
      SINTER_CHECK(v >= 0.0 && v < 1.0, name_, ": invalid ", what, " ", v, " in group ", group,
                   " (must be in [0, 1))");
      return;
    case Rule::Finite:
      SINTER_CHECK(std::isfinite(v), name_, ": invalid ", what, " ", v, " in group ", group,
                   " (must be finite)");
      return;
    case Rule::Flag:
      SINTER_CHECK(v == 0.0 || v == 1.0, name_, ": ", key, " of group ", group,
                   " is a flag and must be 0 or 1, got ", v);
      return;
  }
}

void Optimizer::check_names(const Hyperparameters& h, const std::vector<std::string>& keys,
                            size_t group) const {
  for (const auto& [name, value] : h) {
    SINTER_CHECK(std::find(keys.begin(), keys.end(), name) != keys.end(), name_, ": group ", group,
                 " has an unknown hyperparameter \"", name, "\"");
  }
}

void Optimizer::fit_state(Tensor& buf, const Tensor& p, const std::string& state) const {
  SINTER_CHECK(buf.shape() == p.shape(), name_, ": state \"", state, "\" has shape ",
               shape_str(buf.shape()), " but its parameter has shape ", shape_str(p.shape()));
  if (buf.device() == p.device() && buf.dtype() == p.dtype() && buf.is_contiguous()) return;
  SINTER_CHECK(!cuda::is_capturing(), name_, ": state \"", state,
               "\" must move to its parameter's device, dtype or layout inside a CUDA graph "
               "capture (a replay would copy it again from its value at capture time); run a step "
               "eagerly after Module::to() and before the capture");
  if (buf.device() != p.device() || buf.dtype() != p.dtype())
    buf = buf.to(p.device()).to(p.dtype());
  if (!buf.is_contiguous()) buf = buf.contiguous();
}

void Optimizer::check_not_capturing(size_t group, size_t index, const std::string& state) const {
  SINTER_CHECK(!cuda::is_capturing(), name_, ": parameter ", index, " of group ", group,
               " would make its state \"", state,
               "\" inside a CUDA graph capture (made there, it would be made again on every "
               "replay); run its first step eagerly, before the capture");
}

std::vector<std::vector<size_t>> Optimizer::grad_buckets(size_t group) const {
  std::vector<std::vector<size_t>> buckets;
  const std::vector<Tensor>& ps = params_.at(group);
  for (size_t i = 0; i < ps.size(); ++i) {
    if (!ps[i].grad().defined()) continue;
    auto same = [&](const std::vector<size_t>& b) {
      return ps[b[0]].device() == ps[i].device() && ps[b[0]].dtype() == ps[i].dtype();
    };
    auto it = std::find_if(buckets.begin(), buckets.end(), same);
    if (it == buckets.end()) {
      buckets.push_back({i});
    } else {
      it->push_back(i);
    }
  }
  return buckets;
}

void Optimizer::rule_step(size_t g, const std::vector<RuleBuffer>& buffers, bool capturable,
                          bool counts_steps, const std::function<void(double, double*)>& host_step,
                          const std::function<void(const Tensor&, std::vector<kern::RuleTensor>&,
                                                   const double*)>& launch) {
  SINTER_CHECK(buffers.size() <= static_cast<size_t>(kern::kMaxRuleBuffers), name_, ": ",
               buffers.size(), " state buffers, more than a rule holds");
  // The step count and learning rate are host values otherwise: a graph would replay them.
  SINTER_CHECK(capturable || !cuda::is_capturing(), name_,
               ": a step inside a CUDA graph capture needs capturable = true (the learning rate",
               counts_steps ? " and step count" : "", " would otherwise be baked into the graph)");
  for (const std::vector<size_t>& bucket : grad_buckets(g)) {
    std::vector<kern::RuleTensor> list;
    detail::FusedOperands ops;
    const Tensor& first = params_[g][bucket[0]];
    for (size_t i : bucket) {
      const Tensor& p = params_[g][i];
      auto& st = state_[g][i];
      // A parameter's first step, or a state dict that held only part of its state.
      bool restart = counts_steps && !st.count("step");
      for (const RuleBuffer& b : buffers) restart = restart || (b.required && !st.count(b.name));
      if (restart) {
        check_not_capturing(g, i, "step");
        st.clear();
        if (counts_steps) {
          st["step"] = capturable ? zeros({}, {.dtype = DType::f32, .device = p.device()})
                                  : zeros({}, {.dtype = DType::f64});
        }
      }
      // Every buffer follows the parameter (a Module::to() since the last step), in use or not.
      for (auto& [name, buf] : st) {
        if (name != "step") fit_state(buf, p, name);
      }
      const auto [pw, grad] = ops.add(p);
      kern::RuleTensor t{.param = pw.data_ptr(), .grad = grad.data_ptr(), .numel = p.numel()};
      for (size_t j = 0; j < buffers.size(); ++j) {
        const RuleBuffer& b = buffers[j];
        if (b.name.empty()) continue;
        // A buffer turned on midway (momentum set by a schedule) starts at its init value, and
        // the step knows it is fresh (SGD's first momentum step).
        if (!st.count(b.name)) {
          check_not_capturing(g, i, b.name);
          st[b.name] = full_like(p, b.init);
          t.fresh = true;
        }
        Tensor& buf = st[b.name];
        t.buffers[j] = buf.data_ptr();
        ops.written(buf);
      }
      double step = 0.0;
      if (counts_steps) {
        Tensor& step_t = st["step"];
        if (capturable) {
          // Per Note [capturable adam], the count advances on the device; one that is not there yet
          // moves once, before any capture.
          if (step_t.device() != p.device() || step_t.dtype() != DType::f32) {
            check_not_capturing(g, i, "step");
            step_t = step_t.to(DType::f32).to(p.device());
          }
          step_t.add_(1);
          t.step_device = static_cast<const float*>(step_t.data_ptr());
        } else {
          if (step_t.device().is_cuda() || step_t.dtype() != DType::f64) {
            step_t = step_t.to(Device::cpu()).to(DType::f64);
          }
          step = step_t.item<double>() + 1.0;
          step_t.fill_(step);
        }
      }
      if (!capturable) host_step(step, t.step);
      list.push_back(t);
    }
    const double* lr_device =
        capturable ? static_cast<const double*>(device_lr(g, first.device()).data_ptr()) : nullptr;
    launch(first, list, lr_device);
    ops.finish();
  }
}

StateDict Optimizer::state_dict() const {
  StateDict dict;
  for (size_t g = 0; g < params_.size(); ++g) {
    for (const auto& [name, value] : load(g)) dict[group_key(g, name)] = scalar_tensor(value);
    dict[group_key(g, "num_params")] = scalar_tensor(static_cast<double>(params_[g].size()));
    for (size_t i = 0; i < params_[g].size(); ++i) {
      // Copies, so the dict stays a snapshot while training goes on.
      for (const auto& [name, t] : state_[g][i]) dict[state_key(g, i, name)] = t.detach().clone();
    }
  }
  return dict;
}

void Optimizer::load_state_dict(const StateDict& dict) {
  const std::string op = name_ + "::load_state_dict";
  NoGradGuard ng;
  // Build everything aside first; commit only when the whole dict checks out.
  size_t used = 0;
  std::vector<Hyperparameters> hypers(params_.size());
  for (size_t g = 0; g < params_.size(); ++g) {
    const std::string count_key = group_key(g, "num_params");
    auto it = dict.find(count_key);
    SINTER_CHECK(it != dict.end(), op, ": missing \"", count_key, "\" (the optimizer has ",
                 params_.size(), " parameter groups)");
    const double n = scalar_value(op, count_key, it->second);
    SINTER_CHECK(n == static_cast<double>(params_[g].size()), op, ": group ", g, " has ",
                 params_[g].size(), " parameters, the state dict has ", n);
    ++used;
    const std::vector<std::string> optional = optional_hyperparameters();
    for (const auto& [name, current] : load(g)) {
      const std::string key = group_key(g, name);
      auto hit = dict.find(key);
      if (hit == dict.end() &&
          std::find(optional.begin(), optional.end(), name) != optional.end()) {
        hypers[g][name] = current;  // a dict from before the option existed
        continue;
      }
      SINTER_CHECK(hit != dict.end(), op, ": missing \"", key, "\"");
      hypers[g][name] = scalar_value(op, key, hit->second);
      ++used;
    }
    check(hypers[g], g);
  }

  const std::vector<std::string> names = state_names();
  const std::vector<std::string> scalars = scalar_state();
  std::vector<std::vector<std::map<std::string, Tensor>>> state(params_.size());
  for (size_t g = 0; g < params_.size(); ++g) {
    state[g].resize(params_[g].size());
    for (size_t i = 0; i < params_[g].size(); ++i) {
      const Tensor& p = params_[g][i];
      for (const std::string& name : names) {
        const std::string key = state_key(g, i, name);
        auto it = dict.find(key);
        if (it == dict.end()) continue;
        const Tensor& src = it->second;
        SINTER_CHECK(src.defined(), op, ": \"", key, "\" is an undefined tensor");
        SINTER_CHECK(is_floating(src.dtype()), op, ": \"", key, "\" has dtype ", src.dtype(),
                     ", expected a floating-point tensor");
        Tensor dst;
        if (std::find(scalars.begin(), scalars.end(), name) != scalars.end()) {
          dst = scalar_tensor(scalar_value(op, key, src));
        } else {
          SINTER_CHECK(src.shape() == p.shape(), op, ": \"", key, "\" has shape ",
                       shape_str(src.shape()), ", but the parameter has shape ",
                       shape_str(p.shape()));
          dst = empty(p.shape(), {.dtype = p.dtype(), .device = p.device()});
          dst.copy_(src.detach());
        }
        state[g][i][name] = dst;
        ++used;
      }
    }
  }

  if (used != dict.size()) {
    // Name one key that matched nothing: a wrong group count, a misspelling, another optimizer's.
    std::set<std::string> known;
    for (size_t g = 0; g < params_.size(); ++g) {
      known.insert(group_key(g, "num_params"));
      for (const auto& [name, value] : hypers[g]) known.insert(group_key(g, name));
      for (size_t i = 0; i < params_[g].size(); ++i) {
        for (const std::string& name : names) known.insert(state_key(g, i, name));
      }
    }
    for (const auto& [key, value] : dict) {
      SINTER_CHECK(known.count(key), op, ": unexpected key \"", key, "\" (the optimizer has ",
                   params_.size(), " parameter groups)");
    }
  }

  for (size_t g = 0; g < params_.size(); ++g) store(g, hypers[g]);
  state_ = std::move(state);
}

}  // namespace sinter::optim
