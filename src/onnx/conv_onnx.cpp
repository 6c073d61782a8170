// The convolution layers as ONNX opset-17 operators: Conv or ConvTranspose, with a layer's
// padding_mode as Pad (reflect, edge) or, for circular, as slices concatenated, and "same" as
// uneven pads.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "onnx/exporter.h"
#include "sinter/nn/conv.h"
#include "sinter/ops.h"

namespace sinter::onnx::detail {

namespace {

// One convolution layer's settings as ONNX takes them, each per spatial dim.
struct ConvAttrs {
  Shape kernel, stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool same = false;
  nn::PaddingMode mode = nn::PaddingMode::Zeros;
};

ConvAttrs conv_attrs(const nn::Conv1d& c) {
  const nn::Conv1dOptions& o = c.options;
  return {{c.kernel_size}, {o.stride},     {o.padding},   {o.dilation}, {},
          o.groups,        o.same_padding, o.padding_mode};
}
ConvAttrs conv_attrs(const nn::Conv2d& c) {
  const nn::Conv2dOptions& o = c.options;
  return {{c.kernel_size.h, c.kernel_size.w},
          {o.stride.h, o.stride.w},
          {o.padding.h, o.padding.w},
          {o.dilation.h, o.dilation.w},
          {},
          o.groups,
          o.same_padding,
          o.padding_mode};
}
ConvAttrs conv_attrs(const nn::Conv3d& c) {
  const nn::Conv3dOptions& o = c.options;
  const auto d = [](Size3 s) { return Shape{s.d, s.h, s.w}; };
  return {d(c.kernel_size), d(o.stride),    d(o.padding),  d(o.dilation), {},
          o.groups,         o.same_padding, o.padding_mode};
}
template <class T>
ConvAttrs transposed_attrs(const T& c, Shape kernel, Shape stride, Shape padding, Shape dilation,
                           Shape output_padding) {
  return {std::move(kernel),   std::move(stride),         std::move(padding),
          std::move(dilation), std::move(output_padding), c.options.groups};
}
ConvAttrs conv_attrs(const nn::ConvTranspose1d& c) {
  const nn::ConvTranspose1dOptions& o = c.options;
  return transposed_attrs(c, {c.kernel_size}, {o.stride}, {o.padding}, {o.dilation},
                          {o.output_padding});
}
ConvAttrs conv_attrs(const nn::ConvTranspose2d& c) {
  const nn::ConvTranspose2dOptions& o = c.options;
  const auto d = [](Size2 s) { return Shape{s.h, s.w}; };
  return transposed_attrs(c, d(c.kernel_size), d(o.stride), d(o.padding), d(o.dilation),
                          d(o.output_padding));
}
ConvAttrs conv_attrs(const nn::ConvTranspose3d& c) {
  const nn::ConvTranspose3dOptions& o = c.options;
  const auto d = [](Size3 s) { return Shape{s.d, s.h, s.w}; };
  return transposed_attrs(c, d(c.kernel_size), d(o.stride), d(o.padding), d(o.dilation),
                          d(o.output_padding));
}

// The padding a layer's padding_mode applies before its convolution (reflect and replicate as a
// Pad node, reflect and edge; circular, which opset 17's Pad lacks, as slices of the far ends
// concatenated around each dim), with each dim's (begin, end) padding; `begin`/`end` are set to the
// padding the convolution itself still applies (ONNX's pads, begin and end apart, so that "same"
// needs no node).
std::string padded_for_conv(Exporter& ex, const ConvAttrs& a, const std::string& scope,
                            const std::string& x, Shape& begin, Shape& end) {
  const size_t n = a.kernel.size();
  begin.assign(n, 0);
  end.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t total = a.same ? a.dilation[i] * (a.kernel[i] - 1) : 2 * a.padding[i];
    begin[i] = total / 2;
    end[i] = total - total / 2;
  }
  if (a.mode == nn::PaddingMode::Zeros) return x;
  std::string v = x;
  if (a.mode == nn::PaddingMode::Circular) {
    for (size_t i = 0; i < n; ++i) {
      const auto axis = static_cast<int64_t>(2 + i);
      std::vector<std::string> parts;
      if (begin[i] > 0) {
        parts.push_back(ex.node(
            "Slice", {v, ex.ints({-begin[i]}), ex.ints({INT64_MAX}), ex.ints({axis})}, scope));
      }
      parts.push_back(v);
      if (end[i] > 0) {
        parts.push_back(
            ex.node("Slice", {v, ex.ints({0}), ex.ints({end[i]}), ex.ints({axis})}, scope));
      }
      if (parts.size() > 1) {
        v = ex.node_with("Concat", parts, scope,
                         [&](pb::NodeProto* nd) { attr(nd, "axis", axis); });
      }
    }
  } else {
    Shape pads(2 * (n + 2), 0);  // ONNX's order: every dim's begin, then every dim's end
    for (size_t i = 0; i < n; ++i) {
      pads[2 + i] = begin[i];
      pads[n + 4 + i] = end[i];
    }
    const char* mode = a.mode == nn::PaddingMode::Reflect ? "reflect" : "edge";
    v = ex.node_with("Pad", {x, ex.ints(pads)}, scope,
                     [&](pb::NodeProto* nd) { attr_string(nd, "mode", mode); });
  }
  begin.assign(n, 0);
  end.assign(n, 0);
  return v;
}

// A convolution layer as one Conv or ConvTranspose node (after its padding_mode's nodes), then
// its epilogue activation; `w` names the weight's value where it is not the initializer (an int8
// layer's dequantized weight). `pre` is the layer's output before the activation.
//
// ONNX Runtime refuses a ConvTranspose whose output_padding is not smaller than its stride (one
// smaller than the dilation instead): such a dim is cropped less at its end (pads end p - op)
// instead, and where op > p, the op - p positions past every tap are zeros padded on after the
// node, the bias added after them.
Value conv(Exporter& ex, nn::ConvBase& c, const ConvAttrs& a, bool transposed,
           const std::string& scope, const Value& x, const Tensor& pre, Activation act,
           const std::string& w = "") {
  Shape begin, end;
  const std::string in = padded_for_conv(ex, a, scope, x.name, begin, end);
  Shape output_padding = a.output_padding;
  const size_t n = a.kernel.size();
  Shape zeros_after(n, 0);
  bool late_bias = false;
  for (size_t i = 0; transposed && i < n; ++i) {
    const int64_t op = a.output_padding[i];
    if (op < a.stride[i]) continue;
    output_padding[i] = 0;
    end[i] = std::max<int64_t>(a.padding[i] - op, 0);
    zeros_after[i] = std::max<int64_t>(op - a.padding[i], 0);
    late_bias |= zeros_after[i] > 0;
  }
  std::vector<std::string> inputs{in, w.empty() ? ex.weight(c.weight) : w};
  if (c.bias.defined() && !late_bias) inputs.push_back(ex.weight(c.bias));
  Shape pads = begin;
  pads.insert(pads.end(), end.begin(), end.end());
  std::string y =
      ex.node_with(transposed ? "ConvTranspose" : "Conv", inputs, scope, [&](pb::NodeProto* nd) {
        attr(nd, "kernel_shape", a.kernel);
        attr(nd, "strides", a.stride);
        attr(nd, "pads", pads);
        attr(nd, "dilations", a.dilation);
        attr(nd, "group", a.groups);
        if (transposed) attr(nd, "output_padding", output_padding);
      });
  if (late_bias) {
    Shape tail(2 * (n + 2), 0);
    for (size_t i = 0; i < n; ++i) tail[n + 4 + i] = zeros_after[i];
    y = ex.node("Pad", {y, ex.ints(tail)}, scope);
    if (c.bias.defined()) {
      Shape per_channel(n + 1, 1);
      per_channel[0] = c.out_channels;
      y = ex.node("Add", {y, ex.node("Reshape", {ex.weight(c.bias), ex.ints(per_channel)}, scope)},
                  scope);
    }
  }
  return activation(ex, {y, pre}, act, scope);
}

}  // namespace

// A Conv2d (or an int8 one, with `w`), its epilogue activation as nodes of their own.
Value conv2d(Exporter& ex, nn::Conv2d& c, const std::string& scope, const Value& x,
             const std::string& w) {
  // The float layer's value before the activation (which also checks the input).
  struct WithoutEpilogue {
    nn::Conv2d& c;
    Activation act;
    explicit WithoutEpilogue(nn::Conv2d& layer) : c(layer), act(layer.activation) {
      c.activation = Activation::None;
    }
    ~WithoutEpilogue() { c.activation = act; }
  };
  Tensor pre;
  {
    const WithoutEpilogue bare(c);
    pre = c.nn::Conv2d::forward(x.t);
  }
  return conv(ex, c, conv_attrs(c), false, scope, x, pre, c.activation, w);
}

Value conv_layer(Exporter& ex, nn::ConvBase& c, const std::string& scope, const Value& x) {
  const Tensor y = c.forward(x.t);  // checks the input
  const auto as = [&](auto* layer, bool transposed) {
    return conv(ex, c, conv_attrs(*layer), transposed, scope, x, y, Activation::None);
  };
  if (auto* l = dynamic_cast<nn::Conv1d*>(&c)) return as(l, false);
  if (auto* l = dynamic_cast<nn::Conv3d*>(&c)) return as(l, false);
  if (auto* l = dynamic_cast<nn::ConvTranspose1d*>(&c)) return as(l, true);
  if (auto* l = dynamic_cast<nn::ConvTranspose2d*>(&c)) return as(l, true);
  if (auto* l = dynamic_cast<nn::ConvTranspose3d*>(&c)) return as(l, true);
  SINTER_THROW("onnx::export_model: ", c.name(), " is not a convolution conv_layer exports");
}

}  // namespace sinter::onnx::detail
