// The layers of nn/resampling.h: their options checked when built, then the op from ops.h.
#include "sinter/nn/resampling.h"

namespace sinter::nn {

Upsample::Upsample(const InterpolateOptions& options) : options(options) {
  SINTER_CHECK(options.size.empty() != options.scale_factor.empty(),
               "Upsample: give exactly one of size and scale_factor");
  for (int64_t s : options.size) {
    SINTER_CHECK(s > 0, "Upsample: size must be positive, got ", s);
  }
  for (double s : options.scale_factor) {
    SINTER_CHECK(s > 0, "Upsample: scale_factor must be positive, got ", s);
  }
  const bool nearest = options.mode == InterpolateMode::Nearest ||
                       options.mode == InterpolateMode::NearestExact ||
                       options.mode == InterpolateMode::Area;
  SINTER_CHECK(!nearest || !options.align_corners,
               "Upsample: align_corners is for the interpolating modes, not nearest or area");
}

Tensor Upsample::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "Upsample: undefined input");
  return interpolate(x, options);
}

PixelShuffle::PixelShuffle(int64_t upscale_factor) : upscale_factor(upscale_factor) {
  SINTER_CHECK(upscale_factor > 0, "PixelShuffle: upscale_factor must be positive, got ",
               upscale_factor);
}

Tensor PixelShuffle::forward(const Tensor& x) { return pixel_shuffle(x, upscale_factor); }

PixelUnshuffle::PixelUnshuffle(int64_t downscale_factor) : downscale_factor(downscale_factor) {
  SINTER_CHECK(downscale_factor > 0, "PixelUnshuffle: downscale_factor must be positive, got ",
               downscale_factor);
}

Tensor PixelUnshuffle::forward(const Tensor& x) { return pixel_unshuffle(x, downscale_factor); }

}  // namespace sinter::nn
