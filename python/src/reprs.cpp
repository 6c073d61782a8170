// How the C++ layers print from Python: torch.nn's reprs (those of torch 2.x, with the norms' bias=
// and without RNN's nonlinearity, as torch prints them) ("Conv2d(1, 16, kernel_size=(3, 3),
// stride=(1, 1), padding=(1, 1))"), the arguments a layer was made with, in torch's order and
// with torch's rule for which of them show. Containers print their children
// (python/sinter/nn/__init__.py).
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

// Python's repr of a value (1e-05, True, (3, 3)).
template <class V>
std::string py(const V& v) {
  return nb::cast<std::string>(nb::repr(nb::cast(v)));
}

std::string tuple_of(const std::vector<int64_t>& v) {
  nb::list l;
  for (int64_t x : v) l.append(x);
  return py(nb::tuple(l));
}

std::vector<int64_t> sizes(int64_t v) { return {v}; }
std::vector<int64_t> sizes(Size2 s) { return {s.h, s.w}; }
std::vector<int64_t> sizes(Size3 s) { return {s.d, s.h, s.w}; }

bool all_equal(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v) {
    if (e != x) return false;
  }
  return true;
}

// A pool's size as torch shows it: an int when every dim is the same, else a tuple.
template <class S>
std::string pool_size(S s) {
  const std::vector<int64_t> v = sizes(s);
  return all_equal(v, v[0]) ? std::to_string(v[0]) : tuple_of(v);
}

const char* padding_mode_name(nn::PaddingMode m) {
  switch (m) {
    case nn::PaddingMode::Reflect:
      return "reflect";
    case nn::PaddingMode::Replicate:
      return "replicate";
    case nn::PaddingMode::Circular:
      return "circular";
    default:
      return "zeros";
  }
}

// torch's _ConvNd.extra_repr.
template <class L>
std::string conv_repr(const L& c, const char* type) {
  std::string s = std::string(type) + "(" + std::to_string(c.in_channels) + ", " +
                  std::to_string(c.out_channels) +
                  ", kernel_size=" + tuple_of(sizes(c.kernel_size)) +
                  ", stride=" + tuple_of(sizes(c.options.stride));
  if constexpr (requires { c.options.same_padding; }) {
    if (c.options.same_padding) {
      s += ", padding=same";
    } else if (!all_equal(sizes(c.options.padding), 0)) {
      s += ", padding=" + tuple_of(sizes(c.options.padding));
    }
  } else if (!all_equal(sizes(c.options.padding), 0)) {
    s += ", padding=" + tuple_of(sizes(c.options.padding));
  }
  if (!all_equal(sizes(c.options.dilation), 1)) {
    s += ", dilation=" + tuple_of(sizes(c.options.dilation));
  }
  if constexpr (requires { c.options.output_padding; }) {
    if (!all_equal(sizes(c.options.output_padding), 0)) {
      s += ", output_padding=" + tuple_of(sizes(c.options.output_padding));
    }
  }
  if (c.options.groups != 1) s += ", groups=" + std::to_string(c.options.groups);
  if (!c.bias.defined()) s += ", bias=False";
  if constexpr (requires { c.options.padding_mode; }) {
    if (c.options.padding_mode != nn::PaddingMode::Zeros) {
      s += std::string(", padding_mode=") + padding_mode_name(c.options.padding_mode);
    }
  }
  return s + ")";
}

template <class L>
void conv(nb::module_& m, const char* type) {
  m.attr(type).attr("__repr__") =
      nb::cpp_function([type](const L& c) { return conv_repr(c, type); }, nb::is_method());
}

template <class L, class F>
void repr(nb::module_& m, const char* type, F f) {
  m.attr(type).attr("__repr__") = nb::cpp_function(
      [type, f](const L& l) { return std::string(type) + "(" + f(l) + ")"; }, nb::is_method());
}

// A layer whose repr reads the Python object too (the inplace= it was made with).
template <class L, class F>
void repr_obj(nb::module_& m, const char* type, F f) {
  m.attr(type).attr("__repr__") = nb::cpp_function(
      [type, f](nb::handle self) {
        return std::string(type) + "(" + f(nb::cast<const L&>(self), self) + ")";
      },
      nb::is_method());
}

bool inplace_of(nb::handle self) {
  return nb::cast<bool>(nb::getattr(self, "inplace", nb::bool_(false)));
}

const char* mode_name(InterpolateMode m) {
  switch (m) {
    case InterpolateMode::NearestExact:
      return "'nearest-exact'";
    case InterpolateMode::Linear:
      return "'linear'";
    case InterpolateMode::Bilinear:
      return "'bilinear'";
    case InterpolateMode::Bicubic:
      return "'bicubic'";
    case InterpolateMode::Trilinear:
      return "'trilinear'";
    case InterpolateMode::Area:
      return "'area'";
    default:
      return "'nearest'";
  }
}

// torch's Upsample.extra_repr: the scale factor as float(s), else the size, then the mode.
std::string upsample_args(const nn::Upsample& u) {
  const InterpolateOptions& o = u.options;
  std::string s;
  if (!o.scale_factor.empty()) {
    if (o.scale_factor.size() == 1) {
      s = "scale_factor=" + py(o.scale_factor[0]);
    } else {
      nb::list l;
      for (double f : o.scale_factor) l.append(f);
      s = "scale_factor=" + py(nb::tuple(l));
    }
  } else {
    s = "size=" + (o.size.size() == 1 ? std::to_string(o.size[0]) : tuple_of(o.size));
  }
  return s + ", mode=" + mode_name(o.mode);
}

std::string fold_args(Size2 kernel, const FoldOptions& o) {
  return "kernel_size=" + pool_size(kernel) + ", dilation=" + pool_size(o.dilation) +
         ", padding=" + pool_size(o.padding) + ", stride=" + pool_size(o.stride);
}

template <class P>
std::string max_pool_args(const P& p) {
  return "kernel_size=" + pool_size(p.kernel_size) + ", stride=" + pool_size(p.options.stride) +
         ", padding=" + pool_size(p.options.padding) +
         ", dilation=" + pool_size(p.options.dilation) + ", ceil_mode=" + py(p.options.ceil_mode);
}

template <class P>
std::string avg_pool_args(const P& p) {
  return "kernel_size=" + pool_size(p.kernel_size) + ", stride=" + pool_size(p.options.stride) +
         ", padding=" + pool_size(p.options.padding);
}

std::string norm_args(const nn::NormBase& n) {
  return std::to_string(n.num_features) + ", eps=" + py(n.eps) + ", momentum=" + py(n.momentum) +
         ", affine=" + py(n.affine) + ", bias=" + py(n.affine) +
         ", track_running_stats=" + py(n.track_running_stats);
}

template <class L>
std::string rnn_args(const L& r) {
  std::string s = std::to_string(r.input_size) + ", " + std::to_string(r.hidden_size);
  const nn::RNNOptions& o = r.options;
  if (o.proj_size != 0) s += ", proj_size=" + std::to_string(o.proj_size);
  if (o.num_layers != 1) s += ", num_layers=" + std::to_string(o.num_layers);
  if (!o.bias) s += ", bias=False";
  if (o.batch_first) s += ", batch_first=True";
  if (o.dropout != 0.0) s += ", dropout=" + py(o.dropout);
  if (o.bidirectional) s += ", bidirectional=True";
  return s;
}

}  // namespace

void bind_reprs(nb::module_& m) {
  conv<nn::Conv1d>(m, "Conv1d");
  conv<nn::Conv2d>(m, "Conv2d");
  conv<nn::Conv3d>(m, "Conv3d");
  conv<nn::ConvTranspose1d>(m, "ConvTranspose1d");
  conv<nn::ConvTranspose2d>(m, "ConvTranspose2d");
  conv<nn::ConvTranspose3d>(m, "ConvTranspose3d");
  repr<nn::BatchNorm1d>(m, "BatchNorm1d", norm_args);
  repr<nn::BatchNorm2d>(m, "BatchNorm2d", norm_args);
  repr<nn::BatchNorm3d>(m, "BatchNorm3d", norm_args);
  repr<nn::InstanceNorm1d>(m, "InstanceNorm1d", norm_args);
  repr<nn::InstanceNorm2d>(m, "InstanceNorm2d", norm_args);
  repr<nn::InstanceNorm3d>(m, "InstanceNorm3d", norm_args);
  repr<nn::LayerNorm>(m, "LayerNorm", [](const nn::LayerNorm& l) {
    return tuple_of(l.normalized_shape) + ", eps=" + py(l.eps) +
           ", elementwise_affine=" + py(l.elementwise_affine) + ", bias=" + py(l.bias.defined());
  });
  repr<nn::GroupNorm>(m, "GroupNorm", [](const nn::GroupNorm& g) {
    return std::to_string(g.num_groups) + ", " + std::to_string(g.num_channels) +
           ", eps=" + py(g.eps) + ", affine=" + py(g.affine) + ", bias=" + py(g.bias.defined());
  });
  repr<nn::Embedding>(m, "Embedding", [](const nn::Embedding& e) {
    std::string s = std::to_string(e.num_embeddings) + ", " + std::to_string(e.embedding_dim);
    if (e.padding_idx) s += ", padding_idx=" + std::to_string(*e.padding_idx);
    return s;
  });
  repr_obj<nn::Dropout>(m, "Dropout", [](const nn::Dropout& d, nb::handle self) {
    return "p=" + py(d.p) + ", inplace=" + py(inplace_of(self));
  });
  repr_obj<nn::ReLU>(m, "ReLU", [](const nn::ReLU&, nb::handle self) {
    return std::string(inplace_of(self) ? "inplace=True" : "");
  });
  repr_obj<nn::SELU>(m, "SELU", [](const nn::SELU&, nb::handle self) {
    return std::string(inplace_of(self) ? "inplace=True" : "");
  });
  repr_obj<nn::Mish>(m, "Mish", [](const nn::Mish&, nb::handle self) {
    return std::string(inplace_of(self) ? "inplace=True" : "");
  });
  repr<nn::MaxPool2d>(m, "MaxPool2d", max_pool_args<nn::MaxPool2d>);
  repr<nn::MaxPool3d>(m, "MaxPool3d", max_pool_args<nn::MaxPool3d>);
  repr<nn::AvgPool2d>(m, "AvgPool2d", avg_pool_args<nn::AvgPool2d>);
  repr<nn::AvgPool3d>(m, "AvgPool3d", avg_pool_args<nn::AvgPool3d>);
  repr<nn::AdaptiveAvgPool2d>(m, "AdaptiveAvgPool2d", [](const nn::AdaptiveAvgPool2d& p) {
    return "output_size=" + pool_size(p.output_size);
  });
  repr<nn::Upsample>(m, "Upsample", upsample_args);
  repr<nn::RMSNorm>(m, "RMSNorm", [](const nn::RMSNorm& r) {
    return tuple_of(r.normalized_shape) + ", eps=" + (r.eps ? py(*r.eps) : "None") +
           ", elementwise_affine=" + py(r.elementwise_affine);
  });
  repr<nn::Unfold>(m, "Unfold",
                   [](const nn::Unfold& u) { return fold_args(u.kernel_size, u.options); });
  repr<nn::Fold>(m, "Fold", [](const nn::Fold& f) {
    return "output_size=" + tuple_of(sizes(f.output_size)) + ", " +
           fold_args(f.kernel_size, f.options);
  });
  repr<nn::Flatten>(m, "Flatten", [](const nn::Flatten& f) {
    return "start_dim=" + std::to_string(f.start_dim) + ", end_dim=" + std::to_string(f.end_dim);
  });
  repr<nn::GELU>(m, "GELU", [](const nn::GELU& g) {
    return std::string("approximate=") + (g.form == Activation::GeluTanh ? "'tanh'" : "'none'");
  });
  repr_obj<nn::ELU>(m, "ELU", [](const nn::ELU& e, nb::handle self) {
    return "alpha=" + py(e.alpha) + (inplace_of(self) ? ", inplace=True" : "");
  });
  repr<nn::PReLU>(m, "PReLU", [](const nn::PReLU& p) {
    return "num_parameters=" + std::to_string(p.num_parameters);
  });
  repr<nn::Softmax>(m, "Softmax", [](const nn::Softmax& s) { return "dim=" + py(s.dim); });
  repr<nn::LogSoftmax>(m, "LogSoftmax", [](const nn::LogSoftmax& s) { return "dim=" + py(s.dim); });
  repr<nn::Unflatten>(m, "Unflatten", [](const nn::Unflatten& u) {
    return "dim=" + std::to_string(u.dim) + ", unflattened_size=" + tuple_of(u.sizes);
  });
  repr<nn::PixelShuffle>(m, "PixelShuffle", [](const nn::PixelShuffle& p) {
    return "upscale_factor=" + std::to_string(p.upscale_factor);
  });
  repr<nn::RNN>(m, "RNN", rnn_args<nn::RNN>);
  repr<nn::LSTM>(m, "LSTM", rnn_args<nn::LSTM>);
  repr<nn::GRU>(m, "GRU", rnn_args<nn::GRU>);
}

}  // namespace sinter::python
