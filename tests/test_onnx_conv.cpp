// The convolution layers exported to ONNX (Conv and ConvTranspose nodes, padding_mode as Pad or as
// slices, "same" as uneven pads) and run in ONNX Runtime against Sinter's outputs.
#include <vector>

#include "onnx_test_util.h"

namespace sinter {
namespace {


std::function<Tensor(int64_t)> signals(int64_t c, int64_t l) {
  return [=](int64_t n) { return randn({n, c, l}); };
}
std::function<Tensor(int64_t)> volumes(int64_t c, int64_t d, int64_t h, int64_t w) {
  return [=](int64_t n) { return randn({n, c, d, h, w}); };
}

std::vector<OnnxCase> conv_cases() {
  using nn::PaddingMode;
  using nn::Sequential;
  return {
      {"Conv1d", make<nn::Conv1d>([] { return nn::Conv1d(4, 6, 3, {.stride = 2, .groups = 2}); }),
       signals(4, 11)},
      {"Conv1dSameReflect", make<nn::Conv1d>([] {
         return nn::Conv1d(3, 4, 4, {.same_padding = true, .padding_mode = PaddingMode::Reflect});
       }),
       signals(3, 9)},
      {"Conv2dSameEvenKernel", make<nn::Conv2d>([] {
         return nn::Conv2d(3, 4, {2, 3}, {.same_padding = true});
       }),
       images(3, 7, 6)},
      {"Conv2dReplicate", make<nn::Conv2d>([] {
         return nn::Conv2d(2, 3, 3, {.padding = {1, 2}, .padding_mode = PaddingMode::Replicate});
       }),
       images(2, 6, 5)},
      {"Conv2dCircular", make<nn::Conv2d>([] {
         return nn::Conv2d(2, 3, 3,
                           {.stride = 2, .padding = {2, 1}, .padding_mode = PaddingMode::Circular});
       }),
       images(2, 7, 6)},
      {"Conv3d", make<nn::Conv3d>([] {
         return nn::Conv3d(4, 4, {2, 3, 3},
                           {.stride = {1, 2, 1}, .padding = 1, .dilation = {2, 1, 1}, .groups = 2});
       }),
       volumes(4, 5, 6, 6)},
      {"Conv3dCircularSame", make<nn::Conv3d>([] {
         return nn::Conv3d(2, 3, {3, 2, 3},
                           {.same_padding = true, .padding_mode = PaddingMode::Circular});
       }),
       volumes(2, 4, 5, 5)},
      {"ConvTranspose1d", make<nn::ConvTranspose1d>([] {
         return nn::ConvTranspose1d(4, 6, 3,
                                    {.stride = 3, .padding = 1, .output_padding = 2, .groups = 2});
       }),
       signals(4, 7)},
      {"ConvTranspose2d", make<nn::ConvTranspose2d>([] {
         return nn::ConvTranspose2d(4, 6, 3,
                                    {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2});
       }),
       images(4, 5, 6)},
      {"ConvTranspose2dDilated", make<nn::ConvTranspose2d>([] {
         return nn::ConvTranspose2d(3, 2, {2, 3},
                                    {.output_padding = {1, 0}, .bias = false, .dilation = {2, 1}});
       }),
       images(3, 4, 5)},
      // output_padding past the stride (ONNX Runtime takes only smaller): cropped less at the
      // end, with zeros and the bias after the node where it exceeds the padding.
      {"ConvTranspose1dZerosAfter", make<nn::ConvTranspose1d>([] {
         return nn::ConvTranspose1d(2, 3, 3, {.padding = 1, .output_padding = 2, .dilation = 3});
       }),
       signals(2, 6)},
      {"ConvTranspose2dCroppedLess", make<nn::ConvTranspose2d>([] {
         return nn::ConvTranspose2d(
             2, 3, 3, {.padding = {2, 0}, .output_padding = {2, 0}, .dilation = {3, 1}});
       }),
       images(2, 5, 4)},
      {"ConvTranspose3d", make<nn::ConvTranspose3d>([] {
         return nn::ConvTranspose3d(
             2, 3, {2, 2, 3},
             {.stride = {2, 1, 2}, .padding = {1, 0, 1}, .output_padding = {1, 0, 0}});
       }),
       volumes(2, 3, 4, 3)},
      // A U-Net's down and up steps.
      {"DownAndUp", make<Sequential>([] {
         return Sequential(nn::Conv2d(3, 8, 3, {.stride = 2, .padding = 1}), nn::ReLU(),
                           nn::ConvTranspose2d(8, 3, 2, {.stride = 2}));
       }),
       images(3, 8, 8)},
  };
}

class OnnxConvMatches : public ::testing::TestWithParam<OnnxCase> {};

TEST_P(OnnxConvMatches, Sinter) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  expect_onnx_runtime_matches(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Conv, OnnxConvMatches, ::testing::ValuesIn(conv_cases()),
                         [](const ::testing::TestParamInfo<OnnxCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace sinter
