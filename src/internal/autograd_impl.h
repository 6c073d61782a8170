// The ops layer's side of autograd: saved tensors with version checks, and recording a node.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sinter/autograd.h"

namespace sinter::autograd {

// A tensor saved for backward: a detached alias plus the version it had when saved.
// While a profiler::Guard lives, a saved tensor's storage counts toward the bytes saved for
// backward (Note [saved bytes] in src/profiler/profiler.cpp) from its save until the last copy of
// it goes.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, const char* op);  // NOLINT(google-explicit-constructor)
  SavedTensor(const SavedTensor& other);
  SavedTensor& operator=(const SavedTensor& other);
  ~SavedTensor();
  // The saved tensor; throws if it was modified in place since it was saved.
  Tensor get() const;
  bool defined() const { return t_.defined(); }

 private:
  Tensor t_;
  uint32_t version_ = 0;
  const char* op_ = "";
  bool counted_ = false;  // registered with the profiler's saved-bytes count
};

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

// A node whose backward is a closure over SavedTensors; release() drops the closure.
class FunctionNode : public Node {
 public:
  FunctionNode(const char* name, BackwardFn fn) : name_(name), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return name_; }
  void release() override;

 private:
  const char* name_;
  BackwardFn fn_;
};

// True when grad mode is on and any input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Makes `outputs` the results of a new node `name` over `inputs`. `fn` gets one gradient per output
// (undefined where none flowed; single-output nodes always get a defined one) and returns one per
// input (undefined allowed for inputs that do not require grad). Call only when needs_grad().
void record(const char* name, const std::vector<Tensor*>& outputs,
            const std::vector<Tensor>& inputs, BackwardFn fn);

// Records the write of `src` into `self` (done already, and recorded per records_in_place).
void record_copy(Tensor& self, const Tensor& src);
// Brings a view whose base was rebased since its graph was made up to date (its grad_fn taken
// through the base); nothing for other tensors.
void refresh_view(const Tensor& t);

}  // namespace sinter::autograd

namespace sinter {

// What every op file (src/ops/*.cpp) writes its backward with.
using autograd::needs_grad;
using autograd::record;
using autograd::SavedTensor;
using Grads = std::vector<Tensor>;

}  // namespace sinter
