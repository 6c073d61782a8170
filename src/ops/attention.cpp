// scaled_dot_product_attention: the composed form (scores by matmul, masks, softmax, dropout,
// matmul), which runs on either device and is differentiable through its parts.
#include <cmath>

#include "internal/iter.h"
#include "sinter/core/error.h"
#include "sinter/ops.h"

namespace sinter {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

void check_operands(const Tensor& q, const Tensor& k, const Tensor& v) {
  SINTER_CHECK(q.defined() && k.defined() && v.defined(), kOp, ": q, k and v must be defined");
  SINTER_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), kOp,
               ": q, k and v need one rank of at least 2, got shapes ", q.shape(), ", ", k.shape(),
               ", ", v.shape());
  SINTER_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype() && is_floating(q.dtype()), kOp,
               ": q, k and v need one floating dtype, got ", q.dtype(), ", ", k.dtype(), ", ",
               v.dtype());
  SINTER_CHECK(q.device() == k.device() && q.device() == v.device(), kOp, ": q on ", q.device(),
               ", k on ", k.device(), ", v on ", v.device());
  for (int64_t d = 0; d + 2 < q.dim(); ++d) {
    SINTER_CHECK(k.size(d) == q.size(d) && v.size(d) == q.size(d), kOp,
                 ": the leading dims differ: q ", q.shape(), ", k ", k.shape(), ", v ", v.shape());
  }
  SINTER_CHECK(k.size(-1) == q.size(-1), kOp, ": q has head size ", q.size(-1), ", k has ",
               k.size(-1));
  SINTER_CHECK(v.size(-2) == k.size(-2), kOp, ": k has ", k.size(-2), " keys, v has ", v.size(-2));
}

// The scores with the user's mask applied: -inf where a bool mask is false, + an additive one.
Tensor apply_mask(const Tensor& scores, const Tensor& mask) {
  SINTER_CHECK(mask.device() == scores.device(), kOp, ": mask on ", mask.device(), ", q on ",
               scores.device());
  SINTER_CHECK(mask.dtype() == DType::b8 || mask.dtype() == scores.dtype(), kOp,
               ": the mask must be bool or of q's dtype ", scores.dtype(), ", got ", mask.dtype());
  SINTER_CHECK(broadcast_shapes(kOp, mask.shape(), scores.shape()) == scores.shape(), kOp,
               ": a mask of shape ", mask.shape(), " does not broadcast to the scores' ",
               scores.shape());
  if (mask.dtype() == DType::b8) return where(mask, scores, -INFINITY);
  return add(scores, mask);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& o) {
  check_operands(q, k, v);
  SINTER_CHECK(o.dropout_p >= 0.0 && o.dropout_p < 1.0, kOp, ": dropout_p must be in [0, 1), got ",
               o.dropout_p);
  const int64_t tq = q.size(-2), tk = k.size(-2), d = q.size(-1);
  SINTER_CHECK(d > 0 || o.scale, kOp, ": head size 0 needs an explicit scale");
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(d)));
  SINTER_CHECK(std::isfinite(scale), kOp, ": scale must be finite, got ", scale);

  Tensor scores = mul(matmul(q, k.transpose(-2, -1)), scale);  // (..., Tq, Tk)
  if (o.mask.defined()) scores = apply_mask(scores, o.mask);
  if (o.causal) {
    const Tensor future = triu(ones({tq, tk}, {.dtype = DType::b8, .device = q.device()}), 1);
    scores = masked_fill(scores, future, -INFINITY);
  }
  Tensor weights = softmax(scores, -1);
  if (o.dropout_p > 0.0) weights = dropout(weights, o.dropout_p, true, o.generator);
  return matmul(weights, v);
}

}  // namespace sinter
