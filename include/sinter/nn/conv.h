// The convolution layers: Conv1d, Conv2d, Conv3d and the transposed ConvTranspose1d/2d/3d, with
// PyTorch's parameter names, shapes, options (padding="same", padding_mode) and initialization.
#pragma once

#include <cstdint>
#include <string>

#include "sinter/nn/module.h"
#include "sinter/ops.h"

namespace sinter::nn {

// How a convolution layer pads its input (PyTorch's padding_mode): with zeros inside the
// convolution, or by pad() in one of its modes first (Reflect, Replicate, Circular), after which
// the convolution itself pads nothing.
enum class PaddingMode { Zeros, Reflect, Replicate, Circular };
std::ostream& operator<<(std::ostream& os, PaddingMode m);

// The ops' options (sinter::Conv1dOptions, ...), and `bias` and `padding_mode`.
struct Conv1dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  bool same_padding = false;  // PyTorch's padding="same" (Conv2dOptions::same_padding in ops.h)
  PaddingMode padding_mode = PaddingMode::Zeros;
};
struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  bool same_padding = false;
  PaddingMode padding_mode = PaddingMode::Zeros;
};
struct Conv3dOptions {
  Size3 stride = 1;
  Size3 padding = 0;
  Size3 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  bool same_padding = false;
  PaddingMode padding_mode = PaddingMode::Zeros;
};

// The layers share these checks and the initialization: weight ~ kaiming_uniform_(a = sqrt(5)),
// bias ~ uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = weight.size(1) * prod(kernel) (for a
// transposed layer that is C_out / groups, as in PyTorch).
class ConvBase : public Module {
 public:
  void reset_parameters();

  int64_t in_channels, out_channels;
  Tensor weight;
  Tensor bias;  // undefined without bias

 protected:
  ConvBase(int64_t in_channels, int64_t out_channels)
      : in_channels(in_channels), out_channels(out_channels) {}
  // The parameters, after checking the layer's settings (kernel, stride, padding, dilation, in
  // (D, H, W) order, as many as the layer has spatial dims); `name` names the layer in errors.
  // A "same" layer has stride 1 and no padding of its own. A transposed layer's weight is (C_in,
  // C_out / groups, *kernel), with an output_padding per spatial dim.
  void build(const char* name, const Shape& kernel, const Shape& stride, const Shape& padding,
             const Shape& dilation, int64_t groups, bool with_bias, bool same,
             bool transposed = false, const Shape& output_padding = {});
  // x padded as padding_mode asks, with `padding` (or "same") around each spatial dim, and the
  // padding the convolution itself still applies: the given one for Zeros, none otherwise.
  Tensor mode_padded(const Tensor& x, PaddingMode mode, bool same, const Shape& padding,
                     const Shape& dilation, Shape& conv_padding) const;
  // An error naming the layer unless x is (N, in_channels, *spatial) with `spatial` dims.
  void check_input(const Tensor& x, int64_t spatial) const;
};

// x: (N, in_channels, L) -> (N, out_channels, L_out); weight: (out_channels, in_channels /
// groups, k).
class Conv1d : public ConvBase {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
         const Conv1dOptions& options = {});
  std::string name() const override { return "Conv1d"; }
  Tensor forward(const Tensor& x) override;

  int64_t kernel_size;
  Conv1dOptions options;
};

// x: (N, in_channels, H, W) -> (N, out_channels, H_out, W_out);
// weight: (out_channels, in_channels / groups, kH, kW).
class Conv2d : public ConvBase {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
         const Conv2dOptions& options = {});
  std::string name() const override { return "Conv2d"; }
  Tensor forward(const Tensor& x) override;

  Size2 kernel_size;
  Conv2dOptions options;
  // Applied after the bias in the convolution's epilogue, as Linear::activation.
  Activation activation = Activation::None;
};

// x: (N, in_channels, D, H, W) -> (N, out_channels, D_out, H_out, W_out);
// weight: (out_channels, in_channels / groups, kD, kH, kW).
class Conv3d : public ConvBase {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, Size3 kernel_size,
         const Conv3dOptions& options = {});
  std::string name() const override { return "Conv3d"; }
  Tensor forward(const Tensor& x) override;

  Size3 kernel_size;
  Conv3dOptions options;
};

// The transposed ops' options and `bias`, in PyTorch's order. PyTorch's transposed layers pad
// only with zeros; forward(x) gives the output size of output_padding (PyTorch's forward(x,
// output_size) picks output_padding from a size: give it here instead).
struct ConvTranspose1dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  int64_t dilation = 1;
};
struct ConvTranspose2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  Size2 dilation = 1;
};
struct ConvTranspose3dOptions {
  Size3 stride = 1;
  Size3 padding = 0;
  Size3 output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  Size3 dilation = 1;
};

// x: (N, in_channels, L) -> (N, out_channels, L_out); weight: (in_channels, out_channels /
// groups, k).
class ConvTranspose1d : public ConvBase {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                  const ConvTranspose1dOptions& options = {});
  std::string name() const override { return "ConvTranspose1d"; }
  Tensor forward(const Tensor& x) override;

  int64_t kernel_size;
  ConvTranspose1dOptions options;
};

// x: (N, in_channels, H, W) -> (N, out_channels, H_out, W_out); weight: (in_channels,
// out_channels / groups, kH, kW). A U-Net's upsampling layer: kernel 2, stride 2 doubles H and W.
class ConvTranspose2d : public ConvBase {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
                  const ConvTranspose2dOptions& options = {});
  std::string name() const override { return "ConvTranspose2d"; }
  Tensor forward(const Tensor& x) override;

  Size2 kernel_size;
  ConvTranspose2dOptions options;
};

// x: (N, in_channels, D, H, W) -> (N, out_channels, D_out, H_out, W_out); weight: (in_channels,
// out_channels / groups, kD, kH, kW).
class ConvTranspose3d : public ConvBase {
 public:
  ConvTranspose3d(int64_t in_channels, int64_t out_channels, Size3 kernel_size,
                  const ConvTranspose3dOptions& options = {});
  std::string name() const override { return "ConvTranspose3d"; }
  Tensor forward(const Tensor& x) override;

  Size3 kernel_size;
  ConvTranspose3dOptions options;
};

}  // namespace sinter::nn
