// sinter._C.nn: the C++ modules as Python classes (usable alone or inside a module written in
// Python, python/sinter/nn/), and sinter.nn.functional's ops with PyTorch's signatures.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bind.h"
#include "sinter/nn/activations.h"
#include "sinter/nn/fuse.h"
#include "sinter/nn/init.h"
#include "sinter/nn/normalization.h"

namespace sinter::python {
namespace {

void bind_module_base(nb::module_& m) {
  using nn::Module;
  nb::class_<Module>(m, "CModule", "A module implemented in C++ (the base of sinter.nn's layers).")
      .def("forward", &Module::forward, nb::arg("input"))
      .def("__call__", &Module::forward, nb::arg("input"))
      .def("named_parameters", [](const Module& mod) { return mod.named_parameters(); })
      .def("parameters", [](const Module& mod) { return mod.parameters(); })
      .def("named_buffers", [](const Module& mod) { return mod.named_buffers(); })
      .def("state_dict", &Module::state_dict)
      .def(
          "load_state_dict",
          [](Module& mod, const StateDict& state, bool strict) {
            const LoadResult r = mod.load_state_dict(state, strict);
            return nb::make_tuple(r.missing_keys, r.unexpected_keys);
          },
          nb::arg("state_dict"), nb::arg("strict") = true)
      .def(
          "train", [](Module& mod, bool on) -> Module& { return mod.train(on); },
          nb::arg("mode") = true, nb::rv_policy::reference)
      .def(
          "eval", [](Module& mod) -> Module& { return mod.eval(); }, nb::rv_policy::reference)
      .def_prop_ro("training", &Module::is_training)
      .def(
          "to",
          [](Module& mod, nb::handle what) -> Module& {
            if (nb::isinstance<PyDType>(what)) return mod.to(nb::cast<PyDType>(what).t);
            return mod.to(*device_of(what));
          },
          nb::arg("device_or_dtype"), nb::rv_policy::reference)
      .def("zero_grad", &Module::zero_grad, nb::arg("set_to_none") = true)
      .def("_type_name", &Module::name)
      .def(
          "_clone", [](const Module& mod) { return nn::clone(mod); },
          "A deep copy (nn::clone): new tensors with the same values, the same tree and mode.")
      .def("named_children", [](const Module& mod) { return mod.named_children(); })
      .def("__repr__", [](const Module& mod) { return mod.name() + "()"; });
}

void bind_layers(nb::module_& m) {
  using nn::Module;
  nb::class_<nn::Linear, Module>(m, "Linear", "y = x W^T + b, as torch.nn.Linear.")
      .def(nb::init<int64_t, int64_t, bool>(), nb::arg("in_features"), nb::arg("out_features"),
           nb::arg("bias") = true)
      .def_ro("weight", &nn::Linear::weight)
      .def_prop_ro("bias",
                   [](const nn::Linear& l) {
                     return l.bias.defined() ? std::optional<Tensor>(l.bias) : std::nullopt;
                   })
      .def_ro("in_features", &nn::Linear::in_features)
      .def_ro("out_features", &nn::Linear::out_features)
      .def("__repr__", [](const nn::Linear& l) {
        return "Linear(in_features=" + std::to_string(l.in_features) +
               ", out_features=" + std::to_string(l.out_features) +
               ", bias=" + (l.bias.defined() ? "True" : "False") + ")";
      });
  nb::class_<nn::Conv2d, Module>(m, "Conv2d", "2-D convolution, as torch.nn.Conv2d.")
      .def(
          "__init__",
          [](nn::Conv2d* self, int64_t in, int64_t out, nb::handle kernel, nb::handle stride,
             nb::handle padding, nb::handle dilation, int64_t groups, bool bias) {
            new (self) nn::Conv2d(in, out, size2_of(kernel),
                                  {.stride = size2_of(stride),
                                   .padding = size2_of(padding),
                                   .dilation = size2_of(dilation),
                                   .groups = groups,
                                   .bias = bias});
          },
          nb::arg("in_channels"), nb::arg("out_channels"), nb::arg("kernel_size"),
          nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1,
          nb::arg("groups") = 1, nb::arg("bias") = true)
      .def_ro("weight", &nn::Conv2d::weight)
      .def_prop_ro("bias", [](const nn::Conv2d& c) {
        return c.bias.defined() ? std::optional<Tensor>(c.bias) : std::nullopt;
      });
  nb::class_<nn::LayerNorm, Module>(m, "LayerNorm")
      .def(
          "__init__",
          [](nn::LayerNorm* self, nb::handle shape, double eps, bool affine) {
            new (self) nn::LayerNorm(PyLong_Check(shape.ptr()) ? Shape{nb::cast<int64_t>(shape)}
                                                               : nb::cast<Shape>(shape),
                                     eps, affine);
          },
          nb::arg("normalized_shape"), nb::arg("eps") = 1e-5, nb::arg("elementwise_affine") = true);
  nb::class_<nn::Embedding, Module>(m, "Embedding")
      .def(nb::init<int64_t, int64_t, std::optional<int64_t>>(), nb::arg("num_embeddings"),
           nb::arg("embedding_dim"), nb::arg("padding_idx") = nb::none())
      .def_ro("weight", &nn::Embedding::weight);
  nb::class_<nn::Dropout, Module>(m, "Dropout").def(nb::init<double>(), nb::arg("p") = 0.5);
  nb::class_<nn::ReLU, Module>(m, "ReLU").def(nb::init<>());
  nb::class_<nn::Tanh, Module>(m, "Tanh").def(nb::init<>());
  nb::class_<nn::Sigmoid, Module>(m, "Sigmoid").def(nb::init<>());
  nb::class_<nn::GELU, Module>(m, "GELU").def(nb::init<>());
  nb::class_<nn::Flatten, Module>(m, "Flatten")
      .def(nb::init<int64_t, int64_t>(), nb::arg("start_dim") = 1, nb::arg("end_dim") = -1);
}

// A batch norm layer, with torch's arguments.
template <class L>
void bind_norm(nb::module_& m, const char* name) {
  nb::class_<L, nn::Module>(m, name).def(nb::init<int64_t, double, double, bool, bool>(),
                                         nb::arg("num_features"), nb::arg("eps") = 1e-5,
                                         nb::arg("momentum") = 0.1, nb::arg("affine") = true,
                                         nb::arg("track_running_stats") = true);
}

// A 2-D pool layer: kernel_size, stride (the kernel's when None) and padding, as torch's.
template <class L, class Options>
void bind_pool(nb::module_& m, const char* name) {
  nb::class_<L, nn::Module>(m, name).def(
      "__init__",
      [](L* self, nb::handle kernel, nb::handle stride, nb::handle padding) {
        Options o;
        o.stride = stride.is_none() ? size2_of(kernel) : size2_of(stride);
        o.padding = size2_of(padding);
        new (self) L(size2_of(kernel), o);
      },
      nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(), nb::arg("padding") = 0);
}

// Norms, pools and attention.
void bind_more_layers(nb::module_& m) {
  using nn::Module;
  bind_norm<nn::BatchNorm1d>(m, "BatchNorm1d");
  bind_norm<nn::BatchNorm2d>(m, "BatchNorm2d");
  nb::class_<nn::GroupNorm, Module>(m, "GroupNorm")
      .def(nb::init<int64_t, int64_t, double, bool>(), nb::arg("num_groups"),
           nb::arg("num_channels"), nb::arg("eps") = 1e-5, nb::arg("affine") = true);
  bind_pool<nn::MaxPool2d, MaxPool2dOptions>(m, "MaxPool2d");
  bind_pool<nn::AvgPool2d, AvgPool2dOptions>(m, "AvgPool2d");
  nb::class_<nn::AdaptiveAvgPool2d, Module>(m, "AdaptiveAvgPool2d")
      .def(
          "__init__",
          [](nn::AdaptiveAvgPool2d* self, nb::handle size) {
            new (self) nn::AdaptiveAvgPool2d(size2_of(size));
          },
          nb::arg("output_size"));
  nb::class_<nn::MultiheadAttention, Module>(m, "MultiheadAttention",
                                             "Batch-first self-attention (B, T, E) -> (B, T, E).")
      .def(
          "__init__",
          [](nn::MultiheadAttention* self, int64_t e, int64_t heads, bool bias, double dropout,
             bool causal) {
            new (self) nn::MultiheadAttention(e, heads,
                                              {.bias = bias, .dropout = dropout, .causal = causal});
          },
          nb::arg("embed_dim"), nb::arg("num_heads"), nb::arg("bias") = true,
          nb::arg("dropout") = 0.0, nb::arg("causal") = false);
  nb::class_<nn::TransformerBlock, Module>(m, "TransformerBlock",
                                           "A pre-LayerNorm transformer block (GPT-2's).")
      .def(
          "__init__",
          [](nn::TransformerBlock* self, int64_t e, int64_t heads, int64_t mlp_ratio,
             double dropout, bool causal) {
            new (self) nn::TransformerBlock(
                e, heads, {.mlp_ratio = mlp_ratio, .dropout = dropout, .causal = causal});
          },
          nb::arg("embed_dim"), nb::arg("num_heads"), nb::arg("mlp_ratio") = 4,
          nb::arg("dropout") = 0.0, nb::arg("causal") = false);
  nb::class_<nn::ELU, Module>(m, "ELU").def(nb::init<double>(), nb::arg("alpha") = 1.0);
  nb::class_<nn::Identity, Module>(m, "Identity").def(nb::init<>());
}

void bind_functional(nb::module_& m) {
  using T = const Tensor&;
  using OptT = const std::optional<Tensor>&;
  m.def("relu", [](T x) { return relu(x); });
  m.def(
      "gelu",
      [](T x, const std::string& approximate) {
        return gelu(x, approximate == "tanh" ? Activation::GeluTanh : Activation::Gelu);
      },
      nb::arg("input"), nb::arg("approximate") = "none");
  m.def("silu", [](T x) { return silu(x); });
  m.def(
      "softmax", [](T x, int64_t dim) { return softmax(x, dim); }, nb::arg("input"),
      nb::arg("dim"));
  m.def(
      "log_softmax", [](T x, int64_t dim) { return log_softmax(x, dim); }, nb::arg("input"),
      nb::arg("dim"));
  m.def(
      "linear", [](T x, T w, OptT b) { return linear(x, w, or_undefined(b)); }, nb::arg("input"),
      nb::arg("weight"), nb::arg("bias") = nb::none());
  m.def(
      "conv2d",
      [](T x, T w, OptT b, nb::handle stride, nb::handle padding, nb::handle dilation,
         int64_t groups) {
        return conv2d(x, w, or_undefined(b),
                      {.stride = size2_of(stride),
                       .padding = size2_of(padding),
                       .dilation = size2_of(dilation),
                       .groups = groups});
      },
      nb::arg("input"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("stride") = 1,
      nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("groups") = 1);
  m.def(
      "max_pool2d",
      [](T x, nb::handle kernel, nb::handle stride, nb::handle padding) {
        return max_pool2d(x, size2_of(kernel),
                          {.stride = stride.is_none() ? size2_of(kernel) : size2_of(stride),
                           .padding = size2_of(padding)});
      },
      nb::arg("input"), nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(),
      nb::arg("padding") = 0);
  m.def(
      "dropout", [](T x, double p, bool training) { return dropout(x, p, training); },
      nb::arg("input"), nb::arg("p") = 0.5, nb::arg("training") = true);
  m.def(
      "layer_norm",
      [](T x, const Shape& shape, OptT w, OptT b, double eps) {
        return layer_norm(x, shape, or_undefined(w), or_undefined(b), eps);
      },
      nb::arg("input"), nb::arg("normalized_shape"), nb::arg("weight") = nb::none(),
      nb::arg("bias") = nb::none(), nb::arg("eps") = 1e-5);
  m.def(
      "cross_entropy",
      [](T logits, T target, OptT weight, int64_t ignore_index, const std::string& reduction,
         double label_smoothing) {
        return cross_entropy(logits, target,
                             {.reduction = reduction_of(reduction),
                              .ignore_index = ignore_index,
                              .label_smoothing = label_smoothing,
                              .weight = or_undefined(weight)});
      },
      nb::arg("input"), nb::arg("target"), nb::arg("weight") = nb::none(),
      nb::arg("ignore_index") = -100, nb::arg("reduction") = "mean",
      nb::arg("label_smoothing") = 0.0);
  m.def(
      "mse_loss",
      [](T x, T y, const std::string& reduction) {
        return mse_loss(x, y, reduction_of(reduction));
      },
      nb::arg("input"), nb::arg("target"), nb::arg("reduction") = "mean");
}

nn::init::FanMode fan_mode_of(const std::string& mode) {
  if (mode == "fan_in") return nn::init::FanMode::FanIn;
  if (mode == "fan_out") return nn::init::FanMode::FanOut;
  throw nb::value_error(
      ("Mode " + mode + " not supported, please use one of fan_in, fan_out").c_str());
}

// sinter.nn.init: in place, under no_grad, with torch.nn.init's names and defaults; each returns
// the tensor.
void bind_init(nb::module_& m) {
  using R = nb::rv_policy;
  m.def(
      "calculate_gain",
      [](const std::string& nonlinearity, std::optional<double> param) {
        return nn::init::calculate_gain(nonlinearity, param.value_or(0.01));
      },
      nb::arg("nonlinearity"), nb::arg("param") = nb::none());
  m.def(
      "uniform_",
      [](Tensor& t, double a, double b) -> Tensor& { return nn::init::uniform_(t, a, b); },
      nb::arg("tensor"), nb::arg("a") = 0.0, nb::arg("b") = 1.0, R::reference);
  m.def(
      "normal_",
      [](Tensor& t, double mean, double std) -> Tensor& { return nn::init::normal_(t, mean, std); },
      nb::arg("tensor"), nb::arg("mean") = 0.0, nb::arg("std") = 1.0, R::reference);
  m.def(
      "trunc_normal_",
      [](Tensor& t, double mean, double std, double a, double b) -> Tensor& {
        return nn::init::trunc_normal_(t, mean, std, a, b);
      },
      nb::arg("tensor"), nb::arg("mean") = 0.0, nb::arg("std") = 1.0, nb::arg("a") = -2.0,
      nb::arg("b") = 2.0, R::reference);
  m.def(
      "constant_", [](Tensor& t, double v) -> Tensor& { return nn::init::constant_(t, v); },
      nb::arg("tensor"), nb::arg("val"), R::reference);
  m.def(
      "zeros_", [](Tensor& t) -> Tensor& { return nn::init::zeros_(t); }, nb::arg("tensor"),
      R::reference);
  m.def(
      "ones_", [](Tensor& t) -> Tensor& { return nn::init::ones_(t); }, nb::arg("tensor"),
      R::reference);
  m.def(
      "kaiming_uniform_",
      [](Tensor& t, double a, const std::string& mode, const std::string& nonlinearity) -> Tensor& {
        return nn::init::kaiming_uniform_(t, a, fan_mode_of(mode), nonlinearity);
      },
      nb::arg("tensor"), nb::arg("a") = 0.0, nb::arg("mode") = "fan_in",
      nb::arg("nonlinearity") = "leaky_relu", R::reference);
  m.def(
      "kaiming_normal_",
      [](Tensor& t, double a, const std::string& mode, const std::string& nonlinearity) -> Tensor& {
        return nn::init::kaiming_normal_(t, a, fan_mode_of(mode), nonlinearity);
      },
      nb::arg("tensor"), nb::arg("a") = 0.0, nb::arg("mode") = "fan_in",
      nb::arg("nonlinearity") = "leaky_relu", R::reference);
  m.def(
      "xavier_uniform_",
      [](Tensor& t, double gain) -> Tensor& { return nn::init::xavier_uniform_(t, gain); },
      nb::arg("tensor"), nb::arg("gain") = 1.0, R::reference);
  m.def(
      "xavier_normal_",
      [](Tensor& t, double gain) -> Tensor& { return nn::init::xavier_normal_(t, gain); },
      nb::arg("tensor"), nb::arg("gain") = 1.0, R::reference);
}

}  // namespace

void bind_nn(nb::module_& m) {
  nb::module_ nnm = m.def_submodule("nn", "The C++ modules and functional ops.");
  bind_module_base(nnm);
  bind_layers(nnm);
  bind_more_layers(nnm);
  bind_extra_layers(nnm);
  bind_reprs(nnm);
  nb::module_ functional =
      nnm.def_submodule("functional", "Ops with torch.nn.functional's signatures.");
  bind_functional(functional);
  bind_extra_functional(functional);
  nb::module_ init = nnm.def_submodule("init", "Initializers, with torch.nn.init's names.");
  bind_init(init);
}

}  // namespace sinter::python
