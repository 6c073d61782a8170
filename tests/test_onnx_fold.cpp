// ONNX export of nn/fold.h's layers (Unfold and Fold as Conv and ConvTranspose with a one-hot
// weight): each behind a Linear (they have no parameters), exported, run in ONNX Runtime on
// another batch (tests/onnx_test_util.h), within 1e-5 relative of Sinter's; and the export's
// errors.
#include <memory>
#include <string>
#include <vector>

#include "onnx_test_util.h"
#include "test_util.h"

namespace sinter {
namespace {

std::vector<OnnxCase> fold_cases() {
  return {
      after_linear_case("Unfold", nn::Unfold(3), {2, 5, 6}),
      after_linear_case(
          "UnfoldDilationPaddingStride",
          nn::Unfold({2, 3}, {.dilation = {2, 1}, .padding = {1, 2}, .stride = {2, 3}}), {3, 7, 8}),
      // (C kH kW, L) = (2 * 4, 3 * 4) blocks of 2 x 2 over 4 x 5, stride 1: overlaps summed.
      after_linear_case("Fold", nn::Fold({4, 5}, 2), {8, 12}),
      // 6 x 7 with kernel 2, stride 2: the last row and column are left uncovered.
      after_linear_case("FoldStrideUncovered", nn::Fold({6, 7}, 2, {.stride = 2}), {4, 9}),
      after_linear_case(
          "FoldDilationPadding",
          nn::Fold({5, 6}, {2, 3}, {.dilation = {2, 1}, .padding = 1, .stride = {1, 2}}), {12, 15}),
  };
}

class OnnxFold : public ::testing::TestWithParam<OnnxCase> {};

TEST_P(OnnxFold, MatchesSinter) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  expect_onnx_runtime_matches(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Modules, OnnxFold, ::testing::ValuesIn(fold_cases()),
                         [](const ::testing::TestParamInfo<OnnxCase>& info) {
                           return info.param.name;
                         });

TEST(OnnxFoldErrors, NameTheModuleAndTheValues) {
  SINTER_REQUIRE_ONNX();
  const testing::TempDir dir;
  const std::string path = dir.file("m.onnx");
  nn::Unfold unfold(2);
  testing::expect_error(
      [&] {
        onnx::export_model(unfold, randn({2, 4, 4}), path);
      },
      {"Unfold", "unbatched", "[2, 4, 4]"});
  nn::Fold fold({3, 3}, 2);
  testing::expect_error(
      [&] {
        onnx::export_model(fold, randn({8, 4}), path);
      },
      {"Fold", "unbatched", "[8, 4]"});
}

}  // namespace
}  // namespace sinter
