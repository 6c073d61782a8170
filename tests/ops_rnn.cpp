// Op-table rows of the recurrent cells (see op_table.h): the fused LSTM and GRU steps and PyTorch's
// cell functions built on them. Hidden sizes are small and odd so that units and gate blocks
// never line up with anything.
#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> rnn_rows() {
  return {
      // gates (B, 4H), c (B, H)
      {.name = "LstmCellStep",
       .shapes = {S{3, 12}, S{3, 3}},
       .fn =
           [](const Inputs& x) {
             auto [h, c] = lstm_cell_step(x[0], x[1]);
             return cat({h, c * 0.5}, 1);
           }},
      // The h output alone: c's gradient comes back undefined and counts as zeros.
      {.name = "LstmCellStepHOnly",
       .shapes = {S{2, 8}, S{2, 2}},
       .fn = [](const Inputs& x) { return std::get<0>(lstm_cell_step(x[0], x[1])); }},
      // gi, gh (B, 3H), h (B, H)
      {.name = "GruCellStep",
       .shapes = {S{3, 9}, S{3, 9}, S{3, 3}},
       .fn = [](const Inputs& x) { return gru_cell_step(x[0], x[1], x[2]); }},
      // x (B, I), h, c (B, H), w_ih (4H, I), w_hh (4H, H), b_ih, b_hh (4H)
      {.name = "LstmCell",
       .shapes = {S{2, 4}, S{2, 3}, S{2, 3}, S{12, 4}, S{12, 3}, S{12}, S{12}},
       .fn =
           [](const Inputs& x) {
             auto [h, c] = lstm_cell(x[0], x[1], x[2], x[3], x[4], x[5], x[6]);
             return cat({h, c}, 1);
           }},
      {.name = "LstmCellUnbatchedNoBias",
       .shapes = {S{4}, S{3}, S{3}, S{12, 4}, S{12, 3}},
       .fn =
           [](const Inputs& x) {
             auto [h, c] = lstm_cell(x[0], x[1], x[2], x[3], x[4]);
             return cat({h, c}, 0);
           }},
      {.name = "GruCell",
       .shapes = {S{2, 4}, S{2, 3}, S{9, 4}, S{9, 3}, S{9}, S{9}},
       .fn = [](const Inputs& x) { return gru_cell(x[0], x[1], x[2], x[3], x[4], x[5]); }},
      {.name = "RnnTanhCell",
       .shapes = {S{2, 4}, S{2, 3}, S{3, 4}, S{3, 3}, S{3}, S{3}},
       .fn = [](const Inputs& x) { return rnn_tanh_cell(x[0], x[1], x[2], x[3], x[4], x[5]); }},
      {.name = "RnnReluCell",
       .shapes = {S{2, 4}, S{2, 3}, S{3, 4}, S{3, 3}},
       .fn = [](const Inputs& x) { return rnn_relu_cell(x[0], x[1], x[2], x[3]); }},
  };
}

}  // namespace sinter::testing
