// Op-table rows of the losses built from other ops (see op_table.h): mse_loss, the binary cross
// entropies, kl_div, the L1 family and the margin losses. Probabilities are sigmoid of an input,
// positive weights exp of one, so that every operand's gradient is checked.
#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> loss_rows() {
  return {
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
      {.name = "Bce",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return binary_cross_entropy(sigmoid(x[0]), sigmoid(x[1])); }},
      {.name = "BceWeightedSum",
       .shapes = {S{3, 4}, S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             return binary_cross_entropy(sigmoid(x[0]), sigmoid(x[1]), R::Sum, exp(x[2]));
           }},
      {.name = "BceWeightedNone",
       .shapes = {S{2, 3}, S{2, 3}, S{2, 1}},
       .fn =
           [](const Inputs& x) {
             return binary_cross_entropy(sigmoid(x[0]), sigmoid(x[1]), R::None, exp(x[2]));
           }},
      {.name = "KlDivBatchMean",
       .shapes = {S{3, 5}, S{3, 5}},
       .fn =
           [](const Inputs& x) {
             return kl_div(log_softmax(x[0], 1), softmax(x[1], 1), R::BatchMean);
           }},
      {.name = "KlDivMean",
       .shapes = {S{2, 3}, S{2, 3}},
       .fn = [](const Inputs& x) { return kl_div(x[0], sigmoid(x[1])); }},
      {.name = "KlDivLogTargetNone",
       .shapes = {S{2, 4}, S{2, 4}},
       .fn = [](const Inputs& x) { return kl_div(x[0], x[1], R::None, true); }},
      {.name = "L1Loss",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return l1_loss(x[0], x[1]); }},
      {.name = "L1LossNone",
       .shapes = {S{5}, S{5}},
       .fn = [](const Inputs& x) { return l1_loss(x[0], x[1], R::None); }},
      // Differences of either size against beta and delta (standard normal inputs).
      {.name = "SmoothL1Loss",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return smooth_l1_loss(x[0], x[1]); }},
      {.name = "SmoothL1LossBeta",
       .shapes = {S{2, 5}, S{2, 5}},
       .fn = [](const Inputs& x) { return smooth_l1_loss(x[0], x[1], R::Sum, 0.4); }},
      {.name = "SmoothL1LossBetaZero",
       .shapes = {S{6}, S{6}},
       .fn = [](const Inputs& x) { return smooth_l1_loss(x[0], x[1], R::None, 0.0); }},
      {.name = "HuberLoss",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return huber_loss(x[0], x[1]); }},
      {.name = "HuberLossDelta",
       .shapes = {S{2, 5}, S{2, 5}},
       .fn = [](const Inputs& x) { return huber_loss(x[0], x[1], R::None, 0.6); }},
      // A negative margin so that the y == -1 rows are mostly above it.
      {.name = "CosineEmbeddingLoss",
       .shapes = {S{4, 5}, S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return cosine_embedding_loss(x[0], x[1], index_of({1, -1, -1, 1}, {4}, x[0]), -0.5);
           }},
      {.name = "CosineEmbeddingLossOneSample",
       .shapes = {S{6}, S{6}},
       .fn =
           [](const Inputs& x) {
             return cosine_embedding_loss(x[0], x[1], index_of({-1}, {}, x[0]), -0.3, R::Sum);
           }},
      // y is a random input here, so that its gradient is checked too.
      {.name = "MarginRankingLoss",
       .shapes = {S{6}, S{6}, S{6}},
       .fn = [](const Inputs& x) { return margin_ranking_loss(x[0], x[1], x[2], 0.2); }},
      {.name = "MarginRankingLossBroadcastNone",
       .shapes = {S{3, 4}, S{3, 1}, S{1, 4}},
       .fn = [](const Inputs& x) { return margin_ranking_loss(x[0], x[1], x[2], 0.0, R::None); }},
  };
}

}  // namespace sinter::testing
