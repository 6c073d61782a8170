// Batch-level data augmentation and normalization on (N, C, H, W) tensors, for use in a
// DataLoader's transform (they run on the host, before the copy to the device).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sinter/core/generator.h"
#include "sinter/tensor.h"

namespace sinter::data {

// (x - mean[c]) / std[c] per channel; mean and std hold C values, or one for all channels. Any
// floating dtype and device.
Tensor normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std);

// Zero-pads H and W by `padding` on each side, then cuts a (size[0], size[1]) window at an offset
// drawn per sample from `gen` (uniform over all windows). Host tensors of any dtype.
Tensor random_crop(const Tensor& x, std::array<int64_t, 2> size, int64_t padding,
                   Generator* gen = nullptr);
// Mirrors each sample along W with probability p, drawn per sample from `gen`. Host tensors.
Tensor random_horizontal_flip(const Tensor& x, double p = 0.5, Generator* gen = nullptr);

}  // namespace sinter::data
