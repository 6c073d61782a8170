// The recurrent layers of sinter/nn/rnn.h: construction (PyTorch's parameters and checks) and the
// run over layers, directions and steps.
#include "sinter/nn/rnn.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "sinter/autograd.h"
#include "sinter/nn/init.h"

namespace sinter::nn {

namespace {

const char* kind_name(RNNBase::Kind k) {
  switch (k) {
    case RNNBase::Kind::Lstm:
      return "LSTM";
    case RNNBase::Kind::Gru:
      return "GRU";
    default:
      return "RNN";
  }
}

int64_t gate_count(RNNBase::Kind k) {
  return k == RNNBase::Kind::Lstm ? 4 : (k == RNNBase::Kind::Gru ? 3 : 1);
}

RNNBase::Kind rnn_kind(const RNNOptions& o) {
  return o.nonlinearity == RNNNonlinearity::Relu ? RNNBase::Kind::RnnRelu : RNNBase::Kind::RnnTanh;
}

}  // namespace

RNNBase::RNNBase(Kind kind, int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : kind(kind), input_size(input_size), hidden_size(hidden_size), options(options) {
  const char* name = kind_name(kind);
  SINTER_CHECK(input_size > 0 && hidden_size > 0, name,
               ": input_size and hidden_size must be positive, got ", input_size, " and ",
               hidden_size);
  SINTER_CHECK(options.num_layers >= 1, name, ": num_layers must be positive, got ",
               options.num_layers);
  SINTER_CHECK(options.dropout >= 0.0 && options.dropout <= 1.0, name,
               ": dropout must be in [0, 1], got ", options.dropout);
  SINTER_CHECK(options.proj_size == 0 || kind == Kind::Lstm, name,
               ": proj_size is for LSTM only, got ", options.proj_size);
  SINTER_CHECK(options.proj_size >= 0 && options.proj_size < hidden_size, name,
               ": proj_size must be in [0, hidden_size ", hidden_size, "), got ",
               options.proj_size);
  SINTER_CHECK(options.nonlinearity == RNNNonlinearity::Tanh ||
                   (options.nonlinearity == RNNNonlinearity::Relu && kind != Kind::Lstm &&
                    kind != Kind::Gru),
               name, ": nonlinearity is for RNN only (tanh or relu)");
  const int64_t g = gate_count(kind) * hidden_size, d = directions(), out = output_size();
  for (int64_t layer = 0; layer < options.num_layers; ++layer) {
    for (int64_t dir = 0; dir < d; ++dir) {
      const std::string sfx = std::to_string(layer) + (dir == 1 ? "_reverse" : "");
      const int64_t in = layer == 0 ? input_size : out * d;
      Weights w;
      w.w_ih = register_parameter("weight_ih_l" + sfx, empty({g, in}));
      w.w_hh = register_parameter("weight_hh_l" + sfx, empty({g, out}));
      if (options.bias) {
        w.b_ih = register_parameter("bias_ih_l" + sfx, empty({g}));
        w.b_hh = register_parameter("bias_hh_l" + sfx, empty({g}));
      }
      if (options.proj_size > 0) {
        w.w_hr = register_parameter("weight_hr_l" + sfx, empty({options.proj_size, hidden_size}));
      }
      weights.push_back(w);
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (Weights& w : weights) {
    for (Tensor* t : {&w.w_ih, &w.w_hh, &w.b_ih, &w.b_hh, &w.w_hr}) {
      if (t->defined()) init::uniform_(*t, -bound, bound);
    }
  }
}

Tensor RNNBase::run_direction(const Weights& w, const Tensor& x, bool reverse, Tensor& h, Tensor& c,
                              const Tensor& masks) {
  const int64_t steps = x.size(0);
  const Tensor xp = linear(x, w.w_ih, w.b_ih);  // (T, B, G H): the whole sequence in one GEMM
  std::vector<Tensor> outs(static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    const Tensor gx = xp.select(0, t), gh = linear(h, w.w_hh, w.b_hh);
    Tensor h_next, c_next;
    switch (kind) {
      case Kind::Lstm:
        std::tie(h_next, c_next) = lstm_cell_step(add(gx, gh), c);
        if (w.w_hr.defined()) h_next = linear(h_next, w.w_hr);
        break;
      case Kind::Gru:
        h_next = gru_cell_step(gx, gh, h);
        break;
      case Kind::RnnRelu:
        h_next = relu(add(gx, gh));
        break;
      case Kind::RnnTanh:
        h_next = tanh(add(gx, gh));
        break;
    }
    if (masks.defined()) {
      // Past its length a sequence keeps its state, and its output is zero.
      const Tensor m = masks.select(0, t);  // (B, 1) bool
      h_next = where(m, h_next, h);
      if (c_next.defined()) c_next = where(m, c_next, c);
      outs[t] = where(m, h_next, 0.0);
    } else {
      outs[t] = h_next;
    }
    h = h_next;
    c = c_next;
  }
  return stack(outs, 0);
}

RNNOutput RNNBase::run(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& lengths) {
  const char* op = kind_name(kind);
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK((x.dim() == 3 || x.dim() == 2) && x.size(x.dim() - 1) == input_size, op,
               ": expected input of shape (T, B, ", input_size, "), (B, T, ", input_size,
               ") with batch_first, or (T, ", input_size, "), got shape ", shape_str(x.shape()));
  const bool unbatched = x.dim() == 2;
  const Tensor xs = unbatched ? x.unsqueeze(1) : (options.batch_first ? x.transpose(0, 1) : x);
  const int64_t steps = xs.size(0), batch = xs.size(1), d = directions();
  const int64_t layers = options.num_layers, states = layers * d;
  const auto state = [&](const Tensor& s, int64_t size, const char* what) {
    if (!s.defined())
      return zeros({states, batch, size}, {.dtype = x.dtype(), .device = x.device()});
    const Shape want = unbatched ? Shape{states, size} : Shape{states, batch, size};
    SINTER_CHECK(s.shape() == want, op, ": ", what, " must have shape ", shape_str(want), ", got ",
                 shape_str(s.shape()));
    return unbatched ? s.unsqueeze(1) : s;
  };
  const Tensor h_init = state(h0, output_size(), "h0");
  Tensor c_init;
  if (kind == Kind::Lstm) {
    c_init = state(c0, hidden_size, "c0");
  } else {
    SINTER_CHECK(!c0.defined(), op, ": only an LSTM takes a cell state c0");
  }
  Tensor masks;  // (T, B, 1): step t of sequence b is real
  if (lengths.defined()) {
    SINTER_CHECK(lengths.dim() == 1 && lengths.size(0) == batch && lengths.dtype() == DType::i64,
                 op, ": lengths must be i64 of shape [", batch, "], got ", lengths.dtype(), " ",
                 shape_str(lengths.shape()));
    const Tensor len = lengths.cpu();
    if (batch > 0) {
      const auto lo = min(len).item<int64_t>(), hi = max(len).item<int64_t>();
      SINTER_CHECK(lo >= 1 && hi <= steps, op, ": lengths must be in [1, ", steps, "], got [", lo,
                   ", ", hi, "]");
    }
    masks = lt(arange(static_cast<double>(steps), {.dtype = DType::i64}).reshape({steps, 1, 1}),
               len.reshape({1, batch, 1}))
                .to(x.device());
  }
  Tensor layer_in = xs;
  std::vector<Tensor> h_last, c_last;
  for (int64_t layer = 0; layer < layers; ++layer) {
    std::vector<Tensor> outs;
    for (int64_t dir = 0; dir < d; ++dir) {
      Tensor h = h_init.select(0, layer * d + dir);
      Tensor c = c_init.defined() ? c_init.select(0, layer * d + dir) : Tensor();
      outs.push_back(run_direction(weights[layer * d + dir], layer_in, dir == 1, h, c, masks));
      h_last.push_back(h);
      if (c.defined()) c_last.push_back(c);
    }
    layer_in = d == 2 ? cat(outs, 2) : outs[0];
    if (options.dropout > 0.0 && is_training() && layer + 1 < layers) {
      layer_in = dropout(layer_in, options.dropout, true);
    }
  }
  RNNOutput r;
  r.output = unbatched ? layer_in.squeeze(1)
                       : (options.batch_first ? layer_in.transpose(0, 1).contiguous() : layer_in);
  r.h = stack(h_last, 0);
  if (!c_last.empty()) r.c = stack(c_last, 0);
  if (unbatched) {
    r.h = r.h.squeeze(1);
    if (r.c.defined()) r.c = r.c.squeeze(1);
  }
  return r;
}

Tensor RNNBase::forward(const Tensor& x) { return run(x).output; }

RNN::RNN(int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : RNNBase(rnn_kind(options), input_size, hidden_size, options) {}

LSTM::LSTM(int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : RNNBase(Kind::Lstm, input_size, hidden_size, options) {}

GRU::GRU(int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : RNNBase(Kind::Gru, input_size, hidden_size, options) {}

}  // namespace sinter::nn
