// Module: registration, the recursive views over parameters and buffers, mode, device and dtype
// conversion, and state_dict loading with all-or-nothing checks.
#include "sinter/nn/module.h"

#include <set>
#include <sstream>
#include <unordered_set>

#include "internal/tensor_impl.h"
#include "sinter/autograd.h"

namespace sinter::nn {

namespace {

// Points t's handle at src's data (storage, view geometry, dtype), keeping t's identity, autograd
// state and version counter (Note [module handles]). Saved aliases of t keep the old storage, which
// is left unchanged, so graphs recorded before stay valid.
void replace_data(const Tensor& t, const Tensor& src) {
  TensorImpl* dst = t.impl();
  const TensorImpl* s = src.impl();
  dst->storage = s->storage;
  dst->offset = s->offset;
  dst->shape = s->shape;
  dst->strides = s->strides;
  dst->dtype = s->dtype;
  dst->numel = s->numel;
  dst->view_base.reset();  // its own memory now (Note [in-place autograd])
}

// Applies `convert` (detached tensor -> converted tensor) to each distinct tensor of `tensors`
// and its gradient. Every conversion runs before any tensor is changed, so a failure (no device,
// out of memory) leaves the module as it was.
template <class F>
void convert_all(const std::vector<Tensor>& tensors, F convert) {
  NoGradGuard ng;
  std::vector<Tensor> data, grads;
  data.reserve(tensors.size());
  grads.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    data.push_back(convert(t.detach()));
    Tensor g = t.grad();
    grads.push_back(g.defined() ? convert(g.detach()) : Tensor());
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    replace_data(tensors[i], data[i]);
    if (grads[i].defined()) tensors[i].set_grad(grads[i]);
  }
}

std::string join(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out + "]";
}

}  // namespace

Tensor Module::forward(const Tensor&) { SINTER_THROW(name(), ": this module has no forward"); }

Tensor Module::operator()(const Tensor& input) {
  return call([&] { return forward(input); });
}

// --- forward hooks (Note [forward hooks]) ---

Tensor Module::call(const std::function<Tensor()>& f) {
  if (pre_hooks_.empty() && hooks_.empty()) return f();
  // Copies: a hook may register or remove hooks.
  const std::vector<std::pair<int, ForwardPreHook>> pre = pre_hooks_;
  for (const auto& [id, hook] : pre) hook(*this);
  Tensor out = f();
  const std::vector<std::pair<int, ForwardHook>> post = hooks_;
  for (const auto& [id, hook] : post) out = hook(*this, out);
  return out;
}

int Module::register_forward_pre_hook(ForwardPreHook hook) {
  SINTER_CHECK(hook != nullptr, name(), ": register_forward_pre_hook: the hook is empty");
  pre_hooks_.emplace_back(next_hook_, std::move(hook));
  return next_hook_++;
}

int Module::register_forward_hook(ForwardHook hook) {
  SINTER_CHECK(hook != nullptr, name(), ": register_forward_hook: the hook is empty");
  hooks_.emplace_back(next_hook_, std::move(hook));
  return next_hook_++;
}

void Module::remove_forward_hook(int handle) {
  auto drop = [handle](auto& list) {
    const size_t before = list.size();
    std::erase_if(list, [handle](const auto& entry) { return entry.first == handle; });
    return list.size() != before;
  };
  const bool found = drop(pre_hooks_) || drop(hooks_);
  SINTER_CHECK(found, name(), ": remove_forward_hook: no hook has handle ", handle);
}

// --- registration ---

void Module::check_new_name(const std::string& name, const char* what) const {
  SINTER_CHECK(!name.empty(), this->name(), ": ", what, " name is empty");
  SINTER_CHECK(name.find('.') == std::string::npos, this->name(), ": ", what, " name \"", name,
               "\" contains '.', which separates the levels of a dotted name");
  auto taken = [&](const auto& entries) {
    for (const auto& e : entries) {
      if (e.first == name) return true;
    }
    return false;
  };
  SINTER_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), this->name(), ": ", what,
               " name \"", name, "\" is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  SINTER_CHECK(tensor.defined(), this->name(), ": parameter \"", name, "\" is undefined");
  SINTER_CHECK(tensor.is_leaf(), this->name(), ": parameter \"", name,
               "\" is the result of an op; register a leaf (detach() it first)");
  SINTER_CHECK(!requires_grad || is_floating(tensor.dtype()), this->name(), ": parameter \"", name,
               "\" has dtype ", tensor.dtype(), "; only floating parameters can require grad");
  tensor.requires_grad_(requires_grad);
  params_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name, "buffer");
  SINTER_CHECK(tensor.defined(), this->name(), ": buffer \"", name, "\" is undefined");
  buffers_.emplace_back(name, tensor);
  return tensor;
}

std::shared_ptr<Module> Module::register_module(const std::string& name,
                                                std::shared_ptr<Module> module) {
  check_new_name(name, "submodule");
  SINTER_CHECK(module != nullptr, this->name(), ": submodule \"", name, "\" is null");
  SINTER_CHECK(module.get() != this, this->name(), ": a module cannot be its own child");
  children_.emplace_back(name, module);
  child_registered(module);
  return module;
}

// --- recursive views ---

template <class F>
void Module::visit_tensors(const std::string& prefix, bool params, bool buffers, bool recurse,
                           F&& f) const {
  if (params) {
    for (const auto& [n, t] : params_) f(prefix + n, t);
  }
  if (buffers) {
    for (const auto& [n, t] : buffers_) f(prefix + n, t);
  }
  if (recurse) {
    for (const auto& [n, child] : children_) {
      child->visit_tensors(prefix + n + ".", params, buffers, true, f);
    }
  }
}

namespace {
// Visits with duplicates (tied tensors) dropped after their first name.
template <class V>
std::vector<std::pair<std::string, Tensor>> unique_named(V visit) {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  visit([&](const std::string& n, const Tensor& t) {
    if (seen.insert(t.impl()).second) out.emplace_back(n, t);
  });
  return out;
}

std::vector<Tensor> values(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<Tensor> out;
  out.reserve(named.size());
  for (const auto& e : named) out.push_back(e.second);
  return out;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  return unique_named([&](auto f) { visit_tensors("", true, false, recurse, f); });
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  return values(named_parameters(recurse));
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  return unique_named([&](auto f) { visit_tensors("", false, true, recurse, f); });
}

std::vector<Tensor> Module::buffers(bool recurse) const { return values(named_buffers(recurse)); }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  out.reserve(children_.size());
  for (const auto& e : children_) out.push_back(e.second);
  return out;
}

// --- mode and conversion ---

Module& Module::train(bool on) {
  training_ = on;
  for (const auto& e : children_) e.second->train(on);
  return *this;
}

Module& Module::to(Device device) {
  std::vector<Tensor> all =
      values(unique_named([&](auto f) { visit_tensors("", true, true, true, f); }));
  convert_all(all, [&](const Tensor& t) { return t.to(device); });
  return *this;
}

Module& Module::to(DType dtype) {
  SINTER_CHECK(is_floating(dtype), name(), "::to: dtype ", dtype,
               " is not floating; modules convert only their floating tensors");
  std::vector<Tensor> floating;
  for (const Tensor& t :
       values(unique_named([&](auto f) { visit_tensors("", true, true, true, f); }))) {
    if (is_floating(t.dtype())) floating.push_back(t);
  }
  convert_all(floating, [&](const Tensor& t) { return t.to(dtype); });
  return *this;
}

void Module::zero_grad(bool set_to_none) { zero_grads(parameters(), set_to_none); }

// --- state ---

StateDict Module::state_dict() const {
  StateDict out;
  visit_tensors("", true, true, true,
                [&](const std::string& n, const Tensor& t) { out[n] = t.detach(); });
  return out;
}

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor>> own;
  visit_tensors("", true, true, true,
                [&](const std::string& n, const Tensor& t) { own.emplace_back(n, t); });

  LoadResult result;
  std::vector<std::string> mismatches;
  std::set<std::string> own_names;
  for (const auto& [n, t] : own) {
    own_names.insert(n);
    auto it = state.find(n);
    if (it == state.end()) {
      result.missing_keys.push_back(n);
      continue;
    }
    const Tensor& v = it->second;
    std::ostringstream why;
    if (!v.defined()) {
      why << n << " is undefined in the state dict";
    } else if (v.shape() != t.shape()) {
      why << n << " has shape " << shape_str(v.shape()) << " in the state dict, "
          << shape_str(t.shape()) << " in the module";
    } else if (v.dtype() != t.dtype()) {
      why << n << " has dtype " << v.dtype() << " in the state dict, " << t.dtype()
          << " in the module";
    }
    if (!why.str().empty()) mismatches.push_back(why.str());
  }
  for (const auto& e : state) {
    if (!own_names.count(e.first)) result.unexpected_keys.push_back(e.first);
  }

  const bool key_error =
      strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
  if (key_error || !mismatches.empty()) {
    std::ostringstream msg;
    msg << name() << "::load_state_dict: nothing was loaded:";
    if (strict && !result.missing_keys.empty()) {
      msg << " missing keys " << join(result.missing_keys) << ";";
    }
    if (strict && !result.unexpected_keys.empty()) {
      msg << " unexpected keys " << join(result.unexpected_keys) << ";";
    }
    for (const std::string& m : mismatches) msg << " " << m << ";";
    SINTER_THROW(msg.str());
  }

  NoGradGuard ng;
  for (auto& [n, t] : own) {
    auto it = state.find(n);
    if (it != state.end()) t.copy_(it->second);
  }
  return result;
}

}  // namespace sinter::nn
