// The sliding-block layers: Unfold (im2col) and Fold (col2im), as PyTorch's. They hold no
// parameters.
#pragma once

#include <string>

#include "sinter/nn/module.h"
#include "sinter/ops.h"

namespace sinter::nn {

// unfold(x, kernel_size, options): (N, C, H, W) -> (N, C kH kW, L). The sizes are checked when
// built, the input at forward.
//   Unfold(3, {.padding = 1}), Unfold({2, 3}, {.stride = 2})
class Unfold : public Module {
 public:
  explicit Unfold(Size2 kernel_size, const FoldOptions& options = {});
  std::string name() const override { return "Unfold"; }
  Tensor forward(const Tensor& x) override;

  Size2 kernel_size;
  FoldOptions options;
};

// fold(x, output_size, kernel_size, options): (N, C kH kW, L) -> (N, C, H, W), overlaps summed.
class Fold : public Module {
 public:
  Fold(Size2 output_size, Size2 kernel_size, const FoldOptions& options = {});
  std::string name() const override { return "Fold"; }
  Tensor forward(const Tensor& x) override;

  Size2 output_size;
  Size2 kernel_size;
  FoldOptions options;
};

}  // namespace sinter::nn
