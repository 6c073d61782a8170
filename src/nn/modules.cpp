// The layers of modules.h: construction (argument checks, parameters, PyTorch's default init) and
// forward (an input shape check naming the layer, then the op from ops.h).
#include "sinter/nn/modules.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "internal/infer_plan.h"
#include "internal/ops_impl.h"
#include "nn/layer_init.h"
#include "sinter/autograd.h"
#include "sinter/fp8.h"
#include "sinter/nn/init.h"

namespace sinter::nn {

void init_weight_and_bias(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (!bias.defined()) return;
  const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  init::uniform_(bias, -bound, bound);
}

// --- Linear ---

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias)
    : in_features(in_features), out_features(out_features) {
  SINTER_CHECK(in_features > 0 && out_features > 0,
               "Linear: in_features and out_features must be positive, got ", in_features, " and ",
               out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  if (with_bias) bias = register_parameter("bias", empty({out_features}));
  reset_parameters();
}

void Linear::reset_parameters() { init_weight_and_bias(weight, bias); }

Tensor Linear::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "Linear: undefined input");
  SINTER_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) == in_features,
               "Linear: expected input with last dim ", in_features, ", got shape ",
               shape_str(x.shape()));
  if (fp8 && fp8::is_enabled()) {
    fp8::LinearState state{fp8_amax_history, fp8_scale, fp8_steps};
    return fp8::linear(x, weight, bias, fp8::recipe(), &state);
  }
  return linear(x, weight, bias, activation);  // bias and activation in the GEMM's epilogue
}

// --- NormBase and the batch norms ---

NormBase::NormBase(const std::string& layer, int64_t num_features, double eps, double momentum,
                   bool affine, bool track_running_stats)
    : num_features(num_features),
      eps(eps),
      momentum(momentum),
      affine(affine),
      track_running_stats(track_running_stats) {
  SINTER_CHECK(num_features > 0, layer, ": num_features must be positive, got ", num_features);
  SINTER_CHECK(eps > 0.0, layer, ": eps must be positive, got ", eps);
  SINTER_CHECK(momentum >= 0.0 && momentum <= 1.0, layer, ": momentum must be in [0, 1], got ",
               momentum);
  if (affine) {
    weight = register_parameter("weight", empty({num_features}));
    bias = register_parameter("bias", empty({num_features}));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::i64}));
  }
  reset_parameters();
}

void NormBase::reset_parameters() {
  if (track_running_stats) {
    init::zeros_(running_mean);
    init::ones_(running_var);
    init::zeros_(num_batches_tracked);
  }
  if (affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "BatchNorm2d: undefined input");
  SINTER_CHECK(x.dim() == 4 && x.size(1) == num_features,
               "BatchNorm2d: expected input of shape (N, ", num_features, ", H, W), got shape ",
               shape_str(x.shape()));
  return normalize(x, "BatchNorm2d");
}

Tensor BatchNorm1d::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "BatchNorm1d: undefined input");
  SINTER_CHECK((x.dim() == 2 || x.dim() == 3) && x.size(1) == num_features,
               "BatchNorm1d: expected input of shape (N, ", num_features, ") or (N, ", num_features,
               ", L), got shape ", shape_str(x.shape()));
  return normalize(x, "BatchNorm1d");
}

Tensor BatchNorm2d::normalize(const Tensor& x, const char* op) {
  const bool use_batch_stats = is_training() || !track_running_stats;
  SINTER_CHECK(!use_batch_stats || x.numel() / num_features > 1, op,
               ": batch statistics need more than one value per channel, got shape ",
               shape_str(x.shape()));
  if (is_training() && track_running_stats) {
    NoGradGuard ng;
    num_batches_tracked.add_(1.0);
  }
  // Without tracking, running_mean and running_var are undefined and only batch statistics exist.
  return batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, momentum, eps);
}

// --- LayerNorm and RMSNorm ---

namespace {

// A norm module's normalized_shape: at least one dim, each positive.
void check_normalized_shape(const char* module, const Shape& shape) {
  SINTER_CHECK(!shape.empty(), module, ": normalized_shape is empty");
  for (int64_t d : shape) {
    SINTER_CHECK(d > 0, module, ": normalized_shape ", shape_str(shape), " has a non-positive dim");
  }
}

// x ends in the dims of normalized_shape.
void check_trailing_dims(const char* module, const Shape& normalized_shape, const Tensor& x) {
  SINTER_CHECK(x.defined(), module, ": undefined input");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool ok = x.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = x.size(x.dim() - k + i) == normalized_shape[i];
  SINTER_CHECK(ok, module, ": expected input with trailing dims ", shape_str(normalized_shape),
               ", got shape ", shape_str(x.shape()));
}

}  // namespace

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, bool bias)
    : normalized_shape(std::move(normalized_shape)),
      eps(eps),
      elementwise_affine(elementwise_affine) {
  check_normalized_shape("LayerNorm", this->normalized_shape);
  SINTER_CHECK(eps > 0.0, "LayerNorm: eps must be positive, got ", eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", empty(this->normalized_shape));
    if (bias) this->bias = register_parameter("bias", empty(this->normalized_shape));
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (!elementwise_affine) return;
  init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_trailing_dims("LayerNorm", normalized_shape, x);
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

RMSNorm::RMSNorm(Shape normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape)),
      eps(eps),
      elementwise_affine(elementwise_affine) {
  check_normalized_shape("RMSNorm", this->normalized_shape);
  SINTER_CHECK(!eps || *eps >= 0.0, "RMSNorm: eps must be non-negative, got ", eps.value_or(0));
  if (elementwise_affine) weight = register_parameter("weight", empty(this->normalized_shape));
  reset_parameters();
}

void RMSNorm::reset_parameters() {
  if (elementwise_affine) init::ones_(weight);
}

Tensor RMSNorm::forward(const Tensor& x) {
  check_trailing_dims("RMSNorm", normalized_shape, x);
  return rms_norm(x, normalized_shape, weight, eps);
}

// --- Dropout ---

Dropout::Dropout(double p) : p(p) {
  SINTER_CHECK(p >= 0.0 && p <= 1.0, "Dropout: p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "Dropout: undefined input");
  return dropout(x, p, is_training());
}

// --- Embedding ---

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim,
                     std::optional<int64_t> padding_idx)
    : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
  SINTER_CHECK(num_embeddings > 0 && embedding_dim > 0,
               "Embedding: num_embeddings and embedding_dim must be positive, got ", num_embeddings,
               " and ", embedding_dim);
  if (padding_idx) {
    const int64_t idx = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
    SINTER_CHECK(idx >= 0 && idx < num_embeddings, "Embedding: padding_idx ", *padding_idx,
                 " is out of range for ", num_embeddings, " embeddings");
    this->padding_idx = idx;
  }
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight, 0.0, 1.0);
  if (padding_idx) {
    NoGradGuard ng;
    weight.select(0, *padding_idx).zero_();
  }
}

Tensor Embedding::forward(const Tensor& indices) {
  SINTER_CHECK(indices.defined(), "Embedding: undefined input");
  SINTER_CHECK(indices.dtype() == DType::i64 || indices.dtype() == DType::i32,
               "Embedding: expected i64 or i32 indices, got dtype ", indices.dtype());
  return embedding(weight, indices, padding_idx);
}

// --- activations ---

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

GELU::GELU(Activation form) : form(form) {
  SINTER_CHECK(form == Activation::Gelu || form == Activation::GeluTanh,
               "GELU: form must be Activation::Gelu or Activation::GeluTanh, got Activation ",
               static_cast<int>(form));
}

Tensor GELU::forward(const Tensor& x) { return gelu(x, form); }

Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

// --- pooling ---

namespace {
// A pooling layer's sizes are checked when it is built, so that a bad layer fails there and not at
// its first forward.
void check_pool_sizes(const char* layer, Size2 kernel, Size2 stride, Size2 padding,
                      Size2 dilation) {
  SINTER_CHECK(kernel.h > 0 && kernel.w > 0, layer, ": kernel_size must be positive, got ", kernel);
  SINTER_CHECK(stride.h >= 0 && stride.w >= 0, layer,
               ": stride must be positive (or 0 for the kernel size), got ", stride);
  SINTER_CHECK(
      padding.h >= 0 && padding.w >= 0 && 2 * padding.h <= kernel.h && 2 * padding.w <= kernel.w,
      layer, ": padding must be in [0, kernel_size / 2], got ", padding, " for kernel_size ",
      kernel);
  SINTER_CHECK(dilation.h > 0 && dilation.w > 0, layer, ": dilation must be positive, got ",
               dilation);
}
}  // namespace

MaxPool2d::MaxPool2d(Size2 kernel_size, const MaxPool2dOptions& options)
    : kernel_size(kernel_size), options(options) {
  check_pool_sizes("MaxPool2d", kernel_size, options.stride, options.padding, options.dilation);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  check_pool_input("MaxPool2d", x);
  return max_pool2d(x, kernel_size, options);
}

AvgPool2d::AvgPool2d(Size2 kernel_size, const AvgPool2dOptions& options)
    : kernel_size(kernel_size), options(options) {
  check_pool_sizes("AvgPool2d", kernel_size, options.stride, options.padding, 1);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  check_pool_input("AvgPool2d", x);
  return avg_pool2d(x, kernel_size, options);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 output_size) : output_size(output_size) {
  SINTER_CHECK(output_size.h > 0 && output_size.w > 0,
               "AdaptiveAvgPool2d: output_size must be positive, got ", output_size);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  check_pool_input("AdaptiveAvgPool2d", x);
  return adaptive_avg_pool2d(x, output_size);
}

// --- Flatten ---

Flatten::Flatten(int64_t start_dim, int64_t end_dim) : start_dim(start_dim), end_dim(end_dim) {}

Tensor Flatten::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "Flatten: undefined input");
  const int64_t n = std::max<int64_t>(x.dim(), 1);
  const int64_t s = start_dim < 0 ? start_dim + n : start_dim;
  const int64_t e = end_dim < 0 ? end_dim + n : end_dim;
  SINTER_CHECK(s >= 0 && s < n && e >= 0 && e < n && s <= e, "Flatten: start_dim ", start_dim,
               " and end_dim ", end_dim, " do not fit an input of shape ", shape_str(x.shape()));
  return x.flatten(s, e);
}

// --- containers ---

ModuleList::ModuleList(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), std::move(module));
}

void ModuleList::child_registered(const std::shared_ptr<Module>& child) {
  modules_.push_back(child);
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  SINTER_CHECK(i < modules_.size(), name(), ": index ", i, " is out of range for ", modules_.size(),
               " modules");
  return modules_[i];
}

Tensor Sequential::forward(const Tensor& x) {
  if (inference_plans && !GradMode::is_enabled()) {
    if (std::optional<Tensor> planned = inference_plans->forward(*this, x)) return *planned;
  }
  Tensor y = x;
  for (const auto& m : modules_) y = (*m)(y);
  return y;
}

}  // namespace sinter::nn
