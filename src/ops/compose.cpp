// The tensor conveniences of sinter/ops_tensor.h, each composed of views, elementwise ops, sums and
// matmul, so that autograd, autocast and every backend come with those ops.
#include <string>

#include "internal/iter.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

Tensor repeat(const Tensor& a, const std::vector<int64_t>& reps) {
  SINTER_PROFILE_OP("repeat", a);
  check_defined("repeat", a);
  const int64_t k = static_cast<int64_t>(reps.size());
  SINTER_CHECK(k >= a.dim(), "repeat: ", k, " repeats ", list_str(reps), " for a tensor of ",
               a.dim(), " dims (at least one per dim)");
  for (int64_t r : reps) {
    SINTER_CHECK(r >= 0, "repeat: repeats must be non-negative, got ", list_str(reps));
  }
  // a as (1, s0, 1, s1, ...) expanded to (r0, s0, r1, s1, ...), then each pair merged.
  Shape pairs, expanded, out;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t s = i < k - a.dim() ? 1 : a.size(i - (k - a.dim()));
    pairs.insert(pairs.end(), {1, s});
    expanded.insert(expanded.end(), {reps[static_cast<size_t>(i)], s});
    out.push_back(reps[static_cast<size_t>(i)] * s);
  }
  return reshape(expand(reshape(a, pairs), expanded), out);
}

Tensor tile(const Tensor& a, const std::vector<int64_t>& reps) {
  SINTER_PROFILE_OP("tile", a);
  check_defined("tile", a);
  std::vector<int64_t> full_reps(reps);
  if (static_cast<int64_t>(full_reps.size()) < a.dim()) {
    full_reps.insert(full_reps.begin(), static_cast<size_t>(a.dim()) - reps.size(), 1);
  }
  return repeat(a, full_reps);
}

Tensor broadcast_to(const Tensor& a, const Shape& shape) {
  SINTER_PROFILE_OP("broadcast_to", a);
  check_defined("broadcast_to", a);
  return expand(a, shape);
}

Tensor movedim(const Tensor& a, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination) {
  SINTER_PROFILE_OP("movedim", a);
  check_defined("movedim", a);
  SINTER_CHECK(source.size() == destination.size(), "movedim: source ", list_str(source),
               " and destination ", list_str(destination), " name different numbers of dims");
  const int64_t n = a.dim();
  std::vector<int64_t> order(static_cast<size_t>(n), -1);
  std::vector<bool> moved(static_cast<size_t>(n), false);
  for (size_t i = 0; i < source.size(); ++i) {
    const int64_t s = wrap_dim("movedim", source[i], n), d = wrap_dim("movedim", destination[i], n);
    SINTER_CHECK(!moved[static_cast<size_t>(s)], "movedim: repeated dim in source ",
                 list_str(source));
    SINTER_CHECK(order[static_cast<size_t>(d)] < 0, "movedim: repeated dim in destination ",
                 list_str(destination));
    order[static_cast<size_t>(d)] = s;
    moved[static_cast<size_t>(s)] = true;
  }
  // The dims not moved fill the free places in their order.
  int64_t next = 0;
  for (int64_t& o : order) {
    if (o >= 0) continue;
    while (moved[static_cast<size_t>(next)]) ++next;
    o = next++;
  }
  return permute(a, order);
}

Tensor masked_select(const Tensor& a, const Tensor& mask) {
  SINTER_PROFILE_OP("masked_select", a, mask);
  check_defined("masked_select", a);
  check_defined("masked_select", mask);
  SINTER_CHECK(mask.dtype() == DType::b8, "masked_select: mask must be a bool tensor, got ",
               mask.dtype());
  const Shape shape = broadcast_shapes("masked_select", a.shape(), mask.shape());
  const Tensor index = nonzero(expand(mask, shape).reshape({-1})).reshape({-1});
  return index_select(expand(a, shape).reshape({-1}), 0, index);
}

Tensor diff(const Tensor& a0, int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) {
  SINTER_PROFILE_OP("diff", a0);
  check_defined("diff", a0);
  SINTER_CHECK(a0.dim() >= 1, "diff: expects a tensor of at least 1 dim, got a 0-d tensor");
  SINTER_CHECK(n >= 0, "diff: order must be non-negative, got ", n);
  const int64_t d = wrap_dim("diff", dim, a0.dim());
  std::vector<Tensor> parts;
  if (prepend.defined()) parts.push_back(prepend);
  parts.push_back(a0);
  if (append.defined()) parts.push_back(append);
  Tensor a = parts.size() == 1 ? a0 : cat(parts, d);
  for (int64_t i = 0; i < n && a.size(d) > 0; ++i) {
    const int64_t len = a.size(d) - 1;
    const Tensor hi = narrow(a, d, 1, len), lo = narrow(a, d, 0, len);
    a = a.dtype() == DType::b8 ? logical_xor(hi, lo) : sub(hi, lo);
  }
  return n == 0 ? a.clone() : a;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("outer", a, b);
  check_defined("outer", a);
  check_defined("outer", b);
  SINTER_CHECK(a.dim() == 1 && b.dim() == 1, "outer: expects two 1-D tensors, got shapes ",
               shape_str(a.shape()), " and ", shape_str(b.shape()));
  return mul(a.reshape({-1, 1}), b.reshape({1, -1}));
}

Tensor dot(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("dot", a, b);
  check_defined("dot", a);
  check_defined("dot", b);
  SINTER_CHECK(a.dim() == 1 && b.dim() == 1, "dot: expects two 1-D tensors, got shapes ",
               shape_str(a.shape()), " and ", shape_str(b.shape()));
  SINTER_CHECK(a.size(0) == b.size(0), "dot: the vectors have ", a.size(0), " and ", b.size(0),
               " elements");
  SINTER_CHECK(a.dtype() == b.dtype(), "dot: expected both vectors to have one dtype, got ",
               a.dtype(), " and ", b.dtype());
  SINTER_CHECK(is_floating(a.dtype()), "dot: floating vectors only here, got ", a.dtype(),
               " (PyTorch also takes integers)");
  return matmul(a, b);
}

Tensor mv(const Tensor& m, const Tensor& v) {
  SINTER_PROFILE_OP("mv", m, v);
  check_defined("mv", m);
  check_defined("mv", v);
  SINTER_CHECK(m.dim() == 2 && v.dim() == 1, "mv: expects a 2-D matrix and a 1-D vector, got ",
               shape_str(m.shape()), " and ", shape_str(v.shape()));
  SINTER_CHECK(m.size(1) == v.size(0), "mv: the matrix ", shape_str(m.shape()), " and the vector ",
               shape_str(v.shape()), " do not fit");
  SINTER_CHECK(m.dtype() == v.dtype() && is_floating(m.dtype()),
               "mv: expected floating operands of one dtype, got ", m.dtype(), " and ", v.dtype());
  return matmul(m, v);
}

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta, double alpha) {
  SINTER_PROFILE_OP("addmm", input, m1, m2);
  check_defined("addmm", input);
  check_defined("addmm", m1);
  check_defined("addmm", m2);
  SINTER_CHECK(m1.dim() == 2 && m2.dim() == 2, "addmm: expects 2-D matrices, got ",
               shape_str(m1.shape()), " and ", shape_str(m2.shape()));
  SINTER_CHECK(input.dtype() == m1.dtype() && m1.dtype() == m2.dtype(),
               "addmm: input, mat1 and mat2 must have one dtype, got ", input.dtype(), ", ",
               m1.dtype(), " and ", m2.dtype());
  const Tensor prod = matmul(m1, m2);
  const Shape out = broadcast_shapes("addmm", input.shape(), prod.shape());
  SINTER_CHECK(out == prod.shape(), "addmm: input ", shape_str(input.shape()),
               " does not broadcast to the product's ", shape_str(prod.shape()));
  const Tensor scaled = alpha == 1.0 ? prod : mul(prod, alpha);
  if (beta == 0.0) return scaled;
  return add(beta == 1.0 ? input : mul(input, beta), scaled);
}

Tensor trace(const Tensor& a) {
  SINTER_PROFILE_OP("trace", a);
  check_defined("trace", a);
  SINTER_CHECK(a.dim() == 2, "trace: expects a 2-D tensor, got shape ", shape_str(a.shape()));
  return sum(diagonal(a));
}

Tensor nansum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  SINTER_PROFILE_OP("nansum", a);
  check_defined("nansum", a);
  if (!is_floating(a.dtype())) return sum(a, dims, keepdim);
  return sum(where(isnan(a), zeros({}, {.dtype = a.dtype(), .device = a.device()}), a), dims,
             keepdim);
}

Tensor nanmean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  SINTER_PROFILE_OP("nanmean", a);
  check_defined("nanmean", a);
  SINTER_CHECK(is_floating(a.dtype()), "nanmean: expected a floating tensor, got dtype ",
               a.dtype());
  // bf16 and f16 in f32, rounded once: a count past 256 is not a bf16 number.
  if (a.dtype() == DType::bf16 || a.dtype() == DType::f16) {
    return nanmean(a.to(DType::f32), dims, keepdim).to(a.dtype());
  }
  const Tensor count = sum(logical_not(isnan(a)), dims, keepdim).to(a.dtype());
  return div(nansum(a, dims, keepdim), count);
}

}  // namespace sinter
