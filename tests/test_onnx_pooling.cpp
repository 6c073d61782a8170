// ONNX export of nn/pooling.h's layers (MaxPool3d, AvgPool3d as MaxPool and AveragePool with 3-D
// kernels): each behind a Linear (they have no parameters), exported, run in ONNX Runtime on
// another batch (tests/onnx_test_util.h), within 1e-5 relative of Sinter's; and the export's
// errors.
#include <memory>
#include <string>
#include <vector>

#include "onnx_test_util.h"
#include "test_util.h"

namespace sinter {
namespace {

std::vector<OnnxCase> pooling_cases() {
  return {
      after_linear_case("MaxPool3d", nn::MaxPool3d(2), {2, 4, 4, 6}),
      after_linear_case(
          "MaxPool3dPadStrideDilation",
          nn::MaxPool3d({3, 2, 3},
                        {.stride = {1, 2, 2}, .padding = {1, 0, 1}, .dilation = {1, 2, 1}}),
          {2, 5, 6, 7}),
      after_linear_case("MaxPool3dCeil", nn::MaxPool3d({2, 2, 3}, {.stride = 2, .ceil_mode = true}),
                        {2, 5, 4, 7}),
      after_linear_case("AvgPool3d", nn::AvgPool3d({2, 3, 2}), {3, 4, 6, 5}),
      after_linear_case(
          "AvgPool3dPadExcludePad",
          nn::AvgPool3d(3, {.stride = {2, 1, 2}, .padding = 1, .count_include_pad = false}),
          {2, 5, 4, 6}),
      after_linear_case("AvgPool3dPadIncludePad",
                        nn::AvgPool3d({3, 3, 2}, {.stride = 2, .padding = 1}), {2, 5, 5, 4}),
  };
}

class OnnxPooling : public ::testing::TestWithParam<OnnxCase> {};

TEST_P(OnnxPooling, MatchesSinter) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  expect_onnx_runtime_matches(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Modules, OnnxPooling, ::testing::ValuesIn(pooling_cases()),
                         [](const ::testing::TestParamInfo<OnnxCase>& info) {
                           return info.param.name;
                         });

TEST(OnnxPoolingErrors, NameTheModuleAndTheValues) {
  SINTER_REQUIRE_ONNX();
  const testing::TempDir dir;
  const std::string path = dir.file("m.onnx");
  nn::MaxPool3d max(2);
  testing::expect_error(
      [&] {
        onnx::export_model(max, randn({2, 4, 4, 4}), path);
      },
      {"MaxPool3d", "unbatched"});
  // D = 5, kernel 2, stride 2, ceil: the last window hangs one past the input.
  nn::AvgPool3d avg({2, 2, 2}, {.stride = 2, .ceil_mode = true});
  testing::expect_error(
      [&] {
        onnx::export_model(avg, randn({1, 2, 5, 4, 4}), path);
      },
      {"AvgPool3d", "dim 2", "runs past the padded input"});
  // D = 4, kernel 2, stride 3, padding 1, ceil: ONNX keeps a last window that starts in the
  // padding.
  nn::MaxPool3d late({2, 1, 1}, {.stride = {3, 1, 1}, .padding = {1, 0, 0}, .ceil_mode = true});
  testing::expect_error(
      [&] {
        onnx::export_model(late, randn({1, 2, 4, 3, 3}), path);
      },
      {"MaxPool3d", "ONNX's ceil mode gives 3", "Sinter's gives 2"});
}

}  // namespace
}  // namespace sinter
