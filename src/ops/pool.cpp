// 2-D pooling over (N, C, H, W) or (C, H, W) tensors: max (with indices), average, adaptive
// average and adaptive max, each with a backward kernel. The kernels see (planes, H, W), planes =
// N * C. 1-D max and average pooling are the 2-D ones over rows of height 1.
#include "kern/pool.h"

#include <string>
#include <tuple>

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

}  // namespace sinter
