// Op-table rows for conv2d, max/avg/adaptive pooling (see op_table.h). Shapes are small and odd so
// that padding, strides, dilation, groups and ceil_mode all leave partial windows at the edges.
#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> conv_pool_rows() {
  using S = Shape;
  auto conv = [](Conv2dOptions o, bool with_bias) {
    return [o, with_bias](const Inputs& x) {
      return conv2d(x[0], x[1], with_bias ? x[2] : Tensor(), o);
    };
  };
  auto pool_max = [](Size2 k, MaxPool2dOptions o = {}) {
    return [k, o](const Inputs& x) { return max_pool2d(x[0], k, o); };
  };
  auto pool_avg = [](Size2 k, AvgPool2dOptions o = {}) {
    return [k, o](const Inputs& x) { return avg_pool2d(x[0], k, o); };
  };
  auto adaptive = [](Size2 size) {
    return [size](const Inputs& x) { return adaptive_avg_pool2d(x[0], size); };
  };
  // clang-format off
  return {
      // conv2d: x (N, C_in, H, W), weight (C_out, C_in / groups, kH, kW), bias (C_out).
      {"Conv2d", {S{2, 3, 5, 6}, S{4, 3, 3, 3}, S{4}}, conv({}, true), Domain::Any, true, 2e-4, true, 3e-2},
      {"Conv2dNoBias", {S{2, 3, 5, 6}, S{4, 3, 3, 3}}, conv({}, false), Domain::Any, true, 2e-4, true, 3e-2},
      {"Conv2dGroupsStridePad", {S{2, 4, 6, 5}, S{6, 2, 3, 3}, S{6}},
       conv({.stride = {2, 2}, .padding = {1, 1}, .groups = 2}, true), Domain::Any, true, 2e-4, true, 3e-2},
      {"Conv2dDilation", {S{1, 2, 7, 8}, S{3, 2, 3, 2}, S{3}},
       conv({.stride = {1, 2}, .padding = {1, 2}, .dilation = {2, 3}}, true), Domain::Any, true, 2e-4, true, 3e-2},
      {"Conv2dDepthwise", {S{2, 3, 5, 5}, S{3, 1, 3, 3}},
       conv({.padding = {1, 1}, .groups = 3}, false), Domain::Any, true, 2e-4, true, 3e-2},
      {"Conv2dPointwise", {S{2, 4, 3, 3}, S{5, 4, 1, 1}, S{5}}, conv({}, true), Domain::Any, true, 2e-4, true, 3e-2},
      {"Conv2dStridedInput", {S{2, 5, 3, 4}, S{3, 4, 2, 2}},
       [](const Inputs& x) { return conv2d(x[0].permute({0, 3, 2, 1}), x[1], Tensor(), {.stride = {2, 1}}); },
       Domain::Any, true, 2e-4, true, 3e-2},

      // max pooling; randn inputs have no ties, so the gradient is defined everywhere.
      {"MaxPool2d", {S{2, 3, 6, 5}}, pool_max({2, 2})},
      {"MaxPool2dPadCeil", {S{2, 2, 7, 6}},
       pool_max({3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})},
      {"MaxPool2dDilation", {S{1, 2, 7, 7}},
       pool_max({2, 3}, {.stride = {1, 2}, .dilation = {2, 1}})},
      {"MaxPool2dUnbatched", {S{3, 5, 5}}, pool_max({3, 3}, {.stride = {2, 2}})},
      {"MaxPool2dIndices", {S{2, 2, 7, 6}},
       [](const Inputs& x) {
         return std::get<1>(max_pool2d_with_indices(
             x[0], {3, 2}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}));
       },
       Domain::Any, false},

      // average pooling (Note [avg pool divisor] in src/internal/kernels_pool.inc).
      {"AvgPool2d", {S{2, 3, 6, 6}}, pool_avg({2, 2})},
      {"AvgPool2dPadCeil", {S{2, 2, 7, 6}},
       pool_avg({3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})},
      {"AvgPool2dPadCeilExcludePad", {S{2, 2, 7, 6}},
       pool_avg({3, 2}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true,
                 .count_include_pad = false})},
      {"AvgPool2dUnbatched", {S{3, 5, 4}}, pool_avg({2, 3}, {.stride = {1, 1}})},

      // adaptive average pooling, to sizes that do not divide the input (overlapping windows).
      {"AdaptiveAvgPool2d", {S{2, 3, 7, 5}}, adaptive({3, 2})},
      {"AdaptiveAvgPool2dUp", {S{2, 2, 3, 4}}, adaptive({5, 6})},
      {"AdaptiveAvgPool2dGlobal", {S{2, 3, 4, 5}}, adaptive({1, 1})},
  };
  // clang-format on
}

}  // namespace sinter::testing
