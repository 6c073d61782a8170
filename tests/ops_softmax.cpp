// Op-table rows of the softmax family (see op_table.h): softmax, log_softmax, cross_entropy and
// nll_loss. Class targets are fixed i64 vectors built inside each fn (the inputs are random
// floating tensors); -100 is the default ignore_index. Class weights are exp of an input, so that
// their gradient is checked too.
#include "op_table.h"

namespace sinter::testing {
namespace {

CrossEntropyOptions ce(Reduction r, int64_t ignore_index = -100, double smoothing = 0.0,
                       Tensor weight = Tensor()) {
  return {.reduction = r,
          .ignore_index = ignore_index,
          .label_smoothing = smoothing,
          .weight = std::move(weight)};
}

}  // namespace

std::vector<OpRow> softmax_rows() {
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
             return cross_entropy(x[0], index_of({1, 0, 4, 2}, {4}, x[0]));
           }},
      {.name = "CrossEntropySum",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({3, 3, 0, 1}, {4}, x[0]), ce(R::Sum));
           }},
      {.name = "CrossEntropyNone",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({2, 4, 1, 0}, {4}, x[0]), ce(R::None));
           }},
      {.name = "CrossEntropyIgnoreIndex",
       .shapes = {S{5, 4}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({1, -100, 3, -100, 0}, {5}, x[0]));
           }},
      {.name = "CrossEntropyIgnoreClassSum",
       .shapes = {S{4, 3}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({2, 0, 1, 2}, {4}, x[0]), ce(R::Sum, 2));
           }},
      {.name = "CrossEntropyLabelSmoothing",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({1, -100, 4, 2}, {4}, x[0]),
                                  ce(R::Mean, -100, 0.1));
           }},
      {.name = "CrossEntropySmoothingNone",
       .shapes = {S{3, 6}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({5, 0, 2}, {3}, x[0]), ce(R::None, -100, 0.3));
           }},
      // (N, C, d): class dim 1 is strided.
      {.name = "CrossEntropySpatial",
       .shapes = {S{2, 4, 3}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({0, 3, -100, 2, 1, 1}, {2, 3}, x[0]),
                                  ce(R::Mean, -100, 0.2));
           }},
      {.name = "CrossEntropySpatialNone",
       .shapes = {S{2, 3, 2, 2}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({0, 2, 1, 1, 2, -100, 0, 2}, {2, 2, 2}, x[0]),
                                  ce(R::None));
           }},
      {.name = "CrossEntropySpatialSum",
       .shapes = {S{3, 4, 2}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({3, 0, 1, 2, 2, 3}, {3, 2}, x[0]), ce(R::Sum));
           }},
      {.name = "NllLoss",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return nll_loss(log_softmax(x[0], 1), index_of({1, 0, -100, 2}, {4}, x[0]));
           }},
      {.name = "NllLossSpatialNone",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return nll_loss(log_softmax(x[0], 1), index_of({0, 1, 2, 2, 1, 0, 0, 1}, {2, 4}, x[0]),
                             ce(R::None));
           }},
      {.name = "NllLossSum",
       .shapes = {S{3, 4}},
       .fn =
           [](const Inputs& x) {
             return nll_loss(log_softmax(x[0], 1), index_of({3, 1, 1}, {3}, x[0]), ce(R::Sum, 1));
           }},
      {.name = "CrossEntropyWeightedMean",
       .shapes = {S{4, 5}, S{5}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({1, -100, 4, 1}, {4}, x[0]),
                                  ce(R::Mean, -100, 0.0, exp(x[1])));
           }},
      {.name = "CrossEntropyWeightedSmoothedSpatial",
       .shapes = {S{2, 3, 4}, S{3}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({0, 2, -100, 1, 1, 2, 0, 0}, {2, 4}, x[0]),
                                  ce(R::Mean, -100, 0.2, exp(x[1])));
           }},
      {.name = "CrossEntropyWeightedSmoothedNone",
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             return cross_entropy(x[0], index_of({3, -100, 0}, {3}, x[0]),
                                  ce(R::None, -100, 0.3, exp(x[1])));
           }},
      {.name = "NllLossWeightedMean",
       .shapes = {S{4, 3}, S{3}},
       .fn =
           [](const Inputs& x) {
             return nll_loss(log_softmax(x[0], 1), index_of({2, 0, -100, 2}, {4}, x[0]),
                             ce(R::Mean, -100, 0.0, exp(x[1])));
           }},
      {.name = "NllLossWeightedSum",
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             return nll_loss(log_softmax(x[0], 1), index_of({3, 1, 0}, {3}, x[0]),
                             ce(R::Sum, -100, 0.0, exp(x[1])));
           }},
  };
}

}  // namespace sinter::testing
