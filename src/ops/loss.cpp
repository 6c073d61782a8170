// The losses built from other ops: mse_loss, the binary cross entropies, kl_div, the L1 family
// (l1, smooth L1, Huber), the margin losses and the CTC loss (cross_entropy and nll_loss are in
// softmax.cpp), and the reductions every loss ends with.
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

// Note [ctc alpha recursion]
// ctc_loss runs the forward (alpha) recursion of Graves et al. in log space as T steps of tensor
// ops over all N samples and the 2 S + 1 positions of the extended labels (blank, l_1, blank, ...,
// l_S, blank) at once, and its gradient is autograd's through them. alpha_{-1} is log 1 at
// position 0; alpha_t(s) = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s - 1), alpha_{t-1}(s - 2) where
// s is a label unlike the one two back) + log_probs[t, l'(s)]; a sample's alpha stops moving after
// its input length, and its log-likelihood is the logsumexp of its last two positions, 2 L and
// 2 L - 1. log 0 is kCtcLogZero, finite, so that a logsumexp of unreachable positions has a
// gradient of 0 rather than the NaN of -inf - -inf; a loss at that level is an alignment that
// cannot fit, reported as +inf, its gradient 0 (PyTorch's is NaN there unless zero_infinity). The
// plan (labels, masks, end positions) is built on the host from the lengths and targets, which
// ctc_loss reads back as PyTorch's does, to check them.
namespace {

constexpr double kCtcLogZero = -1e30;

// The i64 or i32 lengths of n samples (a 0-d one for an unbatched call), read to the host.
std::vector<int64_t> ctc_lengths(const char* what, const Tensor& t, int64_t n, bool batched) {
  SINTER_CHECK(t.defined(), "ctc_loss: undefined ", what);
  SINTER_CHECK(t.dtype() == DType::i64 || t.dtype() == DType::i32, "ctc_loss: ", what,
               " must be i64 or i32, got dtype ", t.dtype());
  SINTER_CHECK(batched ? t.dim() == 1 && t.size(0) == n : t.dim() == 0, "ctc_loss: ", what,
               " must hold ", batched ? "one length per sample, N = " : "one length (0-d) for ",
               batched ? std::to_string(n) : "an unbatched call", ", got shape ",
               shape_str(t.shape()));
  return t.reshape({n}).to(DType::i64).cpu().to_vector<int64_t>();
}

// The host-built tensors of Note [ctc alpha recursion] for n samples of target lengths tl, their
// labels in rows of `width` (1-D targets: concatenated, width 0).
struct CtcPlan {
  Tensor labels;  // (N, 2 S + 1) i64: l'(s)
  Tensor skip;    // (N, 2 S + 1) bool: alpha(s - 2) feeds alpha(s)
  Tensor live;    // (T, N, 1) bool: t < the sample's input length
  Tensor ends;    // (N, 2) i64: positions 2 L and 2 L - 1 (0 for an empty target)
  Tensor end_ok;  // (N, 2) bool: the end position exists
};

CtcPlan ctc_plan(const std::vector<int64_t>& labels_in, int64_t width, int64_t num_classes,
                 int64_t blank, const std::vector<int64_t>& il, const std::vector<int64_t>& tl,
                 int64_t t_max, Device device) {
  const int64_t n = static_cast<int64_t>(tl.size());
  const int64_t s_max = tl.empty() ? 0 : *std::max_element(tl.begin(), tl.end());
  const int64_t lp = 2 * s_max + 1;
  std::vector<int64_t> labels(n * lp, blank), skip(n * lp, 0), live(t_max * n, 0), ends(2 * n, 0),
      end_ok(2 * n, 0);
  for (int64_t b = 0, offset = 0; b < n; ++b) {
    const int64_t start = width > 0 ? b * width : offset;
    offset += tl[b];
    for (int64_t j = 0; j < tl[b]; ++j) {
      const int64_t c = labels_in[start + j];
      SINTER_CHECK(c >= 0 && c < num_classes, "ctc_loss: target ", c, " of sample ", b,
                   " out of the ", num_classes, " classes");
      labels[b * lp + 2 * j + 1] = c;
      // As PyTorch's: a label may follow the one two positions back unless it repeats it.
      skip[b * lp + 2 * j + 1] = j > 0 && c != labels_in[start + j - 1];
    }
    for (int64_t t = 0; t < il[b]; ++t) live[t * n + b] = 1;
    ends[2 * b] = 2 * tl[b];
    ends[2 * b + 1] = std::max<int64_t>(2 * tl[b] - 1, 0);
    end_ok[2 * b] = 1;
    end_ok[2 * b + 1] = tl[b] > 0;
  }
  const auto on_device = [&](const std::vector<int64_t>& v, const Shape& shape) {
    return from_vector<int64_t>(v, shape).to(device);
  };
  return {on_device(labels, {n, lp}), ne(on_device(skip, {n, lp}), 0),
          ne(on_device(live, {t_max, n, 1}), 0), on_device(ends, {n, 2}),
          ne(on_device(end_ok, {n, 2}), 0)};
}

// alpha (N, P) moved right by k positions along P, kCtcLogZero coming in.
Tensor shift_right(const Tensor& alpha, int64_t k) {
  const int64_t p = alpha.size(1);
  if (k >= p) return full_like(alpha, kCtcLogZero);
  return pad(alpha.narrow(1, 0, p - k), {k, 0}, PadMode::Constant, kCtcLogZero);
}

// Each sample's log-likelihood (N), per Note [ctc alpha recursion]. lp: (T, N, C).
Tensor ctc_log_likelihood(const Tensor& lp, const CtcPlan& plan) {
  const int64_t t_max = lp.size(0), n = lp.size(1), p = plan.labels.size(1);
  // (T, N, P): log_probs of each position's label at each step.
  const Tensor emit = gather(lp, 2, plan.labels.unsqueeze(0).expand({t_max, n, p}).contiguous());
  // alpha_{-1}: all the probability before the first position (log 1 at position 0), so that
  // step 0 reaches positions 0 and 1, and a sample of input length 0 ends there.
  Tensor alpha = pad(full({n, p - 1}, kCtcLogZero, {.dtype = lp.dtype(), .device = lp.device()}),
                     {1, 0}, PadMode::Constant, 0.0);
  for (int64_t t = 0; t < t_max; ++t) {
    const Tensor from = stack(
        {alpha, shift_right(alpha, 1), where(plan.skip, shift_right(alpha, 2), kCtcLogZero)}, 0);
    const Tensor next = add(logsumexp(from, {0}), emit.select(0, t));
    alpha = where(plan.live.select(0, t), next, alpha);
  }
  const Tensor last = where(plan.end_ok, gather(alpha, 1, plan.ends), kCtcLogZero);
  return logsumexp(last, {1});
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CtcLossOptions& opts) {
  SINTER_PROFILE_OP("ctc_loss", log_probs);
  SINTER_AUTOCAST(ctc_loss, log_probs,
                  ctc_loss(cast(log_probs), targets, input_lengths, target_lengths, opts));
  const char* op = "ctc_loss";
  check_defined(op, log_probs);
  check_defined(op, targets);
  check_reduction(op, opts.reduction);
  SINTER_CHECK(log_probs.dim() == 3 || log_probs.dim() == 2, op,
               ": log_probs must be 3-D (T, N, C) or 2-D (T, C), got shape ",
               shape_str(log_probs.shape()));
  SINTER_CHECK(is_floating(log_probs.dtype()), op, ": expected floating log_probs, got dtype ",
               log_probs.dtype());
  const bool batched = log_probs.dim() == 3;
  const Tensor lp = batched ? log_probs : log_probs.unsqueeze(1);
  const int64_t t_max = lp.size(0), n = lp.size(1), classes = lp.size(2);
  SINTER_CHECK(opts.blank >= 0 && opts.blank < classes, op, ": blank ", opts.blank, " out of the ",
               classes, " classes");
  SINTER_CHECK(targets.dtype() == DType::i64 || targets.dtype() == DType::i32, op,
               ": targets must be i64 or i32, got dtype ", targets.dtype());
  const bool padded = batched && targets.dim() == 2;
  SINTER_CHECK(targets.dim() == 1 || (batched && targets.dim() == 2), op, ": targets must be ",
               batched ? "2-D (N, S) or 1-D (concatenated)" : "1-D (S)", ", got shape ",
               shape_str(targets.shape()));
  SINTER_CHECK(!padded || targets.size(0) == n, op, ": targets ", shape_str(targets.shape()),
               " must have N = ", n, " rows");
  const std::vector<int64_t> il = ctc_lengths("input_lengths", input_lengths, n, batched);
  const std::vector<int64_t> tl = ctc_lengths("target_lengths", target_lengths, n, batched);
  const int64_t width = padded ? targets.size(1) : (batched ? 0 : targets.size(0));
  int64_t total = 0;
  for (int64_t b = 0; b < n; ++b) {
    SINTER_CHECK(il[b] >= 0 && il[b] <= t_max, op, ": input length ", il[b], " of sample ", b,
                 " out of [0, T = ", t_max, "]");
    SINTER_CHECK(tl[b] >= 0, op, ": target length ", tl[b], " of sample ", b, " is negative");
    SINTER_CHECK(width == 0 || tl[b] <= width, op, ": target length ", tl[b], " of sample ", b,
                 " is longer than the targets' S = ", width);
    total += tl[b];
  }
  SINTER_CHECK(width > 0 || targets.numel() == total, op, ": 1-D targets hold ", targets.numel(),
               " labels, but target_lengths sum to ", total);
  const CtcPlan plan = ctc_plan(targets.to(DType::i64).contiguous().cpu().to_vector<int64_t>(),
                                width, classes, opts.blank, il, tl, t_max, lp.device());
  // The half types run the recursion in f32 (kCtcLogZero is out of f16's range).
  const DType acc = lp.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor ll = ctc_log_likelihood(lp.to(acc), plan);
  // An infeasible alignment (no path reaches the end) as +inf, or 0 with zero_infinity.
  Tensor loss = where(ge(ll, kCtcLogZero / 2), neg(ll), opts.zero_infinity ? 0.0 : INFINITY);
  if (opts.reduction == Reduction::Mean) {
    loss = div(loss, clamp(target_lengths.reshape({n}).to(lp.device()).to(acc), 1.0));
  }
  loss = reduce_loss(op, loss, opts.reduction).to(log_probs.dtype());
  return batched || opts.reduction != Reduction::None ? loss : loss.squeeze(0);
}

}  // namespace sinter
