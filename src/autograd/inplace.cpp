// In-place ops under autograd (Note [in-place autograd]): copy_'s nodes, a view's base rebased
// through it, and views brought up to date.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "internal/autograd_impl.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter::autograd {
namespace {

// Where a view's elements lie in its base's memory: both geometries, the view's first element
// counted from the base's, and the span of memory the base covers.
struct ViewGeometry {
  Shape base_shape, base_strides;
  Shape view_shape, view_strides;
  int64_t offset = 0;
  int64_t span = 0;
  // An expanded view (dims of stride 0) has its gradient summed over those dims, to this shape
  // (theirs 1), before it goes to the base.
  std::optional<Shape> summed;
};

// Elements from the first to one past the last that `shape` and `strides` (none negative) reach.
int64_t extent(const Shape& shape, const Shape& strides) {
  int64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    last += (shape[d] - 1) * strides[d];
  }
  return last + 1;
}

// Whether no two elements of the geometry share memory: ordered by stride, each dim's stride
// steps past everything the smaller dims reach.
bool distinct_elements(const Shape& shape, const Shape& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] > 1) dims.emplace_back(strides[d], shape[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return false;
    reach += (size - 1) * stride;
  }
  return true;
}

ViewGeometry geometry_of(const char* op, const Tensor& view, const Tensor& base) {
  const TensorImpl& v = *view.impl();
  const TensorImpl& b = *base.impl();
  ViewGeometry g;
  g.base_shape = b.shape;
  g.base_strides = b.strides;
  g.view_shape = v.shape;
  g.view_strides = v.strides;
  g.offset = v.offset - b.offset;
  g.span = extent(b.shape, b.strides);
  const auto nonnegative = [](const Shape& strides) {
    return std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s >= 0; });
  };
  const int64_t reach = extent(v.shape, v.strides);
  Shape once = v.shape;  // the dims of stride 0 taken once
  for (size_t d = 0; d < once.size(); ++d) {
    if (v.strides[d] == 0) once[d] = std::min<int64_t>(once[d], 1);
  }
  if (once != v.shape) g.summed = once;
  SINTER_CHECK(nonnegative(b.strides) && nonnegative(v.strides) &&
                   distinct_elements(b.shape, b.strides) && distinct_elements(once, v.strides) &&
                   (reach == 0 || (g.offset >= 0 && g.offset + reach <= g.span)),
               op, ": autograd cannot follow an in-place write through this view (shape ",
               shape_str(v.shape), ", strides ", shape_str(v.strides), ", offset ", v.offset,
               ") of its base (shape ", shape_str(b.shape), ", strides ", shape_str(b.strides),
               ", offset ", b.offset, "); write into a clone() of the base");
  return g;
}

Tensor base_view(const Tensor& buffer, const ViewGeometry& g) {
  return make_view(buffer, g.base_shape, g.base_strides, 0);
}

Tensor view_view(const Tensor& buffer, const ViewGeometry& g) {
  return make_view(buffer, g.view_shape, g.view_strides, g.offset);
}

// The gradient of the base from that of the view's elements (zero elsewhere).
Tensor view_grad_to_base(const Tensor& grad, const ViewGeometry& g) {
  Tensor buffer = zeros({g.span}, {.dtype = grad.dtype(), .device = grad.device()});
  if (g.summed) {
    make_view(buffer, *g.summed, g.view_strides, g.offset).copy_(sum_to(grad, *g.summed));
  } else {
    view_view(buffer, g).copy_(grad);
  }
  return base_view(buffer, g);
}

// The base's gradient split in two copies: the view's elements, and the rest (those zero).
std::pair<Tensor, Tensor> split_base_grad(const Tensor& grad, const ViewGeometry& g) {
  Tensor buffer = zeros({g.span}, {.dtype = grad.dtype(), .device = grad.device()});
  Tensor base = base_view(buffer, g);
  base.copy_(grad);
  Tensor region = view_view(buffer, g);
  Tensor inside = region.clone();
  region.zero_();
  return {inside, base};
}

// The view's graph made through its base: the gradient of its elements goes to those of the base.
void record_view_of_base(Tensor& view, const Tensor& base, const ViewGeometry& g) {
  record("as_strided", {&view}, {base},
         [g](const Grads& grads) { return Grads{view_grad_to_base(grads[0], g)}; });
}

// self's memory and place in the graph, with a version counter of its own.
Tensor own_version_alias(const Tensor& self) {
  refresh_view(self);
  const TensorImpl& s = *self.impl();
  auto impl = std::make_shared<TensorImpl>(s.storage, s.offset, s.shape, s.strides, s.dtype);
  impl->inference = s.inference;
  if (s.autograd && s.autograd->grad_fn) {
    impl->meta().grad_fn = s.autograd->grad_fn;
    impl->meta().output_nr = s.autograd->output_nr;
  }
  return Tensor(std::move(impl));
}

bool base_requires_grad(const TensorImpl& impl) {
  return impl.view_base && Tensor(impl.view_base).requires_grad();
}

}  // namespace

bool records_in_place(const Tensor& self, std::initializer_list<const Tensor*> sources) {
  // An integer or bool tensor never requires grad: what is written into it carries none.
  if (!GradMode::is_enabled() || !self.defined() || !is_floating(self.dtype())) return false;
  if (self.requires_grad() || base_requires_grad(*self.impl())) return true;
  return std::any_of(sources.begin(), sources.end(),
                     [](const Tensor* t) { return t && t->defined() && t->requires_grad(); });
}

void check_in_place_target(const char* op, const Tensor& self) {
  const TensorImpl& impl = *self.impl();
  const bool leaf = impl.autograd && impl.autograd->requires_grad && !impl.autograd->grad_fn;
  constexpr const char* advice =
      "; write it under NoGradGuard (sinter.no_grad()), as optimizers do, or write into a clone()";
  SINTER_CHECK(!leaf, op, ": a leaf tensor that requires grad (shape ", shape_str(self.shape()),
               ") is being used in an in-place operation", advice);
  if (!impl.view_base) return;
  const Tensor base(impl.view_base);
  SINTER_CHECK(!(base.is_leaf() && base.requires_grad()), op, ": a view (shape ",
               shape_str(self.shape()), ") of a leaf tensor that requires grad (shape ",
               shape_str(base.shape()), ") is being used in an in-place operation", advice);
  SINTER_CHECK(!impl.view_without_grad || !base.requires_grad(), op, ": a view (shape ",
               shape_str(self.shape()),
               ") made with grad mode off, of a tensor that requires "
               "grad (shape ",
               shape_str(base.shape()),
               "), is being written in place with grad mode on; make the view with grad mode on, "
               "or write under NoGradGuard (sinter.no_grad())");
}

void record_copy(Tensor& self, const Tensor& src) {
  const Shape src_shape = src.shape();
  const DType src_dtype = src.dtype();
  const bool src_needs = src.requires_grad();
  TensorImpl& impl = *self.impl();
  // A retained gradient follows the tensor to its new grad_fn, as in PyTorch.
  const bool retained = impl.autograd && impl.autograd->retains_grad;
  if (retained) impl.autograd->retains_grad = false;
  if (!impl.view_base) {
    const bool old_needs = self.requires_grad();
    record("copy_", {&self}, {self, src},
           [old_needs, src_needs, src_shape, src_dtype](const Grads& g) {
             return Grads{old_needs ? zeros_like(g[0]) : Tensor(),
                          src_needs ? sum_to(g[0], src_shape).to(src_dtype) : Tensor()};
           });
    impl.rebases += 1;  // the views of self are out of date
    if (retained) self.retain_grad();
    return;
  }
  Tensor base(impl.view_base);
  const ViewGeometry g = geometry_of("copy_", self, base);
  SINTER_CHECK(!g.summed, "copy_: the view written repeats elements");
  const bool base_needs = base.requires_grad();
  record("copy_slices", {&base}, {base, src},
         [g, base_needs, src_needs, src_shape, src_dtype](const Grads& grads) {
           auto [inside, rest] = split_base_grad(grads[0], g);
           return Grads{base_needs ? rest : Tensor(),
                        src_needs ? sum_to(inside, src_shape).to(src_dtype) : Tensor()};
         });
  base.impl()->rebases += 1;
  impl.view_seen = base.impl()->rebases;
  record_view_of_base(self, base, g);
  if (retained) self.retain_grad();
}

void refresh_view(const Tensor& t) {
  if (!t.defined()) return;
  TensorImpl& impl = *t.impl();
  if (!impl.view_base || impl.view_base->rebases == impl.view_seen) return;
  impl.view_seen = impl.view_base->rebases;
  const bool leaf = impl.autograd && impl.autograd->requires_grad && !impl.autograd->grad_fn;
  const Tensor base(impl.view_base);
  if (leaf || !base.requires_grad()) return;
  Tensor view = t;
  record_view_of_base(view, base, geometry_of("autograd", t, base));
}

Tensor& in_place(Tensor& self, const std::function<Tensor(const Tensor&)>& f, const char* op) {
  SINTER_CHECK(self.defined(), op, ": undefined tensor");
  if (!GradMode::is_enabled()) return self.copy_(f(self));
  if (records_in_place(self)) check_in_place_target(op, self);
  // f runs on an alias of self with a version counter of its own: an alias of that (a SavedTensor
  // of f's graph, or a view) that outlives f means f's backward may read self's old values,
  // which the write would change, so f runs again on a copy of them.
  Tensor alias = own_version_alias(self);
  Tensor result = f(alias);
  SINTER_CHECK(result.defined(), op, ": the op gave an undefined result");
  if (alias.impl()->version.use_count() > 1) {
    result = Tensor();
    result = f(self.clone());
  }
  return self.copy_(result);
}

}  // namespace sinter::autograd
