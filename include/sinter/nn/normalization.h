// The normalization layers beside modules.h's BatchNorm2d, LayerNorm and RMSNorm: BatchNorm3d,
// GroupNorm and the instance norms, with PyTorch's parameters, buffers, defaults and state_dict
// keys.
#pragma once

#include <cstdint>
#include <string>

#include "sinter/nn/modules.h"

namespace sinter::nn {

// Batch normalization over (N, C, D, H, W) per channel: BatchNorm2d's parameters, buffers, options
// and state_dict keys.
class BatchNorm3d : public BatchNorm2d {
 public:
  using BatchNorm2d::BatchNorm2d;
  std::string name() const override { return "BatchNorm3d"; }
  Tensor forward(const Tensor& x) override;
};

// group_norm of x (N, num_channels, *) in num_groups groups (dividing num_channels); parameters
// weight (1) and bias (0), both (num_channels), when affine (the weight alone without `bias`, as
// PyTorch's bias=False). The same in training and eval.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            bool bias = true);
  std::string name() const override { return "GroupNorm"; }
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Tensor weight, bias;  // undefined unless affine (bias: and `bias`)
};

// instance_norm of a batched (N, C, *) or unbatched (C, *) input, per (sample, channel) over the
// positions, with NormBase's parameters and buffers (num_batches_tracked kept for the state_dict,
// as PyTorch's, which never counts it). Training mode, or no running statistics, normalizes with
// each instance's own statistics (moving the running ones); eval mode with the running ones.
class InstanceNorm : public NormBase {
 public:
  Tensor forward(const Tensor& x) override;
  int64_t spatial_dims() const { return spatial_dims_; }  // 1, 2 or 3: the dims after C

 protected:
  InstanceNorm(int64_t spatial_dims, int64_t num_features, double eps, double momentum, bool affine,
               bool track_running_stats)
      : NormBase("InstanceNorm" + std::to_string(spatial_dims) + "d", num_features, eps, momentum,
                 affine, track_running_stats),
        spatial_dims_(spatial_dims) {}

 private:
  int64_t spatial_dims_;
};

// (N, C, L) or (C, L).
class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                          bool affine = false, bool track_running_stats = false)
      : InstanceNorm(1, num_features, eps, momentum, affine, track_running_stats) {}
  std::string name() const override { return "InstanceNorm1d"; }
};

// (N, C, H, W) or (C, H, W).
class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                          bool affine = false, bool track_running_stats = false)
      : InstanceNorm(2, num_features, eps, momentum, affine, track_running_stats) {}
  std::string name() const override { return "InstanceNorm2d"; }
};

// (N, C, D, H, W) or (C, D, H, W).
class InstanceNorm3d : public InstanceNorm {
 public:
  explicit InstanceNorm3d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                          bool affine = false, bool track_running_stats = false)
      : InstanceNorm(3, num_features, eps, momentum, affine, track_running_stats) {}
  std::string name() const override { return "InstanceNorm3d"; }
};

}  // namespace sinter::nn
