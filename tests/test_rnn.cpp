// The recurrent layers (sinter/nn/rnn.h): PyTorch's parameter names and values for the same
// weights, a two-layer bidirectional LSTM against a written-out cell loop (outputs and every
// gradient, f64), padded batches against each sequence run alone, batch_first and unbatched
// inputs, state dicts, errors, and CPU-vs-CUDA parity.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;

// Parameter k (in named_parameters() order) = 0.3 sin(j + 7k) for its elements j, the values the
// PyTorch side of PyTorchValues filled in; x = 0.5 cos(j), (T, B, I) = (3, 2, 3).
void fill_like_the_reference(nn::Module& m) {
  NoGradGuard ng;
  int64_t k = 0;
  for (auto& [name, p] : m.named_parameters()) {
    const Tensor j = arange(static_cast<double>(p.numel()), {.dtype = DType::f64});
    p.copy_(mul(sin(add(j, 7.0 * static_cast<double>(k))), 0.3).reshape(p.shape()));
    ++k;
  }
}

Tensor reference_input() {
  return mul(cos(arange(18.0, {.dtype = DType::f64})), 0.5).reshape({3, 2, 3});
}

// sum(y * sin(j)): the loss whose input gradient the reference printed.
Tensor weighted_sum(const Tensor& y) {
  return sum(mul(
      y, sin(arange(static_cast<double>(y.numel()), {.dtype = DType::f64})).reshape(y.shape())));
}

std::vector<double> values(const Tensor& t) { return t.contiguous().to_vector<double>(); }

void expect_values(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  const std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-10) << what << " " << i;
}

TEST(Rnn, ParameterNamesAsPyTorch) {
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  std::vector<std::string> names;
  for (const auto& [name, p] : lstm.named_parameters()) names.push_back(name);
  std::vector<std::string> want;
  for (const std::string l : {"0", "1"}) {
    for (const std::string sfx : {"", "_reverse"}) {
      for (const std::string w :
           {"weight_ih_l", "weight_hh_l", "bias_ih_l", "bias_hh_l", "weight_hr_l"}) {
        want.push_back(w + l + sfx);
      }
    }
  }
  EXPECT_EQ(names, want);
  // Shapes: layer 1 reads both directions' projected outputs.
  EXPECT_EQ(lstm.weights[0].w_ih.shape(), (Shape{16, 3}));
  EXPECT_EQ(lstm.weights[0].w_hh.shape(), (Shape{16, 2}));
  EXPECT_EQ(lstm.weights[0].w_hr.shape(), (Shape{2, 4}));
  EXPECT_EQ(lstm.weights[3].w_ih.shape(), (Shape{16, 4}));
  nn::GRU gru(5, 6, {.bias = false});
  EXPECT_EQ(gru.named_parameters().size(), 2u);
  EXPECT_EQ(gru.weights[0].w_ih.shape(), (Shape{18, 5}));
  // Every parameter within 1 / sqrt(hidden_size).
  manual_seed(testing::fresh_seed());
  nn::RNN rnn(3, 16, {.num_layers = 2});
  for (const auto& [name, p] : rnn.named_parameters()) {
    EXPECT_LE(abs(p).max().item<double>(), 0.25) << name;
  }
}

// Values printed by PyTorch 2 for nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2),
// nn.GRU(3, 4, num_layers=2, bidirectional=True) and nn.RNN(3, 4, nonlinearity='relu') in f64
// with the weights of fill_like_the_reference: the last output row, h_n (and c_n), and the
// gradient of weighted_sum(output) at the first input step.
TEST(Rnn, PyTorchValues) {
  {
    nn::LSTM m(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
    m.to(DType::f64);
    fill_like_the_reference(m);
    const Tensor x = reference_input().requires_grad_(true);
    const nn::RNNOutput r = m.run(x);
    expect_values(r.output.select(0, 2),
                  {0.118136607097, -0.157530292448, 0.084781386837, -0.105869798409, 0.117947121431,
                   -0.156933522988, 0.084822971746, -0.10544373001},
                  "LSTM output");
    expect_values(r.h,
                  {0.075763141011, -0.146220925085, 0.089593666046, -0.119738302258, 0.085521286893,
                   -0.133736922528, 0.063282823576, -0.10586012098, 0.118136607097, -0.157530292448,
                   0.117947121431, -0.156933522988, 0.137139567869, -0.178847400252, 0.137387850569,
                   -0.178778195683},
                  "LSTM h");
    const std::vector<double> c = values(r.c);
    ASSERT_EQ(r.c.shape(), (Shape{4, 2, 4}));
    EXPECT_NEAR(c[0], -0.333293132779, 1e-10);
    EXPECT_NEAR(c[31], -0.510921830656, 1e-10);
    weighted_sum(r.output).backward();
    expect_values(x.grad().select(0, 0),
                  {-0.000806860024, -0.000236566422, 0.000551225257, -0.000544267783,
                   -5.2742149e-05, 0.000487274373},
                  "LSTM dx");
  }
  {
    nn::GRU m(3, 4, {.num_layers = 2, .bidirectional = true});
    m.to(DType::f64);
    fill_like_the_reference(m);
    const Tensor x = reference_input().requires_grad_(true);
    const nn::RNNOutput r = m.run(x);
    expect_values(r.output.select(0, 2),
                  {-0.082290325425, -0.158991680234, -0.173278379529, -0.281672332923,
                   -0.002618788361, 0.040519581816, 0.124598945835, 0.245166209686, 0.054392535231,
                   -0.128158195664, -0.271859054683, -0.305617364652, -0.031129234868,
                   -0.006541117517, 0.189541078919, 0.267817987721},
                  "GRU output");
    const std::vector<double> h = values(r.h);
    EXPECT_NEAR(h[0], -0.292071673638, 1e-10);
    EXPECT_NEAR(h[31], 0.396974211942, 1e-10);
    weighted_sum(r.output).backward();
    expect_values(x.grad().select(0, 0),
                  {-0.044726213066, -0.013821814772, 0.029790296281, -0.080355398279,
                   -0.042418630976, 0.034517630023},
                  "GRU dx");
  }
  {
    nn::RNN m(3, 4, {.nonlinearity = nn::RNNNonlinearity::Relu});
    m.to(DType::f64);
    fill_like_the_reference(m);
    const Tensor x = reference_input().requires_grad_(true);
    const nn::RNNOutput r = m.run(x);
    expect_values(r.h, {0.838403636446, 0, 0, 0, 0.533413668668, 0.130280620199, 0, 0}, "RNN h");
    EXPECT_FALSE(r.c.defined());
    weighted_sum(r.output).backward();
    expect_values(x.grad().select(0, 0),
                  {0.047343406969, -0.207492257757, -0.271560497601, -0.052024481473,
                   0.015576028434, 0.068856009632},
                  "RNN dx");
  }
}

// A two-layer bidirectional LSTM by its formulas, with autograd through the plain ops: the output
// (T, B, 2H), h_n and c_n (4, B, H). p[layer * 2 + dir] = {w_ih, w_hh, b_ih, b_hh}.
std::tuple<Tensor, Tensor, Tensor> lstm_loop(const Tensor& x,
                                             const std::vector<std::vector<Tensor>>& p,
                                             int64_t hidden) {
  const int64_t steps = x.size(0), batch = x.size(1), h4 = hidden;
  Tensor in = x;
  std::vector<Tensor> hs, cs;
  for (int64_t layer = 0; layer < 2; ++layer) {
    std::vector<Tensor> dirs;
    for (int64_t dir = 0; dir < 2; ++dir) {
      const std::vector<Tensor>& w = p[layer * 2 + dir];
      Tensor h = zeros({batch, hidden}, {.dtype = DType::f64});
      Tensor c = zeros({batch, hidden}, {.dtype = DType::f64});
      std::vector<Tensor> outs(steps);
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t t = dir == 0 ? s : steps - 1 - s;
        const Tensor g = matmul(in.select(0, t), w[0].t()) + w[2] + matmul(h, w[1].t()) + w[3];
        const Tensor i = sigmoid(g.narrow(1, 0, h4)), f = sigmoid(g.narrow(1, h4, h4));
        const Tensor gg = tanh(g.narrow(1, 2 * h4, h4)), o = sigmoid(g.narrow(1, 3 * h4, h4));
        c = f * c + i * gg;
        h = o * tanh(c);
        outs[t] = h;
      }
      dirs.push_back(stack(outs, 0));
      hs.push_back(h);
      cs.push_back(c);
    }
    in = cat(dirs, 2);
  }
  return {in, stack(hs, 0), stack(cs, 0)};
}

TEST(Rnn, BidirectionalLstmMatchesAWrittenOutCellLoop) {
  manual_seed(testing::fresh_seed());
  nn::LSTM m(3, 5, {.num_layers = 2, .bidirectional = true});
  m.to(DType::f64);
  std::vector<std::vector<Tensor>> p;
  for (const auto& w : m.weights) {
    p.push_back({w.w_ih.detach().clone().requires_grad_(true),
                 w.w_hh.detach().clone().requires_grad_(true),
                 w.b_ih.detach().clone().requires_grad_(true),
                 w.b_hh.detach().clone().requires_grad_(true)});
  }
  const Tensor x = randn({4, 2, 3}, {.dtype = DType::f64});
  const Tensor x1 = x.clone().requires_grad_(true), x2 = x.clone().requires_grad_(true);
  const auto [want_y, want_h, want_c] = lstm_loop(x2, p, 5);
  const nn::RNNOutput got = m.run(x1);
  EXPECT_TRUE(all_close(got.output, want_y, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(got.h, want_h, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(got.c, want_c, 1e-12, 1e-12));
  // One loss over all three results reaches every parameter through both paths.
  const auto loss = [](const Tensor& y, const Tensor& h, const Tensor& c) {
    return weighted_sum(y) + sum(h * h) + sum(c * 0.5);
  };
  loss(got.output, got.h, got.c).backward();
  loss(want_y, want_h, want_c).backward();
  EXPECT_TRUE(all_close(x1.grad(), x2.grad(), 1e-12, 1e-12)) << "input gradient";
  for (size_t k = 0; k < m.weights.size(); ++k) {
    const auto& w = m.weights[k];
    const Tensor mine[] = {w.w_ih, w.w_hh, w.b_ih, w.b_hh};
    for (size_t j = 0; j < 4; ++j) {
      EXPECT_TRUE(all_close(mine[j].grad(), p[k][j].grad(), 1e-12, 1e-12))
          << "layer-direction " << k << ", parameter " << j;
    }
  }
}

TEST(Rnn, PaddedBatchesMatchEachSequenceRunAlone) {
  manual_seed(testing::fresh_seed());
  for (const bool lstm : {true, false}) {
    std::shared_ptr<nn::RNNBase> m;
    if (lstm) {
      m = std::make_shared<nn::LSTM>(3, 4, nn::RNNOptions{.num_layers = 2, .bidirectional = true});
    } else {
      m = std::make_shared<nn::GRU>(3, 4, nn::RNNOptions{.bidirectional = true});
    }
    m->to(DType::f64);
    const std::vector<int64_t> lengths = {3, 1, 4, 2};
    const Tensor x = randn({4, 4, 3}, {.dtype = DType::f64});
    const Tensor h0 = randn({m->options.num_layers * 2, 4, 4}, {.dtype = DType::f64});
    const Tensor c0 = lstm ? randn(h0.shape(), {.dtype = DType::f64}) : Tensor();
    const nn::RNNOutput all = m->run(x, h0, c0, from_vector<int64_t>(lengths, {4}));
    for (int64_t b = 0; b < 4; ++b) {
      SCOPED_TRACE("sequence " + std::to_string(b) + (lstm ? " LSTM" : " GRU"));
      const int64_t len = lengths[b];
      const Tensor xb = x.narrow(0, 0, len).narrow(1, b, 1);
      const nn::RNNOutput one =
          m->run(xb, h0.narrow(1, b, 1), lstm ? c0.narrow(1, b, 1) : Tensor());
      EXPECT_TRUE(
          all_close(all.output.narrow(0, 0, len).narrow(1, b, 1), one.output, 1e-12, 1e-12));
      EXPECT_TRUE(all_close(all.h.narrow(1, b, 1), one.h, 1e-12, 1e-12));
      if (lstm) {
        EXPECT_TRUE(all_close(all.c.narrow(1, b, 1), one.c, 1e-12, 1e-12));
      }
      if (len < 4) {
        EXPECT_EQ(abs(all.output.narrow(0, len, 4 - len).narrow(1, b, 1)).max().item<double>(),
                  0.0);
      }
    }
  }
}

TEST(Rnn, BatchFirstAndUnbatchedInputs) {
  manual_seed(testing::fresh_seed());
  nn::GRU seq_first(3, 4, {.num_layers = 2});
  nn::GRU batch_first(3, 4, {.num_layers = 2, .batch_first = true});
  batch_first.load_state_dict(seq_first.state_dict());
  const Tensor x = randn({5, 2, 3});
  const nn::RNNOutput a = seq_first.run(x), b = batch_first.run(x.transpose(0, 1));
  EXPECT_TRUE(all_close(b.output, a.output.transpose(0, 1), 0, 0));
  EXPECT_TRUE(all_close(b.h, a.h, 0, 0));
  // Unbatched: (T, I) with h0 (L, H).
  const nn::RNNOutput u = seq_first.run(x.select(1, 1));
  EXPECT_EQ(u.output.shape(), (Shape{5, 4}));
  EXPECT_EQ(u.h.shape(), (Shape{2, 4}));
  EXPECT_TRUE(all_close(u.output, a.output.select(1, 1), 1e-6, 1e-6));
  // forward() is run()'s output; dropout between layers only in training.
  nn::LSTM dropped(3, 4, {.num_layers = 2, .dropout = 0.5});
  dropped.eval();
  EXPECT_TRUE(all_close(dropped.forward(x), dropped.run(x).output, 0, 0));
}

TEST(Rnn, StateDictsLoadIntoAFreshLayer) {
  manual_seed(testing::fresh_seed());
  nn::LSTM a(3, 6, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  nn::LSTM b(3, 6, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  b.load_state_dict(a.state_dict());
  const Tensor x = randn({4, 2, 3});
  EXPECT_TRUE(all_close(a.forward(x), b.forward(x), 0, 0));
}

TEST(RnnErrors, Arguments) {
  expect_error([] { nn::LSTM(0, 4); }, {"LSTM", "input_size and hidden_size must be positive"});
  expect_error([] { nn::GRU(3, 4, {.num_layers = 0}); }, {"GRU", "num_layers", "0"});
  expect_error([] { nn::RNN(3, 4, {.dropout = 1.5}); }, {"RNN", "dropout", "1.5"});
  expect_error([] { nn::GRU(3, 4, {.proj_size = 2}); }, {"GRU", "proj_size is for LSTM only"});
  expect_error([] { nn::LSTM(3, 4, {.proj_size = 4}); },
               {"LSTM", "proj_size", "[0, hidden_size 4)"});
  expect_error([] { nn::LSTM(3, 4, {.nonlinearity = nn::RNNNonlinearity::Relu}); },
               {"LSTM", "nonlinearity is for RNN only"});
  nn::LSTM m(3, 4, {.num_layers = 2});
  expect_error(
      [&] {
        m.run(zeros({5, 2, 4}));
      },
      {"LSTM", "expected input of shape (T, B, 3)", "[5, 2, 4]"});
  expect_error(
      [&] {
        m.run(zeros({5, 2, 3}), zeros({1, 2, 4}));
      },
      {"LSTM", "h0 must have shape [2, 2, 4]", "[1, 2, 4]"});
  expect_error(
      [&] {
        m.run(zeros({5, 2, 3}), Tensor(), zeros({2, 2, 5}));
      },
      {"LSTM", "c0 must have shape [2, 2, 4]"});
  expect_error(
      [&] {
        m.run(zeros({5, 2, 3}), Tensor(), Tensor(), from_vector<int64_t>({5, 6}, {2}));
      },
      {"LSTM", "lengths must be in [1, 5]", "[5, 6]"});
  expect_error(
      [&] {
        m.run(zeros({5, 2, 3}), Tensor(), Tensor(), from_vector<int64_t>({5}, {1}));
      },
      {"LSTM", "lengths must be i64 of shape [2]"});
  nn::GRU g(3, 4);
  expect_error(
      [&] {
        g.run(zeros({5, 2, 3}), Tensor(), zeros({1, 2, 4}));
      },
      {"GRU", "only an LSTM takes a cell state"});
  // The cells and steps.
  expect_error(
      [] {
        lstm_cell_step(zeros({2, 8}), zeros({2, 3}));
      },
      {"lstm_cell_step", "expected an operand of shape [2, 12]", "[2, 8]"});
  expect_error(
      [] {
        lstm_cell_step(zeros({2, 8}), zeros({2, 2}, {.dtype = DType::f64}));
      },
      {"lstm_cell_step", "dtypes f32 and f64"});
  expect_error(
      [] {
        gru_cell_step(zeros({2, 9}), zeros({2, 6}), zeros({2, 3}));
      },
      {"gru_cell_step", "[2, 9]", "[2, 6]"});
  expect_error(
      [] {
        lstm_cell_step(zeros({2, 8}, {.dtype = DType::i64}), zeros({2, 2}, {.dtype = DType::i64}));
      },
      {"lstm_cell_step", "floating"});
  expect_error(
      [] {
        gru_cell(zeros({2, 4}), zeros({2, 3}), zeros({9, 5}), zeros({9, 3}));
      },
      {"gru_cell", "weight_ih must be [9, 4]", "[9, 5]"});
  expect_error(
      [] {
        rnn_tanh_cell(zeros({2, 4}), zeros({3, 3}), zeros({3, 4}), zeros({3, 3}));
      },
      {"rnn_tanh_cell", "state [3, 3] does not match input [2, 4]"});
  expect_error(
      [] {
        lstm_cell(zeros({2, 4}), zeros({2, 3}), zeros({2, 2}), zeros({12, 4}), zeros({12, 3}));
      },
      {"lstm_cell", "cell state [2, 2] differs"});
  expect_error(
      [] {
        gru_cell(zeros({2, 4}), zeros({2, 3}), zeros({9, 4}), zeros({9, 3}), zeros({8}));
      },
      {"gru_cell", "biases must be [9]", "[8]"});
}

// The layers on CUDA against the CPU: forward, h_n, c_n and every gradient.
TEST(CudaRnn, LayersMatchTheCpu) {
  SINTER_REQUIRE_CUDA();
  for (const bool lstm : {true, false}) {
    for (const DType dt : {DType::f32, DType::bf16}) {
      const uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE(std::string(lstm ? "LSTM " : "GRU ") + dtype_name(dt) + ", seed " +
                   std::to_string(seed));
      manual_seed(seed);
      const nn::RNNOptions o{.num_layers = 2, .bidirectional = true, .proj_size = lstm ? 3 : 0};
      std::shared_ptr<nn::RNNBase> c, g;
      if (lstm) {
        c = std::make_shared<nn::LSTM>(24, 40, o);
        g = std::make_shared<nn::LSTM>(24, 40, o);
      } else {
        c = std::make_shared<nn::GRU>(24, 40, o);
        g = std::make_shared<nn::GRU>(24, 40, o);
      }
      c->to(dt);
      g->to(dt);
      g->load_state_dict(c->state_dict());
      g->to(Device::cuda());
      const Tensor x = randn({7, 5, 24}).to(dt);
      const Tensor len = from_vector<int64_t>({7, 3, 5, 1, 6}, {5});
      testing::poison_cuda_cache();
      const nn::RNNOutput rc = c->run(x, Tensor(), Tensor(), len);
      const nn::RNNOutput rg = g->run(x.to(Device::cuda()), Tensor(), Tensor(), len);
      const double tol = dt == DType::f32 ? 1e-4 : 5e-2;
      EXPECT_TRUE(all_close(rg.output.cpu(), rc.output, tol, tol)) << "output";
      EXPECT_TRUE(all_close(rg.h.cpu(), rc.h, tol, tol)) << "h";
      const Tensor w = randn(rc.output.shape()).to(dt);
      sum(rc.output * w).backward();
      sum(rg.output * w.to(Device::cuda())).backward();
      const auto pc = c->named_parameters(), pg = g->named_parameters();
      for (size_t k = 0; k < pc.size(); ++k) {
        EXPECT_TRUE(all_close(pg[k].second.grad().cpu(), pc[k].second.grad(), tol, tol))
            << pc[k].first;
      }
    }
  }
}

}  // namespace
}  // namespace sinter
