// The convolution layers of sinter/nn/conv.h: parameters under PyTorch's names and shapes, its
// initialization bounds, forward against the ops, padding_mode and "same" as PyTorch computes
// them, fusion keeping the padding, and the constructor's and forward's errors.
#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;

// Every element of t within [-bound, bound], and not all of them in a tenth of it.
void expect_uniform_within(const Tensor& t, double bound, const std::string& what) {
  const std::vector<double> v = t.to_vector<double>();
  double largest = 0;
  for (double x : v) largest = std::max(largest, std::abs(x));
  EXPECT_LE(largest, bound) << what;
  EXPECT_GT(largest, bound / 10) << what;
}

TEST(NnConv, ParametersAsPyTorch) {
  manual_seed(testing::fresh_seed());
  struct Want {
    std::shared_ptr<nn::ConvBase> layer;
    Shape weight;
    int64_t fan_in;
  };
  const std::vector<Want> layers = {
      {std::make_shared<nn::Conv1d>(4, 6, 3, nn::Conv1dOptions{.groups = 2}), {6, 2, 3}, 6},
      {std::make_shared<nn::Conv2d>(3, 8, Size2{3, 5}), {8, 3, 3, 5}, 45},
      {std::make_shared<nn::Conv3d>(2, 4, Size3{2, 3, 3}), {4, 2, 2, 3, 3}, 36},
      {std::make_shared<nn::ConvTranspose1d>(4, 6, 5, nn::ConvTranspose1dOptions{.groups = 2}),
       {4, 3, 5},
       15},
      {std::make_shared<nn::ConvTranspose2d>(4, 6, 3, nn::ConvTranspose2dOptions{.groups = 2}),
       {4, 3, 3, 3},
       27},
      {std::make_shared<nn::ConvTranspose3d>(3, 5, Size3{1, 2, 2}), {3, 5, 1, 2, 2}, 20},
  };
  for (const Want& w : layers) {
    SCOPED_TRACE(w.layer->name());
    EXPECT_EQ(w.layer->weight.shape(), w.weight);
    EXPECT_EQ(w.layer->bias.shape(), (Shape{w.layer->out_channels}));
    const auto names = w.layer->state_dict();
    ASSERT_EQ(names.size(), 2u);
    EXPECT_TRUE(names.count("weight") && names.count("bias"));
    // kaiming_uniform_(a = sqrt(5)) gives the weight the bias's bound, 1 / sqrt(fan_in).
    const double bound = 1.0 / std::sqrt(static_cast<double>(w.fan_in));
    expect_uniform_within(w.layer->weight, bound * (1 + 1e-6), "weight");
    expect_uniform_within(w.layer->bias, bound * (1 + 1e-6), "bias");
  }
  EXPECT_EQ(nn::Conv1d(2, 3, 2, {.bias = false}).state_dict().count("bias"), 0u);
  EXPECT_EQ(nn::ConvTranspose2d(2, 3, 2, {.bias = false}).named_parameters().size(), 1u);
}

TEST(NnConv, ForwardIsTheOp) {
  manual_seed(testing::fresh_seed());
  NoGradGuard ng;
  nn::Conv1d c1(4, 6, 3, {.stride = 2, .padding = 1, .groups = 2});
  const Tensor x1 = randn({2, 4, 9});
  EXPECT_TRUE(all_close(c1.forward(x1),
                        conv1d(x1, c1.weight, c1.bias, {.stride = 2, .padding = 1, .groups = 2}), 0,
                        0));
  nn::Conv3d c3(2, 3, {2, 3, 3}, {.stride = {1, 2, 2}, .dilation = {2, 1, 1}});
  const Tensor x3 = randn({1, 2, 5, 7, 7});
  EXPECT_TRUE(all_close(
      c3.forward(x3), conv3d(x3, c3.weight, c3.bias, {.stride = {1, 2, 2}, .dilation = {2, 1, 1}}),
      0, 0));
  // A U-Net's upsampling layer doubles H and W.
  nn::ConvTranspose2d up(8, 4, 2, {.stride = 2});
  const Tensor x2 = randn({2, 8, 5, 6});
  const Tensor y2 = up.forward(x2);
  EXPECT_EQ(y2.shape(), (Shape{2, 4, 10, 12}));
  EXPECT_TRUE(all_close(y2, conv_transpose2d(x2, up.weight, up.bias, {.stride = 2}), 0, 0));
  nn::ConvTranspose1d t1(3, 2, 4, {.stride = 2, .padding = 1, .output_padding = 1});
  const Tensor xt = randn({2, 3, 5});
  EXPECT_EQ(t1.forward(xt).shape(), (Shape{2, 2, 11}));
  nn::ConvTranspose3d t3(2, 2, 3, {.stride = 2, .padding = 1, .output_padding = 1});
  EXPECT_EQ(t3.forward(randn({1, 2, 2, 3, 4})).shape(), (Shape{1, 2, 4, 6, 8}));
}

TEST(NnConv, PaddingModesAsPyTorch) {
  NoGradGuard ng;
  // nn.Conv1d(1, 1, 4, padding='same', padding_mode='reflect', bias=False), weight 1 2 3 4.
  nn::Conv1d same(1, 1, 4,
                  {.bias = false, .same_padding = true, .padding_mode = nn::PaddingMode::Reflect});
  same.weight.copy_(from_vector<float>({1, 2, 3, 4}, {1, 1, 4}));
  EXPECT_EQ(same.forward(arange(1.0, 6.0).reshape({1, 1, 5})).to_vector<float>(),
            (std::vector<float>{22, 30, 40, 42, 38}));
  // nn.Conv2d(1, 1, 3, padding=1, padding_mode='circular', bias=False), weight 1..9.
  nn::Conv2d circ(1, 1, 3,
                  {.padding = 1, .bias = false, .padding_mode = nn::PaddingMode::Circular});
  circ.weight.copy_(arange(1.0, 10.0).reshape({1, 1, 3, 3}));
  EXPECT_EQ(circ.forward(arange(1.0, 7.0).reshape({1, 1, 2, 3})).to_vector<float>(),
            (std::vector<float>{177, 186, 177, 132, 141, 132}));
  // Replicate in 3-D: the op on the padded input.
  manual_seed(testing::fresh_seed());
  nn::Conv3d rep(2, 3, 3, {.padding = {1, 2, 0}, .padding_mode = nn::PaddingMode::Replicate});
  const Tensor x = randn({1, 2, 3, 4, 5});
  EXPECT_TRUE(all_close(
      rep.forward(x), conv3d(pad(x, {0, 0, 2, 2, 1, 1}, PadMode::Replicate), rep.weight, rep.bias),
      0, 0));
}

TEST(NnConv, FusionKeepsThePadding) {
  manual_seed(testing::fresh_seed());
  nn::Sequential m(nn::Conv2d(2, 3, 3, {.padding = 1, .padding_mode = nn::PaddingMode::Reflect}),
                   nn::BatchNorm2d(3), nn::ReLU());
  m.forward(randn({4, 2, 6, 6}));  // running statistics
  m.eval();
  const Tensor x = randn({2, 2, 6, 6});
  NoGradGuard ng;
  const auto fused = nn::fuse_for_inference(m);
  EXPECT_TRUE(all_close(fused->forward(x), m.forward(x), 1e-5, 1e-5));
}

TEST(NnConvErrors, Arguments) {
  expect_error([] { nn::Conv1d(4, 6, 3, {.groups = 4}); }, {"Conv1d", "groups 4", "6"});
  expect_error([] { nn::Conv3d(2, 4, {2, 0, 2}); }, {"Conv3d", "kernel_size", "[2, 0, 2]"});
  expect_error(
      [] {
        nn::Conv3d(2, 4, 3, {.dilation = {1, 0, 1}});
      },
      {"Conv3d", "dilation must be positive", "[1, 0, 1]"});
  expect_error([] { nn::Conv2d(2, 4, 3, {.stride = 2, .same_padding = true}); },
               {"Conv2d", "same_padding needs stride 1", "[2, 2]"});
  expect_error([] { nn::Conv1d(2, 4, 3, {.padding = 1, .same_padding = true}); },
               {"Conv1d", "same_padding", "padding [1]"});
  expect_error(
      [] {
        nn::ConvTranspose2d(2, 4, 3, {.stride = 2, .output_padding = {2, 0}});
      },
      {"ConvTranspose2d", "output_padding [2, 0]", "stride [2, 2]"});
  expect_error([] { nn::ConvTranspose1d(0, 4, 3); }, {"ConvTranspose1d", "positive", "0"});
  expect_error(
      [] {
        nn::ConvTranspose3d(2, 4, 3, {.padding = {0, -1, 0}});
      },
      {"ConvTranspose3d", "padding must be non-negative", "[0, -1, 0]"});
  nn::Conv1d c1(3, 4, 3);
  expect_error(
      [&] {
        c1.forward(zeros({2, 4, 8}));
      },
      {"Conv1d: expected input of shape (N, 3, L)", "[2, 4, 8]"});
  nn::ConvTranspose3d t3(3, 4, 3);
  expect_error(
      [&] {
        t3.forward(zeros({2, 3, 8, 8}));
      },
      {"ConvTranspose3d: expected input of shape (N, 3, D, H, W)", "[2, 3, 8, 8]"});
  nn::Conv2d bad_mode(1, 1, 3, {.padding = 1, .padding_mode = static_cast<nn::PaddingMode>(7)});
  expect_error(
      [&] {
        bad_mode.forward(zeros({1, 1, 4, 4}));
      },
      {"Conv2d", "unknown padding_mode", "7"});
  nn::Conv1d reflect(1, 1, 3, {.padding = 4, .padding_mode = nn::PaddingMode::Reflect});
  expect_error([&] { reflect.forward(zeros({1, 1, 4})); }, {"pad", "reflect pads (4, 4)"});
}

}  // namespace
}  // namespace sinter
