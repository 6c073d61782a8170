// Op-table rows for softmax, log_softmax and the losses (see op_table.h). Class targets are fixed
// i64 vectors built inside each fn (the inputs are random floating tensors); -100 is the default
// ignore_index.
#include "op_table.h"

namespace sinter::testing {
namespace {

Tensor targets(const std::vector<int64_t>& v, const Shape& shape, const Tensor& like) {
  return from_vector<int64_t>(v, shape).to(like.device());
}

CrossEntropyOptions ce(Reduction r, int64_t ignore_index = -100, double smoothing = 0.0) {
  return {.reduction = r, .ignore_index = ignore_index, .label_smoothing = smoothing};
}

}  // namespace

std::vector<OpRow> loss_rows() {
  using S = Shape;
  using R = Reduction;
  return {
      {.name = "SoftmaxLastDim",
       .shapes = {S{4, 7}},
       .fn = [](const Inputs& x) { return softmax(x[0], -1); }},
      {.name = "SoftmaxDim1",
       .shapes = {S{2, 5, 3}},
       .fn = [](const Inputs& x) { return softmax(x[0], 1); }},
      {.name = "LogSoftmaxLastDim",
       .shapes = {S{4, 7}},
       .fn = [](const Inputs& x) { return log_softmax(x[0], 1); }},
      {.name = "LogSoftmaxDim1",
       .shapes = {S{2, 5, 3}},
       .fn = [](const Inputs& x) { return log_softmax(x[0], 1); }},
      // A transposed (strided) input takes a contiguous copy first.
      {.name = "SoftmaxTransposed",
       .shapes = {S{6, 4}},
       .fn = [](const Inputs& x) { return softmax(x[0].t(), -1); }},
      {.name = "CrossEntropyMean",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({1, 0, 4, 2}, {4}, x[0]));
           }},
      {.name = "CrossEntropySum",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({3, 3, 0, 1}, {4}, x[0]), ce(R::Sum));
           }},
      {.name = "CrossEntropyNone",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({2, 4, 1, 0}, {4}, x[0]), ce(R::None));
           }},
      {.name = "CrossEntropyIgnoreIndex",
       .shapes = {S{5, 4}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({1, -100, 3, -100, 0}, {5}, x[0]));
           }},
      {.name = "CrossEntropyIgnoreClassSum",
       .shapes = {S{4, 3}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({2, 0, 1, 2}, {4}, x[0]), ce(R::Sum, 2));
           }},
      {.name = "CrossEntropyLabelSmoothing",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({1, -100, 4, 2}, {4}, x[0]),
                                  ce(R::Mean, -100, 0.1));
           }},
      {.name = "CrossEntropySmoothingNone",
       .shapes = {S{3, 6}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({5, 0, 2}, {3}, x[0]), ce(R::None, -100, 0.3));
           }},
      // (N, C, d): class dim 1 is strided.
      {.name = "CrossEntropySpatial",
       .shapes = {S{2, 4, 3}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({0, 3, -100, 2, 1, 1}, {2, 3}, x[0]),
                                  ce(R::Mean, -100, 0.2));
           }},
      {.name = "CrossEntropySpatialNone",
       .shapes = {S{2, 3, 2, 2}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({0, 2, 1, 1, 2, -100, 0, 2}, {2, 2, 2}, x[0]),
                                  ce(R::None));
           }},
      {.name = "CrossEntropySpatialSum",
       .shapes = {S{3, 4, 2}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], targets({3, 0, 1, 2, 2, 3}, {3, 2}, x[0]), ce(R::Sum));
           }},
      {.name = "NllLoss",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return nll_loss(log_softmax(x[0], 1), targets({1, 0, -100, 2}, {4}, x[0]));
           }},
      {.name = "NllLossSpatialNone",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return nll_loss(log_softmax(x[0], 1), targets({0, 1, 2, 2, 1, 0, 0, 1}, {2, 4}, x[0]),
                             ce(R::None));
           }},
      {.name = "NllLossSum",
       .shapes = {S{3, 4}},
       .fn =
           [](const Inputs& x) {
             return nll_loss(log_softmax(x[0], 1), targets({3, 1, 1}, {3}, x[0]), ce(R::Sum, 1));
           }},
      {.name = "MseLoss",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return mse_loss(x[0], x[1]); }},
      {.name = "MseLossSum",
       .shapes = {S{5}, S{5}},
       .fn = [](const Inputs& x) { return mse_loss(x[0], x[1], R::Sum); }},
      {.name = "MseLossNone",
       .shapes = {S{2, 3}, S{2, 3}},
       .fn = [](const Inputs& x) { return mse_loss(x[0], x[1], R::None); }},
      // Targets in (0, 1) from a second random input, so their gradient is checked too.
      {.name = "BceWithLogits",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], sigmoid(x[1])); }},
      {.name = "BceWithLogitsSum",
       .shapes = {S{6}, S{6}},
       .fn =
           [](const Inputs& x) {
             return binary_cross_entropy_with_logits(x[0], sigmoid(x[1]), R::Sum);
           }},
      {.name = "BceWithLogitsPosWeight",
       .shapes = {S{3, 4}, S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             return binary_cross_entropy_with_logits(x[0], sigmoid(x[1]), R::None, exp(x[2]));
           }},
  };
}

}  // namespace sinter::testing
