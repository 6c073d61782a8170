// ONNX export of nn/normalization.h's and nn/resampling.h's layers: each trained a moment (behind
// a Linear where it has no parameters of its own), exported, run in ONNX Runtime on another batch
// (tests/onnx_test_util.h), within 1e-5 relative of Sinter's outputs; and the export's errors.
#include <memory>
#include <string>
#include <vector>

#include "onnx_test_util.h"
#include "test_util.h"

namespace sinter {
namespace {

using nn::Sequential;
using M = InterpolateMode;

// x (N, C, *spatial, last) through a Linear over its last dim, then `layer`.
template <class L>
std::function<std::shared_ptr<nn::Module>()> after_linear(int64_t last, L layer) {
  return [=] { return std::make_shared<Sequential>(nn::Linear(last, last), layer); };
}

std::vector<OnnxCase> norm_resample_cases() {
  std::vector<OnnxCase> c;
  c.push_back(
      {"GroupNorm", make<nn::GroupNorm>([] { return nn::GroupNorm(3, 6); }), images(6, 4, 5)});
  c.push_back({"GroupNormWithoutBias", make<nn::GroupNorm>([] {
                 nn::GroupNorm g(3, 6, 1e-5, true, false);
                 nn::init::normal_(g.weight);
                 return g;
               }),
               images(6, 4, 5)});
  c.push_back({"GroupNormNotAffineOnSequences", after_linear(5, nn::GroupNorm(2, 4, 1e-3, false)),
               rows({4, 5})});
  c.push_back({"BatchNorm3d", after_linear(3, nn::BatchNorm3d(2)), rows({2, 3, 4, 3})});
  c.push_back({"InstanceNorm1d", after_linear(7, nn::InstanceNorm1d(3)), rows({3, 7})});
  c.push_back({"InstanceNorm2dAffine",
               after_linear(5, nn::InstanceNorm2d(3, 1e-5, 0.1, /*affine=*/true)),
               images(3, 4, 5)});
  c.push_back({"InstanceNorm2dRunningStats",
               after_linear(5, nn::InstanceNorm2d(3, 1e-5, 0.3, /*affine=*/true, /*track=*/true)),
               images(3, 4, 5)});
  c.push_back({"InstanceNorm3d", after_linear(4, nn::InstanceNorm3d(2)), rows({2, 3, 2, 4})});
  auto up = [&c](const std::string& name, const InterpolateOptions& o, Shape rest) {
    c.push_back({"Upsample" + name, after_linear(rest.back(), nn::Upsample(o)), rows(rest)});
  };
  up("NearestSize", {.size = {7, 8}}, {2, 5, 5});
  up("NearestScale2", {.scale_factor = {2}}, {2, 3, 4});
  up("Nearest1d", {.size = {11}}, {2, 4});
  up("NearestExactScale", {.scale_factor = {1.5}, .mode = M::NearestExact}, {2, 4, 6});
  up("NearestExactDown", {.size = {3, 2}, .mode = M::NearestExact}, {2, 7, 5});
  up("Nearest3d", {.scale_factor = {2, 1, 3}}, {2, 2, 3, 2});
  up("Linear", {.scale_factor = {1.7}, .mode = M::Linear}, {3, 5});
  up("LinearCorners", {.size = {9}, .mode = M::Linear, .align_corners = true}, {3, 5});
  up("BilinearScale", {.scale_factor = {1.5, 1.7}, .mode = M::Bilinear}, {2, 4, 5});
  up("BilinearDown", {.scale_factor = {0.6}, .mode = M::Bilinear}, {2, 7, 8});
  up("BilinearSameWidth", {.scale_factor = {1.5, 1.1}, .mode = M::Bilinear}, {2, 4, 5});
  up("BilinearCorners", {.size = {7, 3}, .mode = M::Bilinear, .align_corners = true}, {2, 4, 5});
  up("BilinearRecompute",
     {.scale_factor = {1.7}, .mode = M::Bilinear, .recompute_scale_factor = true}, {2, 4, 5});
  up("Bicubic", {.size = {7, 9}, .mode = M::Bicubic}, {2, 4, 5});
  up("BicubicScale", {.scale_factor = {1.5, 2.5}, .mode = M::Bicubic}, {2, 4, 5});
  up("BicubicCornersDown", {.size = {3, 4}, .mode = M::Bicubic, .align_corners = true}, {2, 6, 7});
  up("Trilinear", {.scale_factor = {1.5}, .mode = M::Trilinear}, {2, 3, 4, 3});
  up("TrilinearCorners", {.size = {4, 2, 5}, .mode = M::Trilinear, .align_corners = true},
     {2, 3, 3, 4});
  c.push_back({"PixelShuffle", after_linear(5, nn::PixelShuffle(2)), images(8, 3, 5)});
  c.push_back({"PixelUnshuffle", after_linear(6, nn::PixelUnshuffle(2)), images(3, 4, 6)});
  c.push_back({"PixelUnshuffleBy3", after_linear(6, nn::PixelUnshuffle(3)), images(2, 3, 6)});
  return c;
}

class OnnxNormResample : public ::testing::TestWithParam<OnnxCase> {};

TEST_P(OnnxNormResample, MatchesSinter) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  expect_onnx_runtime_matches(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Modules, OnnxNormResample, ::testing::ValuesIn(norm_resample_cases()),
                         [](const ::testing::TestParamInfo<OnnxCase>& info) {
                           return info.param.name;
                         });

TEST(OnnxNormResampleErrors, NameTheModuleAndTheValues) {
  SINTER_REQUIRE_ONNX();
  const testing::TempDir dir;
  const std::string path = dir.file("m.onnx");
  nn::InstanceNorm2d in(3);
  testing::expect_error(
      [&] {
        onnx::export_model(in, randn({3, 4, 5}), path);
      },
      {"InstanceNorm2d", "unbatched", "[3, 4, 5]"});
  nn::PixelShuffle shuffle(2);
  testing::expect_error(
      [&] {
        onnx::export_model(shuffle, randn({8, 4, 5}), path);
      },
      {"PixelShuffle", "unbatched"});
  nn::Upsample up({.scale_factor = {2}});
  testing::expect_error(
      [&] {
        onnx::export_model(up, randn({1, 2, 3, 3}), path, {.dtype = DType::f16});
      },
      {"Upsample", "f32", "f16"});
}

}  // namespace
}  // namespace sinter
