// Tensor: a ref-counted handle on storage + offset + shape + strides + dtype + device + autograd
// state. Views (reshape, transpose, narrow, expand, ...) share storage and the version counter of
// their base.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sinter/core/device.h"
#include "sinter/core/dtype.h"
#include "sinter/core/error.h"
#include "sinter/core/generator.h"
#include "sinter/core/scalar.h"
#include "sinter/core/storage.h"

namespace sinter {

using Shape = std::vector<int64_t>;

class Tensor;
class Node;

struct TensorOptions {
  DType dtype = DType::f32;
  Device device = Device::cpu();
  bool requires_grad = false;
  bool pinned = false;  // page-locked host memory (CPU tensors only)
};

using TensorHook = std::function<Tensor(const Tensor&)>;
using PostAccumulateHook = std::function<void(Tensor&)>;

class TensorImpl;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  int64_t storage_offset() const;
  const Storage& storage() const;
  bool is_contiguous() const;
  bool is_cuda() const { return device().is_cuda(); }
  // Address of the first element (storage offset applied).
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    SINTER_CHECK(dtype() == dtype_of<T>::value, "Tensor::data: tensor has dtype ", dtype(),
                 ", asked for ", dtype_of<T>::value);
    return static_cast<T*>(data_ptr());
  }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // --- autograd ---
  bool requires_grad() const;
  Tensor& requires_grad_(bool value = true);
  // The accumulated gradient (leaves, and non-leaves after retain_grad()); undefined until
  // backward.
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  bool is_leaf() const;
  std::shared_ptr<Node> grad_fn() const;
  // Runs the backward pass from this tensor. A non-scalar needs an explicit `gradient`.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // A tensor sharing this one's storage and version counter, cut from the graph.
  Tensor detach() const;
  void retain_grad() const;
  // `hook(grad)` runs when this tensor's gradient is computed; a defined return value replaces it.
  void register_hook(TensorHook hook) const;
  // Leaves only: runs after the gradient has been accumulated into grad().
  void register_post_accumulate_grad_hook(PostAccumulateHook hook) const;
  // Made under InferenceMode, or a view of such a tensor (Note [inference mode]).
  bool is_inference() const;
  // Bumped by every in-place op; shared by a tensor and its views.
  uint32_t version() const;
  void bump_version() const;

  // --- conversion and copies ---
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(DType dtype) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  Tensor contiguous() const;
  Tensor clone() const;
  // Host memory that the CUDA side can copy from asynchronously.
  Tensor pin_memory() const;
  template <typename T>
  T item() const;
  template <typename T>
  std::vector<T> to_vector() const;
  std::string str() const;

  // --- views (share storage) ---
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
               int64_t step = 1) const;
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor operator[](int64_t index) const { return select(0, index); }

  // --- ops as methods (see ops.h) ---
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor pow(const Scalar& exponent) const;
  Tensor matmul(const Tensor& other) const;

  // --- in-place: direct under NoGradGuard (optimizers), else recorded per Note [in-place
  // autograd] (include/sinter/autograd.h) ---
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& value);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& value);
  Tensor& zero_();
  Tensor& fill_(const Scalar& value);
  Tensor& copy_(const Tensor& src);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Drops the gradient of each tensor (set_to_none) or fills it with zeros in place, not recorded by
// autograd: what zero_grad does to a module's or an optimizer's parameters.
void zero_grads(const std::vector<Tensor>& tensors, bool set_to_none = true);

// --- factories ---
Tensor empty(const Shape& shape, const TensorOptions& opts = {});
Tensor zeros(const Shape& shape, const TensorOptions& opts = {});
Tensor ones(const Shape& shape, const TensorOptions& opts = {});
Tensor full(const Shape& shape, const Scalar& value, const TensorOptions& opts = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
// [start, end) in steps of `step`; the default dtype is f32 (pass i64 for indices).
Tensor arange(double end, const TensorOptions& opts = {});
Tensor arange(double start, double end, double step = 1.0, const TensorOptions& opts = {});
Tensor linspace(double start, double end, int64_t steps, const TensorOptions& opts = {});
Tensor eye(int64_t n, const TensorOptions& opts = {});
Tensor eye(int64_t n, int64_t m, const TensorOptions& opts = {});
// Uniform in [0, 1), standard normal, uniform integers in [low, high); Philox (the same values on
// CPU and CUDA for one seed).
Tensor rand(const Shape& shape, const TensorOptions& opts = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, const TensorOptions& opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape,
               const TensorOptions& opts = {.dtype = DType::i64}, Generator* gen = nullptr);
// Copies host values into a new tensor of the given shape (numel must match).
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                   const TensorOptions& opts = {});
template <typename T>
Tensor from_vector(const std::vector<T>& values) {
  return from_vector(values, Shape{static_cast<int64_t>(values.size())});
}
// Wraps caller-owned memory without copying (contiguous strides unless given).
Tensor from_blob(void* data, const Shape& shape, const TensorOptions& opts = {},
                 std::function<void(void*)> deleter = {});
Tensor from_blob(void* data, const Shape& shape, const Shape& strides,
                 const TensorOptions& opts = {}, std::function<void(void*)> deleter = {});

int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);

}  // namespace sinter
