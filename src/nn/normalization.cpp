// The layers of nn/normalization.h: construction (argument checks, parameters and buffers at
// PyTorch's starts) and forward (an input shape check naming the layer, then the op from ops.h).
#include "sinter/nn/normalization.h"

#include "sinter/autograd.h"
#include "sinter/nn/init.h"

namespace sinter::nn {

// --- BatchNorm3d ---

Tensor BatchNorm3d::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "BatchNorm3d: undefined input");
  SINTER_CHECK(x.dim() == 5 && x.size(1) == num_features,
               "BatchNorm3d: expected input of shape (N, ", num_features, ", D, H, W), got shape ",
               shape_str(x.shape()));
  return normalize(x, "BatchNorm3d");
}

// --- GroupNorm ---

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine, bool bias)
    : num_groups(num_groups), num_channels(num_channels), eps(eps), affine(affine) {
  SINTER_CHECK(num_groups > 0 && num_channels > 0,
               "GroupNorm: num_groups and num_channels must be positive, got ", num_groups, " and ",
               num_channels);
  SINTER_CHECK(num_channels % num_groups == 0, "GroupNorm: num_channels ", num_channels,
               " must be divisible by num_groups ", num_groups);
  SINTER_CHECK(eps > 0.0, "GroupNorm: eps must be positive, got ", eps);
  if (affine) {
    weight = register_parameter("weight", empty({num_channels}));
    if (bias) this->bias = register_parameter("bias", empty({num_channels}));
  }
  reset_parameters();
}

void GroupNorm::reset_parameters() {
  if (!affine) return;
  init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor GroupNorm::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "GroupNorm: undefined input");
  // As PyTorch, another channel count passes without affine (group_norm checks the groups).
  SINTER_CHECK(x.dim() >= 2 && (x.size(1) == num_channels || !affine),
               "GroupNorm: expected input of shape (N, ", num_channels, ", *), got shape ",
               shape_str(x.shape()));
  return group_norm(x, num_groups, weight, bias, eps);
}

// --- InstanceNorm1d, 2d and 3d ---

// As PyTorch: another channel count than num_features is an error only where a parameter or a
// running statistic has to match it.
Tensor InstanceNorm::forward(const Tensor& x) {
  const std::string layer = name();
  SINTER_CHECK(x.defined(), layer, ": undefined input");
  const bool batched = x.dim() == spatial_dims_ + 2;
  SINTER_CHECK(batched || x.dim() == spatial_dims_ + 1, layer, ": expected a ", spatial_dims_ + 1,
               "-D or ", spatial_dims_ + 2, "-D input, got shape ", shape_str(x.shape()));
  const Tensor xb = batched ? x : x.unsqueeze(0);
  SINTER_CHECK(xb.size(1) == num_features || !(affine || track_running_stats), layer, ": expected ",
               num_features, " channels, got input of shape ", shape_str(x.shape()));
  const Tensor y = instance_norm(xb, running_mean, running_var, weight, bias,
                                 is_training() || !track_running_stats, momentum, eps);
  return batched ? y : y.squeeze(0);
}

}  // namespace sinter::nn
