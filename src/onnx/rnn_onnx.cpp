// The recurrent layers as ONNX's own LSTM, GRU and RNN operators (opset 17), one node per layer
// with both directions in it: PyTorch's gate blocks reordered to ONNX's (LSTM i f g o -> i o f c,
// GRU r z n -> z r h, with linear_before_reset as PyTorch's GRU computes), the biases of the input
// and the state side by side, and the node's (T, D, B, H) output laid out as Sinter's (T, B, D H).
#include <string>
#include <vector>

#include "onnx/exporter.h"
#include "sinter/autograd.h"
#include "sinter/nn/rnn.h"
#include "sinter/ops.h"

namespace sinter::onnx::detail {

namespace {

// t's gate blocks of `hidden` rows (dim 0) in the order `order` (PyTorch's block indices).
Tensor reorder_gates(const Tensor& t, int64_t hidden, const std::vector<int64_t>& order) {
  std::vector<Tensor> blocks;
  for (int64_t b : order) blocks.push_back(t.narrow(0, b * hidden, hidden));
  return cat(blocks, 0);
}

}  // namespace

Value rnn_layer(Exporter& ex, nn::RNNBase& m, const Site& s, const Value& x) {
  SINTER_CHECK(m.options.proj_size == 0, "onnx::export_model: ", where(s.path),
               " (LSTM) has proj_size ", m.options.proj_size,
               ", which ONNX's LSTM operator does not have");
  SINTER_CHECK(x.t.dim() == 3, "onnx::export_model: ", where(s.path), " (", m.name(),
               ") exports with a batched input (T, B, I) or (B, T, I), got shape ",
               shape_str(x.t.shape()));
  const Tensor y = m.forward(x.t);  // checks the input
  NoGradGuard ng;
  const int64_t hidden = m.hidden_size, d = m.directions();
  const bool lstm = m.kind == nn::RNNBase::Kind::Lstm, gru = m.kind == nn::RNNBase::Kind::Gru;
  const std::vector<int64_t> order = lstm  ? std::vector<int64_t>{0, 3, 1, 2}
                                     : gru ? std::vector<int64_t>{1, 0, 2}
                                           : std::vector<int64_t>{0};
  const int64_t gates = static_cast<int64_t>(order.size());
  const auto transpose = [&](const std::string& v, std::vector<int64_t> perm) {
    return ex.node_with("Transpose", {v}, s.scope,
                        [&](pb::NodeProto* n) { attr(n, "perm", perm); });
  };
  std::string v = m.options.batch_first ? transpose(x.name, {1, 0, 2}) : x.name;
  for (int64_t layer = 0; layer < m.options.num_layers; ++layer) {
    std::vector<Tensor> w, r, b;
    for (int64_t dir = 0; dir < d; ++dir) {
      const nn::RNNBase::Weights& p = m.weights[layer * d + dir];
      w.push_back(reorder_gates(p.w_ih.detach(), hidden, order));
      r.push_back(reorder_gates(p.w_hh.detach(), hidden, order));
      const Tensor zero = zeros({gates * hidden}, {.dtype = p.w_ih.dtype()});
      b.push_back(cat({p.b_ih.defined() ? reorder_gates(p.b_ih.detach(), hidden, order) : zero,
                       p.b_hh.defined() ? reorder_gates(p.b_hh.detach(), hidden, order) : zero},
                      0));
    }
    const std::string sfx = "_l" + std::to_string(layer);
    const char* op = lstm ? "LSTM" : (gru ? "GRU" : "RNN");
    const std::string out = ex.node_with(
        op,
        {v, ex.constant(stack(w, 0), "weight_ih" + sfx),
         ex.constant(stack(r, 0), "weight_hh" + sfx), ex.constant(stack(b, 0), "bias" + sfx)},
        s.scope, [&](pb::NodeProto* n) {
          attr(n, "hidden_size", hidden);
          attr_string(n, "direction", d == 2 ? "bidirectional" : "forward");
          if (gru) attr(n, "linear_before_reset", int64_t{1});
          if (!lstm && !gru) {
            pb::AttributeProto* a = n->add_attribute();
            a->set_name("activations");
            a->set_type(pb::AttributeProto::STRINGS);
            for (int64_t dir = 0; dir < d; ++dir) {  // one per direction
              a->add_strings(m.kind == nn::RNNBase::Kind::RnnRelu ? "Relu" : "Tanh");
            }
          }
        });
    // Y (T, D, B, H) -> (T, B, D, H) -> (T, B, D H); dropout between layers is the identity here.
    v = ex.node("Reshape", {transpose(out, {0, 2, 1, 3}), ex.ints({0, 0, d * hidden})}, s.scope);
  }
  if (m.options.batch_first) v = transpose(v, {1, 0, 2});
  return {v, y};
}

}  // namespace sinter::onnx::detail
