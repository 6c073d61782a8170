// conv2d: grouped, strided, padded, dilated 2-D convolution over NCHW tensors, with its backward
// (input gradient and weight gradient kernels, bias gradient as a sum).
#include "kern/conv.h"

#include <string>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

// Checks the arguments and works out the geometry; x and weight are 4-D when it returns.
kern::Conv2dGeom conv_geom(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Conv2dOptions& o) {
  SINTER_CHECK(x.defined() && weight.defined(), "conv2d: undefined input or weight");
  SINTER_CHECK(x.dim() == 4, "conv2d: input must be 4-D (N, C, H, W), got shape ",
               shape_str(x.shape()));
  SINTER_CHECK(weight.dim() == 4,
               "conv2d: weight must be 4-D (C_out, C_in / groups, kH, kW), got shape ",
               shape_str(weight.shape()));
  SINTER_CHECK(x.device() == weight.device(), "conv2d: input on ", x.device(), " but weight on ",
               weight.device());
  SINTER_CHECK(x.dtype() == weight.dtype(), "conv2d: input dtype ", x.dtype(),
               " differs from weight dtype ", weight.dtype());
  SINTER_CHECK(is_floating(x.dtype()), "conv2d: expected floating tensors, got dtype ", x.dtype());
  SINTER_CHECK(o.groups >= 1, "conv2d: groups must be positive, got ", o.groups);
  SINTER_CHECK(o.stride.h >= 1 && o.stride.w >= 1, "conv2d: stride must be positive, got ",
               o.stride);
  SINTER_CHECK(o.padding.h >= 0 && o.padding.w >= 0, "conv2d: padding must be non-negative, got ",
               o.padding);
  SINTER_CHECK(o.dilation.h >= 1 && o.dilation.w >= 1, "conv2d: dilation must be positive, got ",
               o.dilation);
  const int64_t c_in = x.size(1), c_out = weight.size(0);
  SINTER_CHECK(weight.size(1) * o.groups == c_in, "conv2d: input ", shape_str(x.shape()), " has ",
               c_in, " channels, but weight ", shape_str(weight.shape()), " with groups ", o.groups,
               " expects ", weight.size(1) * o.groups);
  SINTER_CHECK(c_out % o.groups == 0, "conv2d: output channels ", c_out, " (weight shape ",
               shape_str(weight.shape()), ") not divisible by groups ", o.groups);
  SINTER_CHECK(weight.size(2) >= 1 && weight.size(3) >= 1, "conv2d: weight ",
               shape_str(weight.shape()), " has an empty kernel");
  if (bias.defined()) {
    SINTER_CHECK(bias.dim() == 1 && bias.size(0) == c_out, "conv2d: bias must have shape [", c_out,
                 "], got ", shape_str(bias.shape()));
    SINTER_CHECK(bias.device() == x.device(), "conv2d: input on ", x.device(), " but bias on ",
                 bias.device());
    SINTER_CHECK(bias.dtype() == x.dtype(), "conv2d: input dtype ", x.dtype(),
                 " differs from bias dtype ", bias.dtype());
  }
  kern::Conv2dGeom g;
  g.n = x.size(0);
  g.c_in = c_in;
  g.h = x.size(2);
  g.w = x.size(3);
  g.c_out = c_out;
  g.kh = weight.size(2);
  g.kw = weight.size(3);
  g.stride_h = o.stride.h;
  g.stride_w = o.stride.w;
  g.pad_h = o.padding.h;
  g.pad_w = o.padding.w;
  g.dil_h = o.dilation.h;
  g.dil_w = o.dilation.w;
  g.groups = o.groups;
  g.allow_tf32 = get_matmul_precision() == "high";
  const int64_t span_h = g.dil_h * (g.kh - 1) + 1, span_w = g.dil_w * (g.kw - 1) + 1;
  SINTER_CHECK(span_h <= g.h + 2 * g.pad_h && span_w <= g.w + 2 * g.pad_w, "conv2d: kernel ",
               span_h, "x", span_w, " (with dilation ", o.dilation,
               ") is larger than the padded input ", g.h + 2 * g.pad_h, "x", g.w + 2 * g.pad_w,
               " (input shape ", shape_str(x.shape()), ", padding ", o.padding, ")");
  g.h_out = (g.h + 2 * g.pad_h - span_h) / g.stride_h + 1;
  g.w_out = (g.w + 2 * g.pad_w - span_w) / g.stride_w + 1;
  return g;
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

}  // namespace sinter
