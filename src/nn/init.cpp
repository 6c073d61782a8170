// Parameter initializers: draw with rand/randn (Philox), scale, and copy into the tensor in place.
#include "sinter/nn/init.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kern/scalar_ops.h"
#include "sinter/autograd.h"
#include "sinter/ops.h"

namespace sinter::nn::init {

namespace {

void check_target(const char* op, const Tensor& t) {
  SINTER_CHECK(t.defined(), op, ": undefined tensor");
  SINTER_CHECK(is_floating(t.dtype()), op, ": needs a floating tensor, got dtype ", t.dtype());
}

// Draws in f64 for f64 tensors and in f32 otherwise (copy_ rounds to bf16/f16), so a 16-bit
// parameter gets the same values as an f32 one rounded.
TensorOptions draw_options(const Tensor& t) {
  return {.dtype = t.dtype() == DType::f64 ? DType::f64 : DType::f32, .device = t.device()};
}

double fan_for(const char* op, const Tensor& t, FanMode mode) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  SINTER_CHECK(fan > 0, op, ": the ", mode == FanMode::FanIn ? "fan_in" : "fan_out", " of shape ",
               shape_str(t.shape()), " is 0");
  return static_cast<double>(fan);
}

// The standard normal's CDF.
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "conv2d" || nonlinearity == "sigmoid" ||
      nonlinearity == "identity") {
    return 1.0;
  }
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 0.75;
  SINTER_THROW("calculate_gain: unknown nonlinearity \"", nonlinearity,
               "\"; expected linear, conv2d, sigmoid, identity, tanh, relu, leaky_relu or selu");
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  SINTER_CHECK(t.defined(), "calculate_fan_in_and_fan_out: undefined tensor");
  SINTER_CHECK(t.dim() >= 2,
               "calculate_fan_in_and_fan_out: needs a tensor with 2 dims or more, got shape ",
               shape_str(t.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double low, double high, Generator* gen) {
  check_target("uniform_", t);
  SINTER_CHECK(low <= high, "uniform_: low ", low, " is above high ", high);
  NoGradGuard ng;
  Tensor r = rand(t.shape(), draw_options(t), gen);
  t.copy_(r * (high - low) + low);
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_target("normal_", t);
  SINTER_CHECK(std >= 0.0, "normal_: std ", std, " is negative");
  NoGradGuard ng;
  Tensor r = randn(t.shape(), draw_options(t), gen);
  t.copy_(r * std + mean);
  return t;
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  check_target("trunc_normal_", t);
  SINTER_CHECK(std >= 0.0, "trunc_normal_: std ", std, " is negative");
  SINTER_CHECK(a <= b, "trunc_normal_: the lower bound a = ", a, " is above b = ", b);
  NoGradGuard ng;
  // Inverse-CDF sampling, as PyTorch: u uniform over [Phi(alpha), Phi(beta)] of the standardized
  // bounds, x = mean + std * Phi^-1(u), clamped to [a, b] against rounding at the ends. The
  // uniforms come from the generator on the host in f64 (Philox: the same on every device).
  const double lo = std > 0.0 ? normal_cdf((a - mean) / std) : 0.0;
  const double hi = std > 0.0 ? normal_cdf((b - mean) / std) : 1.0;
  std::vector<double> v = rand(t.shape(), {.dtype = DType::f64}, gen).to_vector<double>();
  for (double& x : v) {
    const double u = lo + (hi - lo) * x;
    x = std::clamp(
        mean + std * std::sqrt(2.0) * kern::scalar::erfinv(std::clamp(2.0 * u - 1.0, -1.0, 1.0)), a,
        b);
  }
  t.copy_(from_vector(v, t.shape()).to(t.dtype()));
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  SINTER_CHECK(t.defined(), "constant_: undefined tensor");
  NoGradGuard ng;
  t.fill_(value);
  return t;
}

Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity,
                         Generator* gen) {
  check_target("kaiming_uniform_", t);
  const double std =
      calculate_gain(nonlinearity, a) / std::sqrt(fan_for("kaiming_uniform_", t, mode));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity,
                        Generator* gen) {
  check_target("kaiming_normal_", t);
  const double std =
      calculate_gain(nonlinearity, a) / std::sqrt(fan_for("kaiming_normal_", t, mode));
  return normal_(t, 0.0, std, gen);
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_target("xavier_uniform_", t);
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  SINTER_CHECK(fan_in + fan_out > 0, "xavier_uniform_: shape ", shape_str(t.shape()),
               " has no elements");
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(t, -bound, bound, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check_target("xavier_normal_", t);
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  SINTER_CHECK(fan_in + fan_out > 0, "xavier_normal_: shape ", shape_str(t.shape()),
               " has no elements");
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

}  // namespace sinter::nn::init
