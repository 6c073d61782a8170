// The convolution layers of sinter/nn/conv.h: the checks and initialization they share
// (ConvBase), padding_mode, and each layer's forward on its op.
#include "sinter/nn/conv.h"

#include <ostream>
#include <vector>

#include "nn/layer_init.h"

namespace sinter::nn {

std::ostream& operator<<(std::ostream& os, PaddingMode m) {
  switch (m) {
    case PaddingMode::Zeros:
      return os << "zeros";
    case PaddingMode::Reflect:
      return os << "reflect";
    case PaddingMode::Replicate:
      return os << "replicate";
    case PaddingMode::Circular:
      return os << "circular";
  }
  return os << "PaddingMode(" << static_cast<int>(m) << ")";
}

namespace {

Shape dims(Size2 s) { return {s.h, s.w}; }
Shape dims(Size3 s) { return {s.d, s.h, s.w}; }

}  // namespace

// --- ConvBase ---

void ConvBase::build(const char* name, const Shape& kernel, const Shape& stride,
                     const Shape& padding, const Shape& dilation, int64_t groups, bool with_bias,
                     bool same, bool transposed, const Shape& output_padding) {
  SINTER_CHECK(in_channels > 0 && out_channels > 0, name,
               ": in_channels and out_channels must be positive, got ", in_channels, " and ",
               out_channels);
  const auto all = [](const Shape& s, auto pred) {
    for (int64_t v : s) {
      if (!pred(v)) return false;
    }
    return true;
  };
  const auto positive = [](int64_t v) { return v > 0; };
  const auto non_negative = [](int64_t v) { return v >= 0; };
  SINTER_CHECK(all(kernel, positive), name, ": kernel_size must be positive, got ",
               shape_str(kernel));
  SINTER_CHECK(all(stride, positive), name, ": stride must be positive, got ", shape_str(stride));
  SINTER_CHECK(all(padding, non_negative), name, ": padding must be non-negative, got ",
               shape_str(padding));
  SINTER_CHECK(all(dilation, positive), name, ": dilation must be positive, got ",
               shape_str(dilation));
  SINTER_CHECK(!same || (all(stride, [](int64_t v) { return v == 1; }) &&
                         all(padding, [](int64_t v) { return v == 0; })),
               name, ": same_padding needs stride 1 and no padding, got stride ", shape_str(stride),
               " and padding ", shape_str(padding));
  for (size_t i = 0; i < output_padding.size(); ++i) {
    SINTER_CHECK(output_padding[i] >= 0 &&
                     (output_padding[i] < stride[i] || output_padding[i] < dilation[i]),
                 name, ": output_padding ", shape_str(output_padding),
                 " must be non-negative and smaller than the stride ", shape_str(stride),
                 " or the dilation ", shape_str(dilation), " in each dim");
  }
  SINTER_CHECK(groups > 0 && in_channels % groups == 0 && out_channels % groups == 0, name,
               ": groups ", groups, " must divide in_channels ", in_channels, " and out_channels ",
               out_channels);
  Shape wshape = transposed ? Shape{in_channels, out_channels / groups}
                            : Shape{out_channels, in_channels / groups};
  wshape.insert(wshape.end(), kernel.begin(), kernel.end());
  weight = register_parameter("weight", empty(wshape));
  if (with_bias) bias = register_parameter("bias", empty({out_channels}));
  reset_parameters();
}

void ConvBase::reset_parameters() { init_weight_and_bias(weight, bias); }

void ConvBase::check_input(const Tensor& x, int64_t spatial) const {
  static const char* const kLayouts[] = {"", "L", "H, W", "D, H, W"};
  SINTER_CHECK(x.defined(), name(), ": undefined input");
  SINTER_CHECK(x.dim() == spatial + 2 && x.size(1) == in_channels, name(),
               ": expected input of shape (N, ", in_channels, ", ", kLayouts[spatial],
               "), got shape ", shape_str(x.shape()));
}

Tensor ConvBase::mode_padded(const Tensor& x, PaddingMode mode, bool same, const Shape& padding,
                             const Shape& dilation, Shape& conv_padding) const {
  conv_padding = padding;
  if (mode == PaddingMode::Zeros) return x;
  SINTER_CHECK(mode == PaddingMode::Reflect || mode == PaddingMode::Replicate ||
                   mode == PaddingMode::Circular,
               name(), ": unknown padding_mode ", mode);
  // pad()'s (left, right) pairs run from the last dim backwards; "same" puts the odd one right.
  std::vector<int64_t> pads;
  const auto n = static_cast<int64_t>(padding.size());
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t total = same ? dilation[i] * (weight.size(2 + i) - 1) : 2 * padding[i];
    pads.push_back(total / 2);
    pads.push_back(total - total / 2);
  }
  conv_padding.assign(padding.size(), 0);
  const PadMode pm = mode == PaddingMode::Reflect     ? PadMode::Reflect
                     : mode == PaddingMode::Replicate ? PadMode::Replicate
                                                      : PadMode::Circular;
  return pad(x, pads, pm);
}

// --- Conv1d, Conv2d, Conv3d ---

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
               const Conv1dOptions& options)
    : ConvBase(in_channels, out_channels), kernel_size(kernel_size), options(options) {
  build("Conv1d", {kernel_size}, {options.stride}, {options.padding}, {options.dilation},
        options.groups, options.bias, options.same_padding);
}

Tensor Conv1d::forward(const Tensor& x) {
  check_input(x, 1);
  const Conv1dOptions& o = options;
  Shape padding;
  const Tensor xp =
      mode_padded(x, o.padding_mode, o.same_padding, {o.padding}, {o.dilation}, padding);
  const bool same = o.same_padding && o.padding_mode == PaddingMode::Zeros;
  return conv1d(xp, weight, bias,
                {.stride = o.stride,
                 .padding = padding[0],
                 .dilation = o.dilation,
                 .groups = o.groups,
                 .same_padding = same});
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
               const Conv2dOptions& options)
    : ConvBase(in_channels, out_channels), kernel_size(kernel_size), options(options) {
  build("Conv2d", dims(kernel_size), dims(options.stride), dims(options.padding),
        dims(options.dilation), options.groups, options.bias, options.same_padding);
}

Tensor Conv2d::forward(const Tensor& x) {
  check_input(x, 2);
  const Conv2dOptions& o = options;
  Shape padding;
  const Tensor xp =
      mode_padded(x, o.padding_mode, o.same_padding, dims(o.padding), dims(o.dilation), padding);
  const bool same = o.same_padding && o.padding_mode == PaddingMode::Zeros;
  return conv2d(xp, weight, bias,
                {.stride = o.stride,
                 .padding = {padding[0], padding[1]},
                 .dilation = o.dilation,
                 .groups = o.groups,
                 .same_padding = same},
                activation);
}

Conv3d::Conv3d(int64_t in_channels, int64_t out_channels, Size3 kernel_size,
               const Conv3dOptions& options)
    : ConvBase(in_channels, out_channels), kernel_size(kernel_size), options(options) {
  build("Conv3d", dims(kernel_size), dims(options.stride), dims(options.padding),
        dims(options.dilation), options.groups, options.bias, options.same_padding);
}

Tensor Conv3d::forward(const Tensor& x) {
  check_input(x, 3);
  const Conv3dOptions& o = options;
  Shape padding;
  const Tensor xp =
      mode_padded(x, o.padding_mode, o.same_padding, dims(o.padding), dims(o.dilation), padding);
  const bool same = o.same_padding && o.padding_mode == PaddingMode::Zeros;
  return conv3d(xp, weight, bias,
                {.stride = o.stride,
                 .padding = {padding[0], padding[1], padding[2]},
                 .dilation = o.dilation,
                 .groups = o.groups,
                 .same_padding = same});
}

// --- the transposed layers ---

ConvTranspose1d::ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                 const ConvTranspose1dOptions& options)
    : ConvBase(in_channels, out_channels), kernel_size(kernel_size), options(options) {
  build("ConvTranspose1d", {kernel_size}, {options.stride}, {options.padding}, {options.dilation},
        options.groups, options.bias, false, true, {options.output_padding});
}

Tensor ConvTranspose1d::forward(const Tensor& x) {
  check_input(x, 1);
  const ConvTranspose1dOptions& o = options;
  return conv_transpose1d(x, weight, bias,
                          {.stride = o.stride,
                           .padding = o.padding,
                           .output_padding = o.output_padding,
                           .groups = o.groups,
                           .dilation = o.dilation});
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
                                 const ConvTranspose2dOptions& options)
    : ConvBase(in_channels, out_channels), kernel_size(kernel_size), options(options) {
  build("ConvTranspose2d", dims(kernel_size), dims(options.stride), dims(options.padding),
        dims(options.dilation), options.groups, options.bias, false, true,
        dims(options.output_padding));
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  check_input(x, 2);
  const ConvTranspose2dOptions& o = options;
  return conv_transpose2d(x, weight, bias,
                          {.stride = o.stride,
                           .padding = o.padding,
                           .output_padding = o.output_padding,
                           .groups = o.groups,
                           .dilation = o.dilation});
}

ConvTranspose3d::ConvTranspose3d(int64_t in_channels, int64_t out_channels, Size3 kernel_size,
                                 const ConvTranspose3dOptions& options)
    : ConvBase(in_channels, out_channels), kernel_size(kernel_size), options(options) {
  build("ConvTranspose3d", dims(kernel_size), dims(options.stride), dims(options.padding),
        dims(options.dilation), options.groups, options.bias, false, true,
        dims(options.output_padding));
}

Tensor ConvTranspose3d::forward(const Tensor& x) {
  check_input(x, 3);
  const ConvTranspose3dOptions& o = options;
  return conv_transpose3d(x, weight, bias,
                          {.stride = o.stride,
                           .padding = o.padding,
                           .output_padding = o.output_padding,
                           .groups = o.groups,
                           .dilation = o.dilation});
}

}  // namespace sinter::nn
