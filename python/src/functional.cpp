// More of sinter.nn.functional, with torch.nn.functional's names and arguments: activations,
// the 1-D, 3-D and transposed convolutions, pooling, padding, resampling, normalization,
// attention, embeddings and the losses beyond cross_entropy and mse_loss.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

using T = const Tensor&;
using OptT = const std::optional<Tensor>&;

// inplace is taken for torch's callers: the result is a new tensor either way (README).
void bind_activations(nb::module_& m) {
  m.def(
      "leaky_relu", [](T x, double slope, bool) { return leaky_relu(x, slope); }, nb::arg("input"),
      nb::arg("negative_slope") = 0.01, nb::arg("inplace") = false);
  m.def(
      "elu", [](T x, double alpha, bool) { return elu(x, alpha); }, nb::arg("input"),
      nb::arg("alpha") = 1.0, nb::arg("inplace") = false);
  m.def(
      "hardtanh", [](T x, double lo, double hi, bool) { return hardtanh(x, lo, hi); },
      nb::arg("input"), nb::arg("min_val") = -1.0, nb::arg("max_val") = 1.0,
      nb::arg("inplace") = false);
  m.def(
      "relu6", [](T x, bool) { return hardtanh(x, 0.0, 6.0); }, nb::arg("input"),
      nb::arg("inplace") = false);
  m.def(
      "softplus", [](T x, double beta, double threshold) { return softplus(x, beta, threshold); },
      nb::arg("input"), nb::arg("beta") = 1.0, nb::arg("threshold") = 20.0);
  m.def(
      "prelu", [](T x, T w) { return prelu(x, w); }, nb::arg("input"), nb::arg("weight"));
  m.def(
      "selu", [](T x, bool) { return selu(x); }, nb::arg("input"), nb::arg("inplace") = false);
  m.def(
      "mish", [](T x, bool) { return mish(x); }, nb::arg("input"), nb::arg("inplace") = false);
  m.def(
      "hardswish", [](T x, bool) { return hardswish(x); }, nb::arg("input"),
      nb::arg("inplace") = false);
  m.def(
      "hardsigmoid", [](T x, bool) { return hardsigmoid(x); }, nb::arg("input"),
      nb::arg("inplace") = false);
  m.def(
      "sigmoid", [](T x) { return sigmoid(x); }, nb::arg("input"));
  m.def(
      "tanh", [](T x) { return tanh(x); }, nb::arg("input"));
}

// conv_transpose{1,2,3}d(input, weight, bias, stride, padding, output_padding, groups,
// dilation), each size parsed by `of`.
template <class Opt, class Of, class Fn>
void def_conv_transpose(nb::module_& m, const char* name, Of of, Fn fn) {
  m.def(
      name,
      [of, fn](T x, T w, OptT b, nb::handle stride, nb::handle padding, nb::handle output_padding,
               int64_t groups, nb::handle dilation) {
        Opt o;
        o.stride = of(stride);
        o.padding = of(padding);
        o.output_padding = of(output_padding);
        o.groups = groups;
        o.dilation = of(dilation);
        return fn(x, w, or_undefined(b), o);
      },
      nb::arg("input"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("stride") = 1,
      nb::arg("padding") = 0, nb::arg("output_padding") = 0, nb::arg("groups") = 1,
      nb::arg("dilation") = 1);
}

void bind_convolutions(nb::module_& m) {
  m.def(
      "conv1d",
      [](T x, T w, OptT b, int64_t stride, nb::handle padding, int64_t dilation, int64_t groups) {
        Conv1dOptions o{.stride = stride, .dilation = dilation, .groups = groups};
        o.padding = padding_of<int64_t>(padding, o.same_padding, int_of);
        return conv1d(x, w, or_undefined(b), o);
      },
      nb::arg("input"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("stride") = 1,
      nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("groups") = 1);
  m.def(
      "conv3d",
      [](T x, T w, OptT b, nb::handle stride, nb::handle padding, nb::handle dilation,
         int64_t groups) {
        Conv3dOptions o{
            .stride = size3_of(stride), .dilation = size3_of(dilation), .groups = groups};
        o.padding = padding_of<Size3>(padding, o.same_padding, size3_of);
        return conv3d(x, w, or_undefined(b), o);
      },
      nb::arg("input"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("stride") = 1,
      nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("groups") = 1);
  def_conv_transpose<ConvTranspose1dOptions>(
      m, "conv_transpose1d", int_of,
      [](T x, T w, T b, const ConvTranspose1dOptions& o) { return conv_transpose1d(x, w, b, o); });
  def_conv_transpose<ConvTranspose2dOptions>(
      m, "conv_transpose2d", size2_of,
      [](T x, T w, T b, const ConvTranspose2dOptions& o) { return conv_transpose2d(x, w, b, o); });
  def_conv_transpose<ConvTranspose3dOptions>(
      m, "conv_transpose3d", size3_of,
      [](T x, T w, T b, const ConvTranspose3dOptions& o) { return conv_transpose3d(x, w, b, o); });
}

PadMode pad_mode_of(const std::string& mode) {
  if (mode == "constant") return PadMode::Constant;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "replicate") return PadMode::Replicate;
  if (mode == "circular") return PadMode::Circular;
  throw nb::value_error(("Unrecognised padding mode " + mode).c_str());
}

void bind_pooling(nb::module_& m) {
  m.def(
      "avg_pool2d",
      [](T x, nb::handle kernel, nb::handle stride, nb::handle padding, bool ceil_mode,
         bool count_include_pad) {
        return avg_pool2d(x, size2_of(kernel),
                          {.stride = stride.is_none() ? size2_of(kernel) : size2_of(stride),
                           .padding = size2_of(padding),
                           .ceil_mode = ceil_mode,
                           .count_include_pad = count_include_pad});
      },
      nb::arg("input"), nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(),
      nb::arg("padding") = 0, nb::arg("ceil_mode") = false, nb::arg("count_include_pad") = true);
  m.def(
      "max_pool1d",
      [](T x, int64_t kernel, std::optional<int64_t> stride, int64_t padding, int64_t dilation,
         bool ceil_mode) {
        return max_pool1d(x, kernel,
                          {.stride = stride.value_or(kernel),
                           .padding = padding,
                           .dilation = dilation,
                           .ceil_mode = ceil_mode});
      },
      nb::arg("input"), nb::arg("kernel_size"), nb::arg("stride") = nb::none(),
      nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("ceil_mode") = false);
  m.def(
      "avg_pool1d",
      [](T x, int64_t kernel, std::optional<int64_t> stride, int64_t padding, bool ceil_mode,
         bool count_include_pad) {
        return avg_pool1d(x, kernel,
                          {.stride = stride.value_or(kernel),
                           .padding = padding,
                           .ceil_mode = ceil_mode,
                           .count_include_pad = count_include_pad});
      },
      nb::arg("input"), nb::arg("kernel_size"), nb::arg("stride") = nb::none(),
      nb::arg("padding") = 0, nb::arg("ceil_mode") = false, nb::arg("count_include_pad") = true);
  m.def(
      "max_pool3d",
      [](T x, nb::handle kernel, nb::handle stride, nb::handle padding, nb::handle dilation,
         bool ceil_mode, bool return_indices) -> nb::object {
        const MaxPool3dOptions o{.stride = stride.is_none() ? size3_of(kernel) : size3_of(stride),
                                 .padding = size3_of(padding),
                                 .dilation = size3_of(dilation),
                                 .ceil_mode = ceil_mode};
        if (return_indices) return nb::cast(max_pool3d_with_indices(x, size3_of(kernel), o));
        return nb::cast(max_pool3d(x, size3_of(kernel), o));
      },
      nb::arg("input"), nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(),
      nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("ceil_mode") = false,
      nb::arg("return_indices") = false);
  m.def(
      "avg_pool3d",
      [](T x, nb::handle kernel, nb::handle stride, nb::handle padding, bool ceil_mode,
         bool count_include_pad) {
        return avg_pool3d(x, size3_of(kernel),
                          {.stride = stride.is_none() ? size3_of(kernel) : size3_of(stride),
                           .padding = size3_of(padding),
                           .ceil_mode = ceil_mode,
                           .count_include_pad = count_include_pad});
      },
      nb::arg("input"), nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(),
      nb::arg("padding") = 0, nb::arg("ceil_mode") = false, nb::arg("count_include_pad") = true);
  m.def(
      "adaptive_avg_pool2d",
      [](T x, nb::handle size) { return adaptive_avg_pool2d(x, size2_of(size)); }, nb::arg("input"),
      nb::arg("output_size"));
  m.def(
      "adaptive_avg_pool1d",
      [](T x, nb::handle size) {
        // An int or a 1-tuple, as torch's.
        const nb::handle one = nb::isinstance<nb::tuple>(size) || nb::isinstance<nb::list>(size)
                                   ? nb::handle(size[0])
                                   : size;
        return adaptive_avg_pool1d(x, nb::cast<int64_t>(one));
      },
      nb::arg("input"), nb::arg("output_size"));
  m.def(
      "adaptive_avg_pool3d",
      [](T x, nb::handle size) { return adaptive_avg_pool3d(x, size3_of(size)); }, nb::arg("input"),
      nb::arg("output_size"));
  m.def(
      "adaptive_max_pool2d",
      [](T x, nb::handle size, bool return_indices) -> nb::object {
        if (return_indices) return nb::cast(adaptive_max_pool2d_with_indices(x, size2_of(size)));
        return nb::cast(adaptive_max_pool2d(x, size2_of(size)));
      },
      nb::arg("input"), nb::arg("output_size"), nb::arg("return_indices") = false);
}

// pad, interpolate, pixel_shuffle/unshuffle, unfold and fold.
void bind_resampling(nb::module_& m) {
  m.def(
      "pad",
      [](T x, const std::vector<int64_t>& pads, const std::string& mode,
         std::optional<double> value) {
        return pad(x, pads, pad_mode_of(mode), value.value_or(0.0));
      },
      nb::arg("input"), nb::arg("pad"), nb::arg("mode") = "constant",
      nb::arg("value") = nb::none());
  m.def(
      "interpolate",
      [](T x, nb::handle size, nb::handle scale, const std::string& mode,
         std::optional<bool> align_corners, std::optional<bool> recompute, bool antialias) {
        if (antialias) {
          throw nb::value_error(
              "interpolate: antialias=True is not supported (the resampling filters are "
              "torch's antialias=False ones)");
        }
        return interpolate(x, interpolate_options_of(size, scale, mode, align_corners, recompute));
      },
      nb::arg("input"), nb::arg("size").none() = nb::none(),
      nb::arg("scale_factor").none() = nb::none(), nb::arg("mode") = "nearest",
      nb::arg("align_corners") = nb::none(), nb::arg("recompute_scale_factor") = nb::none(),
      nb::arg("antialias") = false);
  m.def(
      "pixel_shuffle", [](T x, int64_t r) { return pixel_shuffle(x, r); }, nb::arg("input"),
      nb::arg("upscale_factor"));
  m.def(
      "pixel_unshuffle", [](T x, int64_t r) { return pixel_unshuffle(x, r); }, nb::arg("input"),
      nb::arg("downscale_factor"));
  m.def(
      "unfold",
      [](T x, nb::handle kernel, nb::handle dilation, nb::handle padding, nb::handle stride) {
        return unfold(x, size2_of(kernel),
                      {.dilation = size2_of(dilation),
                       .padding = size2_of(padding),
                       .stride = size2_of(stride)});
      },
      nb::arg("input"), nb::arg("kernel_size"), nb::arg("dilation") = 1, nb::arg("padding") = 0,
      nb::arg("stride") = 1);
  m.def(
      "fold",
      [](T x, nb::handle out, nb::handle kernel, nb::handle dilation, nb::handle padding,
         nb::handle stride) {
        return fold(x, size2_of(out), size2_of(kernel),
                    {.dilation = size2_of(dilation),
                     .padding = size2_of(padding),
                     .stride = size2_of(stride)});
      },
      nb::arg("input"), nb::arg("output_size"), nb::arg("kernel_size"), nb::arg("dilation") = 1,
      nb::arg("padding") = 0, nb::arg("stride") = 1);
}

void bind_normalization(nb::module_& m) {
  m.def(
      "batch_norm",
      [](T x, T mean, T var, OptT w, OptT b, bool training, double momentum, double eps) {
        return batch_norm(x, mean, var, or_undefined(w), or_undefined(b), training, momentum, eps);
      },
      nb::arg("input"), nb::arg("running_mean"), nb::arg("running_var"),
      nb::arg("weight") = nb::none(), nb::arg("bias") = nb::none(), nb::arg("training") = false,
      nb::arg("momentum") = 0.1, nb::arg("eps") = 1e-5);
  m.def(
      "group_norm",
      [](T x, int64_t groups, OptT w, OptT b, double eps) {
        return group_norm(x, groups, or_undefined(w), or_undefined(b), eps);
      },
      nb::arg("input"), nb::arg("num_groups"), nb::arg("weight") = nb::none(),
      nb::arg("bias") = nb::none(), nb::arg("eps") = 1e-5);
  m.def(
      "instance_norm",
      [](T x, OptT mean, OptT var, OptT w, OptT b, bool use_input_stats, double momentum,
         double eps) {
        return instance_norm(x, or_undefined(mean), or_undefined(var), or_undefined(w),
                             or_undefined(b), use_input_stats, momentum, eps);
      },
      nb::arg("input"), nb::arg("running_mean") = nb::none(), nb::arg("running_var") = nb::none(),
      nb::arg("weight") = nb::none(), nb::arg("bias") = nb::none(),
      nb::arg("use_input_stats") = true, nb::arg("momentum") = 0.1, nb::arg("eps") = 1e-5);
  m.def(
      "rms_norm",
      [](T x, const Shape& shape, OptT w, std::optional<double> eps) {
        return rms_norm(x, shape, or_undefined(w), eps);
      },
      nb::arg("input"), nb::arg("normalized_shape"), nb::arg("weight") = nb::none(),
      nb::arg("eps") = nb::none());
  m.def(
      "embedding",
      [](T indices, T weight, std::optional<int64_t> padding_idx) {
        return embedding(weight, indices, padding_idx);
      },
      nb::arg("input"), nb::arg("weight"), nb::arg("padding_idx") = nb::none());
  m.def(
      "one_hot", [](T t, int64_t n) { return one_hot(t, n); }, nb::arg("tensor"),
      nb::arg("num_classes") = -1);
  m.def(
      "scaled_dot_product_attention",
      [](T q, T k, T v, OptT mask, double dropout_p, bool is_causal, std::optional<double> scale,
         bool enable_gqa) {
        AttentionOptions o;
        o.enable_gqa = enable_gqa;
        o.causal = is_causal;
        o.scale = scale;
        o.dropout_p = dropout_p;
        o.mask = or_undefined(mask);
        return scaled_dot_product_attention(q, k, v, o);
      },
      nb::arg("query"), nb::arg("key"), nb::arg("value"), nb::arg("attn_mask") = nb::none(),
      nb::arg("dropout_p") = 0.0, nb::arg("is_causal") = false, nb::kw_only(),
      nb::arg("scale") = nb::none(), nb::arg("enable_gqa") = false);
}

void bind_losses(nb::module_& m) {
  using R = const std::string&;
  m.def(
      "nll_loss",
      [](T x, T target, OptT weight, int64_t ignore_index, R reduction) {
        return nll_loss(x, target,
                        {.reduction = reduction_of(reduction),
                         .ignore_index = ignore_index,
                         .weight = or_undefined(weight)});
      },
      nb::arg("input"), nb::arg("target"), nb::arg("weight") = nb::none(),
      nb::arg("ignore_index") = -100, nb::arg("reduction") = "mean");
  m.def(
      "binary_cross_entropy",
      [](T x, T y, OptT weight, R reduction) {
        return binary_cross_entropy(x, y, reduction_of(reduction), or_undefined(weight));
      },
      nb::arg("input"), nb::arg("target"), nb::arg("weight") = nb::none(),
      nb::arg("reduction") = "mean");
  m.def(
      "binary_cross_entropy_with_logits",
      [](T x, T y, OptT weight, R reduction, OptT pos_weight) {
        if (!weight) {
          return binary_cross_entropy_with_logits(x, y, reduction_of(reduction),
                                                  or_undefined(pos_weight));
        }
        // A weight scales each element's loss before the reduction.
        Tensor each =
            mul(binary_cross_entropy_with_logits(x, y, Reduction::None, or_undefined(pos_weight)),
                *weight);
        const Reduction r = reduction_of(reduction);
        return r == Reduction::None ? each : r == Reduction::Sum ? sum(each) : mean(each);
      },
      nb::arg("input"), nb::arg("target"), nb::arg("weight") = nb::none(),
      nb::arg("reduction") = "mean", nb::arg("pos_weight") = nb::none());
  m.def(
      "kl_div",
      [](T x, T y, R reduction, bool log_target) {
        return kl_div(x, y, reduction_of(reduction), log_target);
      },
      nb::arg("input"), nb::arg("target"), nb::arg("reduction") = "mean",
      nb::arg("log_target") = false);
  m.def(
      "l1_loss", [](T x, T y, R reduction) { return l1_loss(x, y, reduction_of(reduction)); },
      nb::arg("input"), nb::arg("target"), nb::arg("reduction") = "mean");
  m.def(
      "smooth_l1_loss",
      [](T x, T y, R reduction, double beta) {
        return smooth_l1_loss(x, y, reduction_of(reduction), beta);
      },
      nb::arg("input"), nb::arg("target"), nb::arg("reduction") = "mean", nb::arg("beta") = 1.0);
  m.def(
      "huber_loss",
      [](T x, T y, R reduction, double delta) {
        return huber_loss(x, y, reduction_of(reduction), delta);
      },
      nb::arg("input"), nb::arg("target"), nb::arg("reduction") = "mean", nb::arg("delta") = 1.0);
  m.def(
      "cosine_embedding_loss",
      [](T a, T b, T y, double margin, R reduction) {
        return cosine_embedding_loss(a, b, y, margin, reduction_of(reduction));
      },
      nb::arg("input1"), nb::arg("input2"), nb::arg("target"), nb::arg("margin") = 0.0,
      nb::arg("reduction") = "mean");
  m.def(
      "ctc_loss",
      [](T log_probs, T targets, T input_lengths, T target_lengths, int64_t blank, R reduction,
         bool zero_infinity) {
        return ctc_loss(
            log_probs, targets, input_lengths, target_lengths,
            {.blank = blank, .reduction = reduction_of(reduction), .zero_infinity = zero_infinity});
      },
      nb::arg("log_probs"), nb::arg("targets"), nb::arg("input_lengths"), nb::arg("target_lengths"),
      nb::arg("blank") = 0, nb::arg("reduction") = "mean", nb::arg("zero_infinity") = false);
  m.def(
      "margin_ranking_loss",
      [](T a, T b, T y, double margin, R reduction) {
        return margin_ranking_loss(a, b, y, margin, reduction_of(reduction));
      },
      nb::arg("input1"), nb::arg("input2"), nb::arg("target"), nb::arg("margin") = 0.0,
      nb::arg("reduction") = "mean");
}

}  // namespace

void bind_extra_functional(nb::module_& m) {
  bind_activations(m);
  bind_convolutions(m);
  bind_pooling(m);
  bind_resampling(m);
  bind_normalization(m);
  bind_losses(m);
}

}  // namespace sinter::python
