// Tests of sinter/nn/activations.h: each layer against its op or formula, PReLU's parameter (its
// name, PyTorch's init, its gradient), Unflatten's shapes, ModuleDict's and ParameterList's
// state-dict names (PyTorch's: dict.key.weight, params.0), and their errors.
#include <string>
#include <utility>
#include <vector>

#include "sinter/nn.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;

std::vector<std::string> keys_of(const StateDict& sd) {
  std::vector<std::string> out;
  for (const auto& [k, v] : sd) out.push_back(k);
  return out;
}

TEST(NnActivations, LayersComputeTheirOps) {
  const Tensor x = randn({3, 5}) * 3.0;
  EXPECT_TRUE(all_close(nn::ELU()(x), elu(x), 0, 0));
  EXPECT_TRUE(all_close(nn::ELU(0.3)(x), elu(x, 0.3), 0, 0));
  EXPECT_TRUE(all_close(nn::SELU()(x), selu(x), 0, 0));
  EXPECT_TRUE(all_close(nn::Mish()(x), mish(x), 0, 0));
  EXPECT_TRUE(all_close(nn::Hardswish()(x), hardswish(x), 0, 0));
  EXPECT_TRUE(all_close(nn::Hardsigmoid()(x), hardsigmoid(x), 0, 0));
  EXPECT_TRUE(all_close(nn::Softmax(1)(x), softmax(x, 1), 0, 0));
  EXPECT_TRUE(all_close(nn::Softmax(0)(x), softmax(x, 0), 0, 0));
  EXPECT_TRUE(all_close(nn::LogSoftmax(-1)(x), log_softmax(x, 1), 0, 0));
  // Identity hands back the input itself.
  EXPECT_EQ(nn::Identity()(x).data_ptr(), x.data_ptr());
  EXPECT_EQ(nn::ELU(0.3).alpha, 0.3);
  EXPECT_EQ(nn::Softmax(2).dim, 2);
  for (const auto& m : std::vector<std::shared_ptr<nn::Module>>{
           std::make_shared<nn::ELU>(), std::make_shared<nn::SELU>(), std::make_shared<nn::Mish>(),
           std::make_shared<nn::Hardswish>(), std::make_shared<nn::Hardsigmoid>(),
           std::make_shared<nn::Softmax>(1), std::make_shared<nn::LogSoftmax>(1),
           std::make_shared<nn::Identity>(), std::make_shared<nn::Unflatten>(1, Shape{5})}) {
    EXPECT_TRUE(m->parameters().empty()) << m->name();
  }
}

TEST(NnActivations, PReLUHasAWeightOfPyTorchsInit) {
  nn::PReLU shared;
  ASSERT_EQ(shared.named_parameters().size(), 1u);
  EXPECT_EQ(shared.named_parameters()[0].first, "weight");
  EXPECT_EQ(shared.weight.shape(), (Shape{1}));
  EXPECT_TRUE(all_close(shared.weight, full({1}, 0.25), 0, 0));
  nn::PReLU channels(3, 0.1);
  EXPECT_EQ(keys_of(channels.state_dict()), std::vector<std::string>{"weight"});
  EXPECT_TRUE(all_close(channels.weight, full({3}, 0.1), 0, 0));
  // The formula per channel of (N, C, L), and the weight's gradient: the sum of x g where x <= 0.
  {
    NoGradGuard ng;
    channels.weight.copy_(from_vector<float>({0.5f, -1.0f, 2.0f}));
  }
  const Tensor x = from_vector<float>({-2, 1, -1, 3, -4, 0, 5, -1, -3, 2, 1, -2}, {2, 3, 2});
  const Tensor y = channels(x);
  EXPECT_TRUE(all_close(
      y, from_vector<float>({-1, 1, 1, 3, -8, 0, 5, -0.5f, 3, 2, 1, -4}, {2, 3, 2}), 0, 0));
  sum(y).backward();
  EXPECT_TRUE(all_close(channels.weight.grad(), from_vector<float>({-3, -4, -6}), 0, 0));
  // reset_parameters() fills init again.
  channels.reset_parameters();
  EXPECT_TRUE(all_close(channels.weight, full({3}, 0.1), 0, 0));
}

TEST(NnActivations, UnflattenSplitsADim) {
  const Tensor x = arange(24.0).reshape({2, 12});
  EXPECT_EQ(nn::Unflatten(1, {3, 4})(x).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(nn::Unflatten(-1, {2, -1, 3})(x).shape(), (Shape{2, 2, 2, 3}));
  EXPECT_EQ(nn::Unflatten(0, {1, 2})(x).shape(), (Shape{1, 2, 12}));
  // The inverse of Flatten, values in place.
  const Tensor img = randn({2, 3, 4, 5});
  EXPECT_TRUE(all_close(nn::Unflatten(1, {3, 4, 5})(nn::Flatten()(img)), img, 0, 0));
  EXPECT_TRUE(all_close(nn::Unflatten(1, {3, 4})(x).reshape({2, 12}), x, 0, 0));
}

TEST(NnActivations, ModuleDictNamesItsModulesByKey) {
  auto dict = std::make_shared<nn::ModuleDict>(
      std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
          {"proj", std::make_shared<nn::Linear>(4, 3)}, {"act", std::make_shared<nn::PReLU>()}});
  dict->insert("head", nn::Linear(3, 2, false));
  nn::Module root;
  root.register_module("dict", dict);
  EXPECT_EQ(keys_of(root.state_dict()),
            (std::vector<std::string>{"dict.act.weight", "dict.head.weight", "dict.proj.bias",
                                      "dict.proj.weight"}));
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"proj", "act", "head"}));
  EXPECT_EQ(dict->size(), 3u);
  EXPECT_TRUE(dict->contains("act"));
  EXPECT_FALSE(dict->contains("missing"));
  EXPECT_EQ((*dict)["head"]->name(), "Linear");
  EXPECT_EQ(dict->at<nn::Linear>("proj")->out_features, 3);
  // The owner runs the modules it picks.
  const Tensor y = (*dict)["head"]->forward(
      dict->at<nn::PReLU>("act")->forward((*dict)["proj"]->forward(randn({5, 4}))));
  EXPECT_EQ(y.shape(), (Shape{5, 2}));
  EXPECT_TRUE(nn::ModuleDict().empty());
}

TEST(NnActivations, ParameterListNamesItsParametersByIndex) {
  auto list = std::make_shared<nn::ParameterList>(std::vector<Tensor>{zeros({2}), ones({3, 1})});
  const Tensor third = list->push_back(full({4}, 2.0));
  nn::Module root;
  root.register_module("params", list);
  EXPECT_EQ(keys_of(root.state_dict()),
            (std::vector<std::string>{"params.0", "params.1", "params.2"}));
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[1].shape(), (Shape{3, 1}));
  EXPECT_EQ((*list)[2].data_ptr(), third.data_ptr());
  EXPECT_TRUE(third.requires_grad());
  EXPECT_EQ(root.parameters().size(), 3u);
  EXPECT_TRUE(nn::ParameterList().empty());
}

TEST(NnActivationsErrors, NameTheLayerAndTheValues) {
  expect_error([] { nn::PReLU(0); }, {"PReLU", "num_parameters", "0"});
  expect_error(
      [] {
        nn::PReLU(3)(zeros({2, 4}));
      },
      {"prelu", "weight of 3 elements", "4 channels"});
  expect_error([] { nn::Unflatten(1, {}); }, {"Unflatten", "sizes is empty"});
  expect_error([] { nn::Unflatten(1, {-1, 2, -1}); }, {"Unflatten", "[-1, 2, -1]", "one -1"});
  expect_error([] { nn::Unflatten(1, {-2, 3}); }, {"Unflatten", "[-2, 3]"});
  expect_error(
      [] {
        nn::Unflatten(1, {5, 2})(zeros({2, 12}));
      },
      {"Unflatten", "[5, 2]", "dim 1 of size 12", "[2, 12]"});
  expect_error([] { nn::Unflatten(1, {5, -1})(zeros({2, 12})); }, {"Unflatten", "[5, -1]"});
  expect_error(
      [] {
        nn::Unflatten(2, {2, 6})(zeros({2, 12}));
      },
      {"Unflatten", "dim 2 is out of range", "[2, 12]"});
  expect_error([] { nn::Softmax(2)(zeros({2, 3})); }, {"softmax", "dim 2"});
  nn::ModuleDict dict;
  dict.insert("a", nn::ReLU());
  expect_error([&] { dict["b"]; }, {"ModuleDict", "no module 'b'", "keys: a"});
  expect_error([&] { dict.at<nn::Linear>("a"); }, {"ModuleDict", "'a' is a ReLU"});
  expect_error([&] { dict.insert("a", nn::Tanh()); },
               {"ModuleDict", "\"a\"", "already registered"});
  expect_error([&] { dict.insert("x.y", nn::Tanh()); }, {"ModuleDict", "contains '.'"});
  expect_error([&] { nn::ModuleDict()["k"]; }, {"ModuleDict", "no module 'k'", "keys: none"});
  expect_error([&] { dict.forward(zeros({1})); }, {"ModuleDict"});
  nn::ParameterList list;
  list.push_back(zeros({2}));
  expect_error([&] { list[1]; }, {"ParameterList", "index 1", "1 parameters"});
  expect_error([&] { list.push_back(zeros({2}, {.dtype = DType::i64})); },
               {"ParameterList", "dtype i64"});
}

}  // namespace
}  // namespace sinter
