// The resampling layers: Upsample (interpolate with fixed options), PixelShuffle and
// PixelUnshuffle, as PyTorch's. They hold no parameters.
#pragma once

#include <cstdint>
#include <string>

#include "sinter/nn/module.h"
#include "sinter/ops.h"

namespace sinter::nn {

// interpolate(x, options): checked when built (exactly one of size and scale_factor, each
// positive; align_corners only with an interpolating mode), the input's rank at forward.
//   Upsample({.scale_factor = {2}}), Upsample({.size = {8, 8}, .mode = InterpolateMode::Bilinear})
class Upsample : public Module {
 public:
  explicit Upsample(const InterpolateOptions& options);
  std::string name() const override { return "Upsample"; }
  Tensor forward(const Tensor& x) override;

  InterpolateOptions options;
};

// pixel_shuffle(x, upscale_factor): (*, C r^2, H, W) -> (*, C, H r, W r).
class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor);
  std::string name() const override { return "PixelShuffle"; }
  Tensor forward(const Tensor& x) override;

  int64_t upscale_factor;
};

// pixel_unshuffle(x, downscale_factor): (*, C, H r, W r) -> (*, C r^2, H, W).
class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor);
  std::string name() const override { return "PixelUnshuffle"; }
  Tensor forward(const Tensor& x) override;

  int64_t downscale_factor;
};

}  // namespace sinter::nn
