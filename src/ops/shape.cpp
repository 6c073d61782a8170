// Shape ops: views that share storage (reshape, permute, narrow, select, slice, expand, ...) and
// the ops that build new tensors from pieces (cat, stack, index_select, gather, scatter_add), with
// their backwards.
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

namespace {

int64_t wrap(const char* op, int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  SINTER_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for a tensor with ", ndim,
               " dims");
  return dim < 0 ? dim + n : dim;
}

void check_defined(const char* op, const Tensor& t) {
  SINTER_CHECK(t.defined(), op, ": undefined tensor argument");
}

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
  const int64_t s = wrap("flatten", start_dim, dim()), e = wrap("flatten", end_dim, dim());
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
  const int64_t w = wrap("squeeze", d, dim());
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
    p[i] = wrap("permute", dims[i], dim());
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
  const int64_t w0 = wrap("transpose", d0, dim()), w1 = wrap("transpose", d1, dim());
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
  const int64_t w = wrap("narrow", d, dim());
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
  const int64_t w = wrap("select", d, dim());
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
  const int64_t w = wrap("slice", d, dim());
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
Tensor reshape(const Tensor& a, const Shape& s) {
  SINTER_PROFILE_OP("reshape", a);
  check_defined("reshape", a);
  return a.reshape(s);
}
Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  SINTER_PROFILE_OP("transpose", a);
  check_defined("transpose", a);
  return a.transpose(d0, d1);
}
Tensor permute(const Tensor& a, const std::vector<int64_t>& d) {
  SINTER_PROFILE_OP("permute", a);
  check_defined("permute", a);
  return a.permute(d);
}
Tensor squeeze(const Tensor& a, int64_t d) {
  SINTER_PROFILE_OP("squeeze", a);
  check_defined("squeeze", a);
  return a.squeeze(d);
}
Tensor unsqueeze(const Tensor& a, int64_t d) {
  SINTER_PROFILE_OP("unsqueeze", a);
  check_defined("unsqueeze", a);
  return a.unsqueeze(d);
}
Tensor narrow(const Tensor& a, int64_t d, int64_t s, int64_t l) {
  SINTER_PROFILE_OP("narrow", a);
  check_defined("narrow", a);
  return a.narrow(d, s, l);
}
Tensor select(const Tensor& a, int64_t d, int64_t i) {
  SINTER_PROFILE_OP("select", a);
  check_defined("select", a);
  return a.select(d, i);
}
Tensor expand(const Tensor& a, const Shape& s) {
  SINTER_PROFILE_OP("expand", a);
  check_defined("expand", a);
  return a.expand(s);
}
Tensor flatten(const Tensor& a, int64_t s, int64_t e) {
  SINTER_PROFILE_OP("flatten", a);
  check_defined("flatten", a);
  return a.flatten(s, e);
}

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
  const int64_t w = wrap("cat", dim, first.dim());
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

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  SINTER_PROFILE_OP("split", a);
  check_defined("split", a);
  SINTER_CHECK(split_size > 0, "split: split_size must be positive, got ", split_size);
  const int64_t w = wrap("split", dim, a.dim());
  const int64_t n = a.size(w);
  std::vector<Tensor> out;
  for (int64_t off = 0; off < n || (n == 0 && out.empty()); off += split_size) {
    out.push_back(a.narrow(w, off, std::min(split_size, n - off)));
  }
  return out;
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  SINTER_PROFILE_OP("split", a);
  check_defined("split", a);
  const int64_t w = wrap("split", dim, a.dim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    SINTER_CHECK(s >= 0, "split: negative size in ", sizes);
    total += s;
  }
  SINTER_CHECK(total == a.size(w), "split: sizes ", sizes, " sum to ", total, ", but dim ", dim,
               " has size ", a.size(w));
  std::vector<Tensor> out;
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(a.narrow(w, off, s));
    off += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  SINTER_PROFILE_OP("chunk", a);
  check_defined("chunk", a);
  SINTER_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  const int64_t n = a.size(wrap("chunk", dim, a.dim()));
  const int64_t size = std::max<int64_t>((n + chunks - 1) / chunks, 1);
  return split(a, size, dim);
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  SINTER_PROFILE_OP("index_select", a, index);
  check_defined("index_select", a);
  check_defined("index_select", index);
  SINTER_CHECK(index.dtype() == DType::i64, "index_select: index must be i64, got ", index.dtype());
  SINTER_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape ",
               shape_str(index.shape()));
  SINTER_CHECK(index.device() == a.device(), "index_select: index on ", index.device(),
               ", tensor on ", a.device());
  SINTER_CHECK(a.dim() > 0, "index_select: cannot index a 0-dim tensor");
  const int64_t w = wrap("index_select", dim, a.dim());
  const int64_t in_dim = a.size(w);
  Tensor idx = index.reshape({-1}).contiguous();
  const int64_t nidx = idx.numel();
  if (nidx > 0) {
    const auto lo = min(idx).item<int64_t>(), hi = max(idx).item<int64_t>();
    SINTER_CHECK(lo >= 0 && hi < in_dim, "index_select: index out of range: values span [", lo,
                 ", ", hi, "] but dim ", dim, " has size ", in_dim);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < w; ++d) outer *= a.size(d);
  for (int64_t d = w + 1; d < a.dim(); ++d) inner *= a.size(d);
  Shape shape = a.shape();
  shape[w] = nidx;
  Tensor out = empty(shape, {.dtype = a.dtype(), .device = a.device()});
  if (out.numel() > 0) {
    Tensor src;
    {
      NoGradGuard ng;
      src = a.contiguous();
    }
    SINTER_DISPATCH(a.device(), index_select, src.data_ptr(), a.dtype(), outer, in_dim, inner,
                    static_cast<const int64_t*>(idx.data_ptr()), nidx, out.data_ptr());
  }
  if (needs_grad({&a})) {
    autograd::SavedTensor si(idx, "index_select");
    Shape ashape = a.shape();
    record("index_select", {&out}, {a}, [si, ashape, outer, in_dim, inner](const Grads& g) {
      Tensor i = si.get();
      Tensor gc = g[0].contiguous();
      Tensor z = zeros(ashape, {.dtype = gc.dtype(), .device = gc.device()});
      if (gc.numel() > 0) {
        SINTER_DISPATCH(gc.device(), index_add, z.data_ptr(), gc.dtype(), outer, in_dim, inner,
                        static_cast<const int64_t*>(i.data_ptr()), i.numel(), gc.data_ptr());
      }
      return Grads{z};
    });
  }
  return out;
}

namespace {

// The kernels' view of an op along dim d over an index of shape `index_shape` into a large operand
// with `strides` (Note [gather layout]). Dims where the index has size 1 add nothing to an offset
// and are dropped (except d); neighbours that are one run of the large operand are merged.
kern::GatherGeom gather_geom(const char* op, const Shape& index_shape, const Shape& strides,
                             int64_t d) {
  Shape sizes, st;
  int64_t gdim = -1;
  for (int64_t k = 0; k < static_cast<int64_t>(index_shape.size()); ++k) {
    if (k != d && index_shape[k] == 1) continue;
    const int64_t last = static_cast<int64_t>(sizes.size()) - 1;
    if (k != d && last >= 0 && last != gdim && st.back() == strides[k] * index_shape[k]) {
      sizes.back() *= index_shape[k];
      st.back() = strides[k];
      continue;
    }
    if (k == d) gdim = last + 1;
    sizes.push_back(index_shape[k]);
    st.push_back(strides[k]);
  }
  SINTER_CHECK(static_cast<int>(sizes.size()) <= kern::kMaxDims, op, ": ", sizes.size(),
               " dims remain after merging (at most ", kern::kMaxDims, ")");
  kern::GatherGeom g;
  g.ndim = static_cast<int>(sizes.size());
  g.dim = static_cast<int>(gdim);
  g.numel = numel_of(index_shape);
  for (int k = 0; k < g.ndim; ++k) {
    g.sizes[k] = sizes[k];
    g.strides[k] = st[k];
  }
  return g;
}

// Checks the index of gather and scatter_add against `a` (PyTorch's rules): i64, on a's device, of
// a's rank, no larger than a in the dims other than dim, values in [0, a.size(dim)). Returns the
// wrapped dim.
int64_t check_gather_index(const char* op, const Tensor& a, int64_t dim, const Tensor& index) {
  check_defined(op, a);
  check_defined(op, index);
  SINTER_CHECK(index.dtype() == DType::i64, op, ": index must be i64, got ", index.dtype());
  SINTER_CHECK(index.device() == a.device(), op, ": index on ", index.device(), ", tensor on ",
               a.device());
  SINTER_CHECK(index.dim() == a.dim(), op, ": index has ", index.dim(), " dims but the tensor has ",
               a.dim(), " (index shape ", shape_str(index.shape()), ", tensor shape ",
               shape_str(a.shape()), ")");
  const int64_t d = wrap(op, dim, a.dim());
  for (int64_t k = 0; k < a.dim(); ++k) {
    SINTER_CHECK(k == d || index.size(k) <= a.size(k), op, ": index shape ",
                 shape_str(index.shape()), " is larger than the tensor's ", shape_str(a.shape()),
                 " in dim ", k, ", which is not dim ", dim);
  }
  if (index.numel() > 0) {
    const int64_t n = a.dim() == 0 ? 1 : a.size(d);
    const auto lo = min(index).item<int64_t>(), hi = max(index).item<int64_t>();
    SINTER_CHECK(lo >= 0 && hi < n, op, ": index out of range: values span [", lo, ", ", hi,
                 "] but dim ", dim, " has size ", n);
  }
  return d;
}

// out = a gathered along d at idx (checked, contiguous), of idx's shape; records nothing.
Tensor gather_kernel(const Tensor& a, int64_t d, const Tensor& idx) {
  Tensor out = empty(idx.shape(), {.dtype = a.dtype(), .device = a.device()});
  if (out.numel() > 0) {
    SINTER_DISPATCH(a.device(), gather, a.data_ptr(), a.dtype(),
                    gather_geom("gather", idx.shape(), a.strides(), d),
                    static_cast<const int64_t*>(idx.data_ptr()), out.data_ptr());
  }
  return out;
}

// out (contiguous) += src (idx's shape) scattered along d at idx (checked, contiguous); records
// nothing.
void scatter_add_kernel(const Tensor& out, int64_t d, const Tensor& idx, const Tensor& src) {
  if (idx.numel() == 0) return;
  Tensor sc;
  {
    NoGradGuard ng;
    sc = src.contiguous();
  }
  SINTER_DISPATCH(out.device(), scatter_add, out.data_ptr(), out.dtype(),
                  gather_geom("scatter_add", idx.shape(), out.strides(), d),
                  static_cast<const int64_t*>(idx.data_ptr()), sc.data_ptr());
}

}  // namespace

Tensor scatter_into_zeros(const Shape& shape, int64_t d, const Tensor& index, const Tensor& src) {
  Tensor z = zeros(shape, {.dtype = src.dtype(), .device = src.device()});
  scatter_add_kernel(z, d, index, src);
  return z;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  SINTER_PROFILE_OP("gather", a, index);
  const int64_t d = check_gather_index("gather", a, dim, index);
  if (a.dim() == 0) return gather(a.reshape({1}), d, index.reshape({1})).reshape({});
  Tensor idx = index.contiguous();
  Tensor out = gather_kernel(a, d, idx);
  if (needs_grad({&a})) {
    SINTER_CHECK(is_floating(a.dtype()), "gather: gradients need a floating tensor, got dtype ",
                 a.dtype());
    SavedTensor si(idx, "gather");
    Shape ashape = a.shape();
    // The adjoint of a gather: the gradient added back where each element came from.
    record("gather", {&out}, {a}, [si, ashape, d](const Grads& g) {
      return Grads{scatter_into_zeros(ashape, d, si.get(), g[0])};
    });
  }
  return out;
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  SINTER_PROFILE_OP("scatter_add", a, index, src);
  const char* op = "scatter_add";
  const int64_t d = check_gather_index(op, a, dim, index);
  check_defined(op, src);
  SINTER_CHECK(is_floating(a.dtype()), op, ": expected a floating tensor, got dtype ", a.dtype());
  SINTER_CHECK(src.dtype() == a.dtype() && src.device() == a.device(), op, ": src is ", src.dtype(),
               " on ", src.device(), ", the tensor ", a.dtype(), " on ", a.device());
  SINTER_CHECK(src.dim() == index.dim(), op, ": src has ", src.dim(), " dims but the index has ",
               index.dim());
  for (int64_t k = 0; k < src.dim(); ++k) {
    SINTER_CHECK(index.size(k) <= src.size(k), op, ": index shape ", shape_str(index.shape()),
                 " is larger than src's ", shape_str(src.shape()), " in dim ", k);
  }
  if (a.dim() == 0) {
    return scatter_add(a.reshape({1}), d, index.reshape({1}), src.reshape({1})).reshape({});
  }
  // Only src's leading block of the index's shape is added, as in PyTorch.
  Tensor s = src;
  for (int64_t k = 0; k < s.dim(); ++k) {
    if (s.size(k) != index.size(k)) s = s.narrow(k, 0, index.size(k));
  }
  Tensor idx = index.contiguous();
  Tensor out = empty(a.shape(), {.dtype = a.dtype(), .device = a.device()});
  {
    NoGradGuard ng;
    out.copy_(a);
  }
  scatter_add_kernel(out, d, idx, s);
  if (needs_grad({&a, &s})) {
    SavedTensor si(idx, op);
    record(op, {&out}, {a, s}, [si, d](const Grads& g) {
      return Grads{g[0], gather_kernel(g[0], d, si.get())};
    });
  }
  return out;
}

}  // namespace sinter
