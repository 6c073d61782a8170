// The index family (src/kern/index.h): index_select and index_add, gather and scatter_add (Note
// [gather layout]) and embedding, which gathers rows with the index_select kernel and adds their
// gradients back with index_add, with the deferred device check of its indices.
#include "kern/index.h"

#include <optional>

#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter {

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  SINTER_PROFILE_OP("index_select", a, index);
  check_defined("index_select", a);
  check_defined("index_select", index);
  SINTER_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32,
               "index_select: index must be i64 or i32, got ", index.dtype());
  SINTER_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape ",
               shape_str(index.shape()));
  SINTER_CHECK(index.device() == a.device(), "index_select: index on ", index.device(),
               ", tensor on ", a.device());
  SINTER_CHECK(a.dim() > 0, "index_select: cannot index a 0-dim tensor");
  const int64_t w = wrap_dim("index_select", dim, a.dim());
  const int64_t in_dim = a.size(w);
  Tensor idx = index.to(DType::i64).reshape({-1}).contiguous();  // i32 read as i64, as PyTorch
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

Tensor index_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src,
                 double alpha) {
  SINTER_PROFILE_OP("index_add", a, index, src);
  const char* op = "index_add";
  check_defined(op, a);
  check_defined(op, index);
  check_defined(op, src);
  SINTER_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op,
               ": index must be i64 or i32, got ", index.dtype());
  SINTER_CHECK(index.dim() <= 1, op, ": index must be 1-D, got shape ", shape_str(index.shape()));
  SINTER_CHECK(is_floating(a.dtype()), op, ": expected a floating tensor, got dtype ", a.dtype());
  SINTER_CHECK(
      src.dtype() == a.dtype() && src.device() == a.device() && index.device() == a.device(), op,
      ": src is ", src.dtype(), " on ", src.device(), ", index on ", index.device(),
      ", the tensor ", a.dtype(), " on ", a.device());
  SINTER_CHECK(a.dim() > 0, op, ": cannot index a 0-dim tensor");
  const int64_t w = wrap_dim(op, dim, a.dim());
  Tensor idx = index.to(DType::i64).reshape({-1}).contiguous();
  const int64_t nidx = idx.numel(), out_dim = a.size(w);
  Shape want = a.shape();
  want[w] = nidx;
  SINTER_CHECK(src.shape() == want, op, ": src of shape ", shape_str(src.shape()),
               " does not match the tensor ", shape_str(a.shape()), " with ", nidx,
               " indices along dim ", dim, " (expected ", shape_str(want), ")");
  if (nidx > 0) {
    const auto lo = min(idx).item<int64_t>(), hi = max(idx).item<int64_t>();
    SINTER_CHECK(lo >= 0 && hi < out_dim, op, ": index out of range: values span [", lo, ", ", hi,
                 "] but dim ", dim, " has size ", out_dim);
  }
  const RowView v = row_view(a.shape(), w);
  Tensor out = empty(a.shape(), {.dtype = a.dtype(), .device = a.device()});
  {
    NoGradGuard ng;
    out.copy_(a);
    Tensor s = (alpha == 1.0 ? src : mul(src, alpha)).contiguous();
    if (s.numel() > 0) {
      SINTER_DISPATCH(a.device(), index_add, out.data_ptr(), a.dtype(), v.outer, out_dim, v.inner,
                      static_cast<const int64_t*>(idx.data_ptr()), nidx, s.data_ptr());
    }
  }
  if (needs_grad({&a, &src})) {
    SavedTensor si(idx, op);
    record(op, {&out}, {a, src}, [si, w, alpha](const Grads& g) {
      Tensor gs = index_select(g[0], w, si.get());
      return Grads{g[0], alpha == 1.0 ? gs : mul(gs, alpha)};
    });
  }
  return out;
}

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
  const int64_t d = wrap_dim(op, dim, a.dim());
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

Tensor scatter_source(const char* op, const Tensor& a, const Tensor& index, const Tensor& src) {
  check_defined(op, src);
  SINTER_CHECK(src.dtype() == a.dtype() && src.device() == a.device(), op, ": src is ", src.dtype(),
               " on ", src.device(), ", the tensor ", a.dtype(), " on ", a.device());
  SINTER_CHECK(src.dim() == index.dim(), op, ": src has ", src.dim(), " dims but the index has ",
               index.dim());
  for (int64_t k = 0; k < src.dim(); ++k) {
    SINTER_CHECK(index.size(k) <= src.size(k), op, ": index shape ", shape_str(index.shape()),
                 " is larger than src's ", shape_str(src.shape()), " in dim ", k);
  }
  // Only src's leading block of the index's shape takes part, as in PyTorch.
  Tensor s = src;
  for (int64_t k = 0; k < s.dim(); ++k) {
    if (s.size(k) != index.size(k)) s = s.narrow(k, 0, index.size(k));
  }
  return s;
}

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
  SINTER_CHECK(is_floating(a.dtype()), op, ": expected a floating tensor, got dtype ", a.dtype());
  if (a.dim() == 0) {
    return scatter_add(a.reshape({1}), d, index.reshape({1}), src.reshape({1})).reshape({});
  }
  Tensor s = scatter_source(op, a, index, src);
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

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  SINTER_PROFILE_OP("embedding", weight, indices);
  const char* op = "embedding";
  SINTER_CHECK(weight.defined(), op, ": undefined weight");
  SINTER_CHECK(indices.defined(), op, ": undefined indices");
  SINTER_CHECK(weight.dim() == 2, op, ": weight must be 2-D (num_embeddings, dim), got shape ",
               shape_str(weight.shape()));
  SINTER_CHECK(indices.dtype() == DType::i64 || indices.dtype() == DType::i32, op,
               ": indices must be i64 or i32, got dtype ", indices.dtype());
  SINTER_CHECK(indices.device() == weight.device(), op, ": indices are on ", indices.device(),
               " but the weight is on ", weight.device());
  const int64_t num = weight.size(0), dim = weight.size(1);
  std::optional<int64_t> pad = padding_idx;
  if (pad) {
    SINTER_CHECK(*pad >= -num && *pad < num, op, ": padding_idx ", *pad,
                 " out of range for a table of ", num, " rows");
    if (*pad < 0) *pad += num;
  }
  // i32 indices are read as i64, as PyTorch takes either.
  Tensor idx = indices.to(DType::i64).reshape({-1}).contiguous();
  const int64_t nidx = idx.numel();
  // Known on the host: no index fits a table without rows (the device check's skip value, 0,
  // would pass index 0 there).
  SINTER_CHECK(num > 0 || nidx == 0, op, ": the table has no rows, but ", nidx,
               " indices were given");
  if (nidx > 0 && idx.device().is_cuda()) {
    // On the device, reported at the next synchronization (Note [deferred device checks]); an
    // out-of-range index gives a row of zeros meanwhile.
    SINTER_DISPATCH(idx.device(), check_indices, static_cast<const int64_t*>(idx.data_ptr()), nidx,
                    0, num, 0, kern::DeviceCheck::EmbeddingIndex);
  } else if (nidx > 0) {
    const auto lo = min(idx).item<int64_t>(), hi = max(idx).item<int64_t>();
    SINTER_CHECK(lo >= 0 && hi < num, op, ": index out of range: values span [", lo, ", ", hi,
                 "] but the table has ", num, " rows");
  }
  Tensor wc;
  {
    NoGradGuard ng;
    wc = weight.contiguous();
  }
  Tensor flat = empty({nidx, dim}, {.dtype = weight.dtype(), .device = weight.device()});
  if (flat.numel() > 0) {
    SINTER_DISPATCH(weight.device(), index_select, wc.data_ptr(), weight.dtype(), 1, num, dim,
                    static_cast<const int64_t*>(idx.data_ptr()), nidx, flat.data_ptr());
  }
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);
  Tensor out = flat.reshape(out_shape);
  if (needs_grad({&weight})) {
    SINTER_CHECK(is_floating(weight.dtype()), op, ": gradients need a floating weight, got dtype ",
                 weight.dtype());
    SavedTensor si(idx, op);
    record(op, {&out}, {weight}, [si, pad, num, dim, nidx](const Grads& g) {
      Tensor i = si.get();
      Tensor gc = g[0].reshape({nidx, dim}).contiguous();
      Tensor z = zeros({num, dim}, {.dtype = gc.dtype(), .device = gc.device()});
      if (gc.numel() > 0) {
        SINTER_DISPATCH(gc.device(), index_add, z.data_ptr(), gc.dtype(), 1, num, dim,
                        static_cast<const int64_t*>(i.data_ptr()), nidx, gc.data_ptr());
      }
      if (pad) z.select(0, *pad).zero_();
      return Grads{z};
    });
  }
  return out;
}

}  // namespace sinter
