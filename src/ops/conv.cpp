// The convolutions: conv2d (grouped, strided, padded, dilated, over NCHW tensors) and
// conv_transpose2d on the conv2d kernels (forward, input gradient, weight gradient), and the 1-D
// and 3-D forms of both built on those two.
#include "kern/conv.h"

#include <string>
#include <utility>
#include <vector>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

// The checks every convolution shares: x (N, C_in, *spatial) and weight (C_out, C_in / groups,
// *kernel), or for a transposed one (C_in, C_out / groups, *kernel), both of rank spatial + 2 and
// one floating dtype on one device; bias (C_out) or undefined.
void check_conv(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                int64_t spatial, int64_t groups, bool transposed) {
  static const char* const kLayouts[] = {"", "(N, C, L)", "(N, C, H, W)", "(N, C, D, H, W)"};
  SINTER_CHECK(x.defined() && weight.defined(), op, ": undefined input or weight");
  SINTER_CHECK(x.dim() == spatial + 2, op, ": input must be ", spatial + 2, "-D ",
               kLayouts[spatial], ", got shape ", shape_str(x.shape()));
  SINTER_CHECK(weight.dim() == spatial + 2, op, ": weight must be ", spatial + 2, "-D ",
               transposed ? "(C_in, C_out / groups, *kernel)" : "(C_out, C_in / groups, *kernel)",
               ", got shape ", shape_str(weight.shape()));
  SINTER_CHECK(x.device() == weight.device(), op, ": input on ", x.device(), " but weight on ",
               weight.device());
  SINTER_CHECK(x.dtype() == weight.dtype(), op, ": input dtype ", x.dtype(),
               " differs from weight dtype ", weight.dtype());
  SINTER_CHECK(is_floating(x.dtype()), op, ": expected floating tensors, got dtype ", x.dtype());
  SINTER_CHECK(groups >= 1, op, ": groups must be positive, got ", groups);
  const int64_t c_in = x.size(1);
  int64_t c_out = weight.size(0);
  if (transposed) {
    SINTER_CHECK(weight.size(0) == c_in && c_in % groups == 0, op, ": input ", shape_str(x.shape()),
                 " has ", c_in, " channels, but weight ", shape_str(weight.shape()), " has ",
                 weight.size(0), " input channels (dim 0), which groups ", groups, " must divide");
    c_out = weight.size(1) * groups;
  } else {
    SINTER_CHECK(weight.size(1) * groups == c_in, op, ": input ", shape_str(x.shape()), " has ",
                 c_in, " channels, but weight ", shape_str(weight.shape()), " with groups ", groups,
                 " expects ", weight.size(1) * groups);
    SINTER_CHECK(c_out % groups == 0, op, ": output channels ", c_out, " (weight shape ",
                 shape_str(weight.shape()), ") not divisible by groups ", groups);
  }
  for (int64_t d = 2; d < weight.dim(); ++d) {
    SINTER_CHECK(weight.size(d) >= 1, op, ": weight ", shape_str(weight.shape()),
                 " has an empty kernel");
  }
  if (bias.defined()) {
    SINTER_CHECK(bias.dim() == 1 && bias.size(0) == c_out, op, ": bias must have shape [", c_out,
                 "], got ", shape_str(bias.shape()));
    SINTER_CHECK(bias.device() == x.device(), op, ": input on ", x.device(), " but bias on ",
                 bias.device());
    SINTER_CHECK(bias.dtype() == x.dtype(), op, ": input dtype ", x.dtype(),
                 " differs from bias dtype ", bias.dtype());
  }
}

// The geometry of a convolution of x (n, c_in, h, w) by the 4-D weight (c_out = its dim 0), its
// output size left to the caller.
kern::Conv2dGeom geom_of(int64_t n, int64_t c_in, int64_t h, int64_t w, const Tensor& weight,
                         Size2 stride, Size2 padding, Size2 dilation, int64_t groups) {
  kern::Conv2dGeom g;
  g.n = n;
  g.c_in = c_in;
  g.h = h;
  g.w = w;
  g.c_out = weight.size(0);
  g.kh = weight.size(2);
  g.kw = weight.size(3);
  g.stride_h = stride.h;
  g.stride_w = stride.w;
  g.pad_h = padding.h;
  g.pad_w = padding.w;
  g.dil_h = dilation.h;
  g.dil_w = dilation.w;
  g.groups = groups;
  g.allow_tf32 = get_matmul_precision() == "high";
  return g;
}

// Checks the arguments and works out the geometry; x and weight are 4-D when it returns.
kern::Conv2dGeom conv_geom(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Conv2dOptions& o) {
  check_conv("conv2d", x, weight, bias, 2, o.groups, false);
  SINTER_CHECK(o.stride.h >= 1 && o.stride.w >= 1, "conv2d: stride must be positive, got ",
               o.stride);
  SINTER_CHECK(o.padding.h >= 0 && o.padding.w >= 0, "conv2d: padding must be non-negative, got ",
               o.padding);
  SINTER_CHECK(o.dilation.h >= 1 && o.dilation.w >= 1, "conv2d: dilation must be positive, got ",
               o.dilation);
  kern::Conv2dGeom g = geom_of(x.size(0), x.size(1), x.size(2), x.size(3), weight, o.stride,
                               o.padding, o.dilation, o.groups);
  const int64_t span_h = g.dil_h * (g.kh - 1) + 1, span_w = g.dil_w * (g.kw - 1) + 1;
  SINTER_CHECK(span_h <= g.h + 2 * g.pad_h && span_w <= g.w + 2 * g.pad_w, "conv2d: kernel ",
               span_h, "x", span_w, " (with dilation ", o.dilation,
               ") is larger than the padded input ", g.h + 2 * g.pad_h, "x", g.w + 2 * g.pad_w,
               " (input shape ", shape_str(x.shape()), ", padding ", o.padding, ")");
  g.h_out = (g.h + 2 * g.pad_h - span_h) / g.stride_h + 1;
  g.w_out = (g.w + 2 * g.pad_w - span_w) / g.stride_w + 1;
  return g;
}

// PyTorch's padding="same" over the last k.size() dims of x (stride 1): dim i is padded by
// dil[i] (k[i] - 1) in all, half before and the rest after. Returns x with any odd element padded
// onto its end already, and sets `even` to the padding each dim still takes on both sides.
Tensor same_padded(const char* op, const Tensor& x, const std::vector<int64_t>& k,
                   const std::vector<int64_t>& dil, const std::vector<int64_t>& stride,
                   const std::vector<int64_t>& padding, std::vector<int64_t>& even) {
  const size_t n = k.size();
  std::vector<int64_t> extra;  // pad()'s (left, right) pairs, last dim first
  bool uneven = false;
  even.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    SINTER_CHECK(stride[i] == 1, op, ": same_padding needs stride 1, got stride ", stride[i],
                 " in spatial dim ", i);
    SINTER_CHECK(padding[i] == 0, op, ": same_padding with padding ", padding[i],
                 " in spatial dim ", i, ": give one or the other");
    const int64_t total = dil[i] * (k[i] - 1);
    even[i] = total / 2;
    uneven |= total % 2 != 0;
  }
  if (!uneven) return x;
  for (size_t i = n; i-- > 0;) {
    extra.push_back(0);
    extra.push_back(dil[i] * (k[i] - 1) % 2);
  }
  return pad(x, extra);
}

// One spatial dim of a convolution: its input size, kernel, and options.
struct ConvDim {
  int64_t size, k, stride, padding, dilation, output_padding = 0;
};

// The output size of a convolution along one dim (PyTorch's floor), after checking its options.
int64_t conv_out_size(const char* op, int64_t i, const ConvDim& d) {
  SINTER_CHECK(d.stride >= 1 && d.padding >= 0 && d.dilation >= 1, op, ": spatial dim ", i,
               " has stride ", d.stride, ", padding ", d.padding, ", dilation ", d.dilation,
               " (stride and dilation must be positive, padding non-negative)");
  const int64_t span = d.dilation * (d.k - 1) + 1;
  SINTER_CHECK(span <= d.size + 2 * d.padding, op, ": kernel of ", span, " (", d.k,
               " taps, dilation ", d.dilation, ") is larger than the padded input ",
               d.size + 2 * d.padding, " in spatial dim ", i, " (size ", d.size, ", padding ",
               d.padding, ")");
  return (d.size + 2 * d.padding - span) / d.stride + 1;
}

// The output size of a transposed convolution along one dim, after checking its options.
int64_t conv_transpose_out_size(const char* op, int64_t i, const ConvDim& d) {
  SINTER_CHECK(d.stride >= 1 && d.padding >= 0 && d.dilation >= 1 && d.output_padding >= 0, op,
               ": spatial dim ", i, " has stride ", d.stride, ", padding ", d.padding,
               ", dilation ", d.dilation, ", output_padding ", d.output_padding,
               " (stride and dilation must be positive, the paddings non-negative)");
  SINTER_CHECK(d.output_padding < d.stride || d.output_padding < d.dilation, op,
               ": output_padding ", d.output_padding, " in spatial dim ", i,
               " must be smaller than the stride ", d.stride, " or the dilation ", d.dilation);
  const int64_t out =
      (d.size - 1) * d.stride - 2 * d.padding + d.dilation * (d.k - 1) + d.output_padding + 1;
  SINTER_CHECK(out >= 1, op, ": the output would have size ", out, " in spatial dim ", i,
               " (input size ", d.size, ", stride ", d.stride, ", padding ", d.padding, ", kernel ",
               d.k, ", dilation ", d.dilation, ")");
  return out;
}
}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& opts,
              Activation act) {
  if (act != Activation::None && needs_grad({&x, &weight, &bias})) {
    // The activation's own op records its backward (from the output for ReLU, from the input
    // for GELU); the fused epilogue is for inference.
    Tensor y = conv2d(x, weight, bias, opts);
    return act == Activation::Relu ? relu(y) : gelu(y, act);
  }
  SINTER_PROFILE_OP("conv2d", x, weight, bias);
  SINTER_AUTOCAST(conv2d, x, conv2d(cast(x), cast(weight), cast(bias), opts, act));
  if (opts.same_padding) {
    check_conv("conv2d", x, weight, bias, 2, opts.groups, false);
    std::vector<int64_t> even;
    const Tensor xp = same_padded(
        "conv2d", x, {weight.size(2), weight.size(3)}, {opts.dilation.h, opts.dilation.w},
        {opts.stride.h, opts.stride.w}, {opts.padding.h, opts.padding.w}, even);
    Conv2dOptions o = opts;
    o.same_padding = false;
    o.padding = {even[0], even[1]};
    return conv2d(xp, weight, bias, o, act);
  }
  kern::Conv2dGeom g = conv_geom(x, weight, bias, opts);
  g.act = kernel_act(act);
  Tensor out = empty({g.n, g.c_out, g.h_out, g.w_out}, {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() > 0) {
    NoGradGuard ng;
    Tensor xc = x.contiguous(), wc = weight.contiguous();
    Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
    SINTER_DISPATCH(x.device(), conv2d_forward, g, x.dtype(), xc.data_ptr(), wc.data_ptr(),
                    bc.defined() ? bc.data_ptr() : nullptr, out.data_ptr());
  }
  if (needs_grad({&x, &weight, &bias})) {
    const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    // The input gradient needs the weight and the weight gradient needs the input.
    SavedTensor sx(need_w ? x : Tensor(), "conv2d");
    SavedTensor sw(need_x ? weight : Tensor(), "conv2d");
    const Shape xshape = x.shape(), wshape = weight.shape();
    record("conv2d", {&out}, {x, weight, bias},
           [g, sx, sw, need_x, need_w, need_b, xshape, wshape](const Grads& grads) {
             Tensor gy = grads[0].contiguous();
             // The precision in force when the backward runs, as for matmul.
             kern::Conv2dGeom gb = g;
             gb.allow_tf32 = get_matmul_precision() == "high";
             const TensorOptions topts{.dtype = gy.dtype(), .device = gy.device()};
             Tensor dx, dw, db;
             if (need_x) {
               dx = empty(xshape, topts);
               if (dx.numel() > 0) {
                 Tensor w = sw.get().contiguous();
                 SINTER_DISPATCH(gy.device(), conv2d_backward_input, gb, gy.dtype(), gy.data_ptr(),
                                 w.data_ptr(), dx.data_ptr());
               }
             }
             if (need_w) {
               dw = empty(wshape, topts);
               if (dw.numel() > 0) {
                 Tensor xin = sx.get().contiguous();
                 SINTER_DISPATCH(gy.device(), conv2d_backward_weight, gb, gy.dtype(),
                                 xin.data_ptr(), gy.data_ptr(), dw.data_ptr());
               }
             }
             if (need_b) db = sum(gy, {0, 2, 3});
             return Grads{dx, dw, db};
           });
  }
  return out;
}

namespace {

// The transposed convolution on conv2d's kernels, g being the geometry of the convolution it
// transposes: x (n, c_out, h_out, w_out) is that convolution's dy, the result (n, c_in, h, w) its
// dx. Forward: the input-gradient kernel; backward: the forward kernel (dx) and the
// weight-gradient kernel with the roles of x and dy swapped (dweight).
Tensor conv_transpose2d_kernels(const Tensor& x, const Tensor& weight, const kern::Conv2dGeom& g) {
  Tensor out = empty({g.n, g.c_in, g.h, g.w}, {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() > 0) {
    NoGradGuard ng;
    Tensor xc = x.contiguous(), wc = weight.contiguous();
    if (xc.numel() > 0 && wc.numel() > 0) {
      SINTER_DISPATCH(x.device(), conv2d_backward_input, g, x.dtype(), xc.data_ptr(), wc.data_ptr(),
                      out.data_ptr());
    } else {
      out.zero_();
    }
  }
  if (needs_grad({&x, &weight})) {
    const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
    SavedTensor sx(need_w ? x : Tensor(), "conv_transpose2d");
    SavedTensor sw(need_x ? weight : Tensor(), "conv_transpose2d");
    const Shape xshape = x.shape(), wshape = weight.shape();
    record("conv_transpose2d", {&out}, {x, weight},
           [g, sx, sw, need_x, need_w, xshape, wshape](const Grads& grads) {
             Tensor gy = grads[0].contiguous();
             kern::Conv2dGeom gb = g;
             gb.allow_tf32 = get_matmul_precision() == "high";
             const TensorOptions topts{.dtype = gy.dtype(), .device = gy.device()};
             Tensor dx, dw;
             if (need_x) {
               dx = zeros(xshape, topts);
               Tensor w = sw.get().contiguous();
               if (dx.numel() > 0 && gy.numel() > 0) {
                 SINTER_DISPATCH(gy.device(), conv2d_forward, gb, gy.dtype(), gy.data_ptr(),
                                 w.data_ptr(), nullptr, dx.data_ptr());
               }
             }
             if (need_w) {
               dw = zeros(wshape, topts);
               Tensor xin = sx.get().contiguous();
               if (dw.numel() > 0 && gy.numel() > 0 && xin.numel() > 0) {
                 SINTER_DISPATCH(gy.device(), conv2d_backward_weight, gb, gy.dtype(), gy.data_ptr(),
                                 xin.data_ptr(), dw.data_ptr());
               }
             }
             return Grads{dx, dw};
           });
  }
  return out;
}

// bias (C) added over dim 1 of y (N, C, *).
Tensor add_channel_bias(const Tensor& y, const Tensor& bias) {
  if (!bias.defined()) return y;
  Shape s(y.dim(), 1);
  s[1] = bias.size(0);
  return add(y, bias.reshape(s));
}

}  // namespace

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose2dOptions& o) {
  SINTER_PROFILE_OP("conv_transpose2d", x, weight, bias);
  SINTER_AUTOCAST(conv_transpose2d, x, conv_transpose2d(cast(x), cast(weight), cast(bias), o));
  const char* op = "conv_transpose2d";
  check_conv(op, x, weight, bias, 2, o.groups, true);
  const ConvDim dh{x.size(2),   weight.size(2), o.stride.h,
                   o.padding.h, o.dilation.h,   o.output_padding.h};
  const ConvDim dw{x.size(3),   weight.size(3), o.stride.w,
                   o.padding.w, o.dilation.w,   o.output_padding.w};
  // The geometry of the convolution it transposes: x is that convolution's output (its dy).
  const int64_t h_out = conv_transpose_out_size(op, 0, dh);
  const int64_t w_out = conv_transpose_out_size(op, 1, dw);
  kern::Conv2dGeom g = geom_of(x.size(0), weight.size(1) * o.groups, h_out, w_out, weight, o.stride,
                               o.padding, o.dilation, o.groups);
  // The convolution of the output's size gives back x's size, or more where output_padding is
  // not smaller than the stride (then smaller than the dilation): those rows of its dy are zeros.
  g.h_out = (g.h + 2 * g.pad_h - g.dil_h * (g.kh - 1) - 1) / g.stride_h + 1;
  g.w_out = (g.w + 2 * g.pad_w - g.dil_w * (g.kw - 1) - 1) / g.stride_w + 1;
  const int64_t extra_h = g.h_out - x.size(2), extra_w = g.w_out - x.size(3);
  const Tensor xin = extra_h > 0 || extra_w > 0 ? pad(x, {0, extra_w, 0, extra_h}) : x;
  return add_channel_bias(conv_transpose2d_kernels(xin, weight, g), bias);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv1dOptions& o) {
  SINTER_PROFILE_OP("conv1d", x, weight, bias);
  SINTER_AUTOCAST(conv1d, x, conv1d(cast(x), cast(weight), cast(bias), o));
  const char* op = "conv1d";
  check_conv(op, x, weight, bias, 1, o.groups, false);
  Tensor xp = x;
  int64_t padding = o.padding;
  if (o.same_padding) {
    std::vector<int64_t> even;
    xp = same_padded(op, x, {weight.size(2)}, {o.dilation}, {o.stride}, {o.padding}, even);
    padding = even[0];
  }
  conv_out_size(op, 0, {xp.size(2), weight.size(2), o.stride, padding, o.dilation});
  return conv2d(xp.unsqueeze(2), weight.unsqueeze(2), bias,
                {.stride = {1, o.stride},
                 .padding = {0, padding},
                 .dilation = {1, o.dilation},
                 .groups = o.groups})
      .squeeze(2);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose1dOptions& o) {
  SINTER_PROFILE_OP("conv_transpose1d", x, weight, bias);
  SINTER_AUTOCAST(conv_transpose1d, x, conv_transpose1d(cast(x), cast(weight), cast(bias), o));
  const char* op = "conv_transpose1d";
  check_conv(op, x, weight, bias, 1, o.groups, true);
  conv_transpose_out_size(
      op, 0, {x.size(2), weight.size(2), o.stride, o.padding, o.dilation, o.output_padding});
  return conv_transpose2d(x.unsqueeze(2), weight.unsqueeze(2), bias,
                          {.stride = {1, o.stride},
                           .padding = {0, o.padding},
                           .output_padding = {0, o.output_padding},
                           .groups = o.groups,
                           .dilation = {1, o.dilation}})
      .squeeze(2);
}

// Note [conv3d as conv2d]
// A 3-D convolution is a 2-D one over depth slices: output slice od reads input planes
// od * stride - padding + kd * dilation, kd < kD. Gathering those kD planes of every slice (a
// strided view of the padded depth per kd, stacked) and folding them into the channels, (N, C,
// kD, D_out, H, W) -> (N * D_out, C * kD, H, W), makes the weight (C_out, C / groups, kD, kH, kW)
// a 2-D weight (C_out, C / groups * kD, kH, kW) as it lies in memory, group by group; one conv2d
// then runs every slice on the existing kernels (oneDNN or the implicit GEMMs). The gathered copy
// is kD / stride times the input's size, an im2col along depth alone. The transposed form runs
// conv_transpose2d on each input slice, whose C_out * kD output planes add into output depth
// d * stride + kd * dilation (each kd's planes spread by the stride and shifted into place),
// then cropped by the padding. Nothing reads an index tensor back to the host, so these steps
// run inside a CUDA graph.

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv3dOptions& o) {
  SINTER_PROFILE_OP("conv3d", x, weight, bias);
  SINTER_AUTOCAST(conv3d, x, conv3d(cast(x), cast(weight), cast(bias), o));
  const char* op = "conv3d";
  check_conv(op, x, weight, bias, 3, o.groups, false);
  if (o.same_padding) {
    std::vector<int64_t> even;
    const Tensor xp = same_padded(op, x, {weight.size(2), weight.size(3), weight.size(4)},
                                  {o.dilation.d, o.dilation.h, o.dilation.w},
                                  {o.stride.d, o.stride.h, o.stride.w},
                                  {o.padding.d, o.padding.h, o.padding.w}, even);
    Conv3dOptions flat = o;
    flat.same_padding = false;
    flat.padding = {even[0], even[1], even[2]};
    return conv3d(xp, weight, bias, flat);
  }
  const int64_t n = x.size(0), c = x.size(1), kd = weight.size(2), c_out = weight.size(0);
  const int64_t d_out =
      conv_out_size(op, 0, {x.size(2), kd, o.stride.d, o.padding.d, o.dilation.d});
  conv_out_size(op, 1, {x.size(3), weight.size(3), o.stride.h, o.padding.h, o.dilation.h});
  conv_out_size(op, 2, {x.size(4), weight.size(4), o.stride.w, o.padding.w, o.dilation.w});
  const Tensor xp = o.padding.d > 0 ? pad(x, {0, 0, 0, 0, o.padding.d, o.padding.d}) : x;
  // Tap i of every output slice: the input planes i * dilation + od * stride, a strided view.
  std::vector<Tensor> taps;
  for (int64_t i = 0; i < kd; ++i) {
    taps.push_back(
        xp.slice(2, i * o.dilation.d, i * o.dilation.d + (d_out - 1) * o.stride.d + 1, o.stride.d));
  }
  const Tensor gathered = stack(taps, 2);  // (N, C, kD, D_out, H, W)
  const Tensor slices =
      gathered.permute({0, 3, 1, 2, 4, 5}).reshape({n * d_out, c * kd, x.size(3), x.size(4)});
  const Tensor w2 = weight.reshape({c_out, weight.size(1) * kd, weight.size(3), weight.size(4)});
  const Tensor y = conv2d(slices, w2, bias,
                          {.stride = {o.stride.h, o.stride.w},
                           .padding = {o.padding.h, o.padding.w},
                           .dilation = {o.dilation.h, o.dilation.w},
                           .groups = o.groups});  // (N * D_out, C_out, H_out, W_out)
  return y.reshape({n, d_out, c_out, y.size(2), y.size(3)}).permute({0, 2, 1, 3, 4}).contiguous();
}

Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose3dOptions& o) {
  SINTER_PROFILE_OP("conv_transpose3d", x, weight, bias);
  SINTER_AUTOCAST(conv_transpose3d, x, conv_transpose3d(cast(x), cast(weight), cast(bias), o));
  const char* op = "conv_transpose3d";
  check_conv(op, x, weight, bias, 3, o.groups, true);
  const int64_t n = x.size(0), c_in = x.size(1), d = x.size(2), kd = weight.size(2);
  const int64_t c_out = weight.size(1) * o.groups;
  const int64_t d_out = conv_transpose_out_size(
      op, 0, {d, kd, o.stride.d, o.padding.d, o.dilation.d, o.output_padding.d});
  conv_transpose_out_size(
      op, 1,
      {x.size(3), weight.size(3), o.stride.h, o.padding.h, o.dilation.h, o.output_padding.h});
  conv_transpose_out_size(
      op, 2,
      {x.size(4), weight.size(4), o.stride.w, o.padding.w, o.dilation.w, o.output_padding.w});
  const Tensor slices = x.permute({0, 2, 1, 3, 4}).reshape({n * d, c_in, x.size(3), x.size(4)});
  const Tensor w2 = weight.reshape({c_in, weight.size(1) * kd, weight.size(3), weight.size(4)});
  const Tensor y2 = conv_transpose2d(slices, w2, Tensor(),
                                     {.stride = {o.stride.h, o.stride.w},
                                      .padding = {o.padding.h, o.padding.w},
                                      .output_padding = {o.output_padding.h, o.output_padding.w},
                                      .groups = o.groups,
                                      .dilation = {o.dilation.h, o.dilation.w}});
  const int64_t h_out = y2.size(2), w_out = y2.size(3);
  // (N * D, C_out * kD, H_out, W_out) -> (N, C_out, D, kD, H_out, W_out): plane (d, kd) adds
  // into output plane d * stride + kd * dilation (before the padding's crop). Each kd's planes
  // are spread stride apart (zeros between) and shifted into place by padding, then summed; in
  // f32 for the half types, rounded once, as a convolution's own sums.
  const DType acc = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor planes =
      y2.reshape({n, d, c_out, kd, h_out, w_out}).permute({0, 2, 1, 3, 4, 5}).to(acc);
  const int64_t full = (d - 1) * o.stride.d + o.dilation.d * (kd - 1) + 1 + o.output_padding.d;
  const int64_t spread = (d - 1) * o.stride.d + 1;
  Tensor sums;
  for (int64_t j = 0; j < kd; ++j) {
    Tensor p = planes.select(3, j);  // (N, C_out, D, H_out, W_out)
    if (o.stride.d > 1) {
      Shape gap = p.shape();
      gap.insert(gap.begin() + 3, o.stride.d - 1);
      p = cat({p.unsqueeze(3), zeros(gap, {.dtype = acc, .device = x.device()})}, 3)
              .reshape({n, c_out, d * o.stride.d, h_out, w_out})
              .narrow(2, 0, spread);
    }
    const int64_t before = j * o.dilation.d;
    p = pad(p, {0, 0, 0, 0, before, full - before - spread});
    sums = sums.defined() ? add(sums, p) : p;
  }
  sums = sums.to(x.dtype());
  return add_channel_bias(sums.narrow(2, o.padding.d, d_out), bias);
}

}  // namespace sinter
