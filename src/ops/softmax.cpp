// softmax, log_softmax, cross_entropy and nll_loss: the softmax family (src/kern/softmax.h), a
// row kernel and a fused logsumexp pass over the classes. nll_loss shares cross_entropy's checks,
// and its ops take cross_entropy's class weights.
#include "kern/softmax.h"

#include <algorithm>
#include <vector>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

RowView row_view(const Shape& s, int64_t d) {
  RowView v;
  if (s.empty()) return v;
  for (int64_t k = 0; k < d; ++k) v.outer *= s[k];
  v.dim = s[d];
  for (int64_t k = d + 1; k < static_cast<int64_t>(s.size()); ++k) v.inner *= s[k];
  return v;
}

namespace {

Tensor softmax_impl(const char* op, const Tensor& x, int64_t dim, bool log) {
  SINTER_CHECK(x.defined(), op, ": undefined tensor argument");
  SINTER_CHECK(is_floating(x.dtype()), op, ": expected a floating tensor, got dtype ", x.dtype());
  const int64_t n = std::max<int64_t>(x.dim(), 1);
  SINTER_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for a tensor with ", x.dim(),
               " dims (shape ", shape_str(x.shape()), ")");
  const RowView v = row_view(x.shape(), dim < 0 ? dim + n : dim);
  Tensor src;
  {
    NoGradGuard ng;
    src = x.contiguous();
  }
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() > 0) {
    SINTER_DISPATCH(x.device(), softmax_rows, src.data_ptr(), x.dtype(), v.outer, v.dim, v.inner,
                    log, out.data_ptr());
  }
  if (needs_grad({&x})) {
    SavedTensor sy(out, op);
    record(op, {&out}, {x}, [sy, v, log](const Grads& g) {
      Tensor y = sy.get();
      Tensor gc = g[0].contiguous();
      Tensor dx = empty(y.shape(), {.dtype = y.dtype(), .device = y.device()});
      if (dx.numel() > 0) {
        SINTER_DISPATCH(y.device(), softmax_rows_backward, gc.data_ptr(), y.data_ptr(), y.dtype(),
                        v.outer, v.dim, v.inner, log, dx.data_ptr());
      }
      return Grads{dx};
    });
  }
  return out;
}

// Checks the (input, target) pair of cross_entropy and nll_loss: input (N, C, d1, ...) floating,
// target (N, d1, ...) i64 on the same device, C >= 1.
void check_class_args(const char* op, const Tensor& input, const Tensor& target) {
  SINTER_CHECK(input.defined() && target.defined(), op, ": undefined tensor argument");
  SINTER_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got dtype ",
               input.dtype());
  SINTER_CHECK(target.dtype() == DType::i64, op, ": target must hold i64 class indices, got dtype ",
               target.dtype());
  SINTER_CHECK(input.device() == target.device(), op, ": input on ", input.device(), ", target on ",
               target.device());
  SINTER_CHECK(input.dim() >= 2, op, ": expected input of shape (N, C) or (N, C, d1, ...), got ",
               shape_str(input.shape()));
  Shape want = input.shape();
  want.erase(want.begin() + 1);
  SINTER_CHECK(target.shape() == want, op, ": target shape ", shape_str(target.shape()),
               " does not match input shape ", shape_str(input.shape()), "; expected ",
               shape_str(want));
  SINTER_CHECK(input.size(1) >= 1, op, ": input has no classes (shape ", shape_str(input.shape()),
               ")");
}

// Every target is in [0, c) or equal to ignore_index. Reads the extremes back to the host (a
// device sync on CUDA), so that a bad label is an error here rather than an out-of-bounds read in
// a kernel.
void check_target_range(const char* op, const Tensor& target, int64_t c, int64_t ignore_index) {
  if (target.numel() == 0) return;
  NoGradGuard ng;
  Tensor t = where(ne(target, static_cast<double>(ignore_index)), target, 0.0);
  const std::vector<int64_t> lo_hi = stack({min(t), max(t)}).to_vector<int64_t>();
  const int64_t bad = lo_hi[0] < 0 ? lo_hi[0] : lo_hi[1];
  SINTER_CHECK(lo_hi[0] >= 0 && lo_hi[1] < c, op, ": target ", bad, " is out of range [0, ", c,
               ") and is not ignore_index (", ignore_index, ")");
}

// The number of targets not equal to ignore_index, as a 0-d tensor of dtype.
Tensor count_kept(const Tensor& target, int64_t ignore_index, DType dtype) {
  NoGradGuard ng;
  return sum(ne(target, static_cast<double>(ignore_index))).to(dtype);
}

// weight, when given, is (C) of input's dtype and device.
void check_class_weight(const char* op, const Tensor& input, const Tensor& weight) {
  if (!weight.defined()) return;
  SINTER_CHECK(weight.dtype() == input.dtype(), op, ": weight has dtype ", weight.dtype(),
               ", the input has ", input.dtype());
  SINTER_CHECK(weight.device() == input.device(), op, ": weight on ", weight.device(),
               ", the input on ", input.device());
  SINTER_CHECK(weight.shape() == Shape{input.size(1)}, op, ": weight of shape ",
               shape_str(weight.shape()), " for ", input.size(1), " classes; expected [",
               input.size(1), "]");
}

// opts with `weight` in place of its own (autocast's re-entry, with the weight cast).
CrossEntropyOptions with_weight(CrossEntropyOptions opts, Tensor weight) {
  opts.weight = std::move(weight);
  return opts;
}

// Note [class weights]
// nll_loss, and cross_entropy with a weight, are built from ops on log_probs (N, C, d1, ...) as
// PyTorch's: with w = weight (1 without one) and the kept samples those not ignored,
//   loss_i = -w[t_i] log_probs[i, t_i],  smooth_i = -sum_c w[c] log_probs[i, c] (0 if ignored),
//   result = (1 - eps) reduce(loss) + eps / C reduce(smooth),
// where Mean divides each sum by sum(w[t_i]) over the kept samples (their count without a weight:
// Note [all ignored]). The sums of Mean run in the accumulation dtype.
Tensor class_loss(const char* op, const Tensor& log_probs, const Tensor& target,
                  const CrossEntropyOptions& opts) {
  const int64_t c = log_probs.size(1);
  // mask (N, C, d1, ...): true at each kept sample's target class; ignored samples pick nothing.
  Tensor mask, kept;
  Shape cshape(log_probs.dim(), 1);
  cshape[1] = c;
  {
    NoGradGuard ng;
    Tensor classes = arange(0.0, static_cast<double>(c), 1.0,
                            {.dtype = DType::i64, .device = log_probs.device()})
                         .reshape(cshape);
    kept = ne(target, static_cast<double>(opts.ignore_index));
    mask = eq(classes, where(kept, target, -1.0).unsqueeze(1));
  }
  const Tensor w = opts.weight.defined() ? opts.weight.reshape(cshape) : Tensor();
  const Tensor wlp = w.defined() ? log_probs * w : log_probs;
  Tensor loss = neg(sum(where(mask, wlp, 0.0), {1}));
  const double eps = opts.label_smoothing;
  Tensor smooth = eps > 0.0 ? where(kept, neg(sum(wlp, {1})), 0.0) : Tensor();
  if (opts.reduction == Reduction::Mean) {
    const DType dtype = loss.dtype(), acc = kern::loss_acc_dtype(dtype);
    Tensor denom =
        w.defined() ? sum(where(mask, w, 0.0)).to(acc) : count_kept(target, opts.ignore_index, acc);
    loss = div(sum(loss.to(acc)), denom).to(dtype);
    if (smooth.defined()) smooth = div(sum(smooth.to(acc)), denom).to(dtype);
  } else {
    loss = reduce_loss(op, loss, opts.reduction);
    if (smooth.defined()) smooth = reduce_loss(op, smooth, opts.reduction);
  }
  if (!smooth.defined()) return loss;
  return (1.0 - eps) * loss + (eps / static_cast<double>(c)) * smooth;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  SINTER_PROFILE_OP("softmax", x);
  SINTER_AUTOCAST(softmax, x, softmax(cast(x), dim));
  return softmax_impl("softmax", x, dim, false);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  SINTER_PROFILE_OP("log_softmax", x);
  SINTER_AUTOCAST(log_softmax, x, log_softmax(cast(x), dim));
  return softmax_impl("log_softmax", x, dim, true);
}

// Note [all ignored]
// With Reduction::Mean and every target equal to ignore_index the loss is 0 / 0 = NaN, as in
// PyTorch; the gradient is zero (ignored samples get none, whatever the upstream value), so one
// such batch does not poison the weights.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts) {
  SINTER_PROFILE_OP("cross_entropy", logits, target);
  const char* op = "cross_entropy";
  SINTER_AUTOCAST(cross_entropy, logits,
                  cross_entropy(cast(logits), cast(target), with_weight(opts, cast(opts.weight))));
  check_class_args(op, logits, target);
  check_reduction(op, opts.reduction);
  SINTER_CHECK(opts.label_smoothing >= 0.0 && opts.label_smoothing <= 1.0, op,
               ": label_smoothing must be in [0, 1], got ", opts.label_smoothing);
  check_class_weight(op, logits, opts.weight);
  if (opts.weight.defined()) {
    // Per Note [class weights], from ops rather than the fused kernel, in its accumulation dtype.
    check_target_range(op, target, logits.size(1), opts.ignore_index);
    const DType acc = kern::loss_acc_dtype(logits.dtype());
    return class_loss(op, log_softmax(logits.to(acc), 1), target,
                      with_weight(opts, opts.weight.to(acc)))
        .to(logits.dtype());
  }
  if (target.device().is_cuda()) {
    // On the device, reported at the next synchronization (Note [deferred device checks]); the
    // kernels treat an out-of-range target as ignored meanwhile.
    const Tensor tc = target.contiguous();
    SINTER_DISPATCH(tc.device(), check_indices, static_cast<const int64_t*>(tc.data_ptr()),
                    tc.numel(), 0, logits.size(1), opts.ignore_index,
                    kern::DeviceCheck::CrossEntropyTarget);
  } else {
    check_target_range(op, target, logits.size(1), opts.ignore_index);
  }
  const DType dtype = logits.dtype(), acc = kern::loss_acc_dtype(dtype);
  const Device dev = logits.device();

  Tensor x, t;
  {
    NoGradGuard ng;
    x = logits.contiguous();
    t = target.contiguous();
  }
  int64_t inner = 1;
  for (int64_t k = 2; k < logits.dim(); ++k) inner *= logits.size(k);
  kern::CrossEntropyArgs args{.dtype = dtype,
                              .n = logits.size(0),
                              .c = logits.size(1),
                              .inner = inner,
                              .logits = x.data_ptr(),
                              .target = static_cast<const int64_t*>(t.data_ptr()),
                              .ignore_index = opts.ignore_index,
                              .label_smoothing = opts.label_smoothing};
  // loss, lse: (N, d1, ...), per sample, in the accumulation dtype.
  Tensor loss = empty(target.shape(), {.dtype = acc, .device = dev});
  Tensor lse = empty(target.shape(), {.dtype = acc, .device = dev});
  if (loss.numel() > 0) {
    SINTER_DISPATCH(dev, cross_entropy_rows, args, loss.data_ptr(), lse.data_ptr());
  }

  Tensor out, count;
  {
    NoGradGuard ng;
    switch (opts.reduction) {
      case Reduction::None:
        out = loss.to(dtype);
        break;
      case Reduction::Sum:
        out = sum(loss).to(dtype);
        break;
      case Reduction::Mean:
        count = count_kept(t, opts.ignore_index, acc);
        out = div(sum(loss), count).to(dtype);
        break;
      case Reduction::BatchMean:  // refused by check_reduction above
        break;
    }
  }
  if (needs_grad({&logits})) {
    SavedTensor sx(logits, op), st(target, op), sl(lse, op), sc(count, op);
    const Reduction reduction = opts.reduction;
    record(op, {&out}, {logits}, [sx, st, sl, sc, args, reduction, acc](const Grads& g) {
      Tensor xs = sx.get().contiguous(), ts = st.get().contiguous(), ls = sl.get();
      // The gradient of each sample's loss: its own (None), or one shared value.
      Tensor per = g[0].to(acc);
      if (reduction == Reduction::Mean) per = div(per, sc.get());
      per = per.contiguous();
      kern::CrossEntropyArgs a = args;
      a.logits = xs.data_ptr();
      a.target = static_cast<const int64_t*>(ts.data_ptr());
      Tensor dx = empty(xs.shape(), {.dtype = xs.dtype(), .device = xs.device()});
      if (dx.numel() > 0) {
        SINTER_DISPATCH(xs.device(), cross_entropy_rows_backward, a, ls.data_ptr(), per.data_ptr(),
                        reduction == Reduction::None ? 1 : 0, dx.data_ptr());
      }
      return Grads{dx};
    });
  }
  return out;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const CrossEntropyOptions& opts) {
  SINTER_PROFILE_OP("nll_loss", log_probs, target);
  const char* op = "nll_loss";
  SINTER_AUTOCAST(nll_loss, log_probs,
                  nll_loss(cast(log_probs), target, with_weight(opts, cast(opts.weight))));
  check_class_args(op, log_probs, target);
  check_reduction(op, opts.reduction);
  check_class_weight(op, log_probs, opts.weight);
  check_target_range(op, target, log_probs.size(1), opts.ignore_index);
  CrossEntropyOptions o = opts;
  o.label_smoothing = 0.0;
  return class_loss(op, log_probs, target, o);
}

}  // namespace sinter
