// topk, the first k elements along a dim in Note [topk order], and multinomial, which samples
// categories from weights with Philox uniforms and an exponential race decided by argmax or topk.
#include "kern/sort.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

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

// Note [exponential race]
// With V_j uniform in (0, 1], log(V_j) / w_j = -E_j / w_j for independent E_j ~ Exp(1), and the
// largest of these keys is category j with probability w_j / sum(w): each E_j / w_j is the time of
// an exponential clock of rate w_j, and the first of them to ring is j with that probability. The
// keys sorted from the largest are a draw without replacement (the clocks in the order they ring).
// Weights are divided by the row's largest first, so that the leader's key is at least log(2^-53)
// and the keys of tiny weights are clamped to -DBL_MAX rather than -inf; zero weights get -inf,
// which therefore never wins while a positive weight remains.
namespace {

// Keys of the race for weights w (rows, n), f64, each row's largest 1, broadcast against uniforms
// u in [0, 1) of shape (rows, n) or (rows, c, n).
Tensor race_keys(const Tensor& w, const Tensor& u) {
  const Tensor key = clamp(div(log(sub(1.0, u)), w), -DBL_MAX);
  return where(gt(w, 0.0), key, -std::numeric_limits<double>::infinity());
}

// Uniforms of `shape` in f64 on `device`.
Tensor uniforms(const Shape& shape, Device device, Generator* gen) {
  return rand(shape, {.dtype = DType::f64, .device = device}, gen);
}

}  // namespace

Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement, Generator* gen) {
  SINTER_PROFILE_OP("multinomial", weights);
  const char* op = "multinomial";
  SINTER_CHECK(weights.defined(), op, ": undefined weights");
  SINTER_CHECK(weights.dim() == 1 || weights.dim() == 2, op,
               ": weights must be 1-D (n) or 2-D (rows, n), got shape ",
               shape_str(weights.shape()));
  SINTER_CHECK(is_floating(weights.dtype()), op, ": weights must be floating, got dtype ",
               weights.dtype());
  SINTER_CHECK(num_samples > 0, op, ": num_samples must be positive, got ", num_samples);
  const int64_t n = weights.size(-1), rows = weights.dim() == 2 ? weights.size(0) : 1;
  SINTER_CHECK(n > 0, op, ": no categories to draw from (weights of shape ",
               shape_str(weights.shape()), ")");
  const Shape out_shape = weights.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples};
  if (rows == 0) return empty(out_shape, {.dtype = DType::i64, .device = weights.device()});
  NoGradGuard ng;
  Tensor w = weights.reshape({rows, n}).to(DType::f64);
  {
    // min is NaN when any weight is (Note [extremum order]).
    const double lo = min(w).item<double>(), hi = max(w).item<double>();
    SINTER_CHECK(!std::isnan(lo), op, ": weights contain NaN");
    SINTER_CHECK(lo >= 0, op, ": weights must be non-negative, got ", lo);
    SINTER_CHECK(std::isfinite(hi), op, ": weights must be finite, got ", hi);
    const Tensor positive = sum(gt(w, 0.0), {1});  // i64 counts per row
    const auto [fewest, row] = min(positive, 0);
    const int64_t count = fewest.item<int64_t>();
    SINTER_CHECK(count > 0, op, ": the weights of row ", row.item<int64_t>(), " are all zero");
    SINTER_CHECK(replacement || num_samples <= count, op, ": cannot draw ", num_samples,
                 " samples without replacement from row ", row.item<int64_t>(), ", which has ",
                 count, " non-zero weights");
  }
  w = div(w, amax(w, {1}, true));
  Tensor out;
  if (!replacement) {
    const Tensor keys = race_keys(w, uniforms({rows, n}, w.device(), gen));
    out = std::get<1>(topk(keys, num_samples, 1, true));
  } else {
    // A race per sample, over (rows, c, n) keys: c samples at a time bounds the memory.
    constexpr int64_t kChunkElems = int64_t{1} << 22;
    const int64_t c = std::clamp<int64_t>(kChunkElems / (rows * n), 1, num_samples);
    const Tensor wb = w.reshape({rows, 1, n});
    std::vector<Tensor> parts;
    for (int64_t s = 0; s < num_samples; s += c) {
      const int64_t m = std::min(c, num_samples - s);
      parts.push_back(argmax(race_keys(wb, uniforms({rows, m, n}, w.device(), gen)), 2));
    }
    out = parts.size() == 1 ? parts[0] : cat(parts, 1);
  }
  return out.reshape(out_shape);
}

}  // namespace sinter
