// Tensor accessors, factories, device and dtype conversion, copies, and printing.
#include "sinter/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <utility>
#include <vector>

#include "internal/autograd_impl.h"
#include "internal/cuda_runtime.h"
#include "internal/dispatch.h"
#include "internal/iter.h"
#include "internal/ops_impl.h"
#include "internal/tensor_impl.h"
#include "sinter/cuda.h"
#include "sinter/ops.h"

namespace sinter {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    SINTER_CHECK(!__builtin_mul_overflow(n, s, &n), "shape ", shape,
                 " has more elements than an int64 can count");
  }
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    // A zero-size dim leaves numel at 0, but the strides still multiply the other dims.
    SINTER_CHECK(!__builtin_mul_overflow(acc, std::max<int64_t>(shape[i], 1), &acc), "shape ",
                 shape, " has strides beyond what an int64 can hold");
  }
  return st;
}

std::string shape_str(const Shape& shape) { return detail::str_cat(shape); }

Tensor alias_of(const Tensor& t) {
  if (!t.defined()) return Tensor();
  const TensorImpl* s = t.impl();
  auto impl = std::make_shared<TensorImpl>(s->storage, s->offset, s->shape, s->strides, s->dtype,
                                           s->version);
  impl->inference = impl->inference || s->inference;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& t, Shape shape, Shape strides, int64_t offset) {
  const TensorImpl* s = t.impl();
  auto impl = std::make_shared<TensorImpl>(s->storage, offset, std::move(shape), std::move(strides),
                                           s->dtype, s->version);
  impl->inference = impl->inference || s->inference;
  impl->view_base = s->view_base ? s->view_base : t.impl_ptr();  // Note [in-place autograd]
  impl->view_seen = impl->view_base->rebases;
  impl->view_without_grad = !GradMode::is_enabled();
  return Tensor(std::move(impl));
}

// --- accessors ---

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  SINTER_CHECK(impl != nullptr, "Tensor: use of an undefined tensor");
  return *impl;
}
}  // namespace

const Shape& Tensor::shape() const { return checked(impl_).shape; }
const Shape& Tensor::strides() const { return checked(impl_).strides; }
int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim("size", d, dim())]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim("stride", d, dim())]; }
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }
int64_t Tensor::numel() const { return checked(impl_).numel; }
DType Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage.device(); }
int64_t Tensor::storage_offset() const { return checked(impl_).offset; }
const Storage& Tensor::storage() const { return checked(impl_).storage; }

void* Tensor::data_ptr() const {
  const TensorImpl& i = checked(impl_);
  if (!i.storage.data()) {
    // Per Storage::swap_memory: a parameter whose memory a FullyShardedDataParallel freed.
    SINTER_CHECK(i.numel == 0, "a tensor of shape ", shape_str(i.shape),
                 " has no memory: a parameter of a dist::FullyShardedDataParallel used outside "
                 "its unit's forward and backward (call the model through the wrapper's "
                 "forward() or call(), and its blocks through Module::call)");
    return nullptr;
  }
  return static_cast<char*>(i.storage.data()) +
         i.offset * static_cast<int64_t>(element_size(i.dtype));
}

bool Tensor::is_contiguous() const {
  const TensorImpl& i = checked(impl_);
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(i.shape.size()) - 1; d >= 0; --d) {
    if (i.shape[d] == 1) continue;
    if (i.strides[d] != expected) return false;
    expected *= i.shape[d];
  }
  return true;
}

// --- factories ---

namespace {
void check_shape(const char* op, const Shape& shape) {
  int64_t n = 1, extent = 1;
  for (int64_t s : shape) {
    SINTER_CHECK(s >= 0, op, ": negative size in shape ", shape_str(shape));
    SINTER_CHECK(!__builtin_mul_overflow(n, s, &n), op, ": shape ", shape_str(shape),
                 " has more elements than an int64 can count");
    // The strides multiply the sizes other than 0 (contiguous_strides).
    SINTER_CHECK(!__builtin_mul_overflow(extent, std::max<int64_t>(s, 1), &extent), op, ": shape ",
                 shape_str(shape), " has strides beyond what an int64 can hold");
  }
}

}  // namespace

Tensor finish_factory(Tensor t, const TensorOptions& opts) {
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

Tensor empty(const Shape& shape, const TensorOptions& opts) {
  check_shape("empty", shape);
  SINTER_CHECK(!opts.pinned || opts.device.is_cpu(), "empty: pinned memory is host memory, got ",
               opts.device);
  const int64_t n = numel_of(shape);
  size_t nbytes = 0;
  SINTER_CHECK(!__builtin_mul_overflow(static_cast<size_t>(n), element_size(opts.dtype), &nbytes),
               "empty: shape ", shape, " of ", opts.dtype, " needs more bytes than a size_t holds");
  Storage s = Storage::allocate(nbytes, opts.device, opts.pinned);
  return finish_factory(Tensor(std::make_shared<TensorImpl>(std::move(s), 0, shape,
                                                            contiguous_strides(shape), opts.dtype)),
                        opts);
}

Tensor full(const Shape& shape, const Scalar& value, const TensorOptions& opts) {
  TensorOptions o = opts;
  o.requires_grad = false;
  Tensor t = empty(shape, o);
  t.fill_(value);
  return finish_factory(t, opts);
}

Tensor zeros(const Shape& shape, const TensorOptions& opts) { return full(shape, 0.0, opts); }
Tensor ones(const Shape& shape, const TensorOptions& opts) { return full(shape, 1.0, opts); }

namespace {
TensorOptions like(const Tensor& t) { return {.dtype = t.dtype(), .device = t.device()}; }
}  // namespace

Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), like(t)); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), like(t)); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), like(t)); }
Tensor full_like(const Tensor& t, const Scalar& value) { return full(t.shape(), value, like(t)); }

Tensor eye(int64_t n, const TensorOptions& opts) { return eye(n, n, opts); }

Tensor eye(int64_t n, int64_t m, const TensorOptions& opts) {
  SINTER_CHECK(n >= 0 && m >= 0, "eye: sizes must be non-negative, got ", n, " and ", m);
  TensorOptions o = opts;
  o.requires_grad = false;
  Tensor t = zeros({n, m}, o);
  const int64_t k = std::min(n, m);
  if (k > 0) make_view(t, {k}, {m + 1}, 0).fill_(1.0);
  return finish_factory(t, opts);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, const TensorOptions& opts) {
  check_shape("from_vector", shape);
  SINTER_CHECK(numel_of(shape) == static_cast<int64_t>(values.size()),
               "from_vector: ", values.size(), " values do not fill shape ", shape_str(shape));
  Tensor host = empty(shape, {.dtype = dtype_of<T>::value});
  T* dst = static_cast<T*>(host.data_ptr());
  for (size_t i = 0; i < values.size(); ++i) dst[i] = values[i];
  Tensor t = opts.device.is_cpu() ? host : host.to(opts.device);
  return finish_factory(t, opts);
}

#define SINTER_FROM_VECTOR(T) \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, const TensorOptions&);
SINTER_FROM_VECTOR(float)
SINTER_FROM_VECTOR(double)
SINTER_FROM_VECTOR(BFloat16)
SINTER_FROM_VECTOR(Half)
SINTER_FROM_VECTOR(int64_t)
SINTER_FROM_VECTOR(int32_t)
SINTER_FROM_VECTOR(uint8_t)
SINTER_FROM_VECTOR(bool)
SINTER_FROM_VECTOR(Float8E4M3)
SINTER_FROM_VECTOR(Float8E5M2)
#undef SINTER_FROM_VECTOR

Tensor from_blob(void* data, const Shape& shape, const TensorOptions& opts,
                 std::function<void(void*)> deleter) {
  return from_blob(data, shape, contiguous_strides(shape), opts, std::move(deleter));
}

Tensor from_blob(void* data, const Shape& shape, const Shape& strides, const TensorOptions& opts,
                 std::function<void(void*)> deleter) {
  check_shape("from_blob", shape);
  SINTER_CHECK(shape.size() == strides.size(), "from_blob: shape ", shape_str(shape),
               " and strides ", shape_str(strides), " differ in length");
  SINTER_CHECK(data != nullptr || numel_of(shape) == 0, "from_blob: null data for shape ",
               shape_str(shape));
  int64_t extent = numel_of(shape) > 0 ? 1 : 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    SINTER_CHECK(strides[i] >= 0, "from_blob: negative stride in ", shape_str(strides));
    if (shape[i] > 0) extent += (shape[i] - 1) * strides[i];
  }
  Storage s = Storage::from_blob(data, static_cast<size_t>(extent) * element_size(opts.dtype),
                                 opts.device, std::move(deleter));
  return finish_factory(
      Tensor(std::make_shared<TensorImpl>(std::move(s), 0, shape, strides, opts.dtype)), opts);
}

// --- conversion and copies ---

namespace {
// out <- src (same shape after broadcasting, both on out's device), converting dtype.
void copy_into(const Tensor& out, const Tensor& src) {
  if (out.numel() == 0) return;
  kern::ElementwiseIter it = make_iter("copy_", out, {src}, src.dtype());
  SINTER_DISPATCH(out.device(), copy, it);
}
}  // namespace

Tensor Tensor::to(Device device, bool non_blocking) const {
  if (device == this->device()) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape(), {.dtype = dtype(), .device = device});
  if (numel() > 0) {
    cuda::detail::copy_bytes(out.data_ptr(), device, src.data_ptr(), src.device(),
                             static_cast<size_t>(numel()) * element_size(dtype()));
    // A copy from pinned memory is queued on the device's stream; wait unless asked not to.
    if (!non_blocking && src.storage().is_pinned()) cuda::synchronize(device.index);
  }
  if (autograd::needs_grad({this})) {
    const Device from = this->device();
    autograd::record("to_device", {&out}, {*this}, [from](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(from)};
    });
  }
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  Tensor out = empty(shape(), {.dtype = dtype, .device = device()});
  {
    NoGradGuard ng;
    copy_into(out, *this);
  }
  if (is_floating(dtype) && autograd::needs_grad({this})) {
    const DType from = this->dtype();
    autograd::record("to_dtype", {&out}, {*this}, [from](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(from)};
    });
  }
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), {.dtype = dtype(), .device = device()});
  copy_into(out, *this);
  if (autograd::needs_grad({this})) {
    autograd::record("clone", {&out}, {*this},
                     [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  }
  return out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::pin_memory() const {
  SINTER_CHECK(device().is_cpu(), "pin_memory: only host tensors can be pinned, got ", device());
  Tensor out = empty(shape(), {.dtype = dtype(), .pinned = true});
  copy_into(out, *this);
  return out;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  SINTER_CHECK(defined(), "to_vector: undefined tensor");
  Tensor h = detach().to(Device::cpu()).to(dtype_of<T>::value).contiguous();
  const T* p = static_cast<const T*>(h.data_ptr());
  return std::vector<T>(p, p + h.numel());
}

template <typename T>
T Tensor::item() const {
  SINTER_CHECK(numel() == 1, "item: the tensor has ", numel(), " elements (shape ",
               shape_str(shape()), "), expected 1");
  return to_vector<T>()[0];
}

#define SINTER_TENSOR_TEMPLATES(T)                      \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
SINTER_TENSOR_TEMPLATES(float)
SINTER_TENSOR_TEMPLATES(double)
SINTER_TENSOR_TEMPLATES(BFloat16)
SINTER_TENSOR_TEMPLATES(Half)
SINTER_TENSOR_TEMPLATES(int64_t)
SINTER_TENSOR_TEMPLATES(int32_t)
SINTER_TENSOR_TEMPLATES(uint8_t)
SINTER_TENSOR_TEMPLATES(bool)
SINTER_TENSOR_TEMPLATES(Float8E4M3)
SINTER_TENSOR_TEMPLATES(Float8E5M2)
#undef SINTER_TENSOR_TEMPLATES

// --- in-place ---

namespace {
// Per Note [inference mode], an inference tensor is written only under InferenceMode.
void check_inference_write(const char* op, const Tensor& self) {
  SINTER_CHECK(!self.is_inference() || InferenceMode::is_enabled(), op, ": the tensor (shape ",
               shape_str(self.shape()),
               ") was made under InferenceMode, and an inference tensor cannot be changed in place "
               "outside it; clone() it first");
}

void check_inplace(const char* op, const Tensor& self, const Tensor* other) {
  SINTER_CHECK(self.defined(), op, ": undefined tensor");
  check_inference_write(op, self);
  if (autograd::records_in_place(self, {other})) autograd::check_in_place_target(op, self);
  if (other) {
    SINTER_CHECK(other->device() == self.device(), op, ": tensors on ", self.device(), " and ",
                 other->device());
  }
}

// Note [in-place overlap]
// An in-place op or copy_ whose source shares memory with the tensor it writes, laid out otherwise
// (x.add_(x.t()), x.mul_(x[0:1]), x[1:].copy_(x[:-1])), reads elements it has already written, in
// an order that differs between the CPU's loop and the GPU's threads: a silently wrong result, so
// it is refused where the overlap is certain, as in PyTorch. That is when the tensor written has a
// dim of stride 0 (an expanded view: several of its elements are one), or when both tensors are
// dense (each a permutation of one contiguous block) and their memory meets without every element
// pairing with itself. Sparser views (x[::2] and x[1::2]) are not checked.

// Dense: the dims of size > 1, ordered by stride, pack one block without gaps or overlap.
bool is_dense(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1) dims.emplace_back(t.strides()[d], t.size(d));
  }
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// The bytes [first, last) a non-empty tensor's elements lie in.
std::pair<const char*, const char*> byte_range(const Tensor& t) {
  int64_t extent = 1;
  for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.strides()[d];
  const auto* first = static_cast<const char*>(t.data_ptr());
  return {first, first + extent * static_cast<int64_t>(element_size(t.dtype()))};
}

// Whether `src`, broadcast to dst's shape, puts every element where dst has it.
bool same_elements(const Tensor& dst, const Tensor& src) {
  if (dst.data_ptr() != src.data_ptr() || element_size(dst.dtype()) != element_size(src.dtype()))
    return false;
  const int64_t lead = dst.dim() - src.dim();
  for (int64_t d = 0; d < dst.dim(); ++d) {
    if (dst.size(d) == 1) continue;
    const int64_t s = d - lead;
    if (s < 0 || src.size(s) != dst.size(d) || src.strides()[s] != dst.strides()[d]) return false;
  }
  return true;
}

// Checks Note [in-place overlap] for `dst`, written from `src` (undefined for none) on one device.
void check_overlap(const char* op, const Tensor& dst, const Tensor& src) {
  if (dst.numel() <= 1) return;
  for (int64_t d = 0; d < dst.dim(); ++d) {
    SINTER_CHECK(dst.size(d) == 1 || dst.strides()[d] != 0, op, ": the tensor written (shape ",
                 shape_str(dst.shape()), ", strides ", shape_str(dst.strides()),
                 ") is an expanded view whose dim ", d,
                 " repeats one element; write into a contiguous copy");
  }
  if (!src.defined() || src.numel() == 0 || src.device() != dst.device()) return;
  const auto [d0, d1] = byte_range(dst);
  const auto [s0, s1] = byte_range(src);
  if (s1 <= d0 || d1 <= s0 || same_elements(dst, src)) return;
  SINTER_CHECK(!is_dense(dst) || !is_dense(src), op, ": the source (shape ", shape_str(src.shape()),
               ", strides ", shape_str(src.strides()),
               ") shares memory with the tensor written (shape ", shape_str(dst.shape()),
               ", strides ", shape_str(dst.strides()),
               ") in another layout, so the op would read elements it has already written; pass a "
               "copy of it (clone())");
}

// self = self `bop` other, after the checks of every in-place op.
Tensor& inplace_binary(const char* op, Tensor& self, const IterArg& other, kern::BinaryOp bop) {
  check_inplace(op, self, other.tensor);
  SINTER_CHECK(other.tensor || is_floating(self.dtype()) || other.scalar.holds_integer(), op,
               ": scalar ", other.scalar, " is not an integer, but the tensor has dtype ",
               self.dtype());
  if (other.tensor) {
    SINTER_CHECK(other.tensor->dtype() == self.dtype(), op, ": dtype ", other.tensor->dtype(),
                 " does not match the tensor's ", self.dtype());
    Shape b = broadcast_shapes(op, self.shape(), other.tensor->shape());
    SINTER_CHECK(b == self.shape(), op, ": shape ", shape_str(other.tensor->shape()),
                 " does not broadcast to the tensor's shape ", shape_str(self.shape()));
  }
  check_overlap(op, self, other.tensor ? *other.tensor : Tensor());
  if (autograd::records_in_place(self, {other.tensor})) {  // Note [in-place autograd]
    const bool add = bop == kern::BinaryOp::Add;
    return autograd::in_place(
        self,
        [&](const Tensor& t) {
          if (other.tensor) return add ? sinter::add(t, *other.tensor) : mul(t, *other.tensor);
          return add ? sinter::add(t, other.scalar) : mul(t, other.scalar);
        },
        op);
  }
  if (self.numel() > 0) {
    kern::ElementwiseIter it = make_iter(op, self, {IterArg(self), other}, self.dtype());
    SINTER_DISPATCH(self.device(), binary, it, bop, 0.0);
  }
  self.bump_version();
  return self;
}
}  // namespace

Tensor& Tensor::add_(const Tensor& other, const Scalar& alpha) {
  if (alpha.to_double() == 1.0) return inplace_binary("add_", *this, other, kern::BinaryOp::Add);
  check_inplace("add_", *this, &other);
  if (autograd::records_in_place(*this, {&other})) {  // Note [in-place autograd]
    SINTER_CHECK(other.dtype() == dtype(), "add_: dtype ", other.dtype(),
                 " does not match the tensor's ", dtype());
    return autograd::in_place(
        *this, [&](const Tensor& t) { return sinter::add(t, other, alpha); }, "add_");
  }
  return inplace_binary("add_", *this, mul(other, alpha), kern::BinaryOp::Add);
}

Tensor& Tensor::add_(const Scalar& value) {
  return inplace_binary("add_", *this, value, kern::BinaryOp::Add);
}

Tensor& Tensor::mul_(const Tensor& other) {
  return inplace_binary("mul_", *this, other, kern::BinaryOp::Mul);
}

Tensor& Tensor::mul_(const Scalar& value) {
  return inplace_binary("mul_", *this, value, kern::BinaryOp::Mul);
}

Tensor& Tensor::zero_() { return fill_(0); }

void zero_grads(const std::vector<Tensor>& tensors, bool set_to_none) {
  NoGradGuard ng;
  for (const Tensor& t : tensors) {
    Tensor g = t.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      t.set_grad(Tensor());
    } else {
      g.zero_();
    }
  }
}

Tensor& Tensor::fill_(const Scalar& value) {
  check_inplace("fill_", *this, nullptr);
  if (autograd::records_in_place(*this)) {  // Note [in-place autograd]: zero gradient to the past
    return copy_(full({}, value, {.dtype = dtype(), .device = device()}));
  }
  if (numel() > 0) {
    kern::ElementwiseIter it = make_iter("fill_", *this, {value}, DType::f64);
    SINTER_DISPATCH(device(), copy, it);
  }
  bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  SINTER_CHECK(src.defined(), "copy_: undefined source");
  SINTER_CHECK(defined(), "copy_: undefined tensor");
  check_inference_write("copy_", *this);
  const bool recorded = autograd::records_in_place(*this, {&src});  // Note [in-place autograd]
  if (recorded) autograd::check_in_place_target("copy_", *this);
  Shape b = broadcast_shapes("copy_", shape(), src.shape());
  SINTER_CHECK(b == shape(), "copy_: source of shape ", shape_str(src.shape()),
               " does not broadcast to ", shape_str(shape()));
  Tensor s = src.device() == device() ? src : src.to(device());
  check_overlap("copy_", *this, s);
  copy_into(*this, s);
  bump_version();
  if (recorded) autograd::record_copy(*this, s);
  return *this;
}

// --- printing ---

namespace {
void print_rec(std::ostringstream& os, const std::vector<double>& v, const Shape& shape,
               const Shape& strides, size_t dim, int64_t base, bool elide, bool integral,
               int indent) {
  const int64_t n = shape[dim];
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (elide && n > 6 && i == 3) {
      os << "...";
      i = n - 4;
      if (dim + 1 < shape.size())
        os << ",\n" << std::string(indent + 1, ' ');
      else
        os << ", ";
      continue;
    }
    const int64_t off = base + i * strides[dim];
    if (dim + 1 == shape.size()) {
      if (integral)
        os << static_cast<int64_t>(v[off]);
      else
        os << std::setprecision(4) << v[off];
    } else {
      print_rec(os, v, shape, strides, dim + 1, off, elide, integral, indent + 1);
    }
    if (i + 1 < n) {
      if (dim + 1 < shape.size())
        os << ",\n" << std::string(indent + 1, ' ');
      else
        os << ", ";
    }
  }
  os << ']';
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  os << "tensor(";
  std::vector<double> v = to_vector<double>();
  if (dim() == 0) {
    if (is_integral(dtype()))
      os << static_cast<int64_t>(v[0]);
    else
      os << std::setprecision(4) << v[0];
  } else if (numel() == 0) {
    os << "[]";
  } else {
    print_rec(os, v, shape(), contiguous_strides(shape()), 0, 0, numel() > 1000,
              is_integral(dtype()), 7);
  }
  os << ", shape=" << shape_str(shape()) << ", dtype=" << dtype() << ", device=" << device();
  if (requires_grad()) os << ", requires_grad=true";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace sinter
