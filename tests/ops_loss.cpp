// Op-table rows of the losses built from other ops (see op_table.h): mse_loss and
// binary_cross_entropy_with_logits.
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
  };
}

}  // namespace sinter::testing
