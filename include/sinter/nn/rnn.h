// The recurrent layers RNN, LSTM and GRU: layers, bidirectional, dropout between layers,
// batch_first, initial states, an LSTM's projection (proj_size) and padded batches of sequences of
// several lengths, with PyTorch's parameter names, shapes, gate order and initialization, so that
// state dicts load both ways.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinter/nn/module.h"
#include "sinter/ops.h"

namespace sinter::nn {

enum class RNNNonlinearity { Tanh, Relu };

// PyTorch's arguments after input_size and hidden_size.
struct RNNOptions {
  int64_t num_layers = 1;
  RNNNonlinearity nonlinearity = RNNNonlinearity::Tanh;  // RNN only
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // on each layer's output but the last, in training
  bool bidirectional = false;
  int64_t proj_size = 0;  // LSTM only: h = weight_hr h, of proj_size < hidden_size features
};

// What a recurrent layer returns: output (T, B, D * H_out), or (B, T, D * H_out) with batch_first,
// or (T, D * H_out) for an unbatched input; h (L * D, B, H_out) the last state of each layer and
// direction (layer-major); c the LSTM's last cell states (L * D, B, H), undefined for the others.
// H_out is proj_size where set, else hidden_size; D is 2 when bidirectional.
struct RNNOutput {
  Tensor output, h, c;
};

// The layers' shared run: the input projection of a whole sequence as one GEMM per layer and
// direction, then per step a GEMM of the state and the cell's fused pointwise step (Note [rnn cell
// steps] in src/kern/rnn.h).
class RNNBase : public Module {
 public:
  enum class Kind { RnnTanh, RnnRelu, Lstm, Gru };

  // x: (T, B, input_size) ((B, T, input_size) with batch_first) or unbatched (T, input_size). h0
  // (L * D, B, H_out) and, for an LSTM, c0 (L * D, B, hidden_size) (without B when unbatched) or
  // undefined for zeros. lengths: B i64 values in [1, T] for a padded batch (what
  // pack_padded_sequence takes): sequence b runs its first lengths[b] steps, forward and backward,
  // its state stops there, and its outputs past that are zeros (pad_packed_sequence's, to length
  // T).
  RNNOutput run(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor(),
                const Tensor& lengths = Tensor());
  // The output of run(x).
  Tensor forward(const Tensor& x) override;
  // Every weight and bias ~ uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
  void reset_parameters();

  // One layer and direction's parameters (PyTorch's weight_ih_l{k}[_reverse], ...): w_ih (G H,
  // in), w_hh (G H, H_out), b_ih and b_hh (G H) unless bias is off, w_hr (proj_size, H) for a
  // projected LSTM; G is 4 (LSTM: i, f, g, o), 3 (GRU: r, z, n) or 1.
  struct Weights {
    Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
  };

  Kind kind;
  int64_t input_size, hidden_size;
  RNNOptions options;
  std::vector<Weights> weights;  // [layer * D + direction]

  int64_t directions() const { return options.bidirectional ? 2 : 1; }
  int64_t output_size() const { return options.proj_size > 0 ? options.proj_size : hidden_size; }

 protected:
  RNNBase(Kind kind, int64_t input_size, int64_t hidden_size, const RNNOptions& options);

 private:
  // One layer and direction over the whole sequence x (T, B, in) from state (h, c); returns its
  // outputs (T, B, H_out) and leaves the last state in h and c.
  Tensor run_direction(const Weights& w, const Tensor& x, bool reverse, Tensor& h, Tensor& c,
                       const Tensor& masks);
};

// Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (relu with RNNNonlinearity::Relu).
class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {});
  std::string name() const override { return "RNN"; }
};

// LSTM: gates i, f, g, o; c' = f c + i g, h' = o tanh(c'), then h' = W_hr h' with proj_size.
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {});
  std::string name() const override { return "LSTM"; }
};

// GRU: gates r, z, n; n = tanh(x_n + r (h W_hn^T + b_hn)), h' = (1 - z) n + z h.
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {});
  std::string name() const override { return "GRU"; }
};

}  // namespace sinter::nn
