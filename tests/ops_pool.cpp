// Op-table rows of max, average and adaptive average pooling (see op_table.h). Shapes are small and
// odd so that padding, strides, dilation and ceil_mode leave partial windows at the edges.
#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> pool_rows() {
  return {
      // max pooling; randn inputs have no ties, so the gradient is defined everywhere.
      {.name = "MaxPool2d", .shapes = {S{2, 3, 6, 5}}, .fn = max_pool_of({2, 2})},
      {.name = "MaxPool2dPadCeil",
       .shapes = {S{2, 2, 7, 6}},
       .fn = max_pool_of({3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})},
      {.name = "MaxPool2dDilation",
       .shapes = {S{1, 2, 7, 7}},
       .fn = max_pool_of({2, 3}, {.stride = {1, 2}, .dilation = {2, 1}})},
      {.name = "MaxPool2dUnbatched",
       .shapes = {S{3, 5, 5}},
       .fn = max_pool_of({3, 3}, {.stride = {2, 2}})},
      {.name = "MaxPool2dIndices",
       .shapes = {S{2, 2, 7, 6}},
       .fn =
           [](const Inputs& x) {
             return std::get<1>(max_pool2d_with_indices(
                 x[0], {3, 2}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}));
           },
       .grad = false},

      // average pooling (Note [avg pool divisor] in src/kern/pool.inc).
      {.name = "AvgPool2d", .shapes = {S{2, 3, 6, 6}}, .fn = avg_pool_of({2, 2})},
      {.name = "AvgPool2dPadCeil",
       .shapes = {S{2, 2, 7, 6}},
       .fn = avg_pool_of({3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})},
      {.name = "AvgPool2dPadCeilExcludePad",
       .shapes = {S{2, 2, 7, 6}},
       .fn = avg_pool_of(
           {3, 2},
           {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true, .count_include_pad = false})},
      {.name = "AvgPool2dUnbatched",
       .shapes = {S{3, 5, 4}},
       .fn = avg_pool_of({2, 3}, {.stride = {1, 1}})},

      // adaptive average pooling, to sizes that do not divide the input (overlapping windows).
      {.name = "AdaptiveAvgPool2d", .shapes = {S{2, 3, 7, 5}}, .fn = adaptive_pool_of({3, 2})},
      {.name = "AdaptiveAvgPool2dUp", .shapes = {S{2, 2, 3, 4}}, .fn = adaptive_pool_of({5, 6})},
      {.name = "AdaptiveAvgPool2dGlobal",
       .shapes = {S{2, 3, 4, 5}},
       .fn = adaptive_pool_of({1, 1})},
  };
}

}  // namespace sinter::testing
