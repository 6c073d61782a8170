// Reductions over any set of dims: sum, prod, mean, var, amax/amin, max/min with indices,
// argmax/argmin, logsumexp; and the scans cumsum and cumprod. The reduced dims are moved last and
// the kernel reduces rows of a contiguous matrix.
#include "kern/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

// Sorted, wrapped, duplicate-free dims; all dims when `dims` is empty.
std::vector<int64_t> norm_dims(const char* op, const Tensor& a, const std::vector<int64_t>& dims) {
  SINTER_CHECK(a.defined(), op, ": undefined tensor argument");
  const int64_t nd = a.dim();
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) out.push_back(d);
    return out;
  }
  std::vector<bool> seen(std::max<int64_t>(nd, 1), false);
  for (int64_t d : dims) {
    const int64_t n = std::max<int64_t>(nd, 1);
    SINTER_CHECK(d >= -n && d < n, op, ": dim ", d, " out of range for a tensor with ", nd,
                 " dims");
    const int64_t w = d < 0 ? d + n : d;
    SINTER_CHECK(!seen[w], op, ": dim ", d, " appears more than once in ", dims);
    seen[w] = true;
    if (nd > 0) out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The shape with reduced dims kept as 1.
Shape keep_shape(const Shape& s, const std::vector<int64_t>& dims) {
  Shape k = s;
  for (int64_t d : dims) k[d] = 1;
  return k;
}

Shape drop_shape(const Shape& s, const std::vector<int64_t>& dims) {
  Shape k;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    if (!std::binary_search(dims.begin(), dims.end(), d)) k.push_back(s[d]);
  }
  return k;
}

struct RowsResult {
  Tensor values;   // keepdim shape
  Tensor indices;  // keepdim shape (Max/Min with indices only)
};

// The sums that run along their lines (sum_lines, Note [line sums]) rather than on a transposed
// copy: on the CPU, lines of kMinLineRows rows or more (its 17 partial sums per line and chunk then
// take at most about half the input's bytes) of kMinLineWidth or more; on CUDA, at most
// kMaxCudaLineRows rows (a thread sums each line in f32, in order) and kMinCudaLines lines or more.
constexpr int64_t kMinLineRows = 64;
constexpr int64_t kMinLineWidth = 16;
constexpr int64_t kMaxCudaLineRows = 1024;
constexpr int64_t kMinCudaLines = 4096;

// Reduces `a` over `dims` (normalized) with the row kernel; results have the keepdim shape.
RowsResult reduce_impl(const char* op, const Tensor& a, const std::vector<int64_t>& dims,
                       kern::ReduceOp rop, bool want_indices) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (!std::binary_search(dims.begin(), dims.end(), d)) perm.push_back(d);
  }
  int64_t r = 1;
  for (int64_t d : dims) {
    perm.push_back(d);
    r *= a.size(d);
  }
  if (rop == kern::ReduceOp::Max || rop == kern::ReduceOp::Min) {
    SINTER_CHECK(r > 0, op, ": cannot reduce over an empty dimension (shape ", shape_str(a.shape()),
                 ", dims ", dims, ")");
  }
  const int64_t outer = r == 0 ? numel_of(drop_shape(a.shape(), dims)) : a.numel() / r;
  const bool arith = rop == kern::ReduceOp::Sum || rop == kern::ReduceOp::Prod;
  const DType out_dtype = arith && is_integral(a.dtype()) ? DType::i64 : a.dtype();
  Shape kshape = keep_shape(a.shape(), dims);
  RowsResult res;
  res.values = empty(kshape, {.dtype = out_dtype, .device = a.device()});
  // A sum over consecutive dims that kept dims follow (a Linear's bias gradient, a broadcast's):
  // along its lines in place, with the bits of the rows of the transposed copy (Note [line sums]).
  // Where its lines are long enough for the lanes to pay (r >= kMinLineRows) and wide enough for
  // vectors (inner >= kMinLineWidth); on CUDA, where a thread a line is enough (lines of at most
  // kMaxCudaLineRows, summed in f32 in order) and the lines fill the device.
  const int64_t first = dims.empty() ? 0 : dims.front(), last = dims.empty() ? 0 : dims.back();
  if (rop == kern::ReduceOp::Sum && !dims.empty() &&
      last - first + 1 == static_cast<int64_t>(dims.size()) && last < a.dim() - 1) {
    int64_t lines_outer = 1, inner = 1;
    for (int64_t d = 0; d < first; ++d) lines_outer *= a.size(d);
    for (int64_t d = last + 1; d < a.dim(); ++d) inner *= a.size(d);
    const bool cpu = a.device().is_cpu();
    const bool lines = cpu ? r >= kMinLineRows && inner >= kMinLineWidth
                           : r <= kMaxCudaLineRows && lines_outer * inner >= kMinCudaLines;
    if (lines) {
      if (lines_outer * inner > 0) {
        Tensor src;
        {
          NoGradGuard ng;
          src = a.contiguous();
        }
        SINTER_DISPATCH(a.device(), sum_lines, src.data_ptr(), a.dtype(), lines_outer, r, inner,
                        res.values.data_ptr(), out_dtype);
      }
      return res;
    }
  }
  Tensor src;
  {
    NoGradGuard ng;
    src = a.permute(perm).contiguous();
  }
  if (want_indices) res.indices = empty(kshape, {.dtype = DType::i64, .device = a.device()});
  if (outer > 0) {
    SINTER_DISPATCH(a.device(), reduce_rows, src.data_ptr(), a.dtype(), outer, r, rop,
                    res.values.data_ptr(), out_dtype,
                    want_indices ? static_cast<int64_t*>(res.indices.data_ptr()) : nullptr);
  }
  return res;
}

Tensor finish_keepdim(const Tensor& t, const Shape& a_shape, const std::vector<int64_t>& dims,
                      bool keepdim) {
  return keepdim ? t : t.reshape(drop_shape(a_shape, dims));
}

// amax/amin: gradient split evenly among the elements equal to the extremum.
Tensor extremum(const char* op, const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim,
                kern::ReduceOp rop) {
  std::vector<int64_t> dims = norm_dims(op, a, dims_in);
  RowsResult res = reduce_impl(op, a, dims, rop, false);
  Tensor out = finish_keepdim(res.values, a.shape(), dims, keepdim);
  if (needs_grad({&a})) {
    SavedTensor sa(a, op), sk(res.values, op);
    Shape kshape = res.values.shape();
    record(op, {&out}, {a}, [sa, sk, kshape, dims](const Grads& g) {
      Tensor x = sa.get();
      Tensor mask = eq(x, sk.get()).to(x.dtype());
      Tensor count = sum(mask, dims, true);
      return Grads{mul(div(mask, count), g[0].reshape(kshape))};
    });
  }
  return out;
}

std::tuple<Tensor, Tensor> extremum_dim(const char* op, const Tensor& a, int64_t dim, bool keepdim,
                                        kern::ReduceOp rop) {
  std::vector<int64_t> dims = norm_dims(op, a, {dim});
  RowsResult res = reduce_impl(op, a, dims, rop, true);
  Tensor values = finish_keepdim(res.values, a.shape(), dims, keepdim);
  Tensor indices = finish_keepdim(res.indices, a.shape(), dims, keepdim);
  if (needs_grad({&a})) {
    SavedTensor si(res.indices, op);
    Shape ashape = a.shape(), kshape = res.values.shape();
    const int64_t d = dims.empty() ? 0 : dims[0];
    record(op, {&values}, {a}, [si, ashape, kshape, d](const Grads& g) {
      // Scatter through a mask: position p along dim d receives the gradient iff p == index.
      Tensor idx = si.get();
      if (ashape.empty()) return Grads{g[0].reshape(ashape)};
      Shape pshape(ashape.size(), 1);
      pshape[d] = ashape[d];
      Tensor pos = arange(0.0, static_cast<double>(ashape[d]), 1.0,
                          {.dtype = DType::i64, .device = idx.device()})
                       .reshape(pshape);
      Tensor mask = eq(pos, idx);
      Tensor z = zeros({}, {.dtype = g[0].dtype(), .device = g[0].device()});
      return Grads{where(mask, g[0].reshape(kshape).expand(ashape), z)};
    });
  }
  return {values, indices};
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim) {
  SINTER_PROFILE_OP("sum", a);
  SINTER_AUTOCAST(sum, a, sum(cast(a), dims_in, keepdim));
  std::vector<int64_t> dims = norm_dims("sum", a, dims_in);
  RowsResult res = reduce_impl("sum", a, dims, kern::ReduceOp::Sum, false);
  Tensor out = finish_keepdim(res.values, a.shape(), dims, keepdim);
  if (needs_grad({&a})) {
    Shape ashape = a.shape(), kshape = res.values.shape();
    record("sum", {&out}, {a},
           [ashape, kshape](const Grads& g) { return Grads{g[0].reshape(kshape).expand(ashape)}; });
  }
  return out;
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim) {
  SINTER_PROFILE_OP("mean", a);
  SINTER_AUTOCAST(mean, a, mean(cast(a), dims_in, keepdim));
  std::vector<int64_t> dims = norm_dims("mean", a, dims_in);
  SINTER_CHECK(is_floating(a.dtype()), "mean: expected a floating tensor, got dtype ", a.dtype());
  int64_t n = 1;
  for (int64_t d : dims) n *= a.size(d);
  return div(sum(a, dims, keepdim), static_cast<double>(n));
}

Tensor var(const Tensor& a, const std::vector<int64_t>& dims_in, int64_t correction, bool keepdim) {
  SINTER_PROFILE_OP("var", a);
  SINTER_AUTOCAST(var, a, var(cast(a), dims_in, correction, keepdim));
  std::vector<int64_t> dims = norm_dims("var", a, dims_in);
  SINTER_CHECK(is_floating(a.dtype()), "var: expected a floating tensor, got dtype ", a.dtype());
  SINTER_CHECK(correction >= 0, "var: correction must be non-negative, got ", correction);
  int64_t n = 1;
  for (int64_t d : dims) n *= a.size(d);
  Tensor centered = sub(a, mean(a, dims, true));
  // With n <= correction the result is inf or nan, as the estimator is undefined there.
  return div(sum(mul(centered, centered), dims, keepdim),
             static_cast<double>(std::max<int64_t>(n - correction, 0)));
}

Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim) {
  SINTER_PROFILE_OP("logsumexp", a);
  SINTER_AUTOCAST(logsumexp, a, logsumexp(cast(a), dims_in, keepdim));
  // Integer and bool inputs promote to the default floating dtype, as in PyTorch.
  if (a.defined() && !is_floating(a.dtype())) return logsumexp(a.to(DType::f32), dims_in, keepdim);
  std::vector<int64_t> dims = norm_dims("logsumexp", a, dims_in);
  Tensor m;
  {
    // The shift is a constant for autograd; infinite maxima (all -inf rows) shift by 0.
    NoGradGuard ng;
    m = amax(a, dims, true);
    m = where(eq(abs(m), std::numeric_limits<double>::infinity()), zeros_like(m), m);
  }
  Tensor out = add(log(sum(exp(sub(a, m)), dims, true)), m);
  return keepdim ? out : out.reshape(drop_shape(a.shape(), dims));
}

namespace {

using kern::ReduceOp;

// out = the running sums (Sum) or products (Prod) of `a` along `dim`, forward or in reverse;
// records nothing.
Tensor scan_kernel(const Tensor& a, int64_t dim, ReduceOp op, bool reverse) {
  const RowView v = row_view(a.shape(), dim);
  const DType out_dtype = is_integral(a.dtype()) ? DType::i64 : a.dtype();
  Tensor out = empty(a.shape(), {.dtype = out_dtype, .device = a.device()});
  if (out.numel() > 0) {
    NoGradGuard ng;
    Tensor ac = a.contiguous();
    SINTER_DISPATCH(a.device(), scan_rows, ac.data_ptr(), a.dtype(), v.outer, v.dim, v.inner, op,
                    reverse, out.data_ptr(), out_dtype);
  }
  return out;
}

// Each element's "product of the others" along d (size >= 1): the running products from both ends,
// each shifted one place (exclusive), multiplied. No division, so zeros are exact.
Tensor others_product(const Tensor& x, int64_t d) {
  const int64_t n = x.size(d);
  Shape edge = x.shape();
  edge[d] = 1;
  const Tensor one = ones(edge, {.dtype = x.dtype(), .device = x.device()});
  const Tensor before =
      cat({one, narrow(scan_kernel(x, d, ReduceOp::Prod, false), d, 0, n - 1)}, d);
  const Tensor after = cat({narrow(scan_kernel(x, d, ReduceOp::Prod, true), d, 1, n - 1), one}, d);
  return mul(before, after);
}

// Note [cumprod gradient]
// d out[j] / d x[k] = prod of x[i] over i <= j, i != k, for j >= k. With z the first zero of a
// line:
// - before it (k < z), that is out[j] / x[k], so the gradient is the reverse running sum of
//   g * out, divided by x[k] (never 0 there; out[j] is 0 from z on);
// - at z, it is the running product with x[z] taken as 1, so the gradient is the reverse running
//   sum of g times that product;
// - after z, every such product holds x[z] = 0, and the gradient is 0.
// Lines without a zero take the first form everywhere. This is PyTorch's cumprod_backward, with
// the masks computed on the device, so that no line is read back to the host.
Tensor cumprod_backward(const Tensor& g, const Tensor& x, const Tensor& out, int64_t d) {
  if (x.dim() == 0 || x.numel() == 0) return g;
  const Tensor is_zero = eq(x, 0.0);
  const Tensor seen = scan_kernel(is_zero, d, ReduceOp::Sum, false);  // zeros up to k
  const Tensor before = eq(seen, 0);
  const Tensor first = where(is_zero, eq(seen, 1), is_zero);
  const Tensor one = ones({}, {.dtype = x.dtype(), .device = x.device()});
  const Tensor early = div(scan_kernel(mul(g, out), d, ReduceOp::Sum, true), where(before, x, one));
  const Tensor skip_zero = scan_kernel(where(first, one, x), d, ReduceOp::Prod, false);
  const Tensor at_zero = scan_kernel(mul(g, skip_zero), d, ReduceOp::Sum, true);
  return where(before, early, where(first, at_zero, 0.0));
}

// The one dim a scan or a single-dim reduction runs along (0 for a 0-dim tensor).
int64_t one_dim(const char* op, const Tensor& a, int64_t dim) {
  const std::vector<int64_t> dims = norm_dims(op, a, {dim});  // empty for a 0-dim tensor
  return dims.empty() ? 0 : dims[0];
}

}  // namespace

Tensor cumsum(const Tensor& a, int64_t dim) {
  SINTER_PROFILE_OP("cumsum", a);
  SINTER_AUTOCAST(cumsum, a, cumsum(cast(a), dim));
  const int64_t d = one_dim("cumsum", a, dim);
  Tensor out = scan_kernel(a, d, ReduceOp::Sum, false);
  if (needs_grad({&a})) {
    // The gradient of a running sum: the running sums of the gradient taken from the other end.
    record("cumsum", {&out}, {a},
           [d](const Grads& g) { return Grads{scan_kernel(g[0], d, ReduceOp::Sum, true)}; });
  }
  return out;
}

Tensor cumprod(const Tensor& a, int64_t dim) {
  SINTER_PROFILE_OP("cumprod", a);
  SINTER_AUTOCAST(cumprod, a, cumprod(cast(a), dim));
  const int64_t d = one_dim("cumprod", a, dim);
  Tensor out = scan_kernel(a, d, ReduceOp::Prod, false);
  if (needs_grad({&a})) {
    SavedTensor sa(a, "cumprod"), so(out, "cumprod");
    record("cumprod", {&out}, {a}, [sa, so, d](const Grads& g) {
      return Grads{cumprod_backward(g[0], sa.get(), so.get(), d)};
    });
  }
  return out;
}

Tensor prod(const Tensor& a, int64_t dim, bool keepdim) {
  SINTER_PROFILE_OP("prod", a);
  SINTER_AUTOCAST(prod, a, prod(cast(a), dim, keepdim));
  const int64_t d = one_dim("prod", a, dim);
  const std::vector<int64_t> dims = a.dim() == 0 ? std::vector<int64_t>{} : std::vector{d};
  RowsResult res = reduce_impl("prod", a, dims, ReduceOp::Prod, false);
  Tensor out = finish_keepdim(res.values, a.shape(), dims, keepdim);
  if (needs_grad({&a})) {
    SavedTensor sa(a, "prod");
    const Shape kshape = res.values.shape();
    record("prod", {&out}, {a}, [sa, d, kshape](const Grads& g) {
      const Tensor x = sa.get();
      if (x.numel() == 0) return Grads{zeros_like(x)};
      if (x.dim() == 0) return Grads{g[0].reshape({})};
      return Grads{mul(g[0].reshape(kshape), others_product(x, d))};
    });
  }
  return out;
}

Tensor prod(const Tensor& a) {
  SINTER_PROFILE_OP("prod", a);
  SINTER_AUTOCAST(prod, a, prod(cast(a)));
  const std::vector<int64_t> dims = norm_dims("prod", a, {});
  RowsResult res = reduce_impl("prod", a, dims, ReduceOp::Prod, false);
  Tensor out = res.values.reshape({});
  if (needs_grad({&a})) {
    SavedTensor sa(a, "prod");
    record("prod", {&out}, {a}, [sa](const Grads& g) {
      const Tensor x = sa.get();
      if (x.numel() <= 1) return Grads{g[0].expand(x.shape())};
      const Tensor flat = x.reshape({x.numel()});
      return Grads{mul(g[0], others_product(flat, 0).reshape(x.shape()))};
    });
  }
  return out;
}

Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  SINTER_PROFILE_OP("amax", a);
  return extremum("amax", a, dims, keepdim, kern::ReduceOp::Max);
}
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  SINTER_PROFILE_OP("amin", a);
  return extremum("amin", a, dims, keepdim, kern::ReduceOp::Min);
}
Tensor max(const Tensor& a) {
  SINTER_PROFILE_OP("max", a);
  return extremum("max", a, {}, false, kern::ReduceOp::Max);
}
Tensor min(const Tensor& a) {
  SINTER_PROFILE_OP("min", a);
  return extremum("min", a, {}, false, kern::ReduceOp::Min);
}

std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  SINTER_PROFILE_OP("max", a);
  return extremum_dim("max", a, dim, keepdim, kern::ReduceOp::Max);
}
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  SINTER_PROFILE_OP("min", a);
  return extremum_dim("min", a, dim, keepdim, kern::ReduceOp::Min);
}

Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  SINTER_PROFILE_OP("argmax", a);
  NoGradGuard ng;
  return std::get<1>(extremum_dim("argmax", a, dim, keepdim, kern::ReduceOp::Max));
}
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) {
  SINTER_PROFILE_OP("argmin", a);
  NoGradGuard ng;
  return std::get<1>(extremum_dim("argmin", a, dim, keepdim, kern::ReduceOp::Min));
}

Tensor Tensor::sum() const { return sinter::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const {
  SINTER_CHECK(!dims.empty(), "sum: pass at least one dim, or call sum() for all of them");
  return sinter::sum(*this, dims, keepdim);
}
Tensor Tensor::mean() const { return sinter::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  SINTER_CHECK(!dims.empty(), "mean: pass at least one dim, or call mean() for all of them");
  return sinter::mean(*this, dims, keepdim);
}
Tensor Tensor::max() const { return sinter::max(*this); }
Tensor Tensor::min() const { return sinter::min(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const {
  return sinter::argmax(*this, dim, keepdim);
}

}  // namespace sinter
