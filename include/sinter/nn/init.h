// Parameter initializers. Each fills a tensor in place under NoGradGuard (so it works on
// parameters that require grad), keeps the tensor's identity, and draws from the Philox generator
// `gen` (the default generator when null): the same values on CPU and CUDA for one seed.
#pragma once

#include <string>
#include <utility>

#include "sinter/tensor.h"

namespace sinter::nn::init {

enum class FanMode { FanIn, FanOut };

// The recommended gain for a nonlinearity: "linear", "conv2d", "sigmoid" and "identity" 1, "tanh"
// 5/3, "relu" sqrt(2), "leaky_relu" sqrt(2 / (1 + param^2)), "selu" 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
// A weight of shape (out, in, *k) (2 dims at least): fan_in = in * prod(k), fan_out = out *
// prod(k).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
// Normal(mean, std) truncated to [a, b] (the bounds are values, not multiples of std), as
// torch.nn.init.trunc_normal_: ViT and BERT initialize their weights with it (std 0.02).
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0,
                      double b = 2.0, Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);

// He initialization: std = gain / sqrt(fan) with gain = calculate_gain(nonlinearity, a); the
// uniform variant draws from [-bound, bound] with bound = sqrt(3) std.
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                         const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
// Glorot initialization: std = gain sqrt(2 / (fan_in + fan_out)); uniform bound = sqrt(3) std.
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace sinter::nn::init
