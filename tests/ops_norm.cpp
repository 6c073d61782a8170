// Op-table rows for batch_norm, layer_norm, rms_norm, group_norm, instance_norm and dropout (see
// op_table.h).
#include "op_table.h"

namespace sinter::testing {

namespace {

// A (c) tensor of the given values, in the dtype and on the device of `like`.
Tensor channel_values(const std::vector<double>& v, const Tensor& like) {
  return from_vector<double>(v).to(like.dtype()).to(like.device());
}

}  // namespace

std::vector<OpRow> norm_rows() {
  return {
      // Training: batch statistics; the running statistics are fresh buffers updated per call.
      {.name = "BatchNormTrain",
       .shapes = {S{3, 2, 2, 2}, S{2}, S{2}},
       .fn =
           [](const Inputs& x) {
             Tensor rm = zeros({2}, {.dtype = x[0].dtype(), .device = x[0].device()});
             Tensor rv = ones({2}, {.dtype = x[0].dtype(), .device = x[0].device()});
             return batch_norm(x[0], rm, rv, x[1], x[2], true);
           }},
      {.name = "BatchNormTrainFlat",
       .shapes = {S{5, 3}, S{3}, S{3}},
       .fn = [](const Inputs& x) { return batch_norm(x[0], {}, {}, x[1], x[2], true, 0.1, 1e-3); }},
      {.name = "BatchNormTrainNoAffine",
       .shapes = {S{2, 3, 4}},
       .fn = [](const Inputs& x) { return batch_norm(x[0], {}, {}, {}, {}, true); }},
      {.name = "BatchNormEval",
       .shapes = {S{3, 2, 4}, S{2}, S{2}},
       .fn =
           [](const Inputs& x) {
             Tensor rm = channel_values({0.2, -0.4}, x[0]), rv = channel_values({1.5, 0.7}, x[0]);
             return batch_norm(x[0], rm, rv, x[1], x[2], false);
           }},
      {.name = "LayerNormLastDim",
       .shapes = {S{3, 5}, S{5}, S{5}},
       .fn = [](const Inputs& x) { return layer_norm(x[0], {5}, x[1], x[2]); }},
      {.name = "LayerNormTwoDims",
       .shapes = {S{2, 3, 4}, S{3, 4}, S{3, 4}},
       .fn =
           [](const Inputs& x) {
             return layer_norm(x[0], {3, 4}, x[1], x[2], 1e-3);
           }},
      {.name = "LayerNormNoAffine",
       .shapes = {S{4, 6}},
       .fn = [](const Inputs& x) { return layer_norm(x[0], {6}); }},
      {.name = "LayerNormNoAffineTwoDims",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return layer_norm(x[0], {3, 4});
           }},
      {.name = "RmsNormLastDim",
       .shapes = {S{3, 5}, S{5}},
       .fn = [](const Inputs& x) { return rms_norm(x[0], {5}, x[1]); }},
      {.name = "RmsNormTwoDims",
       .shapes = {S{2, 3, 4}, S{3, 4}},
       .fn =
           [](const Inputs& x) {
             return rms_norm(x[0], {3, 4}, x[1], 1e-3);
           }},
      {.name = "RmsNormNoWeight",
       .shapes = {S{4, 6}},
       .fn = [](const Inputs& x) { return rms_norm(x[0], {6}); }},
      {.name = "GroupNorm",
       .shapes = {S{2, 6, 3, 2}, S{6}, S{6}},
       .fn = [](const Inputs& x) { return group_norm(x[0], 3, x[1], x[2]); }},
      {.name = "GroupNormNoAffineNoPositions",
       .shapes = {S{4, 6}},
       .fn = [](const Inputs& x) { return group_norm(x[0], 2, {}, {}, 1e-3); }},
      {.name = "GroupNormWeightOnly",
       .shapes = {S{2, 4, 5}, S{4}},
       .fn = [](const Inputs& x) { return group_norm(x[0], 4, x[1]); }},
      // Fresh running statistics per call, as BatchNormTrain's.
      {.name = "InstanceNormTrain",
       .shapes = {S{2, 3, 4, 3}, S{3}, S{3}},
       .fn =
           [](const Inputs& x) {
             Tensor rm = zeros({3}, {.dtype = x[0].dtype(), .device = x[0].device()});
             Tensor rv = ones({3}, {.dtype = x[0].dtype(), .device = x[0].device()});
             return instance_norm(x[0], rm, rv, x[1], x[2]);
           }},
      {.name = "InstanceNormEval",
       .shapes = {S{2, 2, 5}, S{2}, S{2}},
       .fn =
           [](const Inputs& x) {
             Tensor rm = channel_values({0.2, -0.4}, x[0]), rv = channel_values({1.5, 0.7}, x[0]);
             return instance_norm(x[0], rm, rv, x[1], x[2], false);
           }},
      {.name = "InstanceNormNoAffine",
       .shapes = {S{3, 2, 2, 3}},
       .fn = [](const Inputs& x) { return instance_norm(x[0]); }},
      // A generator made inside fn: every call draws the same mask, so the function is fixed.
      {.name = "Dropout",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             Generator g(123);
             return dropout(x[0], 0.3, true, &g);
           }},
      {.name = "DropoutTransposed",
       .shapes = {S{5, 4}},
       .fn =
           [](const Inputs& x) {
             Generator g(7);
             return dropout(x[0].t(), 0.5, true, &g);
           }},
      // Rows 2..4 of a 7-row whole: the mask of those rows (Note [dropout blocks]).
      {.name = "DropoutBlock",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             Generator g(9);
             return dropout_block(x[0], 0.4, true, 1, 2, 7, &g);
           }},
  };
}

}  // namespace sinter::testing
