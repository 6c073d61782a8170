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
#include "sinter/nn/pooling.h"

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

// torch's Embedding constructor. max_norm and scale_grad_by_freq are refused by name (the layer's
// forward is the C++ lookup; sinter.nn.functional.embedding takes them); sparse gives a dense
// gradient (README); _weight gives the initial values, _freeze turns their gradient off.
void make_embedding(nn::Embedding* self, int64_t num, int64_t dim, std::optional<int64_t> padding,
                    std::optional<double> max_norm, double, bool by_freq, bool,
                    std::optional<Tensor> weight, bool freeze, nb::handle device,
                    nb::handle dtype) {
  if (max_norm || by_freq) {
    throw nb::value_error(
        "Embedding: max_norm and scale_grad_by_freq are not supported by the layer; use "
        "sinter.nn.functional.embedding, which takes them");
  }
  if (weight && weight->shape() != Shape{num, dim}) {
    throw nb::value_error("Shape of weight does not match num_embeddings and embedding_dim");
  }
  new (self) nn::Embedding(num, dim, padding);
  if (weight) {  // the layer takes the values' dtype and device, as torch's Parameter(_weight)
    if (is_floating(weight->dtype())) self->to(weight->dtype());
    self->to(weight->device());
    NoGradGuard no_grad;
    self->weight.copy_(*weight);
  }
  if (freeze) self->weight.requires_grad_(false);
  to_factory(*self, device, dtype);
}

void bind_layers(nb::module_& m) {
  using nn::Module;
  nb::class_<nn::Linear, Module>(m, "Linear", "y = x W^T + b, as torch.nn.Linear.")
      .def(
          "__init__",
          [](nn::Linear* self, int64_t in, int64_t out, bool bias, nb::handle device,
             nb::handle dtype) {
            new (self) nn::Linear(in, out, bias);
            to_factory(*self, device, dtype);
          },
          nb::arg("in_features"), nb::arg("out_features"), nb::arg("bias") = true, nb::kw_only(),
          nb::arg("device") = nb::none(), nb::arg("dtype") = nb::none())
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
  nb::class_<nn::LayerNorm, Module>(m, "LayerNorm")
      .def(
          "__init__",
          [](nn::LayerNorm* self, nb::handle shape, double eps, bool affine, bool bias,
             nb::handle device, nb::handle dtype) {
            new (self) nn::LayerNorm(PyLong_Check(shape.ptr()) ? Shape{nb::cast<int64_t>(shape)}
                                                               : nb::cast<Shape>(shape),
                                     eps, affine, bias);
            to_factory(*self, device, dtype);
          },
          nb::arg("normalized_shape"), nb::arg("eps") = 1e-5, nb::arg("elementwise_affine") = true,
          nb::arg("bias") = true, nb::kw_only(), nb::arg("device") = nb::none(),
          nb::arg("dtype") = nb::none())
      // torch's attributes: normalized_shape a tuple, weight and bias None without an affine.
      .def_prop_ro("normalized_shape",
                   [](const nn::LayerNorm& l) { return nb::tuple(nb::cast(l.normalized_shape)); })
      .def_ro("eps", &nn::LayerNorm::eps)
      .def_ro("elementwise_affine", &nn::LayerNorm::elementwise_affine)
      .def_prop_ro("weight", [](const nn::LayerNorm& l) { return optional_of(l.weight); })
      .def_prop_ro("bias", [](const nn::LayerNorm& l) { return optional_of(l.bias); });
  nb::class_<nn::Embedding, Module>(m, "Embedding")
      .def("__init__", &make_embedding, nb::arg("num_embeddings"), nb::arg("embedding_dim"),
           nb::arg("padding_idx") = nb::none(), nb::arg("max_norm") = nb::none(),
           nb::arg("norm_type") = 2.0, nb::arg("scale_grad_by_freq") = false,
           nb::arg("sparse") = false, nb::arg("_weight") = nb::none(), nb::arg("_freeze") = false,
           nb::kw_only(), nb::arg("device") = nb::none(), nb::arg("dtype") = nb::none())
      .def_ro("weight", &nn::Embedding::weight);
  // inplace is taken for torch's callers: the result is a new tensor either way (README).
  nb::class_<nn::Dropout, Module>(m, "Dropout", nb::dynamic_attr())
      .def(
          "__init__",
          [](nn::Dropout* self, double p, bool inplace) {
            new (self) nn::Dropout(p);
            keep_inplace(self, inplace);
          },
          nb::arg("p") = 0.5, nb::arg("inplace") = false);
  nb::class_<nn::ReLU, Module>(m, "ReLU", nb::dynamic_attr())
      .def(
          "__init__",
          [](nn::ReLU* self, bool inplace) {
            new (self) nn::ReLU();
            keep_inplace(self, inplace);
          },
          nb::arg("inplace") = false);
  nb::class_<nn::Tanh, Module>(m, "Tanh").def(nb::init<>());
  nb::class_<nn::Sigmoid, Module>(m, "Sigmoid").def(nb::init<>());
  nb::class_<nn::GELU, Module>(m, "GELU").def(
      "__init__",
      [](nn::GELU* self, const std::string& approximate) {
        new (self) nn::GELU(gelu_form_of(approximate));
      },
      nb::arg("approximate") = "none");
  nb::class_<nn::Flatten, Module>(m, "Flatten")
      .def(nb::init<int64_t, int64_t>(), nb::arg("start_dim") = 1, nb::arg("end_dim") = -1);
}

// MaxPool2d and MaxPool3d with torch's arguments (kernel_size, stride (the kernel's when None),
// padding, dilation, return_indices, ceil_mode). return_indices lives on the Python object: with
// it, calling the layer from Python gives (output, indices) as torch's; C++ forward, which C++
// containers call, gives the output alone.
template <class L, class Options, class Of, class WithIndices>
void bind_max_pool(nb::module_& m, const char* name, Of of, WithIndices with_indices) {
  auto call = [with_indices](nb::handle self, const Tensor& x) -> nb::object {
    L& pool = nb::cast<L&>(self);
    if (nb::cast<bool>(nb::getattr(self, "return_indices", nb::bool_(false)))) {
      return nb::cast(with_indices(x, pool.kernel_size, pool.options));
    }
    return nb::cast(pool.forward(x));
  };
  nb::class_<L, nn::Module>(m, name, nb::dynamic_attr())
      .def(
          "__init__",
          [of](L* self, nb::handle kernel, nb::handle stride, nb::handle padding,
               nb::handle dilation, bool return_indices, bool ceil_mode) {
            Options o;
            o.stride = stride.is_none() ? of(kernel) : of(stride);
            o.padding = of(padding);
            o.dilation = of(dilation);
            o.ceil_mode = ceil_mode;
            new (self) L(of(kernel), o);
            nb::setattr(nb::find(self), "return_indices", nb::bool_(return_indices));
          },
          nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(), nb::arg("padding") = 0,
          nb::arg("dilation") = 1, nb::arg("return_indices") = false, nb::arg("ceil_mode") = false)
      .def("forward", call, nb::arg("input"));
}

// AvgPool2d and AvgPool3d with torch's arguments. divisor_override is refused by name: the pool
// kernels divide by the window's count (sinter.nn.functional's avg_pool2d/3d take it).
template <class L, class Options, class Of>
void bind_avg_pool(nb::module_& m, const char* name, Of of) {
  nb::class_<L, nn::Module>(m, name).def(
      "__init__",
      [of, name](L* self, nb::handle kernel, nb::handle stride, nb::handle padding, bool ceil_mode,
                 bool count_include_pad, std::optional<int64_t> divisor_override) {
        if (divisor_override) {
          throw nb::value_error((std::string(name) +
                                 ": divisor_override is not supported by the layer; use "
                                 "sinter.nn.functional's pooling, which takes it")
                                    .c_str());
        }
        Options o;
        o.stride = stride.is_none() ? of(kernel) : of(stride);
        o.padding = of(padding);
        o.ceil_mode = ceil_mode;
        o.count_include_pad = count_include_pad;
        new (self) L(of(kernel), o);
      },
      nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(), nb::arg("padding") = 0,
      nb::arg("ceil_mode") = false, nb::arg("count_include_pad") = true,
      nb::arg("divisor_override").none() = nb::none());
}

// Norms, pools and attention.
void bind_more_layers(nb::module_& m) {
  using nn::Module;
  bind_norm_layer<nn::BatchNorm1d>(m, "BatchNorm1d", true);
  bind_norm_layer<nn::BatchNorm2d>(m, "BatchNorm2d", true);
  nb::class_<nn::GroupNorm, Module>(m, "GroupNorm")
      .def(
          "__init__",
          [](nn::GroupNorm* self, int64_t groups, int64_t channels, double eps, bool affine,
             bool bias, nb::handle device, nb::handle dtype) {
            new (self) nn::GroupNorm(groups, channels, eps, affine, bias);
            to_factory(*self, device, dtype);
          },
          nb::arg("num_groups"), nb::arg("num_channels"), nb::arg("eps") = 1e-5,
          nb::arg("affine") = true, nb::arg("bias") = true, nb::kw_only(),
          nb::arg("device") = nb::none(), nb::arg("dtype") = nb::none())
      .def_ro("num_groups", &nn::GroupNorm::num_groups)
      .def_ro("num_channels", &nn::GroupNorm::num_channels)
      .def_ro("eps", &nn::GroupNorm::eps)
      .def_ro("affine", &nn::GroupNorm::affine)
      .def_prop_ro("weight", [](const nn::GroupNorm& g) { return optional_of(g.weight); })
      .def_prop_ro("bias", [](const nn::GroupNorm& g) { return optional_of(g.bias); });
  bind_max_pool<nn::MaxPool2d, MaxPool2dOptions>(
      m, "MaxPool2d", size2_of, [](const Tensor& x, Size2 k, const MaxPool2dOptions& o) {
        return max_pool2d_with_indices(x, k, o);
      });
  bind_avg_pool<nn::AvgPool2d, AvgPool2dOptions>(m, "AvgPool2d", size2_of);
  bind_max_pool<nn::MaxPool3d, MaxPool3dOptions>(
      m, "MaxPool3d", size3_of, [](const Tensor& x, Size3 k, const MaxPool3dOptions& o) {
        return max_pool3d_with_indices(x, k, o);
      });
  bind_avg_pool<nn::AvgPool3d, AvgPool3dOptions>(m, "AvgPool3d", size3_of);
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
  nb::class_<nn::ELU, Module>(m, "ELU", nb::dynamic_attr())
      .def(
          "__init__",
          [](nn::ELU* self, double alpha, bool inplace) {
            new (self) nn::ELU(alpha);
            keep_inplace(self, inplace);
          },
          nb::arg("alpha") = 1.0, nb::arg("inplace") = false);
  // torch's Identity takes any arguments and ignores them.
  nb::class_<nn::Identity, Module>(m, "Identity")
      .def("__init__", [](nn::Identity* self, const nb::args&, const nb::kwargs&) {
        new (self) nn::Identity();
      });
}

void bind_functional(nb::module_& m) {
  using T = const Tensor&;
  using OptT = const std::optional<Tensor>&;
  // inplace, in the activations and dropout, is taken for torch's callers: the result is a new
  // tensor either way (README).
  m.def(
      "relu", [](T x, bool) { return relu(x); }, nb::arg("input"), nb::arg("inplace") = false);
  m.def(
      "gelu",
      [](T x, const std::string& approximate) { return gelu(x, gelu_form_of(approximate)); },
      nb::arg("input"), nb::arg("approximate") = "none");
  m.def(
      "silu", [](T x, bool) { return silu(x); }, nb::arg("input"), nb::arg("inplace") = false);
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
      [](T x, nb::handle kernel, nb::handle stride, nb::handle padding, nb::handle dilation,
         bool ceil_mode, bool return_indices) -> nb::object {
        const MaxPool2dOptions o{.stride = stride.is_none() ? size2_of(kernel) : size2_of(stride),
                                 .padding = size2_of(padding),
                                 .dilation = size2_of(dilation),
                                 .ceil_mode = ceil_mode};
        if (return_indices) return nb::cast(max_pool2d_with_indices(x, size2_of(kernel), o));
        return nb::cast(max_pool2d(x, size2_of(kernel), o));
      },
      nb::arg("input"), nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(),
      nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("ceil_mode") = false,
      nb::arg("return_indices") = false);
  m.def(
      "dropout", [](T x, double p, bool training, bool) { return dropout(x, p, training); },
      nb::arg("input"), nb::arg("p") = 0.5, nb::arg("training") = true, nb::arg("inplace") = false);
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
