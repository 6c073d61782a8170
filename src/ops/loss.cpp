// The losses built from other ops: mse_loss and binary_cross_entropy_with_logits (cross_entropy
// and nll_loss are in softmax.cpp), and the reductions every loss ends with.
#include <algorithm>
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
  }
  SINTER_THROW(op, ": unknown reduction ", static_cast<int>(reduction));
}

void check_reduction(const char* op, Reduction r) {
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

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  SINTER_PROFILE_OP("mse_loss", input, target);
  const char* op = "mse_loss";
  SINTER_CHECK(input.defined() && target.defined(), op, ": undefined tensor argument");
  SINTER_AUTOCAST(mse_loss, input, mse_loss(cast(input), cast(target), reduction));
  SINTER_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got dtype ",
               input.dtype());
  check_same_kind(op, "target", input, target);
  check_reduction(op, reduction);
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
  SINTER_CHECK(is_floating(logits.dtype()), op, ": expected floating logits, got dtype ",
               logits.dtype());
  check_same_kind(op, "target", logits, target);
  SINTER_CHECK(target.shape() == logits.shape(), op, ": target shape ", shape_str(target.shape()),
               " must equal the logits' shape ", shape_str(logits.shape()));
  check_reduction(op, reduction);
  if (pos_weight.defined()) {
    check_same_kind(op, "pos_weight", logits, pos_weight);
    bool fits = pos_weight.dim() <= logits.dim();
    for (int64_t k = 1; fits && k <= pos_weight.dim(); ++k) {
      const int64_t p = pos_weight.size(-k), l = logits.size(-k);
      fits = p == 1 || p == l;
    }
    SINTER_CHECK(fits, op, ": pos_weight of shape ", shape_str(pos_weight.shape()),
                 " does not broadcast to the logits' shape ", shape_str(logits.shape()));
  }
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
  std::vector<Tensor> inputs = {logits, target};
  if (pos_weight.defined()) inputs.push_back(pos_weight);
  if (needs_grad(inputs)) {
    SavedTensor sx(logits, op), st(target, op), sw(pos_weight, op);
    const Shape shape = logits.shape();
    const double numel = static_cast<double>(logits.numel());
    record(op, {&out}, inputs, [sx, st, sw, shape, numel, reduction](const Grads& g) {
      Tensor x = sx.get(), t = st.get(), w = sw.get();
      // The upstream gradient of each element's loss.
      Tensor ge = reduction == Reduction::Mean ? g[0] / numel : g[0];
      if (reduction != Reduction::None) ge = ge.expand(shape);
      if (!w.defined()) return Grads{ge * (sigmoid(x) - t), ge * neg(x)};
      Tensor sp = softplus_neg(x);
      Tensor l = (w - 1.0) * t + 1.0;
      return Grads{ge * ((1.0 - t) + l * (sigmoid(x) - 1.0)), ge * ((w - 1.0) * sp - x),
                   sum_to(ge * t * sp, w.shape())};
    });
  }
  return out;
}

}  // namespace sinter
