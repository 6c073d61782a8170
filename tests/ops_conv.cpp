// Op-table rows of the convolutions (see op_table.h): conv2d, conv1d and conv3d, the transposed
// ones, padding="same". Shapes are small and odd so that padding, strides, dilation and groups
// leave partial windows at the edges.
#include "op_table.h"

namespace sinter::testing {

namespace {

// A convolution row, with the f32 parity tolerance of a sum over many taps (2e-4).
OpRow conv_row(std::string name, std::vector<Shape> shapes, Conv2dOptions o) {
  return {.name = std::move(name), .shapes = std::move(shapes), .fn = conv2d_of(o), .tol = 2e-4};
}

}  // namespace

std::vector<OpRow> conv_rows() {
  return {
      // conv2d: x (N, C_in, H, W), weight (C_out, C_in / groups, kH, kW), bias (C_out).
      conv_row("Conv2d", {S{2, 3, 5, 6}, S{4, 3, 3, 3}, S{4}}, {}),
      conv_row("Conv2dNoBias", {S{2, 3, 5, 6}, S{4, 3, 3, 3}}, {}),
      conv_row("Conv2dGroupsStridePad", {S{2, 4, 6, 5}, S{6, 2, 3, 3}, S{6}},
               {.stride = {2, 2}, .padding = {1, 1}, .groups = 2}),
      conv_row("Conv2dDilation", {S{1, 2, 7, 8}, S{3, 2, 3, 2}, S{3}},
               {.stride = {1, 2}, .padding = {1, 2}, .dilation = {2, 3}}),
      conv_row("Conv2dDepthwise", {S{2, 3, 5, 5}, S{3, 1, 3, 3}}, {.padding = {1, 1}, .groups = 3}),
      conv_row("Conv2dPointwise", {S{2, 4, 3, 3}, S{5, 4, 1, 1}, S{5}}, {}),
      // Stride 1 with outputs as wide as the inputs: the columns come from shifted planes.
      conv_row("Conv2dSameDilated", {S{2, 3, 6, 7}, S{4, 3, 3, 3}, S{4}},
               {.padding = {2, 2}, .dilation = {2, 2}}),
      conv_row("Conv2dSamePaddedRows", {S{1, 2, 4, 5}, S{3, 2, 3, 3}}, {.padding = {3, 1}}),
      // The epilogue activation (what a fused Conv2d runs; with a gradient, the separate op).
      {.name = "Conv2dReluEpilogue",
       .shapes = {S{2, 3, 5, 6}, S{4, 3, 3, 3}, S{4}},
       .fn =
           [](const Inputs& x) {
             return conv2d(x[0], x[1], x[2], {.padding = 1}, Activation::Relu);
           },
       .tol = 2e-4},
      {.name = "Conv2dGeluTanhEpilogue",
       .shapes = {S{2, 4, 6, 5}, S{6, 2, 3, 3}, S{6}},
       .fn =
           [](const Inputs& x) {
             return conv2d(x[0], x[1], x[2], {.stride = 2, .groups = 2}, Activation::GeluTanh);
           },
       .tol = 2e-4},
      {.name = "Conv2dSamePaddingEvenKernel",
       .shapes = {S{2, 3, 5, 6}, S{4, 3, 2, 3}},
       .fn =
           [](const Inputs& x) {
             return conv2d(x[0], x[1], Tensor(), {.dilation = {1, 2}, .same_padding = true});
           },
       .tol = 2e-4},
      {.name = "Conv1d",
       .shapes = {S{2, 4, 9}, S{6, 2, 3}, S{6}},
       .fn =
           [](const Inputs& x) {
             return conv1d(x[0], x[1], x[2], {.stride = 2, .padding = 1, .groups = 2});
           },
       .tol = 2e-4},
      {.name = "Conv1dSamePadding",
       .shapes = {S{2, 3, 7}, S{4, 3, 4}},
       .fn = [](const Inputs& x) { return conv1d(x[0], x[1], Tensor(), {.same_padding = true}); },
       .tol = 2e-4},
      {.name = "Conv3d",
       .shapes = {S{2, 2, 4, 5, 4}, S{3, 2, 2, 3, 2}, S{3}},
       .fn =
           [](const Inputs& x) {
             return conv3d(x[0], x[1], x[2],
                           {.stride = {2, 1, 1}, .padding = {1, 1, 0}, .dilation = {1, 1, 2}});
           },
       .tol = 2e-4},
      {.name = "Conv3dGroupsSame",
       .shapes = {S{1, 4, 3, 4, 4}, S{4, 2, 2, 3, 3}},
       .fn =
           [](const Inputs& x) {
             return conv3d(x[0], x[1], Tensor(), {.groups = 2, .same_padding = true});
           },
       .tol = 2e-4},
      {.name = "ConvTranspose2d",
       .shapes = {S{2, 4, 3, 4}, S{4, 3, 3, 3}, S{6}},
       .fn =
           [](const Inputs& x) {
             return conv_transpose2d(x[0], x[1], x[2],
                                     {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2});
           },
       .tol = 2e-4},
      // output_padding past the stride, below the dilation: a zero row of the kernels' dy.
      {.name = "ConvTranspose2dDilated",
       .shapes = {S{1, 2, 3, 3}, S{2, 3, 2, 3}},
       .fn =
           [](const Inputs& x) {
             return conv_transpose2d(x[0], x[1], Tensor(),
                                     {.output_padding = {1, 0}, .dilation = {2, 1}});
           },
       .tol = 2e-4},
      {.name = "ConvTranspose1d",
       .shapes = {S{2, 3, 5}, S{3, 2, 3}, S{2}},
       .fn =
           [](const Inputs& x) {
             return conv_transpose1d(x[0], x[1], x[2],
                                     {.stride = 3, .padding = 1, .output_padding = 2});
           },
       .tol = 2e-4},
      {.name = "ConvTranspose3d",
       .shapes = {S{1, 2, 2, 3, 2}, S{2, 2, 2, 2, 3}, S{2}},
       .fn =
           [](const Inputs& x) {
             return conv_transpose3d(
                 x[0], x[1], x[2],
                 {.stride = {2, 1, 2}, .padding = {1, 0, 1}, .output_padding = {1, 0, 0}});
           },
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
