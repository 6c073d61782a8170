// Op-table rows of conv2d (see op_table.h). Shapes are small and odd so that padding, strides,
// dilation and groups leave partial windows at the edges.
#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> conv_rows() {
  return {
      // conv2d: x (N, C_in, H, W), weight (C_out, C_in / groups, kH, kW), bias (C_out).
      {.name = "Conv2d",
       .shapes = {S{2, 3, 5, 6}, S{4, 3, 3, 3}, S{4}},
       .fn = conv2d_of({}),
       .tol = 2e-4},
      {.name = "Conv2dNoBias",
       .shapes = {S{2, 3, 5, 6}, S{4, 3, 3, 3}},
       .fn = conv2d_of({}),
       .tol = 2e-4},
      {.name = "Conv2dGroupsStridePad",
       .shapes = {S{2, 4, 6, 5}, S{6, 2, 3, 3}, S{6}},
       .fn = conv2d_of({.stride = {2, 2}, .padding = {1, 1}, .groups = 2}),
       .tol = 2e-4},
      {.name = "Conv2dDilation",
       .shapes = {S{1, 2, 7, 8}, S{3, 2, 3, 2}, S{3}},
       .fn = conv2d_of({.stride = {1, 2}, .padding = {1, 2}, .dilation = {2, 3}}),
       .tol = 2e-4},
      {.name = "Conv2dDepthwise",
       .shapes = {S{2, 3, 5, 5}, S{3, 1, 3, 3}},
       .fn = conv2d_of({.padding = {1, 1}, .groups = 3}),
       .tol = 2e-4},
      {.name = "Conv2dPointwise",
       .shapes = {S{2, 4, 3, 3}, S{5, 4, 1, 1}, S{5}},
       .fn = conv2d_of({}),
       .tol = 2e-4},
      {.name = "Conv2dStridedInput",
       .shapes = {S{2, 5, 3, 4}, S{3, 4, 2, 2}},
       .fn =
           [](const Inputs& x) {
             return conv2d(x[0].permute({0, 3, 2, 1}), x[1], Tensor(), {.stride = {2, 1}});
           },
       .tol = 2e-4},
  };
}

}  // namespace sinter::testing
