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
      {"SoftmaxLastDim", {S{4, 7}}, [](const Inputs& x) { return softmax(x[0], -1); }},
      {"SoftmaxDim1", {S{2, 5, 3}}, [](const Inputs& x) { return softmax(x[0], 1); }},
      {"LogSoftmaxLastDim", {S{4, 7}}, [](const Inputs& x) { return log_softmax(x[0], 1); }},
      {"LogSoftmaxDim1", {S{2, 5, 3}}, [](const Inputs& x) { return log_softmax(x[0], 1); }},
      // A transposed (strided) input takes a contiguous copy first.
      {"SoftmaxTransposed", {S{6, 4}}, [](const Inputs& x) { return softmax(x[0].t(), -1); }},
      {"CrossEntropyMean",
       {S{4, 5}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({1, 0, 4, 2}, {4}, x[0]));
       }},
      {"CrossEntropySum",
       {S{4, 5}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({3, 3, 0, 1}, {4}, x[0]), ce(R::Sum));
       }},
      {"CrossEntropyNone",
       {S{4, 5}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({2, 4, 1, 0}, {4}, x[0]), ce(R::None));
       }},
      {"CrossEntropyIgnoreIndex",
       {S{5, 4}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({1, -100, 3, -100, 0}, {5}, x[0]));
       }},
      {"CrossEntropyIgnoreClassSum",
       {S{4, 3}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({2, 0, 1, 2}, {4}, x[0]), ce(R::Sum, 2));
       }},
      {"CrossEntropyLabelSmoothing",
       {S{4, 5}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({1, -100, 4, 2}, {4}, x[0]), ce(R::Mean, -100, 0.1));
       }},
      {"CrossEntropySmoothingNone",
       {S{3, 6}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({5, 0, 2}, {3}, x[0]), ce(R::None, -100, 0.3));
       }},
      // (N, C, d): class dim 1 is strided.
      {"CrossEntropySpatial",
       {S{2, 4, 3}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({0, 3, -100, 2, 1, 1}, {2, 3}, x[0]),
                              ce(R::Mean, -100, 0.2));
       }},
      {"CrossEntropySpatialNone",
       {S{2, 3, 2, 2}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({0, 2, 1, 1, 2, -100, 0, 2}, {2, 2, 2}, x[0]),
                              ce(R::None));
       }},
      {"CrossEntropySpatialSum",
       {S{3, 4, 2}},
       [](const Inputs& x) {
         return cross_entropy(x[0], targets({3, 0, 1, 2, 2, 3}, {3, 2}, x[0]), ce(R::Sum));
       }},
      {"NllLoss",
       {S{4, 5}},
       [](const Inputs& x) {
         return nll_loss(log_softmax(x[0], 1), targets({1, 0, -100, 2}, {4}, x[0]));
       }},
      {"NllLossSpatialNone",
       {S{2, 3, 4}},
       [](const Inputs& x) {
         return nll_loss(log_softmax(x[0], 1), targets({0, 1, 2, 2, 1, 0, 0, 1}, {2, 4}, x[0]),
                         ce(R::None));
       }},
      {"NllLossSum",
       {S{3, 4}},
       [](const Inputs& x) {
         return nll_loss(log_softmax(x[0], 1), targets({3, 1, 1}, {3}, x[0]), ce(R::Sum, 1));
       }},
      {"MseLoss", {S{3, 4}, S{3, 4}}, [](const Inputs& x) { return mse_loss(x[0], x[1]); }},
      {"MseLossSum", {S{5}, S{5}}, [](const Inputs& x) { return mse_loss(x[0], x[1], R::Sum); }},
      {"MseLossNone",
       {S{2, 3}, S{2, 3}},
       [](const Inputs& x) { return mse_loss(x[0], x[1], R::None); }},
      // Targets in (0, 1) from a second random input, so their gradient is checked too.
      {"BceWithLogits",
       {S{3, 4}, S{3, 4}},
       [](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], sigmoid(x[1])); }},
      {"BceWithLogitsSum",
       {S{6}, S{6}},
       [](const Inputs& x) {
         return binary_cross_entropy_with_logits(x[0], sigmoid(x[1]), R::Sum);
       }},
      {"BceWithLogitsPosWeight",
       {S{3, 4}, S{3, 4}, S{4}},
       [](const Inputs& x) {
         return binary_cross_entropy_with_logits(x[0], sigmoid(x[1]), R::None, exp(x[2]));
       }},
  };
}

}  // namespace sinter::testing
