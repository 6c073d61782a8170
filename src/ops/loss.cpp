// The losses built from other ops: mse_loss, the binary cross entropies, kl_div, the L1 family
// (l1, smooth L1, Huber) and the margin losses (cross_entropy and nll_loss are in softmax.cpp),
// and the reductions every loss ends with.
#include <algorithm>
#include <cmath>
#include <vector>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

Tensor reduce_loss(const char* op, const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return sum(loss);
    case Reduction::Mean:
      return mean(loss);
    case Reduction::BatchMean:
      break;  // refused by check_reduction; kl_div reduces it itself
  }
  SINTER_THROW(op, ": unknown reduction ", static_cast<int>(reduction));
}

void check_reduction(const char* op, Reduction r) {
  SINTER_CHECK(r != Reduction::BatchMean, op,
               ": Reduction::BatchMean is kl_div's alone; use Mean, Sum or None");
  SINTER_CHECK(r == Reduction::None || r == Reduction::Sum || r == Reduction::Mean, op,
               ": unknown reduction ", static_cast<int>(r));
}

namespace {

void check_same_kind(const char* op, const char* what, const Tensor& ref, const Tensor& t) {
  SINTER_CHECK(t.dtype() == ref.dtype(), op, ": ", what, " has dtype ", t.dtype(),
               ", the input has ", ref.dtype());
  SINTER_CHECK(t.device() == ref.device(), op, ": ", what, " on ", t.device(), ", the input on ",
               ref.device());
}

// The checks of a loss of (input, target) pairs: both defined, input floating, target of its
// dtype and device, a reduction of the three.
void check_pair(const char* op, const Tensor& input, const Tensor& target, Reduction reduction) {
  SINTER_CHECK(input.defined() && target.defined(), op, ": undefined tensor argument");
  SINTER_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got dtype ",
               input.dtype());
  check_same_kind(op, "target", input, target);
  check_reduction(op, reduction);
}

// `what` (pos_weight, weight) broadcasts to `shape`: each of its trailing dims is 1 or shape's.
void check_broadcasts(const char* op, const char* what, const Tensor& w, const Shape& shape) {
  bool fits = w.dim() <= static_cast<int64_t>(shape.size());
  for (int64_t k = 1; fits && k <= w.dim(); ++k) {
    const int64_t p = w.size(-k), l = shape[shape.size() - static_cast<size_t>(k)];
    fits = p == 1 || p == l;
  }
  SINTER_CHECK(fits, op, ": ", what, " of shape ", shape_str(w.shape()),
               " does not broadcast to the input's shape ", shape_str(shape));
}

// The checks of the binary cross entropies: check_pair's, target of input's shape, and a weight
// (`what`: weight, pos_weight) of input's dtype and device that broadcasts to it, if given.
void check_binary(const char* op, const Tensor& input, const Tensor& target, Reduction reduction,
                  const char* what, const Tensor& weight) {
  check_pair(op, input, target, reduction);
  SINTER_CHECK(target.shape() == input.shape(), op, ": target shape ", shape_str(target.shape()),
               " must equal the input's shape ", shape_str(input.shape()));
  if (!weight.defined()) return;
  check_same_kind(op, what, input, weight);
  check_broadcasts(op, what, weight, input.shape());
}

// The backward of a loss of the elements of (x, t), weighed by w (undefined, or broadcast to x),
// written out: grads(ge, x, t, w) gives the Grads of (x, t[, w]) from ge, the upstream gradient
// of each element.
template <class F>
void record_elementwise_loss(const char* op, Tensor& out, const Tensor& x, const Tensor& t,
                             const Tensor& w, Reduction reduction, F grads) {
  std::vector<Tensor> inputs = {x, t};
  if (w.defined()) inputs.push_back(w);
  if (!needs_grad(inputs)) return;
  SavedTensor sx(x, op), st(t, op), sw(w, op);
  record(op, {&out}, inputs, [sx, st, sw, shape = x.shape(), reduction, grads](const Grads& g) {
    Tensor ge = g[0];
    if (reduction != Reduction::None) {
      double numel = 1;
      for (int64_t s : shape) numel *= static_cast<double>(s);
      ge = (reduction == Reduction::Mean ? ge / numel : ge).expand(shape);
    }
    return grads(ge, sx.get(), st.get(), sw.get());
  });
}

// Every element of a probability input is in [0, 1], read back to the host (a device sync on
// CUDA, as nll_loss's target check), so that a logit passed by mistake is an error, not a NaN.
void check_probabilities(const char* op, const Tensor& input) {
  if (input.numel() == 0) return;
  NoGradGuard ng;
  const std::vector<double> lo_hi =
      stack({min(input), max(input)}).to(DType::f64).to_vector<double>();
  SINTER_CHECK(lo_hi[0] >= 0.0 && lo_hi[1] <= 1.0, op,
               ": every element of the input must be in [0, 1] (a probability), got one of ",
               lo_hi[0] < 0.0 ? lo_hi[0] : lo_hi[1]);
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  SINTER_PROFILE_OP("mse_loss", input, target);
  const char* op = "mse_loss";
  SINTER_CHECK(input.defined() && target.defined(), op, ": undefined tensor argument");
  SINTER_AUTOCAST(mse_loss, input, mse_loss(cast(input), cast(target), reduction));
  check_pair(op, input, target, reduction);
  Tensor d = sub(input, target);
  return reduce_loss(op, mul(d, d), reduction);
}

// log(1 + exp(-x)) without overflow: softplus(-x), which is -x itself where -x > 20 (the rest,
// log1p(exp(-20)) = 2e-9, is below f32's resolution there and within 1e-10 of it in f64).
Tensor softplus_neg(const Tensor& x) { return softplus(neg(x)); }

// With l = (pos_weight - 1) t + 1 (1 without pos_weight):
//   loss = (1 - t) x + l log(1 + exp(-x)),
// never exponentiating a positive number, so large |x| neither overflows nor loses the result.
// The backward is written out rather than traced through abs and relu, whose kinks at x == 0
// would give a wrong gradient there (zero logits are common: a zero-initialized last layer):
//   dx = (1 - t) + l (sigmoid(x) - 1), dt = (pos_weight - 1) log(1 + exp(-x)) - x,
//   dpos_weight = t log(1 + exp(-x)).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction, const Tensor& pos_weight) {
  SINTER_PROFILE_OP("binary_cross_entropy_with_logits", logits, target, pos_weight);
  const char* op = "binary_cross_entropy_with_logits";
  SINTER_CHECK(logits.defined() && target.defined(), op, ": undefined tensor argument");
  SINTER_AUTOCAST(
      binary_cross_entropy_with_logits, logits,
      binary_cross_entropy_with_logits(cast(logits), cast(target), reduction, cast(pos_weight)));
  check_binary(op, logits, target, reduction, "pos_weight", pos_weight);
  Tensor out;
  {
    NoGradGuard ng;
    const Tensor& x = logits;
    const Tensor& t = target;
    Tensor sp = softplus_neg(x);
    Tensor loss = pos_weight.defined() ? (1.0 - t) * x + ((pos_weight - 1.0) * t + 1.0) * sp
                                       : (1.0 - t) * x + sp;
    out = reduce_loss(op, loss, reduction);
  }
  record_elementwise_loss(op, out, logits, target, pos_weight, reduction,
                          [](const Tensor& ge, const Tensor& x, const Tensor& t, const Tensor& w) {
                            if (!w.defined()) return Grads{ge * (sigmoid(x) - t), ge * neg(x)};
                            Tensor sp = softplus_neg(x);
                            Tensor l = (w - 1.0) * t + 1.0;
                            return Grads{ge * ((1.0 - t) + l * (sigmoid(x) - 1.0)),
                                         ge * ((w - 1.0) * sp - x), sum_to(ge * t * sp, w.shape())};
                          });
  return out;
}

// loss = -w (t lx + (1 - t) l1x) with lx = max(log x, -100), l1x = max(log(1 - x), -100). The
// backward is PyTorch's, written out: through the clamped logs an x of 0 or 1 would give 0 * inf:
//   dx = w (x - t) / max(x (1 - x), 1e-12), dt = w (l1x - lx), dw = -(t lx + (1 - t) l1x),
// dt being the forward's own slope in t (PyTorch's, -logit(x), differs only at x = 0 or 1), and
// 1e-12 PyTorch's EPSILON, which it applies as a float.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction,
                            const Tensor& weight) {
  SINTER_PROFILE_OP("binary_cross_entropy", input, target, weight);
  const char* op = "binary_cross_entropy";
  SINTER_CHECK(input.defined() && target.defined(), op, ": undefined tensor argument");
  // PyTorch's CUDA autocast refuses this op as unsafe in f16 (log(1 - x) of an x rounded to 1);
  // its CPU autocast runs it in f32, and so does this row, on either device: cast up, it is safe.
  SINTER_AUTOCAST(binary_cross_entropy, input,
                  binary_cross_entropy(cast(input), cast(target), reduction, cast(weight)));
  check_binary(op, input, target, reduction, "weight", weight);
  check_probabilities(op, input);
  Tensor out;
  {
    NoGradGuard ng;
    Tensor lx = clamp(log(input), -100.0), l1x = clamp(log(1.0 - input), -100.0);
    Tensor loss = neg(target * lx + (1.0 - target) * l1x);
    out = reduce_loss(op, weight.defined() ? loss * weight : loss, reduction);
  }
  record_elementwise_loss(
      op, out, input, target, weight, reduction,
      [](const Tensor& ge, const Tensor& x, const Tensor& t, const Tensor& w) {
        Tensor lx = clamp(log(x), -100.0), l1x = clamp(log(1.0 - x), -100.0);
        Tensor gw = w.defined() ? ge * w : ge;
        Grads grads{gw * (x - t) / clamp(x * (1.0 - x), static_cast<double>(1e-12f)),
                    gw * (l1x - lx)};
        if (w.defined()) grads.push_back(sum_to(ge * neg(t * lx + (1.0 - t) * l1x), w.shape()));
        return grads;
      });
  return out;
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  SINTER_PROFILE_OP("kl_div", input, target);
  const char* op = "kl_div";
  SINTER_CHECK(input.defined() && target.defined(), op, ": undefined tensor argument");
  SINTER_AUTOCAST(kl_div, input, kl_div(cast(input), cast(target), reduction, log_target));
  // BatchMean is a sum, divided at the end; check_pair refuses it, as every other loss does.
  const bool batchmean = reduction == Reduction::BatchMean;
  check_pair(op, input, target, batchmean ? Reduction::Sum : reduction);
  Tensor loss;
  if (log_target) {
    loss = exp(target) * (target - input);
  } else {
    // xlogy(t, t) - t x: t log t is 0 at t == 0, computed as t log(1) so that its gradient there
    // is 0 rather than 0 * log(0) (a negative t stays NaN, as in PyTorch).
    Tensor nonzero;
    {
      NoGradGuard ng;
      nonzero = ne(target, 0.0);
    }
    loss = target * log(where(nonzero, target, 1.0)) - target * input;
  }
  if (!batchmean) return reduce_loss(op, loss, reduction);
  // PyTorch's 'batchmean': the sum over a batch of input.size(0) (a 0-d input is one sample).
  Tensor total = sum(loss);
  return input.dim() == 0 ? total : total / static_cast<double>(input.size(0));
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  SINTER_PROFILE_OP("l1_loss", input, target);
  const char* op = "l1_loss";
  SINTER_CHECK(input.defined() && target.defined(), op, ": undefined tensor argument");
  SINTER_AUTOCAST(l1_loss, input, l1_loss(cast(input), cast(target), reduction));
  check_pair(op, input, target, reduction);
  // abs's gradient at 0 is 0 (sign(0)), as PyTorch's.
  return reduce_loss(op, abs(sub(input, target)), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  SINTER_PROFILE_OP("smooth_l1_loss", input, target);
  const char* op = "smooth_l1_loss";
  SINTER_CHECK(input.defined() && target.defined(), op, ": undefined tensor argument");
  SINTER_AUTOCAST(smooth_l1_loss, input,
                  smooth_l1_loss(cast(input), cast(target), reduction, beta));
  check_pair(op, input, target, reduction);
  SINTER_CHECK(beta >= 0.0, op, ": beta must be >= 0, got ", beta);
  Tensor d = sub(input, target), a = abs(d);
  // beta == 0 is l1 (PyTorch's too): the quadratic branch would divide by zero, and its unused
  // gradient, 0 / 0, would reach the result through where.
  if (beta == 0.0) return reduce_loss(op, a, reduction);
  return reduce_loss(op, where(lt(a, beta), 0.5 * d * d / beta, a - 0.5 * beta), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  SINTER_PROFILE_OP("huber_loss", input, target);
  const char* op = "huber_loss";
  SINTER_CHECK(input.defined() && target.defined(), op, ": undefined tensor argument");
  SINTER_AUTOCAST(huber_loss, input, huber_loss(cast(input), cast(target), reduction, delta));
  check_pair(op, input, target, reduction);
  SINTER_CHECK(delta > 0.0, op, ": delta must be > 0, got ", delta);
  Tensor d = sub(input, target), a = abs(d);
  return reduce_loss(op, where(lt(a, delta), 0.5 * d * d, delta * (a - 0.5 * delta)), reduction);
}

// x1, x2: (N, D) and y (N), or (D) and a 0-d y; reduces over D. As PyTorch:
//   cos = sum(x1 x2) / sqrt((sum(x1^2) + 1e-12) (sum(x2^2) + 1e-12)).
Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin,
                             Reduction reduction) {
  SINTER_PROFILE_OP("cosine_embedding_loss", x1, x2, y);
  const char* op = "cosine_embedding_loss";
  SINTER_CHECK(x1.defined() && x2.defined() && y.defined(), op, ": undefined tensor argument");
  SINTER_AUTOCAST(cosine_embedding_loss, x1,
                  cosine_embedding_loss(cast(x1), cast(x2), cast(y), margin, reduction));
  check_pair(op, x1, x2, reduction);
  SINTER_CHECK(y.device() == x1.device(), op, ": y on ", y.device(), ", the input on ",
               x1.device());
  SINTER_CHECK(x1.dim() == 1 || x1.dim() == 2, op, ": expected inputs of shape (N, D) or (D), got ",
               shape_str(x1.shape()));
  SINTER_CHECK(x2.shape() == x1.shape(), op, ": x1 of shape ", shape_str(x1.shape()),
               " and x2 of shape ", shape_str(x2.shape()), " differ");
  const Shape want = x1.dim() == 2 ? Shape{x1.size(0)} : Shape{};
  SINTER_CHECK(y.shape() == want, op, ": y of shape ", shape_str(y.shape()),
               " for inputs of shape ", shape_str(x1.shape()), "; expected ", shape_str(want));
  const std::vector<int64_t> d = {x1.dim() - 1};
  Tensor cos = sum(x1 * x2, d) / sqrt((sum(x1 * x1, d) + 1e-12) * (sum(x2 * x2, d) + 1e-12));
  Tensor pos, neg_y;
  {
    NoGradGuard ng;
    pos = eq(y, 1.0);
    neg_y = eq(y, -1.0);
  }
  Tensor loss = where(pos, 1.0 - cos, where(neg_y, clamp(cos - margin, 0.0), 0.0));
  return reduce_loss(op, loss, reduction);
}

Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin,
                           Reduction reduction) {
  SINTER_PROFILE_OP("margin_ranking_loss", x1, x2, y);
  const char* op = "margin_ranking_loss";
  SINTER_CHECK(x1.defined() && x2.defined() && y.defined(), op, ": undefined tensor argument");
  SINTER_AUTOCAST(margin_ranking_loss, x1,
                  margin_ranking_loss(cast(x1), cast(x2), cast(y), margin, reduction));
  check_pair(op, x1, x2, reduction);
  check_same_kind(op, "y", x1, y);
  SINTER_CHECK(x1.dim() == x2.dim() && x1.dim() == y.dim(), op,
               ": x1, x2 and y must have the same number of dims, got shapes ",
               shape_str(x1.shape()), ", ", shape_str(x2.shape()), " and ", shape_str(y.shape()));
  return reduce_loss(op, clamp(margin - y * (x1 - x2), 0.0), reduction);
}

}  // namespace sinter
