// Normalization and dropout: batch_norm, layer_norm and rms_norm run fused forward and backward
// kernels (src/kern/norm.h), dropout draws its mask from Philox (Note [dropout mask]).
#include "kern/norm.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

// Note [norm statistics] in src/kern/norm.inc: statistics and dweight/dbias are f64 for f64 inputs,
// f32 otherwise.
DType acc_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

void check_input(const char* op, const Tensor& x) {
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK(is_floating(x.dtype()), op, ": expected a floating input, got dtype ", x.dtype());
}

bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// weight, bias (dtype of x, or f32 with a bf16 or f16 x: PyTorch's mixed norms, which autocast
// on the CPU gives them) and running statistics (any floating dtype) must sit on x's device with
// shape `want`.
void check_param(const char* op, const char* what, const Tensor& p, const Tensor& x,
                 const Shape& want, bool parameter) {
  if (!p.defined()) return;
  SINTER_CHECK(p.device() == x.device(), op, ": ", what, " is on ", p.device(),
               " but the input is on ", x.device());
  if (parameter) {
    SINTER_CHECK(p.dtype() == x.dtype() || (is_half(x.dtype()) && p.dtype() == DType::f32), op,
                 ": ", what, " has dtype ", p.dtype(), " but the input has dtype ", x.dtype(),
                 " (a bf16 or f16 input also takes f32 parameters)");
  } else {
    SINTER_CHECK(is_floating(p.dtype()), op, ": ", what, " must be floating, got dtype ",
                 p.dtype());
  }
  SINTER_CHECK(p.shape() == want, op, ": ", what, " has shape ", shape_str(p.shape()),
               ", expected ", shape_str(want));
}

// The per-channel parameters (x's dtype, or f32 with a bf16 or f16 x) and running statistics of
// batch_norm and instance_norm, each (c) or undefined, the statistics both or neither.
void check_channel_params(const char* op, const Tensor& x, int64_t c, const Tensor& weight,
                          const Tensor& bias, const Tensor& running_mean,
                          const Tensor& running_var) {
  check_param(op, "weight", weight, x, {c}, true);
  check_param(op, "bias", bias, x, {c}, true);
  check_param(op, "running_mean", running_mean, x, {c}, false);
  check_param(op, "running_var", running_var, x, {c}, false);
  SINTER_CHECK(running_mean.defined() == running_var.defined(), op,
               ": pass both running_mean and running_var, or neither");
}

void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// A weight or bias in the kernels' dtype, the statistics' (Note [norm statistics]): f32 for a
// bf16 or f16 input, whose gradient comes back through the cast. Undefined stays undefined.
Tensor param_in(const Tensor& p, DType acc) { return p.defined() ? p.to(acc) : p; }

Tensor contiguous_or_undefined(const Tensor& t) {
  if (!t.defined()) return t;
  NoGradGuard ng;
  return t.contiguous();
}

bool wants_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }

// What a normalization's forward leaves for its backward: the contiguous input, its statistics
// and the contiguous weight (acc_dtype; undefined without one).
struct NormSaved {
  Tensor x, mean, rstd, weight;
};

// What the backward kernel of batch_norm or layer_norm reads, the saved tensors and the output
// gradient g (x's dtype, contiguous), and writes: dx, dw and db, each undefined when not wanted (dw
// and db of the statistics' dtype, the parameters' as the kernels take them).
struct NormBackward {
  Tensor g, x, mean, rstd, weight;
  Tensor dx, dw, db;
};

// Records the backward of y = op(x, weight, bias) with weight and bias of shape param_shape.
// `kernel` fills the NormBackward's dx, dw and db; when it `accumulates` into dw and db, they start
// at zero.
template <class Kernel>
void record_norm_backward(const char* op, Tensor& y, const Tensor& x, const Tensor& weight,
                          const Tensor& bias, const NormSaved& saved, const Shape& param_shape,
                          bool accumulates, Kernel kernel) {
  SavedTensor sx(saved.x, op), smean(saved.mean, op), srstd(saved.rstd, op);
  SavedTensor sw = saved.weight.defined() ? SavedTensor(saved.weight, op) : SavedTensor();
  const bool need_x = wants_grad(x), need_w = wants_grad(weight), need_b = wants_grad(bias);
  record(op, {&y}, {x, weight, bias}, [=](const Grads& g) {
    NormBackward bw;
    bw.x = sx.get();
    bw.weight = sw.defined() ? sw.get() : Tensor();
    bw.mean = smean.get();
    bw.rstd = srstd.get();
    const TensorOptions xo{.dtype = bw.x.dtype(), .device = bw.x.device()};
    const TensorOptions acc{.dtype = acc_dtype(bw.x.dtype()), .device = bw.x.device()};
    bw.g = g[0].to(xo.dtype).contiguous();
    auto param_grad = [&](bool need) {
      if (!need) return Tensor();
      return accumulates ? zeros(param_shape, acc) : empty(param_shape, acc);
    };
    if (need_x) bw.dx = empty(bw.x.shape(), xo);
    bw.dw = param_grad(need_w);
    bw.db = param_grad(need_b);
    kernel(bw);
    return Grads{bw.dx, need_w ? bw.dw : Tensor(), need_b ? bw.db : Tensor()};
  });
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  SINTER_PROFILE_OP("batch_norm", x, running_mean, running_var, weight, bias);
  const char* op = "batch_norm";
  // The running statistics are updated in place: they are passed as they are.
  SINTER_AUTOCAST(batch_norm, x,
                  batch_norm(cast(x), running_mean, running_var, cast(weight), cast(bias), training,
                             momentum, eps));
  check_input(op, x);
  SINTER_CHECK(x.dim() >= 2, op, ": expected an input of shape (N, C, *), got shape ",
               shape_str(x.shape()));
  SINTER_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
  const int64_t n = x.size(0), c = x.size(1);
  int64_t hw = 1;
  for (int64_t d = 2; d < x.dim(); ++d) hw *= x.size(d);
  check_channel_params(op, x, c, weight, bias, running_mean, running_var);
  SINTER_CHECK(training || running_mean.defined(), op,
               ": eval mode normalizes with the running statistics, but none were given");
  SINTER_CHECK(!training || n * hw > 1 || c == 0, op,
               ": expected more than 1 value per channel when training, got input shape ",
               shape_str(x.shape()));

  const DType acc = acc_dtype(x.dtype());
  const TensorOptions acc_opts{.dtype = acc, .device = x.device()};
  const Tensor w = param_in(weight, acc), b = param_in(bias, acc);
  Tensor xc = contiguous_or_undefined(x);
  Tensor wc = contiguous_or_undefined(w), bc = contiguous_or_undefined(b);
  Tensor mean, rstd;
  if (training) {
    mean = empty({c}, acc_opts);
    rstd = empty({c}, acc_opts);
    Tensor var = empty({c}, acc_opts);
    if (c > 0) {
      SINTER_DISPATCH(x.device(), batch_norm_stats, xc.data_ptr(), x.dtype(), n, c, hw, eps,
                      mean.data_ptr(), var.data_ptr(), rstd.data_ptr());
    }
    if (running_mean.defined()) {
      // Buffers, not saved by any node: the in-place update (and its version bump) is safe.
      NoGradGuard ng;
      const double m = static_cast<double>(n * hw);
      Tensor rm = running_mean, rv = running_var;
      rm.copy_(add(mul(running_mean.to(acc), 1.0 - momentum), mul(mean, momentum)));
      rv.copy_(add(mul(running_var.to(acc), 1.0 - momentum), mul(var, momentum * m / (m - 1.0))));
    }
  } else {
    NoGradGuard ng;
    // Copies, so that a later update of the buffers cannot change what backward reads.
    mean = running_mean.to(acc).clone();
    rstd = rsqrt(add(running_var.to(acc), eps)).contiguous();
  }

  Tensor y = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (y.numel() > 0) {
    SINTER_DISPATCH(x.device(), batch_norm_apply, xc.data_ptr(), x.dtype(), n, c, hw,
                    mean.data_ptr(), rstd.data_ptr(), ptr_or_null(wc), ptr_or_null(bc),
                    y.data_ptr());
  }
  if (needs_grad({&x, &w, &b})) {
    auto kernel = [=](const NormBackward& bw) {
      if (c == 0) return;
      SINTER_DISPATCH(bw.x.device(), batch_norm_backward, bw.g.data_ptr(), bw.x.data_ptr(),
                      bw.x.dtype(), n, c, hw, bw.mean.data_ptr(), bw.rstd.data_ptr(),
                      ptr_or_null(bw.weight), training, ptr_or_null(bw.dx), ptr_or_null(bw.dw),
                      ptr_or_null(bw.db));
    };
    record_norm_backward(op, y, x, w, b, {xc, mean, rstd, wc}, {c}, false, kernel);
  }
  return y;
}

namespace {

// layer_norm and rms_norm over the trailing dims `normalized_shape` of x (Note [norm statistics]):
// the checks, then kern's layer_norm_forward of `kind`, and its backward.
Tensor row_norm(const char* op, kern::RowNorm kind, const Tensor& x, const Shape& normalized_shape,
                const Tensor& weight, const Tensor& bias, double eps) {
  check_input(op, x);
  const auto k = static_cast<int64_t>(normalized_shape.size());
  SINTER_CHECK(k >= 1, op, ": normalized_shape must name at least one dim");
  SINTER_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
  bool trailing = x.dim() >= k;
  for (int64_t d = 0; trailing && d < k; ++d) {
    trailing = x.size(x.dim() - k + d) == normalized_shape[d];
  }
  SINTER_CHECK(trailing, op, ": normalized_shape ", shape_str(normalized_shape),
               " does not match the trailing dims of the input of shape ", shape_str(x.shape()));
  check_param(op, "weight", weight, x, normalized_shape, true);
  check_param(op, "bias", bias, x, normalized_shape, true);
  const int64_t cols = numel_of(normalized_shape);
  int64_t rows = 1;
  for (int64_t d = 0; d < x.dim() - k; ++d) rows *= x.size(d);

  const DType acc = acc_dtype(x.dtype());
  const TensorOptions acc_opts{.dtype = acc, .device = x.device()};
  const Tensor w = param_in(weight, acc), b = param_in(bias, acc);
  Tensor xc = contiguous_or_undefined(x);
  Tensor wc = contiguous_or_undefined(w), bc = contiguous_or_undefined(b);
  Tensor y = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  Tensor mean = empty({rows}, acc_opts), rstd = empty({rows}, acc_opts);
  if (y.numel() > 0) {
    SINTER_DISPATCH(x.device(), layer_norm_forward, xc.data_ptr(), x.dtype(), rows, cols, kind,
                    ptr_or_null(wc), ptr_or_null(bc), eps, y.data_ptr(), mean.data_ptr(),
                    rstd.data_ptr());
  }
  if (needs_grad({&x, &w, &b})) {
    auto kernel = [=](const NormBackward& bw) {
      if (bw.x.numel() == 0) return;
      SINTER_DISPATCH(bw.x.device(), layer_norm_backward, bw.g.data_ptr(), bw.x.data_ptr(),
                      bw.x.dtype(), rows, cols, kind, bw.mean.data_ptr(), bw.rstd.data_ptr(),
                      ptr_or_null(bw.weight), ptr_or_null(bw.dx), ptr_or_null(bw.dw),
                      ptr_or_null(bw.db));
    };
    record_norm_backward(op, y, x, w, b, {xc, mean, rstd, wc}, normalized_shape, true, kernel);
  }
  return y;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  SINTER_PROFILE_OP("layer_norm", x, weight, bias);
  SINTER_AUTOCAST(layer_norm, x,
                  layer_norm(cast(x), normalized_shape, cast(weight), cast(bias), eps));
  return row_norm("layer_norm", kern::RowNorm::Layer, x, normalized_shape, weight, bias, eps);
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  SINTER_PROFILE_OP("rms_norm", x, weight);
  SINTER_AUTOCAST(rms_norm, x, rms_norm(cast(x), normalized_shape, cast(weight), eps));
  SINTER_CHECK(x.defined(), "rms_norm: undefined input");
  // Without eps, the machine epsilon of the type the sums run in (PyTorch's default).
  const double e = eps ? *eps
                       : (x.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                                  : std::numeric_limits<float>::epsilon());
  return row_norm("rms_norm", kern::RowNorm::Rms, x, normalized_shape, weight, Tensor(), e);
}

namespace {

// y * weight + bias with weight and bias (C) per channel of y (N, C, *), each when defined. f32
// parameters of a bf16 or f16 y: the affine in f32, rounded back to y's dtype once.
Tensor channel_affine(const Tensor& y, const Tensor& weight, const Tensor& bias) {
  Shape per_channel(static_cast<size_t>(y.dim() - 1), 1);
  per_channel[0] = y.size(1);
  Tensor out = y;
  if (weight.defined()) out = mul(out, weight.reshape(per_channel));
  if (bias.defined()) out = add(out, bias.reshape(per_channel));
  return out.to(y.dtype());
}

// The product of x's dims from 2 on: the positions of each channel.
int64_t positions(const Tensor& x) {
  int64_t hw = 1;
  for (int64_t d = 2; d < x.dim(); ++d) hw *= x.size(d);
  return hw;
}

}  // namespace

// Each (sample, group) is a row of layer_norm's kernels: x (N, C, *) as (N, G, C / G * positions),
// normalized row by row, then the per-channel affine.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  SINTER_PROFILE_OP("group_norm", x, weight, bias);
  const char* op = "group_norm";
  SINTER_AUTOCAST(group_norm, x, group_norm(cast(x), num_groups, cast(weight), cast(bias), eps));
  check_input(op, x);
  SINTER_CHECK(x.dim() >= 2, op, ": expected an input of shape (N, C, *), got shape ",
               shape_str(x.shape()));
  const int64_t n = x.size(0), c = x.size(1);
  SINTER_CHECK(num_groups > 0 && c % num_groups == 0, op, ": num_groups ", num_groups,
               " must be positive and divide the input's ", c, " channels");
  check_param(op, "weight", weight, x, {c}, true);
  check_param(op, "bias", bias, x, {c}, true);
  const int64_t group_size = c / num_groups * positions(x);
  const Tensor rows = x.reshape({n, num_groups, group_size});
  const Tensor y = row_norm(op, kern::RowNorm::Layer, rows, {group_size}, Tensor(), Tensor(), eps);
  return channel_affine(y.reshape(x.shape()), weight, bias);
}

// PyTorch's composition: x (N, C, *) as one sample of N * C channels through batch_norm, each
// running statistic repeated N times and, when batch_norm updated the copies, their mean over the
// samples copied back.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  SINTER_PROFILE_OP("instance_norm", x, running_mean, running_var, weight, bias);
  const char* op = "instance_norm";
  // The running statistics are updated in place: they are passed as they are.
  SINTER_AUTOCAST(instance_norm, x,
                  instance_norm(cast(x), running_mean, running_var, cast(weight), cast(bias),
                                use_input_stats, momentum, eps));
  check_input(op, x);
  SINTER_CHECK(x.dim() >= 3, op, ": expected an input of shape (N, C, *) with a spatial dim, got ",
               "shape ", shape_str(x.shape()));
  const int64_t n = x.size(0), c = x.size(1), hw = positions(x);
  check_channel_params(op, x, c, weight, bias, running_mean, running_var);
  SINTER_CHECK(use_input_stats || running_mean.defined(), op,
               ": without use_input_stats it normalizes with the running statistics, but none were "
               "given");
  SINTER_CHECK(!use_input_stats || hw > 1, op,
               ": expected more than 1 spatial element when using the input's statistics, got ",
               "input shape ", shape_str(x.shape()));
  Tensor rm, rv;
  if (running_mean.defined()) {
    NoGradGuard ng;
    rm = running_mean.unsqueeze(0).expand({n, c}).contiguous().reshape({n * c});
    rv = running_var.unsqueeze(0).expand({n, c}).contiguous().reshape({n * c});
  }
  const Tensor y = batch_norm(x.reshape({1, n * c, hw}), rm, rv, Tensor(), Tensor(),
                              use_input_stats, momentum, eps);
  if (running_mean.defined() && use_input_stats) {
    NoGradGuard ng;
    Tensor m = running_mean, v = running_var;
    m.copy_(mean(rm.reshape({n, c}), {0}));
    v.copy_(mean(rv.reshape({n, c}), {0}));
  }
  return channel_affine(y.reshape(x.shape()), weight, bias);
}

namespace {

// dropout of x as `block` of a tensor of `whole` elements (Note [dropout blocks]): the generator
// advances by the whole's count.
Tensor dropout_of_block(const char* op, const Tensor& x, double p, Generator* gen, int64_t whole,
                        const kern::DropoutBlock& block) {
  Generator& g = gen ? *gen : default_generator();
  const int64_t numel = x.numel();
  const GeneratorState st = g.reserve(static_cast<uint64_t>(whole));
  // Keep iff (w0 >> 8) >= ceil(p 2^24) (Note [dropout mask]); p == 1 gives 2^24, which drops all.
  const auto threshold = static_cast<uint32_t>(std::ceil(p * 0x1p24));
  const double scale = p == 1 ? 0.0 : 1.0 / (1.0 - p);
  Tensor xc = contiguous_or_undefined(x);
  Tensor y = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (numel > 0) {
    SINTER_DISPATCH(x.device(), dropout_apply, xc.data_ptr(), x.dtype(), numel, st.seed, st.offset,
                    threshold, scale, block, y.data_ptr());
  }
  if (needs_grad({&x})) {
    record(op, {&y}, {x}, [st, threshold, scale, numel, block](const Grads& gr) {
      Tensor gc = gr[0].contiguous();
      Tensor dx = empty(gc.shape(), {.dtype = gc.dtype(), .device = gc.device()});
      if (numel > 0) {
        SINTER_DISPATCH(gc.device(), dropout_apply, gc.data_ptr(), gc.dtype(), numel, st.seed,
                        st.offset, threshold, scale, block, dx.data_ptr());
      }
      return Grads{dx};
    });
  }
  return y;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  SINTER_PROFILE_OP("dropout", x);
  const char* op = "dropout";
  check_input(op, x);
  SINTER_CHECK(p >= 0 && p <= 1, op, ": probability must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  return dropout_of_block(op, x, p, gen, x.numel(), kern::DropoutBlock{});
}

Tensor dropout_block(const Tensor& x, double p, bool training, int64_t dim, int64_t offset,
                     int64_t whole, Generator* gen) {
  SINTER_PROFILE_OP("dropout_block", x);
  const char* op = "dropout_block";
  check_input(op, x);
  SINTER_CHECK(p >= 0 && p <= 1, op, ": probability must be in [0, 1], got ", p);
  SINTER_CHECK(x.dim() > 0, op, ": x must have a dim to split, got a scalar");
  const int64_t d = wrap_dim(op, dim, x.dim());
  SINTER_CHECK(offset >= 0 && whole >= 0 && offset + x.size(d) <= whole, op, ": the block [",
               offset, ", ", offset + x.size(d), ") of dim ", d, " does not fit a whole of ",
               whole);
  if (!training || p == 0) return x;
  int64_t inner = 1, others = 1;
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k > d) inner *= x.size(k);
    if (k != d) others *= x.size(k);
  }
  const kern::DropoutBlock block{x.size(d) * inner, whole * inner, offset * inner};
  return dropout_of_block(op, x, p, gen, others * whole, block);
}

}  // namespace sinter
