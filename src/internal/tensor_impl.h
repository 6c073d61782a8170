// TensorImpl: the state behind a Tensor handle, and the autograd metadata it carries.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "sinter/autograd.h"
#include "sinter/tensor.h"

namespace sinter {

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;         // which output of grad_fn this tensor is
  bool retains_grad = false;
  std::vector<TensorHook> hooks;  // leaves only; non-leaf hooks live on grad_fn
  std::vector<PostAccumulateHook> post_hooks;
  std::weak_ptr<Node>
      grad_accumulator;  // leaves: the AccumulateGrad node, shared while a graph lives
};

class TensorImpl {
 public:
  TensorImpl(Storage storage, int64_t offset, Shape shape, Shape strides, DType dtype,
             std::shared_ptr<std::atomic<uint32_t>> version = nullptr)
      : storage(std::move(storage)),
        offset(offset),
        shape(std::move(shape)),
        strides(std::move(strides)),
        dtype(dtype),
        version(version ? std::move(version) : std::make_shared<std::atomic<uint32_t>>(0)),
        inference(InferenceMode::is_enabled()) {
    numel = numel_of(this->shape);
  }

  Storage storage;
  int64_t offset;  // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype;
  int64_t numel;
  std::shared_ptr<std::atomic<uint32_t>> version;
  // Made under InferenceMode, or a view of such a tensor (Note [inference mode]).
  bool inference;
  std::unique_ptr<AutogradMeta> autograd;
  // Per Note [in-place autograd]: a view's base (the tensor it was made from, or that tensor's
  // base: never itself a view), and the base's rebase count when this view's graph was made.
  std::shared_ptr<TensorImpl> view_base;
  uint32_t view_seen = 0;
  bool view_without_grad = false;  // made with grad mode off
  // How many times an in-place op gave this tensor a new grad_fn (its views' graphs are then out
  // of date, and are made again through it when next used).
  uint32_t rebases = 0;

  AutogradMeta& meta() {
    if (!autograd) autograd = std::make_unique<AutogradMeta>();
    return *autograd;
  }
};

// A tensor with the same storage, view and version counter as `t`, and no autograd state.
Tensor alias_of(const Tensor& t);
// A new view of t's storage with the given geometry, sharing its version counter (no autograd).
Tensor make_view(const Tensor& t, Shape shape, Shape strides, int64_t offset);

}  // namespace sinter
