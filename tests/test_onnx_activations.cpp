// ONNX export of nn/activations.h's layers: each trained a moment (behind a Linear or a Conv2d,
// which give it trained inputs, or its own parameters in PReLU's case), exported, run in ONNX
// Runtime on another batch (tests/onnx_test_util.h), within 1e-5 relative of Sinter's outputs.
#include <memory>
#include <string>
#include <vector>

#include "onnx_test_util.h"
#include "test_util.h"

namespace sinter {
namespace {

using nn::Sequential;

// (N, ..., in) through a Linear(in, out), then `layer`.
template <class L>
std::function<std::shared_ptr<nn::Module>()> after_linear(int64_t in, int64_t out, L layer) {
  return [=] { return std::make_shared<Sequential>(nn::Linear(in, out), layer); };
}

// rows(rest) times 4: inputs past the activations' bends (hardswish's -3 and 3).
std::function<Tensor(int64_t)> wide_rows(Shape rest) {
  return [=](int64_t n) { return rows(rest)(n) * 4.0; };
}

std::vector<OnnxCase> activation_cases() {
  std::vector<OnnxCase> c;
  c.push_back({"ELU", after_linear(6, 6, nn::ELU(0.7)), wide_rows({6})});
  c.push_back({"SELU", after_linear(6, 6, nn::SELU()), wide_rows({6})});
  c.push_back({"Mish", after_linear(6, 6, nn::Mish()), wide_rows({6})});
  c.push_back({"Hardswish", after_linear(6, 6, nn::Hardswish()), wide_rows({6})});
  c.push_back({"Hardsigmoid", after_linear(6, 6, nn::Hardsigmoid()), wide_rows({6})});
  c.push_back({"PReLUShared", after_linear(5, 4, nn::PReLU()), rows({5})});
  c.push_back({"PReLUChannelsOfSequences", after_linear(5, 5, nn::PReLU(3)), rows({3, 5})});
  c.push_back({"PReLUChannelsOfImages",
               make<Sequential>([] { return Sequential(nn::Conv2d(2, 3, 1), nn::PReLU(3, 0.1)); }),
               images(2, 4, 5)});
  c.push_back({"Softmax", after_linear(5, 5, nn::Softmax(1)), rows({4, 5})});
  c.push_back({"SoftmaxLastDim", after_linear(5, 5, nn::Softmax(-1)), rows({4, 5})});
  c.push_back({"LogSoftmax", after_linear(5, 5, nn::LogSoftmax(-1)), rows({5})});
  c.push_back({"Identity", after_linear(5, 3, nn::Identity()), rows({5})});
  c.push_back({"Unflatten", after_linear(12, 12, nn::Unflatten(1, {3, 4})), rows({12})});
  c.push_back(
      {"UnflattenInferredLastDim", after_linear(6, 6, nn::Unflatten(-1, {2, -1})), rows({3, 6})});
  c.push_back({"UnflattenMiddleDim", make<Sequential>([] {
                 return Sequential(nn::Linear(4, 4), nn::Unflatten(1, {2, 3}), nn::Flatten(2));
               }),
               rows({6, 4})});
  return c;
}

class ActivationsOnnxRuntimeMatches : public ::testing::TestWithParam<OnnxCase> {};

TEST_P(ActivationsOnnxRuntimeMatches, Sinter) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  expect_onnx_runtime_matches(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Modules, ActivationsOnnxRuntimeMatches,
                         ::testing::ValuesIn(activation_cases()),
                         [](const ::testing::TestParamInfo<OnnxCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace sinter
