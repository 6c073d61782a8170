// 2-D pooling over (N, C, H, W) or (C, H, W) tensors: max (with indices), average, adaptive
// average and adaptive max, each with a backward kernel. The kernels see (planes, H, W), planes =
// N * C. 1-D max and average pooling are the 2-D ones over rows of height 1; 3-D pooling is the
// 2-D pooling of each depth plane, then of the depths (Note [3-D pooling as 2-D and 1-D]).
#include "kern/pool.h"

#include <string>
#include <tuple>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

void check_pool_input(const char* op, const Tensor& x) {
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK(x.dim() == 3 || x.dim() == 4, op,
               ": input must be 3-D (C, H, W) or 4-D (N, C, H, W), got shape ",
               shape_str(x.shape()));
  SINTER_CHECK(is_floating(x.dtype()), op, ": expected a floating tensor, got dtype ", x.dtype());
}

namespace {

// N * C, or C for a 3-D input.
int64_t planes_of(const Tensor& x) { return x.dim() == 4 ? x.size(0) * x.size(1) : x.size(0); }

// The output shape: x's leading dims with (h_out, w_out) for the last two.
Shape out_shape(const Tensor& x, int64_t h_out, int64_t w_out) {
  Shape s = x.shape();
  s[s.size() - 2] = h_out;
  s[s.size() - 1] = w_out;
  return s;
}

// Output length of one dim, as PyTorch computes it: with ceil_mode, a last window that would start
// in the right padding is dropped.
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (span + (ceil_mode ? s - 1 : 0)) / s + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// The first output along one dim whose window holds no input element, or -1. The padding limit
// rules this out for dense windows; a dilated one can step over the whole input (a 1-wide input,
// kernel 2, padding 1, dilation 2 puts its taps at -1 and 1).
int64_t empty_window(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d) {
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - p;
    const int64_t first = start >= 0 ? 0 : (-start + d - 1) / d;  // the first tap at or after 0
    if (first >= k || start + first * d >= in) return o;
  }
  return -1;
}

// What max_pool2d (dilated) and avg_pool2d take, for the one check of both.
struct PoolArgs {
  Size2 kernel_size, stride, padding, dilation;
  bool ceil_mode;
  bool count_include_pad;
};

// Checks x and the pooling arguments, and works out the geometry.
kern::Pool2dGeom pool_geom(const char* op, const Tensor& x, const PoolArgs& o) {
  check_pool_input(op, x);
  const Size2 k = o.kernel_size;
  SINTER_CHECK(k.h >= 1 && k.w >= 1, op, ": kernel_size must be positive, got ", k);
  const bool default_stride = o.stride.h == 0 && o.stride.w == 0;
  const Size2 s = default_stride ? k : o.stride;
  SINTER_CHECK(s.h >= 1 && s.w >= 1, op, ": stride must be positive (or (0, 0) for the kernel ",
               "size), got ", o.stride);
  SINTER_CHECK(o.padding.h >= 0 && o.padding.w >= 0, op, ": padding must be non-negative, got ",
               o.padding);
  // A window wholly inside the padding would have no element to take or average.
  SINTER_CHECK(o.padding.h <= k.h / 2 && o.padding.w <= k.w / 2, op, ": padding ", o.padding,
               " must be at most half the kernel size ", k);
  SINTER_CHECK(o.dilation.h >= 1 && o.dilation.w >= 1, op, ": dilation must be positive, got ",
               o.dilation);
  kern::Pool2dGeom g;
  g.h = x.size(-2);
  g.w = x.size(-1);
  g.planes = planes_of(x);
  g.kh = k.h;
  g.kw = k.w;
  g.stride_h = s.h;
  g.stride_w = s.w;
  g.pad_h = o.padding.h;
  g.pad_w = o.padding.w;
  g.dil_h = o.dilation.h;
  g.dil_w = o.dilation.w;
  g.count_include_pad = o.count_include_pad;
  g.h_out = pool_out_size(g.h, g.kh, g.stride_h, g.pad_h, g.dil_h, o.ceil_mode);
  g.w_out = pool_out_size(g.w, g.kw, g.stride_w, g.pad_w, g.dil_w, o.ceil_mode);
  SINTER_CHECK(g.h_out >= 1 && g.w_out >= 1, op, ": input ", shape_str(x.shape()),
               " is too small for kernel_size ", k, " with padding ", o.padding, " and dilation ",
               o.dilation, " (output would be ", g.h_out, "x", g.w_out, ")");
  const int64_t empty_row = empty_window(g.h, g.h_out, g.kh, g.stride_h, g.pad_h, g.dil_h);
  const int64_t empty_col = empty_window(g.w, g.w_out, g.kw, g.stride_w, g.pad_w, g.dil_w);
  SINTER_CHECK(empty_row < 0 && empty_col < 0, op, ": the window of output ",
               empty_row >= 0 ? "row " : "column ", empty_row >= 0 ? empty_row : empty_col,
               " holds no input element (input ", shape_str(x.shape()), ", kernel_size ", k,
               ", padding ", o.padding, ", dilation ", o.dilation, ")");
  return g;
}

TensorOptions like(const Tensor& x) { return {.dtype = x.dtype(), .device = x.device()}; }

// avg_pool2d and adaptive_avg_pool2d over the checked geometry g: the two differ only in their
// forward and backward kernels, which take the same arguments.
Tensor average_pool(const char* op, const Tensor& x, const kern::Pool2dGeom& g, bool adaptive) {
  Tensor out = empty(out_shape(x, g.h_out, g.w_out), like(x));
  if (out.numel() > 0) {
    NoGradGuard ng;
    Tensor xc = x.contiguous();
    if (adaptive) {
      SINTER_DISPATCH(x.device(), adaptive_avg_pool2d_forward, g, x.dtype(), xc.data_ptr(),
                      out.data_ptr());
    } else {
      SINTER_DISPATCH(x.device(), avg_pool2d_forward, g, x.dtype(), xc.data_ptr(), out.data_ptr());
    }
  }
  if (needs_grad({&x})) {
    const Shape xshape = x.shape();
    record(op, {&out}, {x}, [g, xshape, adaptive](const Grads& grads) {
      Tensor gy = grads[0].contiguous();
      Tensor dx = empty(xshape, like(gy));
      if (dx.numel() == 0) return Grads{dx};
      if (adaptive) {
        SINTER_DISPATCH(gy.device(), adaptive_avg_pool2d_backward, g, gy.dtype(), gy.data_ptr(),
                        dx.data_ptr());
      } else {
        SINTER_DISPATCH(gy.device(), avg_pool2d_backward, g, gy.dtype(), gy.data_ptr(),
                        dx.data_ptr());
      }
      return Grads{dx};
    });
  }
  return out;
}

}  // namespace

namespace {

// max_pool2d_with_indices and adaptive_max_pool2d_with_indices over the checked geometry g: the two
// differ only in their kernels, which take the same arguments.
std::tuple<Tensor, Tensor> max_pool(const char* op, const Tensor& x, const kern::Pool2dGeom& g,
                                    bool adaptive) {
  const Shape oshape = out_shape(x, g.h_out, g.w_out);
  Tensor out = empty(oshape, like(x));
  Tensor indices = empty(oshape, {.dtype = DType::i64, .device = x.device()});
  if (out.numel() > 0) {
    NoGradGuard ng;
    Tensor xc = x.contiguous();
    auto* idx = static_cast<int64_t*>(indices.data_ptr());
    if (adaptive) {
      SINTER_DISPATCH(x.device(), adaptive_max_pool2d_forward, g, x.dtype(), xc.data_ptr(),
                      out.data_ptr(), idx);
    } else {
      SINTER_DISPATCH(x.device(), max_pool2d_forward, g, x.dtype(), xc.data_ptr(), out.data_ptr(),
                      idx);
    }
  }
  if (needs_grad({&x})) {
    SavedTensor si(indices, op);
    const Shape xshape = x.shape();
    record(op, {&out}, {x}, [g, si, xshape, adaptive](const Grads& grads) {
      Tensor gy = grads[0].contiguous();
      Tensor dx = empty(xshape, like(gy));
      if (dx.numel() > 0) {
        Tensor saved = si.get();
        const auto* idx = static_cast<const int64_t*>(saved.data_ptr());
        if (adaptive) {
          SINTER_DISPATCH(gy.device(), adaptive_max_pool2d_backward, g, gy.dtype(), gy.data_ptr(),
                          idx, dx.data_ptr());
        } else {
          SINTER_DISPATCH(gy.device(), max_pool2d_backward, g, gy.dtype(), gy.data_ptr(), idx,
                          dx.data_ptr());
        }
      }
      return Grads{dx};
    });
  }
  return {out, indices};
}

// The geometry of adaptive pooling of x to output_size, checked.
kern::Pool2dGeom adaptive_geom(const char* op, const Tensor& x, Size2 output_size) {
  check_pool_input(op, x);
  SINTER_CHECK(output_size.h >= 1 && output_size.w >= 1, op, ": output_size must be positive, got ",
               output_size);
  kern::Pool2dGeom g;
  g.h = x.size(-2);
  g.w = x.size(-1);
  SINTER_CHECK(g.h >= 1 && g.w >= 1, op, ": input ", shape_str(x.shape()),
               " has an empty spatial dim");
  g.planes = planes_of(x);
  g.h_out = output_size.h;
  g.w_out = output_size.w;
  return g;
}

// A 1-D pooling's input (N, C, L) or (C, L), as the 2-D one's (N, C, 1, L) or (C, 1, L).
Tensor as_rows(const char* op, const Tensor& x) {
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK(x.dim() == 2 || x.dim() == 3, op,
               ": input must be 2-D (C, L) or 3-D (N, C, L), got shape ", shape_str(x.shape()));
  return x.unsqueeze(-2);
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Size2 kernel_size,
                                                   const MaxPool2dOptions& opts) {
  SINTER_PROFILE_OP("max_pool2d_with_indices", x);
  const kern::Pool2dGeom g =
      pool_geom("max_pool2d", x,
                {kernel_size, opts.stride, opts.padding, opts.dilation, opts.ceil_mode, true});
  return max_pool("max_pool2d", x, g, false);
}

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, const MaxPool2dOptions& opts) {
  SINTER_PROFILE_OP("max_pool2d", x);
  return std::get<0>(max_pool2d_with_indices(x, kernel_size, opts));
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, const AvgPool2dOptions& opts) {
  SINTER_PROFILE_OP("avg_pool2d", x);
  const kern::Pool2dGeom g = pool_geom(
      "avg_pool2d", x,
      {kernel_size, opts.stride, opts.padding, 1, opts.ceil_mode, opts.count_include_pad});
  return average_pool("avg_pool2d", x, g, false);
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size) {
  SINTER_PROFILE_OP("adaptive_avg_pool2d", x);
  const kern::Pool2dGeom g = adaptive_geom("adaptive_avg_pool2d", x, output_size);
  return average_pool("adaptive_avg_pool2d", x, g, true);
}

std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, Size2 output_size) {
  SINTER_PROFILE_OP("adaptive_max_pool2d_with_indices", x);
  const kern::Pool2dGeom g = adaptive_geom("adaptive_max_pool2d", x, output_size);
  return max_pool("adaptive_max_pool2d", x, g, true);
}

Tensor adaptive_max_pool2d(const Tensor& x, Size2 output_size) {
  SINTER_PROFILE_OP("adaptive_max_pool2d", x);
  return std::get<0>(adaptive_max_pool2d_with_indices(x, output_size));
}

// Over rows of height 1: kernel (1, k), stride (1, s), padding (0, p), dilation (1, d).
std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, int64_t kernel_size,
                                                   const MaxPool1dOptions& opts) {
  SINTER_PROFILE_OP("max_pool1d_with_indices", x);
  const char* op = "max_pool1d";
  const Tensor rows = as_rows(op, x);
  const int64_t stride = opts.stride == 0 ? kernel_size : opts.stride;
  const kern::Pool2dGeom g = pool_geom(
      op, rows,
      {{1, kernel_size}, {1, stride}, {0, opts.padding}, {1, opts.dilation}, opts.ceil_mode, true});
  auto [out, indices] = max_pool(op, rows, g, false);
  return {out.squeeze(-2), indices.squeeze(-2)};
}

Tensor max_pool1d(const Tensor& x, int64_t kernel_size, const MaxPool1dOptions& opts) {
  SINTER_PROFILE_OP("max_pool1d", x);
  return std::get<0>(max_pool1d_with_indices(x, kernel_size, opts));
}

Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, const AvgPool1dOptions& opts) {
  SINTER_PROFILE_OP("avg_pool1d", x);
  const char* op = "avg_pool1d";
  const Tensor rows = as_rows(op, x);
  const int64_t stride = opts.stride == 0 ? kernel_size : opts.stride;
  const kern::Pool2dGeom g = pool_geom(op, rows,
                                       {{1, kernel_size},
                                        {1, stride},
                                        {0, opts.padding},
                                        1,
                                        opts.ceil_mode,
                                        opts.count_include_pad});
  return average_pool(op, rows, g, false).squeeze(-2);
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  SINTER_PROFILE_OP("adaptive_avg_pool1d", x);
  const char* op = "adaptive_avg_pool1d";
  const Tensor rows = as_rows(op, x);
  const kern::Pool2dGeom g = adaptive_geom(op, rows, {1, output_size});
  return average_pool(op, rows, g, true).squeeze(-2);
}

void check_pool3d_options(const char* op, Size3 k, Size3 stride, Size3 padding, Size3 dilation) {
  SINTER_CHECK(k.d >= 1 && k.h >= 1 && k.w >= 1, op, ": kernel_size must be positive, got ", k);
  SINTER_CHECK(stride == Size3(0) || (stride.d >= 1 && stride.h >= 1 && stride.w >= 1), op,
               ": stride must be positive (or (0, 0, 0) for the kernel size), got ", stride);
  SINTER_CHECK(padding.d >= 0 && padding.h >= 0 && padding.w >= 0, op,
               ": padding must be non-negative, got ", padding);
  // As in 2-D: a window wholly inside the padding would have no element to take or average.
  SINTER_CHECK(padding.d <= k.d / 2 && padding.h <= k.h / 2 && padding.w <= k.w / 2, op,
               ": padding ", padding, " must be at most half the kernel size ", k);
  SINTER_CHECK(dilation.d >= 1 && dilation.h >= 1 && dilation.w >= 1, op,
               ": dilation must be positive, got ", dilation);
}

// Note [3-D pooling as 2-D and 1-D]
// Max and average pooling over a (kD, kH, kW) box are separable: the maximum (average) of a box
// is the maximum (average) over its kD depths of each depth plane's (kH, kW) window's, and every
// size, padding, ceil_mode rule and divisor (Note [avg pool divisor] in src/kern/pool.inc) is a
// product of one per dim. So 3-D pooling runs the 2-D kernels twice: over the D planes of
// (N C D, H, W), then over the depths, rows (N C H_out W_out, 1, D) of the first's output, with
// autograd through both. Max pooling's first maximum in (d, h, w) order is the first depth's first
// maximum in (h, w), as PyTorch's scan picks, and its flat index is that depth times H W plus the
// plane's index.
namespace {

// The two 2-D pools of a 3-D pooling of x, per Note [3-D pooling as 2-D and 1-D].
struct Pool3dGeom {
  kern::Pool2dGeom planes;  // (N C D, H, W) -> (N C D, H_out, W_out)
  kern::Pool2dGeom depths;  // (N C H_out W_out, 1, D) -> (N C H_out W_out, 1, D_out)
};

Pool3dGeom pool3d_geom(const char* op, const Tensor& x, Size3 k, Size3 stride, Size3 p, Size3 dil,
                       bool ceil_mode, bool count_include_pad) {
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK(x.dim() == 4 || x.dim() == 5, op,
               ": input must be 4-D (C, D, H, W) or 5-D (N, C, D, H, W), got shape ",
               shape_str(x.shape()));
  SINTER_CHECK(is_floating(x.dtype()), op, ": expected a floating tensor, got dtype ", x.dtype());
  check_pool3d_options(op, k, stride, p, dil);
  const Size3 s = stride == Size3(0) ? k : stride;
  const int64_t d = x.size(-3), h = x.size(-2), w = x.size(-1);
  const int64_t d_out = pool_out_size(d, k.d, s.d, p.d, dil.d, ceil_mode);
  const int64_t h_out = pool_out_size(h, k.h, s.h, p.h, dil.h, ceil_mode);
  const int64_t w_out = pool_out_size(w, k.w, s.w, p.w, dil.w, ceil_mode);
  SINTER_CHECK(d_out >= 1 && h_out >= 1 && w_out >= 1, op, ": input ", shape_str(x.shape()),
               " is too small for kernel_size ", k, " with padding ", p, " and dilation ", dil,
               " (output would be ", d_out, "x", h_out, "x", w_out, ")");
  const int64_t empty[3] = {empty_window(d, d_out, k.d, s.d, p.d, dil.d),
                            empty_window(h, h_out, k.h, s.h, p.h, dil.h),
                            empty_window(w, w_out, k.w, s.w, p.w, dil.w)};
  for (int i = 0; i < 3; ++i) {
    SINTER_CHECK(empty[i] < 0, op, ": the window of output ", "dhw"[i], " = ", empty[i],
                 " holds no input element (input ", shape_str(x.shape()), ", kernel_size ", k,
                 ", padding ", p, ", dilation ", dil, ")");
  }
  const int64_t lead = x.numel() / std::max<int64_t>(d * h * w, 1);  // N C
  Pool3dGeom g;
  g.planes = {.planes = lead * d,
              .h = h,
              .w = w,
              .h_out = h_out,
              .w_out = w_out,
              .kh = k.h,
              .kw = k.w,
              .stride_h = s.h,
              .stride_w = s.w,
              .pad_h = p.h,
              .pad_w = p.w,
              .dil_h = dil.h,
              .dil_w = dil.w,
              .count_include_pad = count_include_pad};
  g.depths = {.planes = lead * h_out * w_out,
              .h = 1,
              .w = d,
              .h_out = 1,
              .w_out = d_out,
              .kh = 1,
              .kw = k.d,
              .stride_h = 1,
              .stride_w = s.d,
              .pad_h = 0,
              .pad_w = p.d,
              .dil_h = 1,
              .dil_w = dil.d,
              .count_include_pad = count_include_pad};
  return g;
}

// x (N, C, D, H, W) as the first pool's (N, C D, H, W); y1 (N, C D, H_out, W_out) as the second's
// rows (N C H_out W_out, 1, 1, D).
Tensor as_planes(const Tensor& x) {
  return x.reshape({x.size(0), x.size(1) * x.size(2), x.size(3), x.size(4)});
}
Tensor as_depth_rows(const Tensor& y1, const Shape& x5) {
  const int64_t n = x5[0], c = x5[1], d = x5[2], h_out = y1.size(2), w_out = y1.size(3);
  return y1.reshape({n, c, d, h_out, w_out})
      .permute({0, 1, 3, 4, 2})
      .reshape({n * c * h_out * w_out, 1, 1, d});
}
// The second pool's (N C H_out W_out, 1, 1, D_out) as (N, C, D_out, H_out, W_out), or without N
// for a 4-D input.
Tensor from_depth_rows(const Tensor& y2, const Shape& x5, const kern::Pool2dGeom& planes,
                       bool batched) {
  const Tensor y = y2.reshape({x5[0], x5[1], planes.h_out, planes.w_out, y2.size(3)})
                       .permute({0, 1, 4, 2, 3})
                       .contiguous();
  return batched ? y : y.squeeze(0);
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, Size3 kernel_size,
                                                   const MaxPool3dOptions& opts) {
  SINTER_PROFILE_OP("max_pool3d_with_indices", x);
  SINTER_AUTOCAST(max_pool3d, x, max_pool3d_with_indices(cast(x), kernel_size, opts));
  const char* op = "max_pool3d";
  const Pool3dGeom g = pool3d_geom(op, x, kernel_size, opts.stride, opts.padding, opts.dilation,
                                   opts.ceil_mode, true);
  const Tensor x5 = x.dim() == 5 ? x : x.unsqueeze(0);
  const Shape s5 = x5.shape();
  auto [y1, plane_idx] = max_pool(op, as_planes(x5), g.planes, false);
  auto [y2, depth_idx] = max_pool(op, as_depth_rows(y1, s5), g.depths, false);
  const bool batched = x.dim() == 5;
  // Per Note [3-D pooling as 2-D and 1-D]: the chosen depth's plane index, plus depth * H W.
  const Tensor depth = from_depth_rows(depth_idx, s5, g.planes, true);
  const Tensor in_plane =
      gather(plane_idx.reshape({s5[0], s5[1], s5[2], g.planes.h_out, g.planes.w_out}), 2, depth);
  Tensor indices = add(mul(depth, Scalar(s5[3] * s5[4])), in_plane);
  return {from_depth_rows(y2, s5, g.planes, batched), batched ? indices : indices.squeeze(0)};
}

Tensor max_pool3d(const Tensor& x, Size3 kernel_size, const MaxPool3dOptions& opts) {
  SINTER_PROFILE_OP("max_pool3d", x);
  return std::get<0>(max_pool3d_with_indices(x, kernel_size, opts));
}

Tensor avg_pool3d(const Tensor& x, Size3 kernel_size, const AvgPool3dOptions& opts) {
  SINTER_PROFILE_OP("avg_pool3d", x);
  SINTER_AUTOCAST(avg_pool3d, x, avg_pool3d(cast(x), kernel_size, opts));
  const char* op = "avg_pool3d";
  const Pool3dGeom g = pool3d_geom(op, x, kernel_size, opts.stride, opts.padding, 1, opts.ceil_mode,
                                   opts.count_include_pad);
  const Tensor x5 = x.dim() == 5 ? x : x.unsqueeze(0);
  const Shape s5 = x5.shape();
  const Tensor y1 = average_pool(op, as_planes(x5), g.planes, false);
  const Tensor y2 = average_pool(op, as_depth_rows(y1, s5), g.depths, false);
  return from_depth_rows(y2, s5, g.planes, x.dim() == 5);
}

Tensor adaptive_avg_pool3d(const Tensor& x, Size3 output_size) {
  SINTER_PROFILE_OP("adaptive_avg_pool3d", x);
  SINTER_AUTOCAST(adaptive_avg_pool3d, x, adaptive_avg_pool3d(cast(x), output_size));
  const char* op = "adaptive_avg_pool3d";
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK(x.dim() == 4 || x.dim() == 5, op,
               ": input must be 4-D (C, D, H, W) or 5-D (N, C, D, H, W), got shape ",
               shape_str(x.shape()));
  SINTER_CHECK(output_size.d >= 1, op, ": output_size must be positive, got ", output_size);
  const Tensor x5 = x.dim() == 5 ? x : x.unsqueeze(0);
  const Shape s5 = x5.shape();
  SINTER_CHECK(s5[2] >= 1, op, ": input ", shape_str(x.shape()), " has an empty spatial dim");
  const Tensor planes = as_planes(x5);
  const kern::Pool2dGeom g = adaptive_geom(op, planes, {output_size.h, output_size.w});
  const Tensor y1 = average_pool(op, planes, g, true);
  const Tensor rows = as_depth_rows(y1, s5);
  const Tensor y2 = average_pool(op, rows, adaptive_geom(op, rows, {1, output_size.d}), true);
  return from_depth_rows(y2, s5, g, x.dim() == 5);
}

}  // namespace sinter
