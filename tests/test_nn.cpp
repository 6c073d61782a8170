// Tests of sinter::nn: Module (names, counts, state_dict round trips and all-or-nothing loading,
// train/eval, to, zero_grad), the initializers' statistics, a small MLP that learns, and, in the
// second part, the layers built on the convolution, pooling, normalization, dropout and embedding
// ops.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "sinter/nn.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;

using ::sinter::testing::expect_error;

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& e : named) out.push_back(e.first);
  return out;
}

int64_t count_params(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

// Copies of every state_dict value, to compare a module before and after an operation.
StateDict snapshot(const nn::Module& m) {
  StateDict out;
  for (const auto& [k, v] : m.state_dict()) out[k] = v.clone();
  return out;
}

void expect_same_values(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [k, v] : a) {
    ASSERT_TRUE(b.count(k)) << k;
    EXPECT_TRUE(all_close(v, b.at(k), 0.0, 0.0)) << k;
  }
}

// A two-level module, for dotted names: features.conv1.{weight,bias}, features.act, head.
struct Block : nn::Module {
  Block() {
    conv1 = register_module("conv1", nn::Linear(3, 4));
    register_module("act", nn::ReLU());
  }
  std::string name() const override { return "Block"; }
  Tensor forward(const Tensor& x) override { return relu(conv1->forward(x)); }
  std::shared_ptr<nn::Linear> conv1;
};

struct Net : nn::Module {
  Net() {
    features = register_module("features", std::make_shared<Block>());
    head = register_module("head", nn::Linear(4, 2, /*bias=*/false));
  }
  std::string name() const override { return "Net"; }
  Tensor forward(const Tensor& x) override { return head->forward(features->forward(x)); }
  std::shared_ptr<Block> features;
  std::shared_ptr<nn::Linear> head;
};

// ============================================================================================
// Part 1: Module and the layers built on matmul and elementwise ops.
// ============================================================================================

TEST(NnModule, LinearParameterNamesAndCount) {
  nn::Linear fc(784, 256);
  EXPECT_EQ(names_of(fc.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(fc.weight.shape(), (Shape{256, 784}));
  EXPECT_EQ(fc.bias.shape(), (Shape{256}));
  EXPECT_EQ(count_params(fc), 784 * 256 + 256);
  EXPECT_TRUE(fc.weight.requires_grad());
  EXPECT_TRUE(fc.parameters()[0].is_same(fc.weight));

  nn::Linear no_bias(3, 5, false);
  EXPECT_EQ(names_of(no_bias.named_parameters()), (std::vector<std::string>{"weight"}));
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(count_params(no_bias), 15);
}

TEST(NnModule, NestedDottedNames) {
  Net net;
  EXPECT_EQ(
      names_of(net.named_parameters()),
      (std::vector<std::string>{"features.conv1.weight", "features.conv1.bias", "head.weight"}));
  EXPECT_EQ(net.parameters(/*recurse=*/false).size(), 0u);
  EXPECT_EQ(net.children().size(), 2u);
  EXPECT_EQ(net.named_children()[0].first, "features");

  nn::Sequential seq{nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2)};
  EXPECT_EQ(names_of(seq.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(seq[1]->name(), "ReLU");
  EXPECT_EQ(seq.at<nn::Linear>(2)->out_features, 2);
}

TEST(NnModule, DesignExampleMatchesMatmulChain) {
  manual_seed(1);
  nn::Sequential model{nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10)};
  EXPECT_EQ(count_params(model), 784 * 256 + 256 + 256 * 10 + 10);
  Tensor x = randn({64, 784});
  Tensor y = model(x);
  auto l1 = model.at<nn::Linear>(0);
  auto l2 = model.at<nn::Linear>(2);
  Tensor expected;
  {
    NoGradGuard ng;
    Tensor h = relu(matmul(x, l1->weight.t()) + l1->bias);
    expected = matmul(h, l2->weight.t()) + l2->bias;
  }
  EXPECT_TRUE(all_close(y, expected, 1e-5, 1e-5));

  y.sum().backward();
  for (const auto& [n, p] : model.named_parameters()) {
    EXPECT_TRUE(p.grad().defined()) << n;
    EXPECT_EQ(p.grad().shape(), p.shape()) << n;
  }
  // d(sum y)/d b2 = the batch size for every output.
  EXPECT_TRUE(all_close(l2->bias.grad(), full({10}, 64.0), 1e-4, 0.0));
}

TEST(NnModule, SequentialSharesModulesGivenByPointer) {
  auto shared = std::make_shared<nn::Linear>(3, 3);
  nn::Sequential a{shared, nn::Tanh()};
  nn::ModuleList list;
  list.push_back(shared);
  list.push_back(nn::Sigmoid());
  EXPECT_EQ(list.size(), 2u);
  EXPECT_TRUE(a[0] == list[0]);
  EXPECT_TRUE(a.parameters()[0].is_same(shared->weight));
  EXPECT_TRUE(list.parameters()[0].is_same(shared->weight));
  // An empty Sequential is the identity.
  nn::Sequential empty;
  Tensor x = randn({2, 3});
  EXPECT_TRUE(empty(x).is_same(x));
}

// Regression: a module added with register_module became a child, so its parameters were
// trained, but Sequential's forward ran only what push_back had added.
TEST(NnModule, SequentialRunsModulesAddedByRegisterModule) {
  nn::Sequential seq{nn::Linear(3, 4)};
  auto head = seq.register_module("head", nn::Linear(4, 2));
  ASSERT_EQ(seq.size(), 2u);
  EXPECT_TRUE(seq[1] == head);
  manual_seed(5);
  const Tensor x = randn({5, 3});
  const Tensor y = seq(x);
  EXPECT_EQ(y.shape(), (Shape{5, 2}));
  EXPECT_TRUE(all_close(y, (*head)(seq.at<nn::Linear>(0)->forward(x)), 0.0, 0.0));
  seq.push_back(nn::ReLU());  // after a named child: the next index
  EXPECT_EQ(seq.named_children().back().first, "2");
  EXPECT_EQ(seq(x).shape(), (Shape{5, 2}));
}

TEST(NnModule, TiedParametersAppearOnce) {
  nn::Linear a(4, 4);
  struct Tied : nn::Module {};
  Tied tied;
  tied.register_parameter("w1", a.weight);
  tied.register_parameter("w2", a.weight);
  EXPECT_EQ(tied.parameters().size(), 1u);
  EXPECT_EQ(tied.state_dict().size(), 2u);
}

TEST(NnModule, StateDictRoundTripIntoFreshModel) {
  manual_seed(2);
  nn::Sequential a{nn::Linear(5, 7), nn::ReLU(), nn::Linear(7, 3)};
  nn::Sequential b{nn::Linear(5, 7), nn::ReLU(), nn::Linear(7, 3)};
  Tensor x = randn({4, 5});
  ASSERT_FALSE(all_close(a(x), b(x), 1e-3, 0.0));

  const std::vector<Tensor> b_params = b.parameters();
  StateDict sd = a.state_dict();
  EXPECT_EQ(sd.size(), 4u);
  // The state dict aliases the module's storage and is detached.
  EXPECT_EQ(sd.at("0.weight").data_ptr(), a.at<nn::Linear>(0)->weight.data_ptr());
  EXPECT_FALSE(sd.at("0.weight").requires_grad());

  LoadResult r = b.load_state_dict(sd);
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  EXPECT_TRUE(all_close(b(x), a(x), 0.0, 0.0));
  // Loading copied values into the same tensors (optimizers keep working) ...
  const std::vector<Tensor> after = b.parameters();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(after[i].is_same(b_params[i]));
  EXPECT_TRUE(b.parameters()[0].requires_grad());
  // ... and no storage with a.
  EXPECT_NE(b.parameters()[0].data_ptr(), a.parameters()[0].data_ptr());
}

TEST(NnModule, StrictLoadErrorsLeaveModelUntouched) {
  manual_seed(3);
  nn::Sequential src{nn::Linear(3, 4), nn::Linear(4, 2)};
  nn::Sequential dst{nn::Linear(3, 4), nn::Linear(4, 2)};
  const StateDict before = snapshot(dst);

  StateDict missing = src.state_dict();
  missing.erase("1.bias");
  expect_error([&] { dst.load_state_dict(missing); },
               {"load_state_dict", "missing keys", "1.bias"});
  expect_same_values(before, snapshot(dst));

  StateDict unexpected = src.state_dict();
  unexpected["2.weight"] = zeros({1});
  expect_error([&] { dst.load_state_dict(unexpected); },
               {"load_state_dict", "unexpected keys", "2.weight"});
  expect_same_values(before, snapshot(dst));

  StateDict shape = src.state_dict();
  shape["0.weight"] = zeros({4, 4});
  expect_error([&] { dst.load_state_dict(shape); }, {"0.weight", "[4, 4]", "[4, 3]"});
  expect_same_values(before, snapshot(dst));

  StateDict dtype = src.state_dict();
  dtype["1.weight"] = dtype["1.weight"].to(DType::f64);
  expect_error([&] { dst.load_state_dict(dtype); }, {"1.weight", "f64", "f32"});
  expect_same_values(before, snapshot(dst));

  // Several problems are reported together.
  StateDict many = src.state_dict();
  many.erase("0.bias");
  many["extra"] = zeros({1});
  many["1.bias"] = zeros({3});
  expect_error([&] { dst.load_state_dict(many); }, {"0.bias", "extra", "1.bias", "[3]"});
  expect_same_values(before, snapshot(dst));

  // Not strict: key problems are returned and the rest is loaded; shapes are still checked.
  LoadResult r = dst.load_state_dict(missing, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"1.bias"}));
  EXPECT_TRUE(r.unexpected_keys.empty());
  EXPECT_TRUE(all_close(dst.state_dict().at("0.weight"), src.state_dict().at("0.weight"), 0, 0));
  EXPECT_TRUE(all_close(dst.state_dict().at("1.bias"), before.at("1.bias"), 0, 0));
  expect_error([&] { dst.load_state_dict(shape, false); }, {"0.weight", "[4, 4]"});
}

TEST(NnModule, TrainEvalPropagates) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.features->is_training());
  EXPECT_FALSE(net.features->conv1->is_training());
  EXPECT_FALSE(net.head->is_training());
  net.features->train();
  EXPECT_TRUE(net.features->conv1->is_training());
  EXPECT_FALSE(net.is_training());
  net.train(true);
  EXPECT_TRUE(net.head->is_training());
}

TEST(NnModule, ToDtypeKeepsIdentityAndIntegerBuffers) {
  manual_seed(4);
  nn::Sequential model{nn::Linear(3, 4), nn::BatchNorm2d(4)};
  const std::vector<Tensor> params = model.parameters();
  const std::vector<float> w = model.at<nn::Linear>(0)->weight.to_vector<float>();
  model.at<nn::Linear>(0)->weight.set_grad(ones({4, 3}));

  model.to(DType::f64);
  const std::vector<Tensor> after = model.parameters();
  ASSERT_EQ(after.size(), params.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].is_same(params[i]));
    EXPECT_EQ(after[i].dtype(), DType::f64);
    EXPECT_TRUE(after[i].requires_grad());
  }
  const std::vector<double> w64 = model.at<nn::Linear>(0)->weight.to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(static_cast<float>(w64[i]), w[i]);
  EXPECT_EQ(model.at<nn::Linear>(0)->weight.grad().dtype(), DType::f64);
  auto bn = model.at<nn::BatchNorm2d>(1);
  EXPECT_EQ(bn->running_mean.dtype(), DType::f64);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), DType::i64);
  EXPECT_EQ(model.state_dict().at("1.num_batches_tracked").dtype(), DType::i64);

  // Computes in f64 now.
  Tensor y = model.at<nn::Linear>(0)->forward(randn({2, 3}, {.dtype = DType::f64}));
  EXPECT_EQ(y.dtype(), DType::f64);

  model.to(DType::bf16);
  EXPECT_EQ(model.at<nn::Linear>(0)->weight.dtype(), DType::bf16);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), DType::i64);

  expect_error([&] { model.to(DType::i64); }, {"to", "i64", "not floating"});
  model.to(Device::cpu());
  EXPECT_TRUE(model.parameters()[0].is_same(params[0]));
}

TEST(NnModule, FailedMoveLeavesModuleUntouched) {
  if (testing::has_cuda()) GTEST_SKIP() << "needs a machine where CUDA tensors cannot be made";
  nn::Sequential model{nn::Linear(3, 4), nn::BatchNorm2d(4)};
  const StateDict before = snapshot(model);
  EXPECT_THROW(model.to(Device::cuda()), Error);
  for (const auto& [k, v] : model.state_dict()) EXPECT_TRUE(v.device().is_cpu()) << k;
  expect_same_values(before, snapshot(model));
}

TEST(NnModule, ZeroGrad) {
  nn::Linear fc(3, 2);
  fc(randn({5, 3})).sum().backward();
  ASSERT_TRUE(fc.weight.grad().defined());
  fc.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(fc.weight.grad().defined());
  EXPECT_EQ(fc.weight.grad().abs().sum().item<float>(), 0.0f);
  fc.zero_grad();
  EXPECT_FALSE(fc.weight.grad().defined());
  EXPECT_FALSE(fc.bias.grad().defined());
}

TEST(NnModule, TinyMlpLearnsWithManualSgd) {
  manual_seed(5);
  nn::Sequential model{nn::Linear(4, 32), nn::Tanh(), nn::Linear(32, 1)};
  Tensor x = randn({128, 4});
  // A smooth target: y = sin(x0) + x1 * x2 - 0.5 x3.
  Tensor y;
  {
    Tensor c = x.t();
    y = (sin(c[0]) + c[1] * c[2] - 0.5 * c[3]).unsqueeze(1);
  }
  auto loss_fn = [&] {
    Tensor d = model(x) - y;
    return (d * d).mean();
  };
  const float initial = loss_fn().item<float>();
  float last = initial;
  for (int step = 0; step < 50; ++step) {
    model.zero_grad();
    Tensor loss = loss_fn();
    loss.backward();
    last = loss.item<float>();
    NoGradGuard ng;
    for (Tensor& p : model.parameters()) p.add_(p.grad(), -0.1);
  }
  EXPECT_LT(last, 0.5f * initial) << "initial " << initial << ", after 50 steps " << last;
}

TEST(NnModule, ActivationsAndFlatten) {
  Tensor x = randn({2, 3, 4});
  EXPECT_TRUE(all_close(nn::ReLU()(x), relu(x), 0, 0));
  EXPECT_TRUE(all_close(nn::Tanh()(x), tanh(x), 0, 0));
  EXPECT_TRUE(all_close(nn::Sigmoid()(x), sigmoid(x), 0, 0));
  EXPECT_TRUE(all_close(nn::GELU(Activation::GeluTanh)(x), gelu(x, Activation::GeluTanh), 0, 0));
  EXPECT_TRUE(all_close(nn::GELU()(x), gelu(x), 0, 0));
  EXPECT_EQ(nn::Flatten()(x).shape(), (Shape{2, 12}));
  EXPECT_EQ(nn::Flatten(0)(x).shape(), (Shape{24}));
  EXPECT_EQ(nn::Flatten(0, 1)(x).shape(), (Shape{6, 4}));
  EXPECT_EQ(nn::Flatten(-2, -1)(x).shape(), (Shape{2, 12}));
}

TEST(NnModule, DefaultInitOfLinear) {
  manual_seed(6);
  nn::Linear fc(400, 300);
  const double bound = 1.0 / std::sqrt(400.0);
  for (const Tensor& t : {fc.weight, fc.bias}) {
    const double m = t.abs().max().item<float>();
    EXPECT_LE(m, bound);
    EXPECT_GT(m, 0.9 * bound);
  }
  // Same seed, same init.
  manual_seed(6);
  nn::Linear again(400, 300);
  EXPECT_TRUE(all_close(again.weight, fc.weight, 0, 0));
}

TEST(NnModule, ErrorsNameTheModuleAndValues) {
  nn::Linear fc(784, 10);
  expect_error(
      [&] {
        fc(zeros({2, 10}));
      },
      {"Linear: expected input with last dim 784", "got shape [2, 10]"});
  expect_error([&] { fc(Tensor()); }, {"Linear", "undefined"});
  expect_error([] { nn::Linear(0, 3); }, {"Linear", "positive"});

  struct Bare : nn::Module {};
  Bare m;
  m.register_parameter("w", zeros({2}));
  expect_error([&] { m.register_parameter("w", zeros({2})); }, {"\"w\"", "already registered"});
  expect_error([&] { m.register_buffer("w", zeros({2})); }, {"already registered"});
  expect_error([&] { m.register_parameter("a.b", zeros({2})); }, {"a.b", "'.'"});
  expect_error([&] { m.register_parameter("", zeros({2})); }, {"empty"});
  expect_error([&] { m.register_parameter("i", zeros({2}, {.dtype = DType::i64})); },
               {"i64", "floating"});
  expect_error([&] { m.register_buffer("u", Tensor()); }, {"\"u\"", "undefined"});
  Tensor leaf = zeros({2}, {.requires_grad = true});
  expect_error([&] { m.register_parameter("nl", leaf * 2.0); }, {"\"nl\"", "leaf"});
  expect_error([&] { m(zeros({1})); }, {"no forward"});

  nn::ModuleList list{nn::ReLU(), nn::Linear(2, 2)};
  expect_error([&] { list[2]; }, {"ModuleList", "index 2", "2 modules"});
  expect_error([&] { list.at<nn::Linear>(0); }, {"ModuleList::at", "ReLU"});
  expect_error([&] { list(zeros({1})); }, {"ModuleList", "no forward"});

  expect_error([] { nn::GELU gelu(Activation::None); }, {"GELU", "got Activation 0"});
  expect_error([] { nn::Dropout(1.5); }, {"Dropout", "1.5"});
  expect_error([] { nn::Flatten(2)(zeros({3, 4})); }, {"Flatten", "start_dim 2", "[3, 4]"});
  expect_error([] { nn::Conv2d(6, 4, 3, {.groups = 4}); }, {"Conv2d", "groups 4", "6"});
  expect_error([] { nn::Conv2d(3, 4, {3, 0}); }, {"Conv2d", "kernel_size"});
  expect_error([] { nn::Embedding(10, 4, 10); }, {"Embedding", "padding_idx 10"});
  expect_error([] { nn::BatchNorm2d(0); }, {"BatchNorm2d", "num_features"});
  expect_error([] { nn::LayerNorm(Shape{}); }, {"LayerNorm", "empty"});
  expect_error([] { nn::MaxPool2d(2, {.stride = 2, .padding = 2}); }, {"MaxPool2d", "padding"});
}

// --- initializers ---

TEST(NnInit, FansAndGains) {
  auto [fi, fo] = nn::init::calculate_fan_in_and_fan_out(zeros({16, 3, 5, 5}));
  EXPECT_EQ(fi, 75);
  EXPECT_EQ(fo, 400);
  auto [li, lo] = nn::init::calculate_fan_in_and_fan_out(zeros({10, 20}));
  EXPECT_EQ(li, 20);
  EXPECT_EQ(lo, 10);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("linear"), 1.0);
  expect_error([] { nn::init::calculate_gain("swish"); }, {"calculate_gain", "swish"});
  expect_error([] { nn::init::calculate_fan_in_and_fan_out(zeros({5})); },
               {"calculate_fan_in_and_fan_out", "[5]"});
  Tensor i = zeros({3, 3}, {.dtype = DType::i64});
  expect_error([&] { nn::init::normal_(i); }, {"normal_", "i64"});
}

// Max |w|, mean and standard deviation of a tensor's values.
struct Stats {
  double max_abs = 0, mean = 0, std = 0;
};
Stats stats_of(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  Stats s;
  for (double x : v) {
    s.max_abs = std::max(s.max_abs, std::abs(x));
    s.mean += x;
  }
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size()));
  return s;
}

TEST(NnInit, KaimingAndXavierStatistics) {
  manual_seed(7);
  const int64_t fan_in = 512, fan_out = 256;
  Tensor w = zeros({fan_out, fan_in}, {.requires_grad = true});
  const Tensor same = w;
  for (double a : {0.0, std::sqrt(5.0)}) {
    nn::init::kaiming_uniform_(w, a);
    const double bound = std::sqrt(6.0 / ((1.0 + a * a) * fan_in));
    Stats s = stats_of(w);
    EXPECT_LE(s.max_abs, bound) << "a " << a;
    EXPECT_GT(s.max_abs, 0.99 * bound) << "a " << a;
    EXPECT_NEAR(s.std, bound / std::sqrt(3.0), 0.02 * bound) << "a " << a;
    EXPECT_NEAR(s.mean, 0.0, 0.01 * bound) << "a " << a;
  }
  EXPECT_TRUE(w.is_same(same));
  EXPECT_TRUE(w.requires_grad());

  nn::init::kaiming_uniform_(w, 0.0, nn::init::FanMode::FanOut, "relu");
  EXPECT_LE(stats_of(w).max_abs, std::sqrt(6.0 / fan_out));
  EXPECT_GT(stats_of(w).max_abs, 0.99 * std::sqrt(6.0 / fan_out));

  nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::FanIn, "relu");
  EXPECT_NEAR(stats_of(w).std, std::sqrt(2.0 / fan_in), 0.02 * std::sqrt(2.0 / fan_in));

  const double xstd = std::sqrt(2.0 / (fan_in + fan_out));
  nn::init::xavier_uniform_(w, 2.0);
  EXPECT_LE(stats_of(w).max_abs, 2.0 * std::sqrt(3.0) * xstd);
  EXPECT_GT(stats_of(w).max_abs, 0.99 * 2.0 * std::sqrt(3.0) * xstd);
  nn::init::xavier_normal_(w);
  EXPECT_NEAR(stats_of(w).std, xstd, 0.02 * xstd);

  nn::init::uniform_(w, 2.0, 3.0);
  Stats u = stats_of(w);
  EXPECT_NEAR(u.mean, 2.5, 0.01);
  EXPECT_LE(u.max_abs, 3.0);
  nn::init::normal_(w, -1.0, 0.5);
  Stats n = stats_of(w);
  EXPECT_NEAR(n.mean, -1.0, 0.01);
  EXPECT_NEAR(n.std, 0.5, 0.01);
  nn::init::constant_(w, 0.25);
  EXPECT_EQ(stats_of(w).mean, 0.25);
  nn::init::ones_(w);
  EXPECT_EQ(stats_of(w).std, 0.0);
  nn::init::zeros_(w);
  EXPECT_EQ(stats_of(w).max_abs, 0.0);
}

// The moments of the truncated normal, from its density: with alpha, beta the standardized
// bounds and Z = Phi(beta) - Phi(alpha), mean = mu + s (phi(alpha) - phi(beta)) / Z and
// var = s^2 (1 + (alpha phi(alpha) - beta phi(beta)) / Z - ((phi(alpha) - phi(beta)) / Z)^2).
TEST(NnInit, TruncNormalHasTheTruncatedMoments) {
  const auto phi = [](double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); };
  const auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  manual_seed(11);
  Tensor w = zeros({256, 512}, {.requires_grad = true});
  const Tensor same = w;
  struct Case {
    double mean, std, a, b;
  };
  for (const Case c :
       {Case{0, 1, -2, 2}, Case{0.5, 0.02, 0.47, 0.6}, Case{0, 1, 3, 4}, Case{1, 2, 1, INFINITY}}) {
    nn::init::trunc_normal_(w, c.mean, c.std, c.a, c.b);
    const double al = (c.a - c.mean) / c.std, be = (c.b - c.mean) / c.std;
    const double z = cdf(be) - cdf(al);
    const double pa = phi(al), pb = std::isinf(be) ? 0.0 : phi(be);
    const double mean = c.mean + c.std * (pa - pb) / z;
    const double bt = std::isinf(be) ? 0.0 : be * pb;
    const double sd = c.std * std::sqrt(1 + (al * pa - bt) / z - std::pow((pa - pb) / z, 2));
    const Tensor v = w.detach().to(DType::f64);
    EXPECT_GE(min(v).item<double>(), c.a);
    EXPECT_LE(max(v).item<double>(), c.b);
    Stats s = stats_of(w);
    EXPECT_NEAR(s.mean, mean, 0.01 * sd) << c.a << " " << c.b;
    EXPECT_NEAR(s.std, sd, 0.01 * sd) << c.a << " " << c.b;
  }
  // A quantile: P(x < 1) within [-2, 2] is (Phi(1) - Phi(-2)) / (Phi(2) - Phi(-2)).
  nn::init::trunc_normal_(w);
  const double below = lt(w.detach(), 1.0).to(DType::f64).mean().item<double>();
  EXPECT_NEAR(below, (cdf(1) - cdf(-2)) / (cdf(2) - cdf(-2)), 0.005);
  EXPECT_TRUE(w.is_same(same));
  EXPECT_TRUE(w.requires_grad());
  Generator g1(5), g2(5);
  Tensor x = zeros({100}), y = zeros({100});
  nn::init::trunc_normal_(x, 0, 0.02, -0.04, 0.04, &g1);
  nn::init::trunc_normal_(y, 0, 0.02, -0.04, 0.04, &g2);
  EXPECT_TRUE(all_close(x, y, 0, 0));
  expect_error([&] { nn::init::trunc_normal_(x, 0, 1, 2, -2); }, {"trunc_normal_", "a = 2", "-2"});
  expect_error([&] { nn::init::trunc_normal_(x, 0, -1); }, {"trunc_normal_", "std -1"});
}

TEST(NnInit, GeneratorGivesReproducibleValues) {
  Generator g1(42), g2(42);
  Tensor a = empty({8, 8}), b = empty({8, 8}, {.dtype = DType::f64});
  nn::init::xavier_uniform_(a, 1.0, &g1);
  nn::init::xavier_uniform_(b, 1.0, &g2);
  EXPECT_TRUE(all_close(a, b.to(DType::f32), 1e-6, 0));
  nn::init::xavier_uniform_(a, 1.0, &g1);
  EXPECT_FALSE(all_close(a, b.to(DType::f32), 1e-6, 0));
}

// ============================================================================================
// Part 2: layers built on the conv, pooling, normalization, dropout and embedding ops.
// ============================================================================================

TEST(NnLayers, Conv2dMatchesMatmulForOneByOneKernel) {
  manual_seed(8);
  nn::Conv2d conv(3, 5, 1);
  EXPECT_EQ(names_of(conv.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(conv.weight.shape(), (Shape{5, 3, 1, 1}));
  Tensor x = randn({2, 3, 4, 6});
  Tensor y = conv(x);
  ASSERT_EQ(y.shape(), (Shape{2, 5, 4, 6}));
  // (N, C, H, W) -> (N, H, W, C) @ (C, O) -> (N, O, H, W)
  Tensor expected = (matmul(x.permute({0, 2, 3, 1}), conv.weight.reshape({5, 3}).t()) + conv.bias)
                        .permute({0, 3, 1, 2});
  EXPECT_TRUE(all_close(y, expected, 1e-5, 1e-5));

  nn::Conv2d strided(3, 4, 3, {.stride = 2, .padding = 1, .bias = false});
  EXPECT_EQ(strided.parameters().size(), 1u);
  EXPECT_EQ(strided(x).shape(), (Shape{2, 4, 2, 3}));
  expect_error(
      [&] {
        conv(randn({2, 4, 4, 4}));
      },
      {"Conv2d: expected input of shape (N, 3, H, W)", "[2, 4, 4, 4]"});
  expect_error([&] { conv(randn({3, 4, 4})); }, {"Conv2d", "[3, 4, 4]"});
}

TEST(NnLayers, Conv2dDefaultInitBound) {
  manual_seed(9);
  nn::Conv2d conv(16, 32, 3);
  const double bound = 1.0 / std::sqrt(16.0 * 9.0);
  EXPECT_LE(stats_of(conv.weight).max_abs, bound);
  EXPECT_GT(stats_of(conv.weight).max_abs, 0.95 * bound);
  EXPECT_LE(stats_of(conv.bias).max_abs, bound);
}

TEST(NnLayers, BatchNorm2dTrainAndEval) {
  manual_seed(10);
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(names_of(bn.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(names_of(bn.named_buffers()),
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  Tensor x = randn({4, 3, 5, 5}) * 2.0 + 1.0;
  Tensor y = bn(x);
  // Per-channel batch statistics of x: mean and unbiased variance over (N, H, W).
  Tensor mean = x.mean({0, 2, 3});
  Tensor var_unbiased = var(x, {0, 2, 3});
  EXPECT_TRUE(all_close(y.mean({0, 2, 3}), zeros({3}), 1e-5, 0));
  EXPECT_TRUE(all_close(var(y, {0, 2, 3}, 0), ones({3}), 1e-3, 0));
  EXPECT_TRUE(all_close(bn.running_mean, mean * 0.1, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(bn.running_var, var_unbiased * 0.1 + 0.9, 1e-5, 1e-5));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);

  bn.eval();
  Tensor z = bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  Tensor rm = bn.running_mean.reshape({1, 3, 1, 1}), rv = bn.running_var.reshape({1, 3, 1, 1});
  EXPECT_TRUE(all_close(z, (x - rm) / sqrt(rv + 1e-5), 1e-4, 1e-4));

  nn::BatchNorm2d plain(3, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_TRUE(plain.buffers().empty());
  plain.eval();
  EXPECT_TRUE(all_close(plain(x), y, 1e-5, 1e-5));
  expect_error(
      [&] {
        bn(randn({4, 2, 5, 5}));
      },
      {"BatchNorm2d: expected input of shape (N, 3, H, W)", "[4, 2, 5, 5]"});
  bn.train();
  expect_error([&] { bn(randn({1, 3, 1, 1})); }, {"BatchNorm2d", "more than one value"});
}

TEST(NnLayers, LayerNormMatchesFormula) {
  manual_seed(11);
  nn::LayerNorm ln({4, 6});
  EXPECT_EQ(ln.weight.shape(), (Shape{4, 6}));
  Tensor x = randn({3, 4, 6});
  Tensor mean = x.mean({1, 2}, true);
  Tensor expected = (x - mean) / sqrt(var(x, {1, 2}, 0, true) + 1e-5);
  EXPECT_TRUE(all_close(ln(x), expected, 1e-4, 1e-4));
  nn::LayerNorm bare({6}, 1e-5, false);
  EXPECT_TRUE(bare.parameters().empty());
  // bias = false: the weight alone (PyTorch's bias=False), kept by the inference copy.
  nn::LayerNorm weighted({6}, 1e-5, true, false);
  EXPECT_EQ(weighted.parameters().size(), 1u);
  EXPECT_FALSE(weighted.bias.defined());
  nn::init::normal_(weighted.weight);
  const Tensor rows = randn({3, 6});
  EXPECT_TRUE(all_close(weighted(rows), layer_norm(rows, {6}, weighted.weight, {}), 0, 0));
  auto fused = nn::fuse_for_inference(weighted);
  EXPECT_EQ(fused->parameters().size(), 1u);
  EXPECT_TRUE(all_close((*fused)(rows), weighted(rows), 0, 0));
  expect_error(
      [&] {
        ln(randn({3, 6, 4}));
      },
      {"LayerNorm: expected input with trailing dims [4, 6]", "[3, 6, 4]"});
}

TEST(NnLayers, RMSNormMatchesFormula) {
  manual_seed(14);
  nn::RMSNorm norm({4, 6}, 1e-6);
  EXPECT_EQ(norm.weight.shape(), (Shape{4, 6}));
  EXPECT_EQ(norm.named_parameters().size(), 1U);  // weight, no bias
  norm.weight.detach().copy_(randn({4, 6}));
  Tensor x = randn({3, 4, 6});
  Tensor expected = x / sqrt((x * x).mean({1, 2}, true) + 1e-6) * norm.weight.detach();
  EXPECT_TRUE(all_close(norm(x), expected, 1e-5, 1e-5));
  nn::RMSNorm bare({6}, std::nullopt, false);
  EXPECT_TRUE(bare.parameters().empty());
  Tensor y = randn({2, 6});
  EXPECT_TRUE(all_close(bare(y), rms_norm(y, {6}), 0, 0));
  expect_error(
      [&] {
        norm(randn({3, 6, 4}));
      },
      {"RMSNorm: expected input with trailing dims [4, 6]", "[3, 6, 4]"});
  expect_error([&] { nn::RMSNorm({4}, -1.0); }, {"RMSNorm", "eps", "-1"});
  expect_error([&] { nn::RMSNorm({0}); }, {"RMSNorm", "non-positive"});
}

TEST(NnLayers, DropoutFollowsTrainingFlag) {
  manual_seed(12);
  nn::Dropout drop(0.25);
  Tensor x = ones({100, 100});
  Tensor y = drop(x);
  std::vector<float> v = y.to_vector<float>();
  int64_t zeros_seen = 0;
  for (float e : v) {
    if (e == 0.0f) {
      ++zeros_seen;
    } else {
      EXPECT_FLOAT_EQ(e, 1.0f / 0.75f);
    }
  }
  EXPECT_NEAR(static_cast<double>(zeros_seen) / v.size(), 0.25, 0.03);
  drop.eval();
  EXPECT_TRUE(all_close(drop(x), x, 0, 0));
}

TEST(NnLayers, EmbeddingLooksUpRowsAndSkipsPadding) {
  manual_seed(13);
  nn::Embedding emb(10, 4, /*padding_idx=*/-1);
  EXPECT_EQ(emb.padding_idx, 9);
  EXPECT_EQ(stats_of(emb.weight.select(0, 9)).max_abs, 0.0);
  Tensor idx = from_vector<int64_t>({1, 9, 3, 1}, {2, 2});
  Tensor y = emb(idx);
  ASSERT_EQ(y.shape(), (Shape{2, 2, 4}));
  EXPECT_TRUE(all_close(y.select(0, 0).select(0, 0), emb.weight.select(0, 1), 0, 0));
  EXPECT_TRUE(all_close(y.select(0, 1).select(0, 0), emb.weight.select(0, 3), 0, 0));
  y.sum().backward();
  Tensor g = emb.weight.grad();
  EXPECT_TRUE(all_close(g.select(0, 1), full({4}, 2.0), 0, 0));
  EXPECT_TRUE(all_close(g.select(0, 9), zeros({4}), 0, 0));
  expect_error([&] { emb(zeros({2})); }, {"Embedding", "i64", "f32"});

  // Default init is normal(0, 1).
  nn::Embedding big(1000, 64);
  Stats s = stats_of(big.weight);
  EXPECT_NEAR(s.mean, 0.0, 0.02);
  EXPECT_NEAR(s.std, 1.0, 0.02);
}

TEST(NnLayers, Pooling) {
  Tensor x = arange(16).reshape({1, 1, 4, 4});
  EXPECT_EQ(nn::MaxPool2d(2)(x).to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(nn::AvgPool2d(2)(x).to_vector<float>(), (std::vector<float>{2.5, 4.5, 10.5, 12.5}));
  EXPECT_EQ(nn::MaxPool2d(3, {.stride = 1})(x).shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(nn::AdaptiveAvgPool2d(1)(x).to_vector<float>(), (std::vector<float>{7.5}));
  EXPECT_EQ(nn::AdaptiveAvgPool2d({2, 1})(x).shape(), (Shape{1, 1, 2, 1}));
  EXPECT_EQ(nn::MaxPool2d(2)(x.select(0, 0)).shape(), (Shape{1, 2, 2}));
  expect_error(
      [] {
        nn::MaxPool2d(2)(zeros({4, 4}));
      },
      {"MaxPool2d: input must be 3-D (C, H, W) or 4-D (N, C, H, W)", "[4, 4]"});
  expect_error([] { nn::AvgPool2d(2)(zeros({4})); }, {"AvgPool2d", "[4]"});
  expect_error(
      [] {
        nn::AdaptiveAvgPool2d(1)(zeros({1, 1, 1, 1, 1}));
      },
      {"AdaptiveAvgPool2d", "[1, 1, 1, 1, 1]"});
}

// A 3x3 convolution (padding 1) to 4 channels, batch norm, ReLU, `pool`, flatten, and a Linear
// from the `flat` features left to 3 outputs.
template <class Pool>
nn::Sequential small_cnn(int64_t in_channels, Pool pool, int64_t flat) {
  return nn::Sequential{nn::Conv2d(in_channels, 4, 3, {.padding = 1}),
                        nn::BatchNorm2d(4),
                        nn::ReLU(),
                        std::move(pool),
                        nn::Flatten(),
                        nn::Linear(flat, 3)};
}

TEST(NnLayers, SmallCnnRoundTripAndDtype) {
  manual_seed(14);
  auto make = [] { return small_cnn(1, nn::MaxPool2d(2), 4 * 4 * 4); };
  nn::Sequential a = make();
  Tensor x = randn({2, 1, 8, 8});
  Tensor y = a(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  y.sum().backward();
  for (const auto& [n, p] : a.named_parameters()) EXPECT_TRUE(p.grad().defined()) << n;

  const StateDict sd = a.state_dict();
  const std::set<std::string> keys = [&] {
    std::set<std::string> k;
    for (const auto& e : sd) k.insert(e.first);
    return k;
  }();
  EXPECT_EQ(keys, (std::set<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                         "1.running_mean", "1.running_var", "1.num_batches_tracked",
                                         "5.weight", "5.bias"}));
  nn::Sequential b = make();
  b.load_state_dict(sd);
  a.eval();
  b.eval();
  EXPECT_TRUE(all_close(b(x), a(x), 0, 0));
  EXPECT_EQ(b.at<nn::BatchNorm2d>(1)->num_batches_tracked.item<int64_t>(), 1);

  b.to(DType::f64);
  EXPECT_EQ(b.at<nn::BatchNorm2d>(1)->num_batches_tracked.dtype(), DType::i64);
  EXPECT_TRUE(all_close(b(x.to(DType::f64)), a(x).to(DType::f64), 1e-5, 1e-5));
  // Loading an f32 state dict into the f64 model is a dtype mismatch.
  expect_error([&] { b.load_state_dict(sd); }, {"0.weight", "f32", "f64"});
}

// --- CUDA ---

TEST(CudaNn, ToDeviceMovesEverythingAndKeepsIdentity) {
  SINTER_REQUIRE_CUDA();
  manual_seed(15);
  nn::Sequential model{nn::Linear(6, 5), nn::ReLU(), nn::Linear(5, 2)};
  Tensor x = randn({3, 6});
  Tensor expected = model(x);
  const std::vector<Tensor> params = model.parameters();
  model.to(Device::cuda());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(model.parameters()[i].is_same(params[i]));
    EXPECT_TRUE(params[i].is_cuda());
  }
  Tensor y = model(x.cuda());
  EXPECT_TRUE(all_close(y.cpu(), expected, 1e-5, 1e-5));
  y.sum().backward();
  EXPECT_TRUE(params[0].grad().is_cuda());
  // Loading a CPU state dict into the CUDA model copies across devices.
  nn::Sequential cpu_model{nn::Linear(6, 5), nn::ReLU(), nn::Linear(5, 2)};
  model.load_state_dict(cpu_model.state_dict());
  EXPECT_TRUE(all_close(model(x.cuda()).cpu(), cpu_model(x), 1e-5, 1e-5));
  model.to(Device::cpu());
  EXPECT_TRUE(params[0].grad().device().is_cpu());
}

TEST(CudaNn, CnnMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  manual_seed(16);
  nn::Sequential model = small_cnn(2, nn::AdaptiveAvgPool2d(1), 4);
  nn::Sequential gpu = small_cnn(2, nn::AdaptiveAvgPool2d(1), 4);
  gpu.load_state_dict(model.state_dict());
  gpu.to(Device::cuda());
  Tensor x = randn({3, 2, 6, 6});
  EXPECT_TRUE(all_close(gpu(x.cuda()).cpu(), model(x), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(gpu.at<nn::BatchNorm2d>(1)->running_var.cpu(),
                        model.at<nn::BatchNorm2d>(1)->running_var, 1e-5, 1e-5));
}

}  // namespace
}  // namespace sinter

namespace sinter {
namespace {

// Every layer checks its input's shape at forward and says what it expected.
TEST(NnLayers, EveryLayerRejectsAWrongInputShape) {
  auto fails = [](nn::Module&& m, const Tensor& x, std::initializer_list<std::string> frags) {
    try {
      m(x);
      ADD_FAILURE() << m.name() << " accepted shape " << shape_str(x.shape());
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const std::string& f : frags) {
        EXPECT_NE(msg.find(f), std::string::npos) << "\"" << f << "\" is not in: " << msg;
      }
    }
  };
  fails(nn::Linear(4, 2), zeros({3, 5}), {"Linear", "[3, 5]"});
  fails(nn::Conv2d(3, 4, 3), zeros({2, 5, 8, 8}), {"Conv2d", "(N, 3, H, W)", "[2, 5, 8, 8]"});
  fails(nn::Conv2d(3, 4, 3), zeros({2, 3, 8}), {"Conv2d", "[2, 3, 8]"});
  fails(nn::Conv2d(3, 4, 5), zeros({1, 3, 2, 2}), {"conv2d"});
  fails(nn::BatchNorm2d(4), zeros({2, 3, 5, 5}), {"3"});
  fails(nn::BatchNorm2d(4), zeros({2, 4}), {"[2, 4]"});
  fails(nn::LayerNorm({6}), zeros({2, 5}), {"LayerNorm", "[6]", "[2, 5]"});
  fails(nn::Embedding(10, 3), zeros({4}), {"Embedding", "i64", "f32"});
  fails(nn::MaxPool2d(2), zeros({4, 4}), {"[4, 4]"});
  fails(nn::AvgPool2d(3), zeros({1, 1, 2, 2}), {"avg_pool2d"});
  fails(nn::AdaptiveAvgPool2d(2), zeros({2, 3}), {"AdaptiveAvgPool2d", "[2, 3]"});
  fails(nn::Flatten(1), zeros({3}), {"Flatten", "[3]"});
}

}  // namespace
}  // namespace sinter
