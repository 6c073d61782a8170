// Tensors rearranged or built from others: diagonal (a view), diag, flip, roll, kron, meshgrid,
// repeat_interleave, nonzero and one_hot, composed of views, index_select, cat and the elementwise
// ops (no kernels of their own).
#include <algorithm>
#include <string>
#include <vector>

#include "internal/autograd_impl.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter {

Tensor diagonal(const Tensor& a, int64_t offset, int64_t dim1, int64_t dim2) {
  SINTER_PROFILE_OP("diagonal", a);
  check_defined("diagonal", a);
  SINTER_CHECK(a.dim() >= 2, "diagonal: expected a tensor with at least 2 dims, got shape ",
               shape_str(a.shape()));
  const int64_t d1 = wrap_dim("diagonal", dim1, a.dim()), d2 = wrap_dim("diagonal", dim2, a.dim());
  SINTER_CHECK(d1 != d2, "diagonal: dim1 and dim2 are the same dim ", d1, " (dim1 ", dim1,
               ", dim2 ", dim2, ")");
  const int64_t n = std::max<int64_t>(offset >= 0 ? std::min(a.size(d1), a.size(d2) - offset)
                                                  : std::min(a.size(d1) + offset, a.size(d2)),
                                      0);
  int64_t start = a.storage_offset();
  if (n > 0) start += offset >= 0 ? offset * a.stride(d2) : -offset * a.stride(d1);
  Shape shape, strides;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d == d1 || d == d2) continue;
    shape.push_back(a.size(d));
    strides.push_back(a.stride(d));
  }
  shape.push_back(n);
  strides.push_back(a.stride(d1) + a.stride(d2));
  Tensor out = make_view(a, shape, strides, start);
  if (needs_grad({&a})) {
    const Shape ashape = a.shape();
    const DType dtype = a.dtype();
    const Device device = a.device();
    // The gradient goes to the diagonal of zeros of a's shape.
    record("diagonal", {&out}, {a}, [=](const Grads& g) {
      Tensor z = zeros(ashape, {.dtype = dtype, .device = device});
      diagonal(z, offset, d1, d2).copy_(g[0]);
      return Grads{z};
    });
  }
  return out;
}

Tensor diag(const Tensor& a, int64_t k) {
  SINTER_PROFILE_OP("diag", a);
  check_defined("diag", a);
  SINTER_CHECK(a.dim() == 1 || a.dim() == 2, "diag: expected a 1-D or 2-D tensor, got shape ",
               shape_str(a.shape()));
  if (a.dim() == 2) return diagonal(a, k, 0, 1).clone();
  // 1-D: a on diagonal k of a square of zeros; the gradient is that diagonal.
  const int64_t n = a.size(0) + (k >= 0 ? k : -k);
  Tensor out;
  {
    NoGradGuard ng;
    out = zeros({n, n}, {.dtype = a.dtype(), .device = a.device()});
    diagonal(out, k, 0, 1).copy_(a);
  }
  if (needs_grad({&a})) {
    record("diag", {&out}, {a}, [k](const Grads& g) { return Grads{diagonal(g[0], k, 0, 1)}; });
  }
  return out;
}

Tensor flip(const Tensor& a, const std::vector<int64_t>& dims) {
  SINTER_PROFILE_OP("flip", a);
  check_defined("flip", a);
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(a.dim(), 1)), false);
  Tensor out = a;
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim("flip", dim, a.dim());
    SINTER_CHECK(!seen[d], "flip: dim ", d, " appears more than once in dims ", dims);
    seen[d] = true;
    if (a.dim() == 0 || a.size(d) < 2) continue;
    const int64_t n = a.size(d);
    out = index_select(out, d,
                       arange(static_cast<double>(n - 1), -1.0, -1.0,
                              {.dtype = DType::i64, .device = a.device()}));
  }
  // Always a new tensor, as PyTorch's.
  return out.is_same(a) ? a.clone() : out;
}

Tensor roll(const Tensor& a, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  SINTER_PROFILE_OP("roll", a);
  check_defined("roll", a);
  if (dims.empty()) {
    SINTER_CHECK(shifts.size() == 1,
                 "roll: without dims, one shift rolls the flattened tensor; got ", shifts.size(),
                 " shifts ", shifts);
    return roll(a.flatten(), shifts, {0}).reshape(a.shape());
  }
  SINTER_CHECK(shifts.size() == dims.size(), "roll: ", shifts.size(), " shifts ", shifts, " for ",
               dims.size(), " dims ", dims);
  Tensor out = a;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim("roll", dims[i], a.dim());
    if (a.dim() == 0) continue;
    const int64_t n = a.size(d);
    const int64_t s = n == 0 ? 0 : ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    // The last s elements come first.
    out = cat({out.narrow(d, n - s, s), out.narrow(d, 0, n - s)}, d);
  }
  return out.is_same(a) ? a.clone() : out;
}

Tensor kron(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("kron", a, b);
  check_defined("kron", a);
  check_defined("kron", b);
  const int64_t nd = std::max(a.dim(), b.dim());
  // a as (a0, 1, a1, 1, ...) times b as (1, b0, 1, b1, ...): (a0, b0, a1, b1, ...).
  Shape sa, sb, out;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t da = d - (nd - a.dim()), db = d - (nd - b.dim());
    const int64_t na = da >= 0 ? a.size(da) : 1, nb = db >= 0 ? b.size(db) : 1;
    sa.insert(sa.end(), {na, 1});
    sb.insert(sb.end(), {1, nb});
    out.push_back(na * nb);
  }
  return mul(a.reshape(sa), b.reshape(sb)).reshape(out);
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  SINTER_PROFILE_OP("meshgrid", tensors);
  SINTER_CHECK(!tensors.empty(), "meshgrid: expected at least one tensor");
  SINTER_CHECK(indexing == "ij" || indexing == "xy",
               "meshgrid: indexing must be \"ij\" or \"xy\", got \"", indexing, "\"");
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_defined("meshgrid", tensors[i]);
    SINTER_CHECK(tensors[i].dim() <= 1, "meshgrid: expected 0-D or 1-D tensors, tensor ", i,
                 " has shape ", shape_str(tensors[i].shape()));
    SINTER_CHECK(
        tensors[i].dtype() == tensors[0].dtype() && tensors[i].device() == tensors[0].device(),
        "meshgrid: tensor ", i, " is ", tensors[i].dtype(), " on ", tensors[i].device(),
        ", tensor 0 ", tensors[0].dtype(), " on ", tensors[0].device());
  }
  // "xy" is "ij" of the first two swapped (grids of (len_1, len_0, ...)), the grids swapped back.
  const bool xy = indexing == "xy" && tensors.size() >= 2;
  std::vector<Tensor> in = tensors;
  if (xy) std::swap(in[0], in[1]);
  Shape shape;
  for (const Tensor& t : in) shape.push_back(t.numel());
  std::vector<Tensor> grids;
  for (size_t i = 0; i < in.size(); ++i) {
    Shape one(shape.size(), 1);
    one[i] = shape[i];
    grids.push_back(in[i].reshape(one).expand(shape));
  }
  if (xy) std::swap(grids[0], grids[1]);
  return grids;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  SINTER_PROFILE_OP("one_hot", indices);
  check_defined("one_hot", indices);
  SINTER_CHECK(indices.dtype() == DType::i64, "one_hot: expected i64 indices, got dtype ",
               indices.dtype());
  SINTER_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 or non-negative, got ",
               num_classes);
  if (indices.numel() == 0) {
    SINTER_CHECK(num_classes >= 0,
                 "one_hot: cannot infer num_classes from an empty tensor; pass num_classes");
  } else {
    const int64_t lo = min(indices).item<int64_t>(), hi = max(indices).item<int64_t>();
    SINTER_CHECK(lo >= 0, "one_hot: indices must be non-negative, got ", lo);
    if (num_classes < 0) num_classes = hi + 1;
    SINTER_CHECK(hi < num_classes, "one_hot: index ", hi, " is out of range for num_classes ",
                 num_classes);
  }
  const Tensor classes =
      arange(static_cast<double>(num_classes), {.dtype = DType::i64, .device = indices.device()});
  return eq(indices.unsqueeze(-1), classes).to(DType::i64);
}

namespace {

// a (flattened without dim) with slice i along the dim repeated counts[i] times: index_select
// at 0 (counts[0] times), 1 (counts[1] times), ...
Tensor repeat_slices(const Tensor& a, const std::vector<int64_t>& counts,
                     std::optional<int64_t> dim) {
  const Tensor x = !dim ? a.flatten() : (a.dim() == 0 ? a.reshape({1}) : a);
  const int64_t d = dim ? wrap_dim("repeat_interleave", *dim, a.dim()) : 0;
  const int64_t n = x.size(d);
  SINTER_CHECK(counts.size() == 1 || static_cast<int64_t>(counts.size()) == n,
               "repeat_interleave: ", counts.size(), " repeats for dim ", d, " of size ", n,
               " (shape ", shape_str(a.shape()), ")");
  std::vector<int64_t> index;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = counts[counts.size() == 1 ? 0 : i];
    SINTER_CHECK(r >= 0, "repeat_interleave: repeats must be non-negative, got ", r);
    index.insert(index.end(), static_cast<size_t>(r), i);
  }
  const auto len = static_cast<int64_t>(index.size());
  return index_select(x, d, from_vector<int64_t>(index, {len}).to(a.device()));
}

}  // namespace

Tensor repeat_interleave(const Tensor& a, int64_t repeats, std::optional<int64_t> dim) {
  SINTER_PROFILE_OP("repeat_interleave", a);
  check_defined("repeat_interleave", a);
  return repeat_slices(a, {repeats}, dim);
}

Tensor repeat_interleave(const Tensor& a, const Tensor& repeats, std::optional<int64_t> dim) {
  SINTER_PROFILE_OP("repeat_interleave", a, repeats);
  check_defined("repeat_interleave", a);
  check_defined("repeat_interleave", repeats);
  SINTER_CHECK(repeats.dtype() == DType::i64 && repeats.dim() <= 1,
               "repeat_interleave: repeats must be an i64 tensor of 0 or 1 dims, got ",
               repeats.dtype(), " of shape ", shape_str(repeats.shape()));
  return repeat_slices(a, repeats.to(Device::cpu()).to_vector<int64_t>(), dim);
}

Tensor nonzero(const Tensor& a) {
  SINTER_PROFILE_OP("nonzero", a);
  check_defined("nonzero", a);
  // The count decides the output's shape, so the mask comes to the host.
  const std::vector<int64_t> mask =
      ne(a.detach(), 0).to(Device::cpu()).to(DType::i64).to_vector<int64_t>();
  const Shape& shape = a.shape();
  std::vector<int64_t> out;
  int64_t count = 0;
  for (size_t flat = 0; flat < mask.size(); ++flat) {
    if (mask[flat] == 0) continue;
    ++count;
    // The row-major multi-index of `flat`, written back to front.
    const size_t at = out.size();
    out.resize(at + shape.size());
    auto rest = static_cast<int64_t>(flat);
    for (size_t k = shape.size(); k-- > 0;) {
      out[at + k] = rest % shape[k];
      rest /= shape[k];
    }
  }
  return from_vector<int64_t>(out, {count, a.dim()}).to(a.device());
}

}  // namespace sinter
