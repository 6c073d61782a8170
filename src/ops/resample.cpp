// Resampling: interpolate (kern/resample.h's kernels, forward and adjoint) and pixel_shuffle /
// pixel_unshuffle, which are reshapes around a permute.
#include "kern/resample.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

const char* mode_name(InterpolateMode m) {
  switch (m) {
    case InterpolateMode::Nearest:
      return "nearest";
    case InterpolateMode::NearestExact:
      return "nearest-exact";
    case InterpolateMode::Linear:
      return "linear";
    case InterpolateMode::Bilinear:
      return "bilinear";
    case InterpolateMode::Bicubic:
      return "bicubic";
    case InterpolateMode::Trilinear:
      return "trilinear";
    case InterpolateMode::Area:
      return "area";
  }
  return "?";
}

// The input rank a mode takes, 0 for any of 3 to 5.
int64_t mode_rank(InterpolateMode m) {
  switch (m) {
    case InterpolateMode::Linear:
      return 3;
    case InterpolateMode::Bilinear:
    case InterpolateMode::Bicubic:
      return 4;
    case InterpolateMode::Trilinear:
      return 5;
    default:
      return 0;
  }
}

kern::ResampleMode kernel_mode(InterpolateMode m) {
  switch (m) {
    case InterpolateMode::Nearest:
      return kern::ResampleMode::Nearest;
    case InterpolateMode::NearestExact:
      return kern::ResampleMode::NearestExact;
    case InterpolateMode::Bicubic:
      return kern::ResampleMode::Cubic;
    default:
      return kern::ResampleMode::Linear;
  }
}

template <class V>
std::string list_str(const std::vector<V>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

// x's checks against the options, and the geometry of the resampling: x's spatial dims (the last
// `dims` of the kernel's three), the output sizes and the scale factors the coordinates use.
kern::ResampleGeom resample_geom(const Tensor& x, const InterpolateOptions& o) {
  const char* op = "interpolate";
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK(is_floating(x.dtype()), op, ": expected a floating input, got dtype ", x.dtype());
  SINTER_CHECK(x.dim() >= 3 && x.dim() <= 5, op,
               ": expected an input of shape (N, C, *spatial) with 1 to 3 spatial dims, got shape ",
               shape_str(x.shape()));
  const int64_t want = mode_rank(o.mode);
  SINTER_CHECK(want == 0 || want == x.dim(), op, ": mode ", mode_name(o.mode), " needs a ", want,
               "-D input, got shape ", shape_str(x.shape()));
  const bool nearest = o.mode == InterpolateMode::Nearest ||
                       o.mode == InterpolateMode::NearestExact || o.mode == InterpolateMode::Area;
  SINTER_CHECK(!nearest || !o.align_corners, op,
               ": align_corners is for the interpolating modes "
               "(linear, bilinear, bicubic, trilinear), not ",
               mode_name(o.mode));
  SINTER_CHECK(o.size.empty() != o.scale_factor.empty(), op,
               ": give exactly one of size and scale_factor, got size ", list_str(o.size),
               " and scale_factor ", list_str(o.scale_factor));
  SINTER_CHECK(o.size.empty() || !o.recompute_scale_factor, op,
               ": recompute_scale_factor needs a scale_factor, not a size");
  const auto dims = static_cast<size_t>(x.dim() - 2);
  const size_t given = o.size.empty() ? o.scale_factor.size() : o.size.size();
  SINTER_CHECK(given == 1 || given == dims, op, ": expected ",
               o.size.empty() ? "scale_factor" : "size", " of 1 or ", dims,
               " values for an input of shape ", shape_str(x.shape()), ", got ",
               o.size.empty() ? list_str(o.scale_factor) : list_str(o.size));
  kern::ResampleGeom g;
  g.planes = x.size(0) * x.size(1);
  g.mode = kernel_mode(o.mode);
  g.align_corners = o.align_corners.value_or(false);
  for (size_t i = 0; i < dims; ++i) {
    const size_t k = 3 - dims + i;
    const int64_t in = x.size(static_cast<int64_t>(2 + i));
    g.in[k] = in;
    if (o.size.empty()) {
      const double s = o.scale_factor[given == 1 ? 0 : i];
      SINTER_CHECK(s > 0 && std::isfinite(s), op,
                   ": scale_factor must be positive and finite, got ", list_str(o.scale_factor));
      g.out[k] = static_cast<int64_t>(std::floor(static_cast<double>(in) * s));
      if (!o.recompute_scale_factor) g.scale[k] = s;
    } else {
      g.out[k] = o.size[given == 1 ? 0 : i];
    }
    SINTER_CHECK(in > 0 && g.out[k] > 0, op,
                 ": input and output sizes must be positive, got input ", shape_str(x.shape()),
                 " to spatial size ", g.out[k], " along dim ", 2 + i);
  }
  return g;
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& options) {
  SINTER_PROFILE_OP("interpolate", x);
  if (options.mode == InterpolateMode::Area) {  // PyTorch's: adaptive average pooling (and its
                                                // autocast policy)
    const kern::ResampleGeom g = resample_geom(x, options);
    if (x.dim() == 3) return adaptive_avg_pool1d(x, g.out[2]);
    if (x.dim() == 4) return adaptive_avg_pool2d(x, {g.out[1], g.out[2]});
    return adaptive_avg_pool3d(x, {g.out[0], g.out[1], g.out[2]});
  }
  SINTER_AUTOCAST(interpolate, x, interpolate(cast(x), options));
  const kern::ResampleGeom g = resample_geom(x, options);
  Shape out_shape{x.size(0), x.size(1)};
  for (int64_t k = 5 - x.dim(); k < 3; ++k) out_shape.push_back(g.out[k]);
  const DType dtype = x.dtype();
  Tensor xc;
  {
    NoGradGuard ng;
    xc = x.contiguous();
  }
  Tensor y = empty(out_shape, {.dtype = dtype, .device = x.device()});
  if (y.numel() > 0) {
    SINTER_DISPATCH(x.device(), resample_forward, g, dtype, xc.data_ptr(), y.data_ptr());
  }
  if (needs_grad({&x})) {
    const Shape in_shape = x.shape();
    record("interpolate", {&y}, {x}, [g, in_shape, dtype](const Grads& gr) {
      const Tensor gc = gr[0].to(dtype).contiguous();
      Tensor dx = empty(in_shape, {.dtype = dtype, .device = gc.device()});
      if (gc.numel() > 0) {
        SINTER_DISPATCH(gc.device(), resample_backward, g, dtype, gc.data_ptr(), dx.data_ptr());
      }
      return Grads{dx};
    });
  }
  return y;
}

namespace {

// x's leading dims (all but the last three), then `rest`.
Shape leading_then(const Tensor& x, std::initializer_list<int64_t> rest) {
  Shape s(x.shape().begin(), x.shape().end() - 3);
  s.insert(s.end(), rest);
  return s;
}

// The permutation that keeps x's leading dims and orders the five after them as `tail`.
std::vector<int64_t> leading_then_perm(int64_t lead, std::initializer_list<int64_t> tail) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < lead; ++d) perm.push_back(d);
  for (int64_t d : tail) perm.push_back(lead + d);
  return perm;
}

void check_shuffle(const char* op, const Tensor& x, int64_t factor) {
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK(x.dim() >= 3, op, ": expected an input of shape (*, C, H, W), got shape ",
               shape_str(x.shape()));
  SINTER_CHECK(factor > 0, op, ": the factor must be positive, got ", factor);
}

}  // namespace

// (*, C r r, H, W) -> (*, C, r, r, H, W) -> (*, C, H, r, W, r) -> (*, C, H r, W r).
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor) {
  const char* op = "pixel_shuffle";
  const int64_t r = upscale_factor;
  check_shuffle(op, x, r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  SINTER_CHECK(c % (r * r) == 0, op, ": the input's ", c,
               " channels must be divisible by the square of upscale_factor ", r);
  const int64_t lead = x.dim() - 3;
  return x.reshape(leading_then(x, {c / (r * r), r, r, h, w}))
      .permute(leading_then_perm(lead, {0, 3, 1, 4, 2}))
      .reshape(leading_then(x, {c / (r * r), h * r, w * r}));
}

// (*, C, H r, W r) -> (*, C, H, r, W, r) -> (*, C, r, r, H, W) -> (*, C r r, H, W).
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor) {
  const char* op = "pixel_unshuffle";
  const int64_t r = downscale_factor;
  check_shuffle(op, x, r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  SINTER_CHECK(h % r == 0 && w % r == 0, op, ": the input's height ", h, " and width ", w,
               " must be divisible by downscale_factor ", r);
  const int64_t lead = x.dim() - 3;
  return x.reshape(leading_then(x, {c, h / r, r, w / r, r}))
      .permute(leading_then_perm(lead, {0, 2, 4, 1, 3}))
      .reshape(leading_then(x, {c * r * r, h / r, w / r}));
}

}  // namespace sinter
