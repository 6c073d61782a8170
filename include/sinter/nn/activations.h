// The activation layers beyond modules.h's (ELU, SELU, Mish, Hardswish, Hardsigmoid, PReLU,
// Softmax, LogSoftmax), the shape layers Identity and Unflatten, and the containers ModuleDict and
// ParameterList: PyTorch's classes, parameter names and state-dict names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sinter/nn/modules.h"

namespace sinter::nn {

// elu(x, alpha).
class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0);
  std::string name() const override { return "ELU"; }
  Tensor forward(const Tensor& x) override;

  double alpha;
};

class SELU : public Module {
 public:
  std::string name() const override { return "SELU"; }
  Tensor forward(const Tensor& x) override;
};

class Mish : public Module {
 public:
  std::string name() const override { return "Mish"; }
  Tensor forward(const Tensor& x) override;
};

class Hardswish : public Module {
 public:
  std::string name() const override { return "Hardswish"; }
  Tensor forward(const Tensor& x) override;
};

class Hardsigmoid : public Module {
 public:
  std::string name() const override { return "Hardsigmoid"; }
  Tensor forward(const Tensor& x) override;
};

// prelu(x, weight) with a learned weight of num_parameters slopes: 1, shared, or the input's
// channel count C, for x (N, C, ...). weight: (num_parameters), filled with init.
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  std::string name() const override { return "PReLU"; }
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  int64_t num_parameters;
  double init;
  Tensor weight;
};

// softmax(x, dim) and log_softmax(x, dim); the dim is required (PyTorch's implicit one is
// deprecated).
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim);
  std::string name() const override { return "Softmax"; }
  Tensor forward(const Tensor& x) override;

  int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim);
  std::string name() const override { return "LogSoftmax"; }
  Tensor forward(const Tensor& x) override;

  int64_t dim;
};

// x itself (the same tensor): a placeholder where a model may put a layer.
class Identity : public Module {
 public:
  std::string name() const override { return "Identity"; }
  Tensor forward(const Tensor& x) override;
};

// Splits dim `dim` (negative counts from the end) into `sizes`, whose product is its size; one
// size may be -1, inferred. A view where possible. The inverse of Flatten:
//   Unflatten(1, {C, H, W}): (N, C * H * W) -> (N, C, H, W).
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes);
  std::string name() const override { return "Unflatten"; }
  Tensor forward(const Tensor& x) override;

  int64_t dim;
  Shape sizes;
};

// Modules by name, in insertion order: module "key"'s parameter "weight" is "key.weight" in the
// parent's state_dict. Keys follow register_module's rules (non-empty, no '.', unique). Has no
// forward: its owner runs the modules it picks.
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  explicit ModuleDict(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules);
  std::string name() const override { return "ModuleDict"; }

  // Adds `module` under `key` (a module by value is moved into a shared_ptr, Note [module
  // handles]); returns it.
  template <class M>
  requires detail::ModuleArg<M>
  auto insert(const std::string& key, M&& module) {
    return register_module(key, std::forward<M>(module));
  }
  bool contains(const std::string& key) const;
  // Throws when key is missing.
  const std::shared_ptr<Module>& operator[](const std::string& key) const;
  // The module under key as an M; throws when key is missing or the module is not an M.
  template <class M>
  std::shared_ptr<M> at(const std::string& key) const {
    std::shared_ptr<M> m = std::dynamic_pointer_cast<M>((*this)[key]);
    SINTER_CHECK(m != nullptr, name(), "::at: module '", key, "' is a ", (*this)[key]->name(),
                 ", not the type asked for");
    return m;
  }
  std::vector<std::string> keys() const;
  size_t size() const { return named_children().size(); }
  bool empty() const { return named_children().empty(); }
};

// Parameters held in order, named "0", "1", ...: a model's tensors without a layer of their own
// (params.0 in the parent's state_dict). Has no forward.
class ParameterList : public Module {
 public:
  ParameterList() = default;
  explicit ParameterList(const std::vector<Tensor>& parameters);
  std::string name() const override { return "ParameterList"; }

  // Registers `parameter` under the next index and returns it (requires_grad set).
  Tensor push_back(Tensor parameter);
  // Throws when i is out of range.
  const Tensor& operator[](size_t i) const;
  size_t size() const { return own_parameters().size(); }
  bool empty() const { return own_parameters().empty(); }
};

}  // namespace sinter::nn
