// Module: the base of every layer. It owns named parameters, buffers and child modules, and gives
// the recursive views over them (parameters, state_dict, train/eval, to) that optimizers, io and
// the distributed layer build on.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sinter/state_dict.h"
#include "sinter/tensor.h"

namespace sinter::nn {

// Note [module handles]
// Modules are shared: a parent holds its children by std::shared_ptr<Module>, and registering a
// module given by value moves it into a new shared_ptr. Parameters and buffers are Tensor handles,
// and a layer keeps the handle it registered as a member (Linear::weight), so the member and the
// registry name the same tensor. Those tensors keep their identity for the module's lifetime:
// to() and load_state_dict() change their contents in place rather than replacing them, so an
// optimizer built from parameters() stays attached. Copying a module is shallow (the copy shares
// the parameters and children); assigning a new tensor to a member does not re-register it.

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = default;
  Module(Module&&) = default;
  Module& operator=(const Module&) = default;
  Module& operator=(Module&&) = default;

  // The type's name, for messages ("Linear").
  virtual std::string name() const { return "Module"; }
  // The computation; the base throws (containers such as ModuleList have none).
  virtual Tensor forward(const Tensor& input);
  // forward(input) through call(): with this module's forward hooks.
  Tensor operator()(const Tensor& input);

  // Note [forward hooks]
  // Functions that run around this module's forward when its caller goes through call() (or
  // operator()): the pre hooks in registration order, then `f`, then the hooks in registration
  // order, each given the output and returning the output to pass on (itself, or a tensor that
  // replaces it), as PyTorch's forward pre-hooks and forward hooks. A direct forward() skips them.
  // The reference models call their blocks through call() (GPT's and ViT's blocks, Llama's layers,
  // Sequential's children, the tensor-parallel models' blocks), which is what lets
  // dist::FullyShardedDataParallel gather a block's parameters just before it runs. Without
  // hooks, call() is f().
  using ForwardPreHook = std::function<void(Module&)>;
  using ForwardHook = std::function<Tensor(Module&, const Tensor& output)>;
  Tensor call(const std::function<Tensor()>& f);
  // Each returns a handle for remove_forward_hook.
  int register_forward_pre_hook(ForwardPreHook hook);
  int register_forward_hook(ForwardHook hook);
  // Removes the hook of that handle (either kind); an unknown handle is an error.
  void remove_forward_hook(int handle);

  // --- registration (names: non-empty, no '.', unique among this module's entries) ---
  // Registers a leaf tensor as a parameter and sets its requires_grad; returns the same handle.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // State that is saved and moved with the module but not trained (running statistics).
  Tensor register_buffer(const std::string& name, Tensor tensor);
  std::shared_ptr<Module> register_module(const std::string& name, std::shared_ptr<Module> module);
  template <class M>
  requires std::is_base_of_v<Module, M> std::shared_ptr<M> register_module(
      const std::string& name, std::shared_ptr<M> module) {
    register_module(name, std::static_pointer_cast<Module>(module));
    return module;
  }
  // Moves (or copies) a module given by value into a new shared_ptr (Note [module handles]).
  template <class M>
  requires std::is_base_of_v<Module, std::decay_t<M>> std::shared_ptr<std::decay_t<M>>
  register_module(const std::string& name, M&& module) {
    return register_module(name, std::make_shared<std::decay_t<M>>(std::forward<M>(module)));
  }

  // --- recursive views; names are dotted paths ("features.0.weight") in registration order ---
  // A tensor registered under two names (tied weights) appears once, under its first name.
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  // Direct children only.
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  // This module's own entries (no recursion).
  const std::vector<std::pair<std::string, Tensor>>& own_parameters() const { return params_; }
  const std::vector<std::pair<std::string, Tensor>>& own_buffers() const { return buffers_; }

  // --- mode ---
  // Sets the training flag of this module and every descendant (Dropout and BatchNorm read it).
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // --- conversion (Note [module handles]: the tensors keep their identity) ---
  // Moves every parameter, buffer and gradient to `device`.
  Module& to(Device device);
  // Casts floating parameters, buffers and gradients to the floating `dtype`; integer buffers
  // (BatchNorm's num_batches_tracked) keep theirs.
  Module& to(DType dtype);

  // Clears every parameter's gradient: undefined (set_to_none, the default, which frees the memory
  // and lets the next backward write the gradient instead of adding to zeros) or filled with zeros.
  void zero_grad(bool set_to_none = true);

  // --- state ---
  // Every parameter and buffer by dotted name (tied tensors under each of their names), as
  // detached tensors sharing the module's storage: no copy is made.
  StateDict state_dict() const;
  // Copies values from `state` into this module's tensors in place (under NoGradGuard, so the
  // tensors keep their identity; a value on another device is copied across). Every check runs
  // before any value is copied, so a failure leaves the module untouched: a key of the module
  // missing from `state` or a key of `state` the module lacks (errors when strict; returned
  // otherwise), and a shape or dtype that differs (always an error). All problems are listed.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

 protected:
  // Checks that `name` can be registered here.
  void check_new_name(const std::string& name, const char* what) const;
  // Called by register_module after `child` became the newest child: containers whose forward
  // runs their children (ModuleList, Sequential) keep their list in step with the children.
  virtual void child_registered(const std::shared_ptr<Module>& child) { (void)child; }

 private:
  // Visits (dotted name, tensor&) of this module's parameters and buffers and its descendants'.
  template <class F>
  void visit_tensors(const std::string& prefix, bool params, bool buffers, bool recurse,
                     F&& f) const;

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::vector<std::pair<int, ForwardPreHook>> pre_hooks_;
  std::vector<std::pair<int, ForwardHook>> hooks_;
  int next_hook_ = 0;
};

}  // namespace sinter::nn
