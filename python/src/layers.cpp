// More of sinter._C.nn's layers, with torch.nn's arguments: the 1-D, 3-D and transposed
// convolutions, instance and RMS norms, the recurrent layers (forward returning torch's tuples),
// resampling, folding, 3-D pools and the remaining activations.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bind.h"
#include "sinter/nn.h"

namespace sinter::python {
namespace {

using nn::Module;

nn::PaddingMode padding_mode_of(const std::string& mode) {
  if (mode == "zeros") return nn::PaddingMode::Zeros;
  if (mode == "reflect") return nn::PaddingMode::Reflect;
  if (mode == "replicate") return nn::PaddingMode::Replicate;
  if (mode == "circular") return nn::PaddingMode::Circular;
  throw nb::value_error(("padding_mode must be one of 'zeros', 'reflect', 'replicate' or "
                         "'circular', but got padding_mode='" +
                         mode + "'")
                            .c_str());
}

// Conv1d, Conv2d's siblings: L(in, out, kernel, stride, padding, dilation, groups, bias,
// padding_mode) with Size the options' size type and `of` its parser.
template <class L, class Opt, class Size, class Of>
void bind_conv(nb::module_& m, const char* name, Of of) {
  nb::class_<L, Module>(m, name)
      .def(
          "__init__",
          [of](L* self, int64_t in, int64_t out, nb::handle kernel, nb::handle stride,
               nb::handle padding, nb::handle dilation, int64_t groups, bool bias,
               const std::string& mode, nb::handle device, nb::handle dtype) {
            Opt o;
            o.stride = of(stride);
            o.padding = padding_of<Size>(padding, o.same_padding, of);
            o.dilation = of(dilation);
            o.groups = groups;
            o.bias = bias;
            o.padding_mode = padding_mode_of(mode);
            new (self) L(in, out, of(kernel), o);
            to_factory(*self, device, dtype);
          },
          nb::arg("in_channels"), nb::arg("out_channels"), nb::arg("kernel_size"),
          nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1,
          nb::arg("groups") = 1, nb::arg("bias") = true, nb::arg("padding_mode") = "zeros",
          nb::kw_only(), nb::arg("device") = nb::none(), nb::arg("dtype") = nb::none())
      .def_ro("weight", &L::weight)
      .def_prop_ro("bias", [](const L& c) {
        return c.bias.defined() ? std::optional<Tensor>(c.bias) : std::nullopt;
      });
}

// The transposed convolutions: L(in, out, kernel, stride, padding, output_padding, groups, bias,
// dilation), torch's order.
template <class L, class Opt, class Of>
void bind_conv_transpose(nb::module_& m, const char* name, Of of) {
  nb::class_<L, Module>(m, name)
      .def(
          "__init__",
          [of, name](L* self, int64_t in, int64_t out, nb::handle kernel, nb::handle stride,
                     nb::handle padding, nb::handle output_padding, int64_t groups, bool bias,
                     nb::handle dilation, const std::string& mode, nb::handle device,
                     nb::handle dtype) {
            if (mode != "zeros") {
              throw nb::value_error(
                  ("Only \"zeros\" padding mode is supported for " + std::string(name)).c_str());
            }
            Opt o;
            o.stride = of(stride);
            o.padding = of(padding);
            o.output_padding = of(output_padding);
            o.groups = groups;
            o.bias = bias;
            o.dilation = of(dilation);
            new (self) L(in, out, of(kernel), o);
            to_factory(*self, device, dtype);
          },
          nb::arg("in_channels"), nb::arg("out_channels"), nb::arg("kernel_size"),
          nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("output_padding") = 0,
          nb::arg("groups") = 1, nb::arg("bias") = true, nb::arg("dilation") = 1,
          nb::arg("padding_mode") = "zeros", nb::kw_only(), nb::arg("device") = nb::none(),
          nb::arg("dtype") = nb::none())
      .def_ro("weight", &L::weight)
      .def_prop_ro("bias", [](const L& c) {
        return c.bias.defined() ? std::optional<Tensor>(c.bias) : std::nullopt;
      });
}

// RNN, LSTM and GRU: torch's constructor and forward(input, hx) -> (output, h_n), or for the
// LSTM (output, (h_n, c_n)); batch_first, bidirectional, dropout and proj_size as torch's.
template <class L>
void bind_rnn(nb::module_& m, const char* name, bool lstm, bool elman) {
  auto cls = nb::class_<L, Module>(m, name);
  auto make = [](L* self, int64_t input_size, int64_t hidden_size, int64_t num_layers,
                 const std::string& nonlinearity, bool bias, bool batch_first, double dropout,
                 bool bidirectional, int64_t proj_size, nb::handle device, nb::handle dtype) {
    SINTER_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", "Unknown nonlinearity '",
                 nonlinearity, "'. Select from 'tanh' or 'relu'.");
    nn::RNNOptions o;
    o.num_layers = num_layers;
    o.nonlinearity = nonlinearity == "relu" ? nn::RNNNonlinearity::Relu : nn::RNNNonlinearity::Tanh;
    o.bias = bias;
    o.batch_first = batch_first;
    o.dropout = dropout;
    o.bidirectional = bidirectional;
    o.proj_size = proj_size;
    new (self) L(input_size, hidden_size, o);
    to_factory(*self, device, dtype);
  };
  // torch's order: RNN has nonlinearity fourth; LSTM and GRU have none.
  if (elman) {
    cls.def("__init__", make, nb::arg("input_size"), nb::arg("hidden_size"),
            nb::arg("num_layers") = 1, nb::arg("nonlinearity") = "tanh", nb::arg("bias") = true,
            nb::arg("batch_first") = false, nb::arg("dropout") = 0.0,
            nb::arg("bidirectional") = false, nb::arg("proj_size") = 0, nb::kw_only(),
            nb::arg("device") = nb::none(), nb::arg("dtype") = nb::none());
  } else {
    cls.def(
        "__init__",
        [make](L* self, int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias,
               bool batch_first, double dropout, bool bidirectional, int64_t proj_size,
               nb::handle device, nb::handle dtype) {
          make(self, input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
               bidirectional, proj_size, device, dtype);
        },
        nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("num_layers") = 1,
        nb::arg("bias") = true, nb::arg("batch_first") = false, nb::arg("dropout") = 0.0,
        nb::arg("bidirectional") = false, nb::arg("proj_size") = 0, nb::kw_only(),
        nb::arg("device") = nb::none(), nb::arg("dtype") = nb::none());
  }
  cls.def(
      "forward",
      [lstm](L& self, const Tensor& x, nb::handle hx) -> nb::tuple {
        Tensor h0, c0;
        if (!hx.is_none()) {
          if (lstm) {
            const auto pair = nb::cast<std::pair<Tensor, Tensor>>(hx);
            h0 = pair.first;
            c0 = pair.second;
          } else {
            h0 = nb::cast<Tensor>(hx);
          }
        }
        nn::RNNOutput r = self.run(x, h0, c0);
        if (lstm) return nb::make_tuple(r.output, nb::make_tuple(r.h, r.c));
        return nb::make_tuple(r.output, r.h);
      },
      nb::arg("input"), nb::arg("hx").none() = nb::none());
  cls.def_ro("input_size", &L::input_size).def_ro("hidden_size", &L::hidden_size);
}

// inplace is taken for torch's callers: the result is a new tensor either way (README).
void bind_activations(nb::module_& m) {
  nb::class_<nn::SELU, Module>(m, "SELU", nb::dynamic_attr())
      .def(
          "__init__",
          [](nn::SELU* self, bool inplace) {
            new (self) nn::SELU();
            keep_inplace(self, inplace);
          },
          nb::arg("inplace") = false);
  nb::class_<nn::Mish, Module>(m, "Mish", nb::dynamic_attr())
      .def(
          "__init__",
          [](nn::Mish* self, bool inplace) {
            new (self) nn::Mish();
            keep_inplace(self, inplace);
          },
          nb::arg("inplace") = false);
  nb::class_<nn::Hardswish, Module>(m, "Hardswish")
      .def(
          "__init__", [](nn::Hardswish* self, bool) { new (self) nn::Hardswish(); },
          nb::arg("inplace") = false);
  nb::class_<nn::Hardsigmoid, Module>(m, "Hardsigmoid")
      .def(
          "__init__", [](nn::Hardsigmoid* self, bool) { new (self) nn::Hardsigmoid(); },
          nb::arg("inplace") = false);
  nb::class_<nn::PReLU, Module>(m, "PReLU")
      .def(
          "__init__",
          [](nn::PReLU* self, int64_t n, double init, nb::handle device, nb::handle dtype) {
            new (self) nn::PReLU(n, init);
            to_factory(*self, device, dtype);
          },
          nb::arg("num_parameters") = 1, nb::arg("init") = 0.25, nb::kw_only(),
          nb::arg("device") = nb::none(), nb::arg("dtype") = nb::none())
      .def_ro("weight", &nn::PReLU::weight);
  nb::class_<nn::Softmax, Module>(m, "Softmax").def(nb::init<int64_t>(), nb::arg("dim"));
  nb::class_<nn::LogSoftmax, Module>(m, "LogSoftmax").def(nb::init<int64_t>(), nb::arg("dim"));
  nb::class_<nn::Unflatten, Module>(m, "Unflatten")
      .def(nb::init<int64_t, Shape>(), nb::arg("dim"), nb::arg("unflattened_size"));
  nb::class_<nn::PixelShuffle, Module>(m, "PixelShuffle")
      .def(nb::init<int64_t>(), nb::arg("upscale_factor"));
  nb::class_<nn::PixelUnshuffle, Module>(m, "PixelUnshuffle")
      .def(nb::init<int64_t>(), nb::arg("downscale_factor"));
}

void bind_resampling(nb::module_& m) {
  nb::class_<nn::Upsample, Module>(m, "Upsample")
      .def(
          "__init__",
          [](nn::Upsample* self, nb::handle size, nb::handle scale, const std::string& mode,
             std::optional<bool> align_corners, std::optional<bool> recompute) {
            new (self)
                nn::Upsample(interpolate_options_of(size, scale, mode, align_corners, recompute));
          },
          nb::arg("size").none() = nb::none(), nb::arg("scale_factor").none() = nb::none(),
          nb::arg("mode") = "nearest", nb::arg("align_corners") = nb::none(),
          nb::arg("recompute_scale_factor") = nb::none());
  auto fold_options = [](nb::handle dilation, nb::handle padding, nb::handle stride) {
    return FoldOptions{
        .dilation = size2_of(dilation), .padding = size2_of(padding), .stride = size2_of(stride)};
  };
  nb::class_<nn::Unfold, Module>(m, "Unfold")
      .def(
          "__init__",
          [fold_options](nn::Unfold* self, nb::handle kernel, nb::handle dilation,
                         nb::handle padding, nb::handle stride) {
            new (self) nn::Unfold(size2_of(kernel), fold_options(dilation, padding, stride));
          },
          nb::arg("kernel_size"), nb::arg("dilation") = 1, nb::arg("padding") = 0,
          nb::arg("stride") = 1);
  nb::class_<nn::Fold, Module>(m, "Fold").def(
      "__init__",
      [fold_options](nn::Fold* self, nb::handle out, nb::handle kernel, nb::handle dilation,
                     nb::handle padding, nb::handle stride) {
        new (self)
            nn::Fold(size2_of(out), size2_of(kernel), fold_options(dilation, padding, stride));
      },
      nb::arg("output_size"), nb::arg("kernel_size"), nb::arg("dilation") = 1,
      nb::arg("padding") = 0, nb::arg("stride") = 1);
}

}  // namespace

InterpolateOptions interpolate_options_of(nb::handle size, nb::handle scale,
                                          const std::string& mode,
                                          std::optional<bool> align_corners,
                                          std::optional<bool> recompute_scale_factor) {
  static const std::pair<const char*, InterpolateMode> kModes[] = {
      {"nearest", InterpolateMode::Nearest}, {"nearest-exact", InterpolateMode::NearestExact},
      {"linear", InterpolateMode::Linear},   {"bilinear", InterpolateMode::Bilinear},
      {"bicubic", InterpolateMode::Bicubic}, {"trilinear", InterpolateMode::Trilinear},
      {"area", InterpolateMode::Area}};
  InterpolateOptions o;
  bool known = false;
  for (const auto& [n, v] : kModes) {
    if (mode == n) {
      o.mode = v;
      known = true;
    }
  }
  if (!known) throw nb::value_error(("interpolate: mode '" + mode + "' is not supported").c_str());
  if (!size.is_none()) {
    o.size = PyLong_Check(size.ptr()) ? std::vector<int64_t>{nb::cast<int64_t>(size)}
                                      : nb::cast<std::vector<int64_t>>(size);
  }
  if (!scale.is_none()) {
    o.scale_factor = PyFloat_Check(scale.ptr()) || PyLong_Check(scale.ptr())
                         ? std::vector<double>{nb::cast<double>(scale)}
                         : nb::cast<std::vector<double>>(scale);
  }
  o.align_corners = align_corners;
  if (recompute_scale_factor.value_or(false)) {
    if (!size.is_none()) {
      throw nb::value_error("recompute_scale_factor is not meaningful with an explicit size.");
    }
    o.recompute_scale_factor = true;
  }
  return o;
}

void bind_extra_layers(nb::module_& m) {
  bind_conv<nn::Conv1d, nn::Conv1dOptions, int64_t>(m, "Conv1d", int_of);
  bind_conv<nn::Conv2d, nn::Conv2dOptions, Size2>(m, "Conv2d", size2_of);
  bind_conv<nn::Conv3d, nn::Conv3dOptions, Size3>(m, "Conv3d", size3_of);
  bind_conv_transpose<nn::ConvTranspose1d, nn::ConvTranspose1dOptions>(m, "ConvTranspose1d",
                                                                       int_of);
  bind_conv_transpose<nn::ConvTranspose2d, nn::ConvTranspose2dOptions>(m, "ConvTranspose2d",
                                                                       size2_of);
  bind_conv_transpose<nn::ConvTranspose3d, nn::ConvTranspose3dOptions>(m, "ConvTranspose3d",
                                                                       size3_of);
  bind_norm_layer<nn::BatchNorm3d>(m, "BatchNorm3d", true);
  bind_norm_layer<nn::InstanceNorm1d>(m, "InstanceNorm1d", false);
  bind_norm_layer<nn::InstanceNorm2d>(m, "InstanceNorm2d", false);
  bind_norm_layer<nn::InstanceNorm3d>(m, "InstanceNorm3d", false);
  nb::class_<nn::RMSNorm, Module>(m, "RMSNorm")
      .def(
          "__init__",
          [](nn::RMSNorm* self, nb::handle shape, std::optional<double> eps, bool affine,
             nb::handle device, nb::handle dtype) {
            new (self) nn::RMSNorm(PyLong_Check(shape.ptr()) ? Shape{nb::cast<int64_t>(shape)}
                                                             : nb::cast<Shape>(shape),
                                   eps, affine);
            to_factory(*self, device, dtype);
          },
          nb::arg("normalized_shape"), nb::arg("eps") = nb::none(),
          nb::arg("elementwise_affine") = true, nb::kw_only(), nb::arg("device") = nb::none(),
          nb::arg("dtype") = nb::none());
  bind_rnn<nn::RNN>(m, "RNN", false, true);
  bind_rnn<nn::LSTM>(m, "LSTM", true, false);
  bind_rnn<nn::GRU>(m, "GRU", false, false);
  bind_activations(m);
  bind_resampling(m);
}

}  // namespace sinter::python
