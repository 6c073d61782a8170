// The 3-D pooling layers, MaxPool3d and AvgPool3d, as PyTorch's. They hold no parameters.
#pragma once

#include <string>

#include "sinter/nn/module.h"
#include "sinter/ops.h"

namespace sinter::nn {

// x: (N, C, D, H, W) or (C, D, H, W); max_pool3d with these options (a stride of 0: the kernel
// size), checked when built.
//   MaxPool3d(2), MaxPool3d({1, 3, 3}, {.stride = {1, 2, 2}, .padding = {0, 1, 1}})
class MaxPool3d : public Module {
 public:
  explicit MaxPool3d(Size3 kernel_size, const MaxPool3dOptions& options = {});
  std::string name() const override { return "MaxPool3d"; }
  Tensor forward(const Tensor& x) override;

  Size3 kernel_size;
  MaxPool3dOptions options;
};

// x: (N, C, D, H, W) or (C, D, H, W); avg_pool3d with these options.
class AvgPool3d : public Module {
 public:
  explicit AvgPool3d(Size3 kernel_size, const AvgPool3dOptions& options = {});
  std::string name() const override { return "AvgPool3d"; }
  Tensor forward(const Tensor& x) override;

  Size3 kernel_size;
  AvgPool3dOptions options;
};

}  // namespace sinter::nn
