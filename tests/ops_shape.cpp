// Op-table rows of the shape ops (see op_table.h): views, copies, cat, stack, split and chunk, pad,
// and the rearranged tensors (flip, roll, diagonal, diag, kron, meshgrid, repeat_interleave,
// nonzero, one_hot).
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> shape_rows() {
  return {
      // Shape ops and copies.
      {.name = "Reshape",
       .shapes = {S{2, 6}},
       .fn =
           [](const Inputs& x) {
             return x[0].reshape({3, -1}) * 2.0;
           }},
      {.name = "TransposeContiguous",
       .shapes = {S{2, 3, 4}},
       .fn = [](const Inputs& x) { return x[0].transpose(0, 2).contiguous(); }},
      {.name = "Permute",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return x[0].permute({1, 2, 0}) * 1.0;
           }},
      {.name = "NarrowSelect",
       .shapes = {S{4, 5}},
       .fn = [](const Inputs& x) { return x[0].narrow(1, 1, 3).select(0, 2) * 1.0; }},
      {.name = "SliceStep",
       .shapes = {S{7, 3}},
       .fn = [](const Inputs& x) { return x[0].slice(0, 1, std::nullopt, 2) * 1.0; }},
      {.name = "ExpandSqueeze",
       .shapes = {S{3, 1}},
       .fn =
           [](const Inputs& x) {
             return x[0].expand({2, 3, 4}).unsqueeze(0).squeeze(0) * 1.0;
           }},
      {.name = "Cat",
       .shapes = {S{2, 3}, S{4, 3}},
       .fn =
           [](const Inputs& x) {
             return cat({x[0], x[1]}, 0);
           }},
      {.name = "Stack",
       .shapes = {S{2, 3}, S{2, 3}},
       .fn =
           [](const Inputs& x) {
             return stack({x[0], x[1]}, 1);
           }},
      {.name = "Split",
       .shapes = {S{5, 4}},
       .fn =
           [](const Inputs& x) {
             std::vector<Tensor> p = split(x[0], 2, 0);
             return cat({p[2] * 3.0, p[0], p[1] * 2.0}, 0);
           }},
      {.name = "Chunk",
       .shapes = {S{3, 6}},
       .fn =
           [](const Inputs& x) {
             std::vector<Tensor> p = chunk(x[0], 3, 1);
             return p[0] * p[1] - p[2];
           }},
      // pad: every mode, on the last dims of a batch of images and of a 1-D signal.
      {.name = "PadReflect",
       .shapes = {S{2, 2, 4, 5}},
       .fn =
           [](const Inputs& x) {
             return pad(x[0], {2, 1, 3, 1}, PadMode::Reflect);
           }},
      {.name = "PadReplicate",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return pad(x[0], {3, 2}, PadMode::Replicate);
           }},
      {.name = "PadCircular3d",
       .shapes = {S{1, 2, 3, 2, 3}},
       .fn =
           [](const Inputs& x) {
             return pad(x[0], {1, 3, 2, 0, 1, 1}, PadMode::Circular);
           }},
      {.name = "PadConstantCrop",
       .shapes = {S{3, 4, 5}},
       .fn =
           [](const Inputs& x) {
             return pad(x[0], {-1, 2, 1, -2}, PadMode::Constant, 0.5);
           }},
      // Rearranged tensors (src/ops/rearrange.cpp).
      {.name = "Flip",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return flip(x[0], {0, -1});
           }},
      {.name = "Roll",
       .shapes = {S{3, 4}},
       .fn =
           [](const Inputs& x) {
             return roll(x[0], {-1, 6}, {0, 1});
           }},
      {.name = "RollFlattened",
       .shapes = {S{2, 3}},
       .fn = [](const Inputs& x) { return roll(x[0], {4}); }},
      {.name = "Diagonal",
       .shapes = {S{2, 3, 4}},
       .fn = [](const Inputs& x) { return diagonal(x[0], 1, 2, 1) * 1.0; }},
      {.name = "DiagEmbed", .shapes = {S{3}}, .fn = [](const Inputs& x) { return diag(x[0], -1); }},
      {.name = "DiagOfMatrix",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return diag(x[0], 1); }},
      {.name = "Kron",
       .shapes = {S{2, 3}, S{2, 1, 2}},
       .fn = [](const Inputs& x) { return kron(x[0], x[1]); }},
      {.name = "Meshgrid",
       .shapes = {S{2}, S{3}, S{}},
       .fn =
           [](const Inputs& x) {
             const std::vector<Tensor> g = meshgrid({x[0], x[1], x[2]}, "xy");
             return g[0] * g[1] + g[2];
           }},
      {.name = "RepeatInterleave",
       .shapes = {S{2, 3}},
       .fn =
           [](const Inputs& x) {
             return repeat_interleave(x[0], index_of({2, 0, 3}, {3}, x[0]), 1);
           }},
      {.name = "RepeatInterleaveFlat",
       .shapes = {S{2, 3}},
       .fn = [](const Inputs& x) { return repeat_interleave(x[0], 2); }},
      {.name = "Nonzero",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return nonzero(gt(x[0], 0.0)); },
       .grad = false},
      {.name = "OneHot",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return one_hot(argmax(x[0], 1), 5); },
       .grad = false},
  };
}

}  // namespace sinter::testing
