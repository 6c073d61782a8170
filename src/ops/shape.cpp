// Shape ops: views that share storage (reshape, permute, narrow, select, slice, expand, ...) and
// the ops that build new tensors from pieces (cat, stack, split, pad), with their backwards. The
// ops that pick elements by an index tensor are in index.cpp.
#include <algorithm>
#include <numeric>
#include <optional>

#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter {

std::ostream& operator<<(std::ostream& os, Size2 s) {
  return os << "(" << s.h << ", " << s.w << ")";
}

std::ostream& operator<<(std::ostream& os, Size3 s) {
  return os << "(" << s.d << ", " << s.h << ", " << s.w << ")";
}

std::ostream& operator<<(std::ostream& os, PadMode m) {
  switch (m) {
    case PadMode::Constant:
      return os << "constant";
    case PadMode::Reflect:
      return os << "reflect";
    case PadMode::Replicate:
      return os << "replicate";
    case PadMode::Circular:
      return os << "circular";
  }
  return os << "PadMode(" << static_cast<int>(m) << ")";
}

int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  SINTER_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for a tensor with ", ndim,
               " dims");
  return dim < 0 ? dim + n : dim;
}

void check_defined(const char* op, const Tensor& t) {
  SINTER_CHECK(t.defined(), op, ": undefined tensor argument");
}

namespace {

// Strides that let `new_shape` view memory laid out as (old_shape, old_strides), if any exist.
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& new_shape) {
  if (numel_of(old_shape) == 0 || old_shape.empty()) return contiguous_strides(new_shape);
  Shape ns(new_shape.size(), 1);
  int64_t vd = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t base = old_strides.back();
  int64_t tnumel = 1, vnumel = 1;
  for (int64_t td = static_cast<int64_t>(old_shape.size()) - 1; td >= 0; --td) {
    tnumel *= old_shape[td];
    // A chunk ends where the next-outer old dim does not continue it in memory.
    const bool chunk_ends =
        td == 0 || (old_shape[td - 1] != 1 && old_strides[td - 1] != tnumel * base);
    if (!chunk_ends) continue;
    while (vd >= 0 && (vnumel < tnumel || new_shape[vd] == 1)) {
      ns[vd] = vnumel * base;
      vnumel *= new_shape[vd];
      --vd;
    }
    if (vnumel != tnumel) return std::nullopt;
    if (td > 0) {
      base = old_strides[td - 1];
      tnumel = 1;
      vnumel = 1;
    }
  }
  if (vd != -1) return std::nullopt;
  return ns;
}

Shape infer_shape(const char* op, const Shape& shape, int64_t numel) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      SINTER_CHECK(infer < 0, op, ": only one dim can be -1 in ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      SINTER_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    SINTER_CHECK(known > 0 && numel % known == 0, op, ": shape ", shape_str(shape),
                 " is invalid for ", numel, " elements");
    out[infer] = numel / known;
  }
  SINTER_CHECK(numel_of(out) == numel, op, ": shape ", shape_str(shape), " is invalid for ", numel,
               " elements");
  return out;
}

// A view of `a`; its backward is `fn` (gradient of the view -> gradient of a).
Tensor view_op(const char* name, const Tensor& a, Shape shape, Shape strides, int64_t offset,
               autograd::BackwardFn fn) {
  Tensor out = make_view(a, std::move(shape), std::move(strides), offset);
  if (needs_grad({&a})) record(name, {&out}, {a}, std::move(fn));
  return out;
}

// Backward of a view that picks part of a: scatter the gradient into zeros of a's shape.
autograd::BackwardFn scatter_back(const Tensor& a, std::function<Tensor(const Tensor&)> part) {
  Shape shape = a.shape();
  DType dtype = a.dtype();
  Device device = a.device();
  return [shape, dtype, device, part](const Grads& g) {
    Tensor z = zeros(shape, {.dtype = dtype, .device = device});
    part(z).copy_(g[0]);
    return Grads{z};
  };
}

}  // namespace

Tensor Tensor::view(const Shape& shape_in) const {
  Shape shape = infer_shape("view", shape_in, numel());
  std::optional<Shape> st = view_strides(this->shape(), strides(), shape);
  SINTER_CHECK(st.has_value(), "view: shape ", shape_str(shape_in),
               " is not compatible with the "
               "strides ",
               shape_str(strides()), " of a tensor of shape ", shape_str(this->shape()),
               "; use reshape (which copies when needed)");
  Shape orig = this->shape();
  return view_op("view", *this, shape, *st, storage_offset(),
                 [orig](const Grads& g) { return Grads{g[0].reshape(orig)}; });
}

Tensor Tensor::reshape(const Shape& shape_in) const {
  Shape shape = infer_shape("reshape", shape_in, numel());
  if (view_strides(this->shape(), strides(), shape)) return view(shape);
  return clone().view(shape);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  const int64_t s = wrap_dim("flatten", start_dim, dim()), e = wrap_dim("flatten", end_dim, dim());
  if (dim() == 0) return reshape({1});
  SINTER_CHECK(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape shape(this->shape().begin(), this->shape().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= size(d);
  shape.push_back(n);
  shape.insert(shape.end(), this->shape().begin() + e + 1, this->shape().end());
  return reshape(shape);
}

Tensor Tensor::squeeze() const {
  Shape shape;
  for (int64_t s : this->shape()) {
    if (s != 1) shape.push_back(s);
  }
  return reshape(shape);
}

Tensor Tensor::squeeze(int64_t d) const {
  const int64_t w = wrap_dim("squeeze", d, dim());
  if (dim() == 0) return *this;
  if (size(w) != 1) return *this;
  Shape shape = this->shape(), st = strides();
  shape.erase(shape.begin() + w);
  st.erase(st.begin() + w);
  Shape orig = this->shape();
  return view_op("squeeze", *this, shape, st, storage_offset(),
                 [orig](const Grads& g) { return Grads{g[0].reshape(orig)}; });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t n = dim() + 1;
  SINTER_CHECK(d >= -n && d < n, "unsqueeze: dim ", d, " out of range for a tensor with ", dim(),
               " dims");
  const int64_t w = d < 0 ? d + n : d;
  Shape shape = this->shape(), st = strides();
  const int64_t stride = w < dim() ? st[w] * shape[w] : 1;
  shape.insert(shape.begin() + w, 1);
  st.insert(st.begin() + w, stride);
  Shape orig = this->shape();
  return view_op("unsqueeze", *this, shape, st, storage_offset(),
                 [orig](const Grads& g) { return Grads{g[0].reshape(orig)}; });
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  SINTER_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: ", dims.size(),
               " dims given for a tensor with ", dim(), " dims");
  std::vector<int64_t> p(dims.size()), inv(dims.size());
  std::vector<bool> seen(dims.size(), false);
  Shape shape(dims.size()), st(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    p[i] = wrap_dim("permute", dims[i], dim());
    SINTER_CHECK(!seen[p[i]], "permute: dim ", dims[i], " repeats in ", dims);
    seen[p[i]] = true;
    inv[p[i]] = static_cast<int64_t>(i);
    shape[i] = size(p[i]);
    st[i] = stride(p[i]);
  }
  return view_op("permute", *this, shape, st, storage_offset(),
                 [inv](const Grads& g) { return Grads{g[0].permute(inv)}; });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  const int64_t w0 = wrap_dim("transpose", d0, dim()), w1 = wrap_dim("transpose", d1, dim());
  if (dim() == 0) return *this;
  std::vector<int64_t> p(dim());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[w0], p[w1]);
  return permute(p);
}

Tensor Tensor::t() const {
  SINTER_CHECK(dim() <= 2, "t: expects a tensor with at most 2 dims, got shape ",
               shape_str(shape()));
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  SINTER_CHECK(dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  const int64_t w = wrap_dim("narrow", d, dim());
  const int64_t n = size(w);
  if (start < 0) start += n;
  SINTER_CHECK(start >= 0 && length >= 0 && start <= n && length <= n - start, "narrow: start ",
               start, " and length ", length, " do not fit dim ", d, " of size ", n);
  Shape shape = this->shape();
  shape[w] = length;
  return view_op("narrow", *this, shape, strides(), storage_offset() + start * stride(w),
                 scatter_back(*this, [w, start, length](const Tensor& z) {
                   return z.narrow(w, start, length);
                 }));
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  SINTER_CHECK(dim() > 0, "select: cannot select from a 0-dim tensor");
  const int64_t w = wrap_dim("select", d, dim());
  const int64_t n = size(w);
  SINTER_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dim ", d,
               " of size ", n);
  if (index < 0) index += n;
  Shape shape = this->shape(), st = strides();
  const int64_t offset = storage_offset() + index * st[w];
  shape.erase(shape.begin() + w);
  st.erase(st.begin() + w);
  return view_op("select", *this, shape, st, offset,
                 scatter_back(*this, [w, index](const Tensor& z) { return z.select(w, index); }));
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start_in, std::optional<int64_t> end_in,
                     int64_t step) const {
  SINTER_CHECK(dim() > 0, "slice: cannot slice a 0-dim tensor");
  SINTER_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t w = wrap_dim("slice", d, dim());
  const int64_t n = size(w);
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  const int64_t start = clampi(start_in.value_or(0));
  const int64_t end = std::max(start, clampi(end_in.value_or(n)));
  Shape shape = this->shape(), st = strides();
  shape[w] = end > start ? (end - start - 1) / step + 1 : 0;
  const int64_t offset = storage_offset() + start * st[w];
  st[w] *= step;
  return view_op("slice", *this, shape, st, offset,
                 scatter_back(*this, [w, start, end, step](const Tensor& z) {
                   return z.slice(w, start, end, step);
                 }));
}

Tensor Tensor::expand(const Shape& shape_in) const {
  const int64_t nd = static_cast<int64_t>(shape_in.size());
  SINTER_CHECK(nd >= dim(), "expand: cannot expand shape ", shape_str(this->shape()), " to ",
               shape_str(shape_in), " (fewer dims)");
  Shape shape(nd), st(nd);
  const int64_t lead = nd - dim();
  for (int64_t i = 0; i < nd; ++i) {
    if (i < lead) {
      SINTER_CHECK(shape_in[i] >= 0, "expand: invalid size ", shape_in[i],
                   " for a new leading dim");
      shape[i] = shape_in[i];
      st[i] = 0;
      continue;
    }
    const int64_t cur = size(i - lead);
    const int64_t want = shape_in[i] == -1 ? cur : shape_in[i];
    SINTER_CHECK(want >= 0, "expand: invalid size ", shape_in[i], " in ", shape_str(shape_in));
    SINTER_CHECK(want == cur || cur == 1, "expand: cannot expand shape ", shape_str(this->shape()),
                 " to ", shape_str(shape_in), " (dim ", i, ": ", cur, " vs ", want, ")");
    shape[i] = want;
    st[i] = want == cur ? stride(i - lead) : 0;
  }
  if (shape == this->shape()) return *this;
  Shape orig = this->shape();
  return view_op("expand", *this, shape, st, storage_offset(),
                 [orig](const Grads& g) { return Grads{sum_to(g[0], orig)}; });
}

// --- free-function forms ---
// Each is its Tensor method, named in the profiler and in the error for an undefined tensor.
#define SINTER_FREE_FORM(name, params, args) \
  Tensor name params {                       \
    SINTER_PROFILE_OP(#name, a);             \
    check_defined(#name, a);                 \
    return a.name args;                      \
  }
SINTER_FREE_FORM(reshape, (const Tensor& a, const Shape& s), (s))
SINTER_FREE_FORM(transpose, (const Tensor& a, int64_t d0, int64_t d1), (d0, d1))
SINTER_FREE_FORM(permute, (const Tensor& a, const std::vector<int64_t>& d), (d))
SINTER_FREE_FORM(squeeze, (const Tensor& a, int64_t d), (d))
SINTER_FREE_FORM(unsqueeze, (const Tensor& a, int64_t d), (d))
SINTER_FREE_FORM(narrow, (const Tensor& a, int64_t d, int64_t s, int64_t l), (d, s, l))
SINTER_FREE_FORM(select, (const Tensor& a, int64_t d, int64_t i), (d, i))
SINTER_FREE_FORM(expand, (const Tensor& a, const Shape& s), (s))
SINTER_FREE_FORM(flatten, (const Tensor& a, int64_t s, int64_t e), (s, e))
#undef SINTER_FREE_FORM

// --- building from pieces ---

Tensor cat(const std::vector<Tensor>& tensors_in, int64_t dim) {
  SINTER_PROFILE_OP("cat", tensors_in);
  SINTER_CHECK(!tensors_in.empty(), "cat: expected at least one tensor");
  // Mixed dtypes promote to the widest, as PyTorch's cat (and so autocast's "promote" policy).
  std::vector<Tensor> promoted_parts;
  DType common = tensors_in[0].defined() ? tensors_in[0].dtype() : DType::f32;
  for (size_t i = 0; i < tensors_in.size(); ++i) {
    const Tensor& t = tensors_in[i];
    check_defined("cat", t);
    SINTER_CHECK(t.device() == tensors_in[0].device(), "cat: tensor ", i, " is on ", t.device(),
                 ", tensor 0 on ", tensors_in[0].device());
    common = promote_types(common, t.dtype());
  }
  for (const Tensor& t : tensors_in) {
    if (t.dtype() != common) {
      for (const Tensor& u : tensors_in) promoted_parts.push_back(u.to(common));
      break;
    }
  }
  const std::vector<Tensor>& tensors = promoted_parts.empty() ? tensors_in : promoted_parts;
  const Tensor& first = tensors[0];
  check_defined("cat", first);
  SINTER_CHECK(first.dim() > 0,
               "cat: 0-dim tensors cannot be concatenated; unsqueeze them or use stack");
  const int64_t w = wrap_dim("cat", dim, first.dim());
  Shape shape = first.shape();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    SINTER_CHECK(t.dim() == first.dim(), "cat: tensor ", i, " has shape ", shape_str(t.shape()),
                 ", tensor 0 has shape ", shape_str(first.shape()));
    for (int64_t d = 0; d < t.dim(); ++d) {
      SINTER_CHECK(d == w || t.size(d) == first.size(d), "cat: tensor ", i, " has shape ",
                   shape_str(t.shape()), ", tensor 0 has shape ", shape_str(first.shape()),
                   " (they may differ only in dim ", w, ")");
    }
    total += t.size(w);
  }
  shape[w] = total;
  Tensor out = empty(shape, {.dtype = first.dtype(), .device = first.device()});
  std::vector<int64_t> sizes;
  {
    NoGradGuard ng;
    int64_t off = 0;
    for (const Tensor& t : tensors) {
      if (t.size(w) > 0) out.narrow(w, off, t.size(w)).copy_(t);
      off += t.size(w);
      sizes.push_back(t.size(w));
    }
  }
  if (needs_grad(tensors)) {
    record("cat", {&out}, tensors, [sizes, w](const Grads& g) {
      Grads r;
      int64_t off = 0;
      for (int64_t s : sizes) {
        r.push_back(g[0].narrow(w, off, s));
        off += s;
      }
      return r;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  SINTER_PROFILE_OP("stack", tensors);
  SINTER_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  check_defined("stack", tensors[0]);
  const int64_t n = tensors[0].dim() + 1;
  SINTER_CHECK(dim >= -n && dim < n, "stack: dim ", dim, " out of range for ", n - 1,
               "-dim tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_defined("stack", tensors[i]);
    SINTER_CHECK(tensors[i].device() == tensors[0].device(), "stack: tensor ", i, " is on ",
                 tensors[i].device(), ", tensor 0 on ", tensors[0].device());
    SINTER_CHECK(tensors[i].shape() == tensors[0].shape(), "stack: tensor ", i, " has shape ",
                 shape_str(tensors[i].shape()), ", tensor 0 has shape ",
                 shape_str(tensors[0].shape()));
  }
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(dim));
  return cat(parts, dim);
}

namespace {

// Note [split views]
// split, chunk and unbind return views of `a`, pieces side by side along one dim, with one
// backward node for them all (PyTorch's SplitBackward, UnbindBackward): its gradient is the
// pieces' gradients put side by side in one pass (zeros for a piece that got none). A node per
// piece, as a narrow or select has, would zero-fill a's whole shape once per piece and then add
// the pieces' full-size gradients: attention's q, k and v picked from the fused qkv projection
// paid three zero-fills and two full sums a block for it. `squeeze` drops the dim from each piece
// (unbind's pieces of size 1).
std::vector<Tensor> split_views(const char* name, const Tensor& a, int64_t w,
                                const std::vector<int64_t>& sizes, bool squeeze) {
  std::vector<Tensor> out;
  int64_t offset = a.storage_offset();
  for (const int64_t size : sizes) {
    Shape shape = a.shape(), strides = a.strides();
    shape[w] = size;
    if (squeeze) {
      shape.erase(shape.begin() + w);
      strides.erase(strides.begin() + w);
    }
    out.push_back(make_view(a, shape, strides, offset));
    offset += size * a.stride(w);
  }
  if (!needs_grad({&a})) return out;
  std::vector<Tensor*> outputs;
  for (Tensor& t : out) outputs.push_back(&t);
  const Shape shape = a.shape();
  const DType dtype = a.dtype();
  const Device device = a.device();
  record(name, outputs, {a}, [shape, dtype, device, w, sizes, squeeze](const Grads& g) {
    std::vector<Tensor> pieces;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape piece = shape;
      piece[w] = sizes[i];
      if (!g[i].defined()) {
        pieces.push_back(zeros(piece, {.dtype = dtype, .device = device}));
      } else {
        pieces.push_back(squeeze ? g[i].unsqueeze(w) : g[i]);
      }
    }
    Tensor grad = cat(pieces, w);
    return Grads{grad.dtype() == dtype ? grad : grad.to(dtype)};
  });
  return out;
}

}  // namespace

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  SINTER_PROFILE_OP("split", a);
  check_defined("split", a);
  SINTER_CHECK(split_size > 0, "split: split_size must be positive, got ", split_size);
  const int64_t w = wrap_dim("split", dim, a.dim());
  const int64_t n = a.size(w);
  std::vector<int64_t> sizes;
  for (int64_t off = 0; off < n || (n == 0 && sizes.empty()); off += split_size) {
    sizes.push_back(std::min(split_size, n - off));
  }
  return split_views("split", a, w, sizes, false);
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  SINTER_PROFILE_OP("split", a);
  check_defined("split", a);
  const int64_t w = wrap_dim("split", dim, a.dim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    SINTER_CHECK(s >= 0, "split: negative size in ", sizes);
    total += s;
  }
  SINTER_CHECK(total == a.size(w), "split: sizes ", sizes, " sum to ", total, ", but dim ", dim,
               " has size ", a.size(w));
  return split_views("split", a, w, sizes, false);
}

std::vector<Tensor> unbind(const Tensor& a, int64_t dim) {
  SINTER_PROFILE_OP("unbind", a);
  check_defined("unbind", a);
  SINTER_CHECK(a.dim() > 0, "unbind: a 0-dim tensor has no dim to unbind");
  const int64_t w = wrap_dim("unbind", dim, a.dim());
  return split_views("unbind", a, w, std::vector<int64_t>(static_cast<size_t>(a.size(w)), 1),
                     true);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  SINTER_PROFILE_OP("chunk", a);
  check_defined("chunk", a);
  SINTER_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  const int64_t n = a.size(wrap_dim("chunk", dim, a.dim()));
  const int64_t size = std::max<int64_t>((n + chunks - 1) / chunks, 1);
  return split(a, size, dim);
}

// --- padding ---

namespace {

// Constant padding: the output filled with `value`, the input (cropped by any negative pads) copied
// into its interior; the gradient is the interior of the output's.
Tensor pad_constant(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  const int64_t np = static_cast<int64_t>(pads.size()) / 2;
  Tensor inner = x;
  Shape shape = x.shape();
  std::vector<int64_t> offsets(x.dim(), 0);
  for (int64_t k = 0; k < np; ++k) {
    const int64_t d = x.dim() - 1 - k, left = pads[2 * k], right = pads[2 * k + 1];
    const int64_t crop = std::max<int64_t>(-left, 0) + std::max<int64_t>(-right, 0);
    SINTER_CHECK(crop <= x.size(d), "pad: pads (", left, ", ", right, ") crop ", crop,
                 " elements from dim ", d, " of size ", x.size(d), " (input shape ",
                 shape_str(x.shape()), ")");
    inner = inner.narrow(d, std::max<int64_t>(-left, 0), x.size(d) - crop);
    offsets[d] = std::max<int64_t>(left, 0);
    shape[d] = x.size(d) + left + right;
  }
  Tensor out;
  {
    NoGradGuard ng;
    out = full(shape, value, {.dtype = x.dtype(), .device = x.device()});
    Tensor interior = out;
    for (int64_t d = 0; d < x.dim(); ++d) interior = interior.narrow(d, offsets[d], inner.size(d));
    if (interior.numel() > 0) interior.copy_(inner);
  }
  if (needs_grad({&inner})) {
    const Shape sizes = inner.shape();
    record("pad", {&out}, {inner}, [offsets, sizes](const Grads& g) {
      Tensor r = g[0];
      for (int64_t d = 0; d < r.dim(); ++d) r = r.narrow(d, offsets[d], sizes[d]);
      return Grads{r};
    });
  }
  return out;
}

// The source position of each of the left + n + right positions of a padded dim of size n.
std::vector<int64_t> pad_source(PadMode mode, int64_t n, int64_t left, int64_t right) {
  std::vector<int64_t> src;
  src.reserve(left + n + right);
  for (int64_t j = -left; j < n + right; ++j) {
    if (mode == PadMode::Reflect) {
      src.push_back(j < 0 ? -j : (j >= n ? 2 * (n - 1) - j : j));
    } else if (mode == PadMode::Replicate) {
      src.push_back(std::clamp<int64_t>(j, 0, n - 1));
    } else {
      src.push_back(((j % n) + n) % n);
    }
  }
  return src;
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode, double value) {
  SINTER_PROFILE_OP("pad", x);
  check_defined("pad", x);
  const int64_t np = static_cast<int64_t>(pads.size()) / 2;
  SINTER_CHECK(pads.size() % 2 == 0, "pad: pads come in (left, right) pairs, got ", pads.size(),
               " values");
  SINTER_CHECK(np <= x.dim(), "pad: ", pads.size(), " pads for ", np,
               " dims, but the input has shape ", shape_str(x.shape()));
  if (mode == PadMode::Constant) return pad_constant(x, pads, value);
  SINTER_CHECK(mode == PadMode::Reflect || mode == PadMode::Replicate || mode == PadMode::Circular,
               "pad: unknown mode ", mode);
  SINTER_CHECK(np >= 1 && np <= 3 && (x.dim() == np + 1 || x.dim() == np + 2), "pad: ", mode,
               " padding of ", np, " dims takes an input of ", np + 1, " or ", np + 2,
               " dims, got shape ", shape_str(x.shape()));
  SINTER_CHECK(value == 0.0, "pad: ", mode, " padding takes no value, got ", value);
  Tensor y = x;
  for (int64_t k = 0; k < np; ++k) {
    const int64_t d = x.dim() - 1 - k, n = x.size(d), left = pads[2 * k], right = pads[2 * k + 1];
    SINTER_CHECK(left >= 0 && right >= 0, "pad: ", mode, " padding takes non-negative pads, got (",
                 left, ", ", right, ") for dim ", d);
    if (left == 0 && right == 0) continue;
    const int64_t limit = mode == PadMode::Reflect ? n - 1 : n;
    SINTER_CHECK(n > 0 && (mode == PadMode::Replicate || std::max(left, right) <= limit),
                 "pad: ", mode, " pads (", left, ", ", right, ") of dim ", d, " must be ",
                 mode == PadMode::Reflect ? "smaller than" : "at most", " its size ", n,
                 " (input shape ", shape_str(x.shape()), ")");
    // The padded dim as narrows of y, one per run of consecutive source positions (no index
    // tensor read back to the host: the op runs inside a CUDA graph).
    const std::vector<int64_t> src = pad_source(mode, n, left, right);
    std::vector<Tensor> parts;
    for (size_t k = 0, e = 0; k < src.size(); k = e) {
      for (e = k + 1; e < src.size() && src[e] == src[e - 1] + 1;) ++e;
      parts.push_back(y.narrow(d, src[k], static_cast<int64_t>(e - k)));
    }
    y = cat(parts, d);
  }
  // A new tensor even where no pad was asked for, as PyTorch's.
  return y.is_same(x) ? x.clone() : y;
}

// Note [sliding blocks as views]
// unfold and fold are written with views, pad, stack and add rather than kernels of their own:
// tap (i, j) of every block is one strided view of the padded input (rows i dil_h + b stride_h),
// so unfold stacks the kH kW views; fold spreads each tap's (H_out, W_out) values stride apart
// (zeros between), pads them to their offset in the padded output and sums the kH kW planes. No
// index tensor exists, so nothing is read back to the host (they run under cuda::NoSyncGuard),
// and each op's autograd through those pieces is the other op.

void check_fold_options(const char* op, Size2 k, const FoldOptions& o) {
  SINTER_CHECK(k.h >= 1 && k.w >= 1, op, ": kernel_size must be positive, got ", k);
  SINTER_CHECK(o.dilation.h >= 1 && o.dilation.w >= 1, op, ": dilation must be positive, got ",
               o.dilation);
  SINTER_CHECK(o.padding.h >= 0 && o.padding.w >= 0, op, ": padding must be non-negative, got ",
               o.padding);
  SINTER_CHECK(o.stride.h >= 1 && o.stride.w >= 1, op, ": stride must be positive, got ", o.stride);
}

namespace {

// The checked geometry of unfold's or fold's blocks over an (h, w) image.
struct BlockGeom {
  Size2 k, dil, pad, stride;
  int64_t h_out, w_out;
};

BlockGeom block_geom(const char* op, Size2 size, Size2 k, const FoldOptions& o) {
  check_fold_options(op, k, o);
  auto blocks = [](int64_t in, int64_t kk, int64_t d, int64_t p, int64_t s) {
    const int64_t span = in + 2 * p - d * (kk - 1) - 1;
    return span < 0 ? 0 : span / s + 1;
  };
  BlockGeom g{k,
              o.dilation,
              o.padding,
              o.stride,
              blocks(size.h, k.h, o.dilation.h, o.padding.h, o.stride.h),
              blocks(size.w, k.w, o.dilation.w, o.padding.w, o.stride.w)};
  SINTER_CHECK(g.h_out >= 1 && g.w_out >= 1, op, ": spatial size ", size, " with kernel_size ", k,
               ", dilation ", o.dilation, ", padding ", o.padding, " and stride ", o.stride,
               " holds no block (", g.h_out, "x", g.w_out, " blocks)");
  return g;
}

// x (..., n) -> (..., (n - 1) s + 1) along dim d: x's values s apart, zeros between (a constant pad
// of a new dim after d, then merged into d).
Tensor spread(const Tensor& x, int64_t d, int64_t s) {
  if (s == 1) return x;
  std::vector<int64_t> pads(2 * (x.dim() - d), 0);
  pads.back() = s - 1;  // the right side of the new dim d + 1
  Shape merged = x.shape();
  merged[d] *= s;
  return pad(x.unsqueeze(d + 1), pads).reshape(merged).narrow(d, 0, (x.size(d) - 1) * s + 1);
}

}  // namespace

Tensor unfold(const Tensor& x, Size2 kernel_size, const FoldOptions& opts) {
  SINTER_PROFILE_OP("unfold", x);
  check_defined("unfold", x);
  SINTER_CHECK(x.dim() == 3 || x.dim() == 4,
               "unfold: input must be 3-D (C, H, W) or 4-D (N, C, H, W), got shape ",
               shape_str(x.shape()));
  SINTER_CHECK(is_floating(x.dtype()), "unfold: expected a floating tensor, got dtype ", x.dtype());
  const Tensor xb = x.dim() == 4 ? x : x.unsqueeze(0);
  const BlockGeom g = block_geom("unfold", {xb.size(2), xb.size(3)}, kernel_size, opts);
  // Per Note [sliding blocks as views]: (N, C, H + 2 pad_h, W + 2 pad_w), then one view per tap.
  const Tensor xp = g.pad.h > 0 || g.pad.w > 0 ? pad(xb, {g.pad.w, g.pad.w, g.pad.h, g.pad.h}) : xb;
  std::vector<Tensor> taps;
  for (int64_t i = 0; i < g.k.h; ++i) {
    for (int64_t j = 0; j < g.k.w; ++j) {
      const int64_t r = i * g.dil.h, c = j * g.dil.w;
      taps.push_back(xp.slice(2, r, r + (g.h_out - 1) * g.stride.h + 1, g.stride.h)
                         .slice(3, c, c + (g.w_out - 1) * g.stride.w + 1, g.stride.w));
    }
  }
  // (N, C, kH kW, H_out, W_out) -> (N, C kH kW, L)
  const Tensor cols =
      stack(taps, 2).reshape({xb.size(0), xb.size(1) * g.k.h * g.k.w, g.h_out * g.w_out});
  return x.dim() == 4 ? cols : cols.squeeze(0);
}

Tensor fold(const Tensor& x, Size2 output_size, Size2 kernel_size, const FoldOptions& opts) {
  SINTER_PROFILE_OP("fold", x);
  check_defined("fold", x);
  SINTER_CHECK(x.dim() == 2 || x.dim() == 3,
               "fold: input must be 2-D (C kH kW, L) or 3-D (N, C kH kW, L), got shape ",
               shape_str(x.shape()));
  SINTER_CHECK(is_floating(x.dtype()), "fold: expected a floating tensor, got dtype ", x.dtype());
  SINTER_CHECK(output_size.h >= 1 && output_size.w >= 1, "fold: output_size must be positive, got ",
               output_size);
  const Tensor xb = x.dim() == 3 ? x : x.unsqueeze(0);
  const BlockGeom g = block_geom("fold", output_size, kernel_size, opts);
  const int64_t taps = g.k.h * g.k.w;
  SINTER_CHECK(xb.size(1) % taps == 0, "fold: input's dim ", x.dim() - 2, " (", xb.size(1),
               ") must be divisible by the kernel's size ", kernel_size, " = ", taps);
  SINTER_CHECK(xb.size(2) == g.h_out * g.w_out, "fold: input's last dim ", xb.size(2),
               " must be the number of blocks in output_size ", output_size, " (", g.h_out, " * ",
               g.w_out, " = ", g.h_out * g.w_out, ")");
  const int64_t n = xb.size(0), c = xb.size(1) / taps;
  const int64_t hp = output_size.h + 2 * g.pad.h, wp = output_size.w + 2 * g.pad.w;
  // Per Note [sliding blocks as views]. The sums run in f32 for the half types, rounded once.
  const DType acc = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor blocks = xb.to(acc).reshape({n, c, taps, g.h_out, g.w_out});
  blocks = spread(spread(blocks, 3, g.stride.h), 4, g.stride.w);
  const int64_t span_h = blocks.size(3), span_w = blocks.size(4);
  Tensor sums;
  for (int64_t i = 0; i < g.k.h; ++i) {
    for (int64_t j = 0; j < g.k.w; ++j) {
      const int64_t r = i * g.dil.h, col = j * g.dil.w;
      const Tensor p =
          pad(blocks.select(2, i * g.k.w + j), {col, wp - col - span_w, r, hp - r - span_h});
      sums = sums.defined() ? add(sums, p) : p;
    }
  }
  // Drop the padding (a negative pad crops): (N, C, H, W).
  if (g.pad.h > 0 || g.pad.w > 0) sums = pad(sums, {-g.pad.w, -g.pad.w, -g.pad.h, -g.pad.h});
  const Tensor out = sums.to(x.dtype());
  return x.dim() == 3 ? out : out.squeeze(0);
}

}  // namespace sinter
