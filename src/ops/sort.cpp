// topk, the first k elements along a dim in Note [topk order]; sort and argsort, topk of the whole
// dim; searchsorted and bucketize, a binary search (Note [searchsorted]); unique and unique_dim,
// of sort.
#include "kern/sort.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter {

std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest) {
  SINTER_PROFILE_OP("topk", a);
  const char* op = "topk";
  SINTER_CHECK(a.defined(), op, ": undefined tensor argument");
  const int64_t nd = std::max<int64_t>(a.dim(), 1);
  SINTER_CHECK(dim >= -nd && dim < nd, op, ": dim ", dim, " out of range for a tensor with ",
               a.dim(), " dims");
  const int64_t d = dim < 0 ? dim + nd : dim;
  if (a.dim() == 0) {
    // One element: k = 1 keeps the 0-dim shape.
    auto [v, i] = topk(a.reshape({1}), k, 0, largest);
    return k == 1 ? std::tuple<Tensor, Tensor>{v.reshape({}), i.reshape({})}
                  : std::tuple<Tensor, Tensor>{v, i};
  }
  const int64_t n = a.size(d);
  SINTER_CHECK(k >= 0 && k <= n, op, ": k = ", k, " is out of range for dim ", dim, " of size ", n,
               " (shape ", shape_str(a.shape()), ")");
  // The kernel takes rows along the last dim: d moves last, and back after.
  std::vector<int64_t> perm, inverse(static_cast<size_t>(nd));
  for (int64_t j = 0; j < nd; ++j) {
    if (j != d) perm.push_back(j);
  }
  perm.push_back(d);
  for (int64_t j = 0; j < nd; ++j) inverse[static_cast<size_t>(perm[j])] = j;
  Tensor src;
  {
    NoGradGuard ng;
    src = a.permute(perm).contiguous();
  }
  Shape rows_shape = src.shape();
  rows_shape.back() = k;
  const int64_t rows = n == 0 ? 0 : a.numel() / n;
  Tensor vals = empty(rows_shape, {.dtype = a.dtype(), .device = a.device()});
  Tensor idx = empty(rows_shape, {.dtype = DType::i64, .device = a.device()});
  if (rows > 0 && k > 0) {
    SINTER_DISPATCH(a.device(), topk_rows, src.data_ptr(), a.dtype(), rows, n, k, largest,
                    vals.data_ptr(), static_cast<int64_t*>(idx.data_ptr()));
  }
  Tensor values = vals.permute(inverse).contiguous();
  Tensor indices = idx.permute(inverse).contiguous();
  if (needs_grad({&a})) {
    SavedTensor si(indices, op);
    Shape ashape = a.shape();
    // The gradient of each value goes back to the position it was taken from.
    record(op, {&values}, {a}, [si, ashape, d](const Grads& g) {
      return Grads{scatter_into_zeros(ashape, d, si.get(), g[0])};
    });
  }
  return {values, indices};
}

std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending) {
  SINTER_PROFILE_OP("sort", a);
  check_defined("sort", a);
  const int64_t d = wrap_dim("sort", dim, a.dim());
  // Note [topk order] is PyTorch's stable sort order, descending when largest, ascending if not.
  return topk(a, a.dim() == 0 ? 1 : a.size(d), d, descending);
}

Tensor argsort(const Tensor& a, int64_t dim, bool descending) {
  SINTER_PROFILE_OP("argsort", a);
  return std::get<1>(sort(a, dim, descending));
}

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right) {
  SINTER_PROFILE_OP("searchsorted", sorted_sequence, values);
  const char* op = "searchsorted";
  check_defined(op, sorted_sequence);
  check_defined(op, values);
  const Tensor& b = sorted_sequence;
  SINTER_CHECK(b.dim() >= 1, op, ": sorted_sequence must have at least 1 dim, got shape ",
               shape_str(b.shape()));
  SINTER_CHECK(b.device() == values.device(), op, ": sorted_sequence is on ", b.device(),
               ", values on ", values.device());
  SINTER_CHECK(b.dtype() != DType::b8 && values.dtype() != DType::b8, op,
               ": bool tensors cannot be searched");
  if (b.dim() > 1) {
    const Shape lead(b.shape().begin(), b.shape().end() - 1);
    SINTER_CHECK(
        values.dim() == b.dim() && Shape(values.shape().begin(), values.shape().end() - 1) == lead,
        op, ": sorted_sequence of shape ", shape_str(b.shape()),
        " needs values with the same leading dims ", shape_str(lead), ", got shape ",
        shape_str(values.shape()));
  }
  NoGradGuard ng;
  // Both in their result type; each value searches its row of boundaries (the one row of 1-D
  // boundaries) with Note [searchsorted]'s binary search.
  const DType dt = result_type(b, values);  // (a 0-d value takes the boundaries' dtype, as torch)
  const Tensor bc = b.to(dt).contiguous(), vc = values.to(dt).contiguous();
  const int64_t m = b.size(-1), rows = b.dim() == 1 ? 1 : b.numel() / std::max<int64_t>(m, 1);
  Tensor out = zeros(values.shape(), {.dtype = DType::i64, .device = values.device()});
  const int64_t k = b.dim() == 1 ? vc.numel() : (values.dim() == 0 ? 1 : values.size(-1));
  if (m > 0 && vc.numel() > 0) {
    SINTER_DISPATCH(values.device(), searchsorted_rows, bc.data_ptr(), vc.data_ptr(), dt, rows, m,
                    k, right, static_cast<int64_t*>(out.data_ptr()));
  }
  return out;
}

Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool right) {
  SINTER_PROFILE_OP("bucketize", input, boundaries);
  check_defined("bucketize", input);
  check_defined("bucketize", boundaries);
  SINTER_CHECK(boundaries.dim() == 1, "bucketize: boundaries must be 1-D, got shape ",
               shape_str(boundaries.shape()));
  return searchsorted(boundaries, input, right);
}

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& a, bool return_inverse,
                                          bool return_counts) {
  SINTER_PROFILE_OP("unique", a);
  check_defined("unique", a);
  NoGradGuard ng;
  const int64_t n = a.numel();
  // Sorted, each run of equal values is one group (NaN equals nothing, so each is its own):
  // s (n) sorted, first (n) true where a group starts, starts (groups) where each does.
  const auto [s, order] = sort(a.flatten());
  Tensor first = ones({n}, {.dtype = DType::b8, .device = a.device()});
  if (n > 1) first.narrow(0, 1, n - 1).copy_(ne(s.narrow(0, 1, n - 1), s.narrow(0, 0, n - 1)));
  const Tensor starts = nonzero(first).reshape({-1});
  const int64_t groups = starts.numel();
  Tensor inverse, counts;
  if (return_inverse) {
    // Sorted element j is a[order[j]], in group cumsum(first)[j] - 1: read that at the inverse
    // permutation of order.
    const Tensor group = sub(cumsum(first, 0), 1);
    inverse = index_select(group, 0, argsort(order)).reshape(a.shape());
  }
  if (return_counts) {
    const Tensor bounds = cat(
        {starts, full({1}, static_cast<double>(n), {.dtype = DType::i64, .device = a.device()})});
    counts = sub(bounds.narrow(0, 1, groups), bounds.narrow(0, 0, groups));
  }
  return {index_select(s, 0, starts), inverse, counts};
}

std::tuple<Tensor, Tensor, Tensor> unique_dim(const Tensor& a, int64_t dim, bool return_inverse,
                                              bool return_counts) {
  SINTER_PROFILE_OP("unique_dim", a);
  const char* op = "unique_dim";
  check_defined(op, a);
  SINTER_CHECK(a.dim() > 0, op, ": dim ", dim, " of a tensor with no dimensions");
  const int64_t d = wrap_dim(op, dim, a.dim());
  NoGradGuard ng;
  const int64_t n = a.size(d);
  const TensorOptions i64{.dtype = DType::i64, .device = a.device()};
  // The slices as rows: (n, r).
  std::vector<int64_t> perm{d};
  for (int64_t j = 0; j < a.dim(); ++j) {
    if (j != d) perm.push_back(j);
  }
  const Tensor moved = a.permute(perm).contiguous();
  const int64_t r = n == 0 ? 0 : moved.numel() / n;
  SINTER_CHECK(n == 0 || r > 0, op, ": input of shape ", shape_str(a.shape()),
               " has dims of size 0 other than dim ", d, " (unique cannot take its slices)");
  if (n == 0) return {a.clone(), empty({0}, i64), empty({0}, i64)};
  const Tensor rows = moved.reshape({n, r});
  // Lexicographic order by stable sorts, the last element first.
  Tensor order = arange(0, static_cast<double>(n), 1, i64);
  for (int64_t c = r - 1; c >= 0; --c) {
    order = index_select(order, 0, argsort(index_select(rows.select(1, c), 0, order)));
  }
  const Tensor sorted_rows = index_select(rows, 0, order);
  // A group starts where a row differs from the one before (a NaN differs from everything).
  Tensor first = ones({n}, {.dtype = DType::b8, .device = a.device()});
  if (n > 1) {
    const Tensor differ = ne(sorted_rows.narrow(0, 1, n - 1), sorted_rows.narrow(0, 0, n - 1));
    first.narrow(0, 1, n - 1).copy_(gt(sum(differ.to(DType::i64), {1}), 0.0));
  }
  const Tensor starts = nonzero(first).reshape({-1});
  const int64_t groups = starts.numel();
  std::vector<int64_t> back(static_cast<size_t>(a.dim()));
  for (int64_t j = 0; j < a.dim(); ++j) back[static_cast<size_t>(perm[j])] = j;
  const Tensor values =
      index_select(moved, 0, index_select(order, 0, starts)).permute(back).contiguous();
  Tensor inverse, counts;
  if (return_inverse) inverse = index_select(sub(cumsum(first, 0), 1), 0, argsort(order));
  if (return_counts) {
    const Tensor bounds = cat({starts, full({1}, static_cast<double>(n), i64)});
    counts = sub(bounds.narrow(0, 1, groups), bounds.narrow(0, 0, groups));
  }
  return {values, inverse, counts};
}

}  // namespace sinter
