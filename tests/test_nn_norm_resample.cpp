// The normalization and resampling layers beside modules.h's (nn/normalization.h,
// nn/resampling.h) and the norms they run: group_norm and instance_norm against PyTorch's values,
// the layers' parameters, buffers, state_dict keys, modes and errors.
#include <string>
#include <vector>

#include "sinter/nn.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::ramp;

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape);
}

std::vector<std::string> keys_of(const nn::Module& m) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : m.state_dict()) keys.push_back(k);
  return keys;
}

// torch.nn.functional.group_norm and instance_norm of ramp(...), torch 2.15.
TEST(GroupNorm, MatchesPyTorch) {
  const Tensor w = f64({0.5, 1.0, 1.5, 2.0}, {4}), b = f64({0.1, -0.2, 0.3, -0.4}, {4});
  EXPECT_TRUE(all_close(
      group_norm(ramp({2, 4, 3}), 2, w, b),
      f64({-0.48977517800013542, 0.27146807020812336,  0.70047291480059093,   0.84251572950048315,
           -0.20626962672905108, -1.6005777167885897,  -1.2396191330332551,   -1.3486860239429392,
           -0.6299216007025592,  0.027678466031470568, 1.6763621608835491,    2.5869283833233188,
           0.95761913451804459,  0.5445071908148611,   0.0036949193687476852, -1.1809113252952803,
           -1.2651196445051098,  -0.56561151960291678, -1.3463773752312032,   0.9056292663270874,
           2.1237692567719644,   1.6164481712556276,   -0.53999259776819353,  -3.3204837706445618},
          {2, 4, 3}),
      1e-12, 1e-12));
  EXPECT_TRUE(all_close(
      group_norm(ramp({2, 4, 2, 2}), 4, {}, {}, 1e-3),
      f64({-1.6225677888432761,  -0.0092989697379962221, 0.89987183822008165,  0.73199492036119129,
           1.5518792783156379,   0.19556813189537106,    -0.80878846280466232, -0.93865894740634659,
           -1.424073109150501,   -0.39276878175356206,   0.62685295417961917,  1.1899889367244438,
           1.3198963800708241,   0.51659225307115242,    -0.53502761947571276, -1.3014610136662643,
           -1.2094147085733835,  -0.61094335364152219,   0.41081297939676015,  1.4095450828181455,
           0.97942529503208831,  0.78434410401203269,    -0.22874906587855562, -1.535020333165565,
           -0.7898425382575015,  -0.87377170741711829,   0.054178273669922283, 1.6094359720046973,
           -0.39089472376212003, 1.1314156607348207,     0.68370979664686882,  -1.4242307336195676},
          {2, 4, 2, 2}),
      1e-12, 1e-12));
  EXPECT_TRUE(all_close(
      group_norm(ramp({2, 4, 3}).to(DType::f32), 2, w.to(DType::f32), b.to(DType::f32)),
      f64({-0.48977517800013542, 0.27146807020812336,  0.70047291480059093,   0.84251572950048315,
           -0.20626962672905108, -1.6005777167885897,  -1.2396191330332551,   -1.3486860239429392,
           -0.6299216007025592,  0.027678466031470568, 1.6763621608835491,    2.5869283833233188,
           0.95761913451804459,  0.5445071908148611,   0.0036949193687476852, -1.1809113252952803,
           -1.2651196445051098,  -0.56561151960291678, -1.3463773752312032,   0.9056292663270874,
           2.1237692567719644,   1.6164481712556276,   -0.53999259776819353,  -3.3204837706445618},
          {2, 4, 3}),
      1e-5, 1e-5));
}

TEST(InstanceNorm, MatchesPyTorchAndMovesTheRunningStatistics) {
  const Tensor x = ramp({2, 3, 4});
  Tensor rm = f64({0.1, 0.2, 0.3}, {3}), rv = f64({1.0, 2.0, 3.0}, {3});
  const Tensor w = f64({0.5, 1.0, 1.5}, {3}), b = f64({0.1, -0.2, 0.3}, {3});
  EXPECT_TRUE(all_close(instance_norm(x, rm, rv, w, b, true, 0.2),
                        f64({-0.71346133285224855, 0.095338036186077807,  0.55114352075025419,
                             0.46697977591591688,  1.3553872045729063,    -0.0039897985477074325,
                             -1.0106166786490851,  -1.1407807273761137,   -1.8384211741223566,
                             -0.28979070248513189, 1.2412969191437648,    2.0869149574637236,
                             0.76084433751776814,  0.35864686834681558,   -0.16787706829468224,
                             -0.55161413756990185, -1.4106858151221084,   -0.81158546101148288,
                             0.21124474780896038,  1.2110265283246306,    1.7722232178270485,
                             1.4789869084955951,   -0.043844178367504517, -2.0073659479551398},
                            {2, 3, 4}),
                        1e-12, 1e-12));
  EXPECT_TRUE(all_close(
      rm, f64({0.21550997912722658, 0.20590136263644382, 0.46470258054018299}, {3}), 1e-14, 1e-14));
  EXPECT_TRUE(all_close(rv, f64({0.87312635555158291, 1.6919260326646421, 2.4923509103412842}, {3}),
                        1e-14, 1e-14));
  EXPECT_TRUE(all_close(
      instance_norm(x, rm, rv, w, b, false, 0.2),
      f64({-0.015317801295580472, 0.35615296603019864,  0.56549834831415746,  0.52684306237866507,
           0.052998808814429615,  -0.4357762115552784,  -0.79771706585601254, -0.84451860466526663,
           -0.36126543961491353,  0.30200604117841839,  0.95776399804498835,  1.3199384087480597,
           0.76302735249735176,   0.5032395891225252,   0.16314675824182201,  -0.084717046462148463,
           -0.49604516260284254,  -0.18004102510002043, 0.35946554626557131,  0.88681489112099399,
           1.7498171258992432,    1.6596867224124068,   1.1916226528086415,   0.5881059541037662},
          {2, 3, 4}),
      1e-12, 1e-12));
  EXPECT_TRUE(all_close(
      instance_norm(ramp({1, 2, 2, 3})),
      f64({-1.1795503560002707, 0.34293614041624693, 1.2009458296011819, 1.0425157295004832,
           -0.0062696267290509146, -1.4005777167885896, -1.0264127553555034, -1.0991240159619595,
           -0.61994773380170609, 0.21383923301573529, 1.0381810804417746, 1.4934641916616593},
          {1, 2, 2, 3}),
      1e-12, 1e-12));
}

TEST(NormErrors, GroupAndInstanceNormNameTheOpAndTheValues) {
  const Tensor x = zeros({2, 6, 3});
  expect_error([&] { group_norm(zeros({6}), 2); }, {"group_norm", "(N, C, *)", "[6]"});
  expect_error([&] { group_norm(x, 4); }, {"group_norm", "num_groups 4", "6 channels"});
  expect_error([&] { group_norm(x, 0); }, {"group_norm", "num_groups 0"});
  expect_error([&] { group_norm(x, 2, zeros({3})); }, {"group_norm", "weight", "[3]", "[6]"});
  expect_error([&] { group_norm(x.to(DType::i64), 2); }, {"group_norm", "i64"});
  expect_error([&] { instance_norm(zeros({2, 6})); }, {"instance_norm", "spatial", "[2, 6]"});
  expect_error(
      [&] {
        instance_norm(zeros({2, 6, 1}));
      },
      {"instance_norm", "more than 1 spatial element", "[2, 6, 1]"});
  expect_error([&] { instance_norm(x, zeros({6})); }, {"instance_norm", "both running_mean"});
  expect_error([&] { instance_norm(x, {}, {}, {}, {}, false); },
               {"instance_norm", "running statistics"});
  expect_error([&] { instance_norm(x, zeros({5}), ones({5})); },
               {"instance_norm", "running_mean", "[5]", "[6]"});
  expect_error([&] { instance_norm(x, {}, {}, {}, zeros({2})); }, {"instance_norm", "bias", "[2]"});
}

TEST(NnNormLayers, GroupNorm) {
  nn::GroupNorm gn(2, 4);
  EXPECT_EQ(keys_of(gn), (std::vector<std::string>{"bias", "weight"}));
  EXPECT_TRUE(all_close(gn.weight, ones({4}), 0, 0));
  EXPECT_TRUE(all_close(gn.bias, zeros({4}), 0, 0));
  nn::init::normal_(gn.weight);
  nn::init::normal_(gn.bias);
  const Tensor x = randn({3, 4, 5});
  EXPECT_TRUE(all_close(gn(x), group_norm(x, 2, gn.weight, gn.bias), 0, 0));
  gn.eval();
  EXPECT_TRUE(all_close(gn(x), group_norm(x, 2, gn.weight, gn.bias), 0, 0));
  nn::GroupNorm plain(3, 6, 1e-3, false);
  EXPECT_TRUE(plain.state_dict().empty());
  // Without affine another channel count passes, as in PyTorch, if the groups divide it.
  const Tensor nine = randn({2, 9, 4});
  EXPECT_TRUE(all_close(plain(nine), group_norm(nine, 3, {}, {}, 1e-3), 0, 0));
  expect_error([&] { plain(randn({2, 8, 4})); }, {"group_norm", "num_groups 3", "8 channels"});
  expect_error([] { nn::GroupNorm(4, 6); }, {"GroupNorm", "num_channels 6", "num_groups 4"});
  expect_error([] { nn::GroupNorm(0, 6); }, {"GroupNorm", "positive", "0"});
  expect_error([] { nn::GroupNorm(2, 6, 0.0); }, {"GroupNorm", "eps"});
  expect_error([&] { gn(zeros({3, 6, 5})); }, {"GroupNorm", "(N, 4, *)", "[3, 6, 5]"});
  // bias = false: the weight alone (PyTorch's bias=False), kept by the inference copy.
  nn::GroupNorm weighted(2, 4, 1e-5, true, false);
  EXPECT_EQ(keys_of(weighted), (std::vector<std::string>{"weight"}));
  nn::init::normal_(weighted.weight);
  EXPECT_TRUE(all_close(weighted(x), group_norm(x, 2, weighted.weight, {}), 0, 0));
  auto fused = nn::fuse_for_inference(weighted);
  EXPECT_EQ(keys_of(*fused), (std::vector<std::string>{"weight"}));
  EXPECT_TRUE(all_close((*fused)(x), weighted(x), 0, 0));
}

TEST(NnNormLayers, InstanceNormTrainEvalAndUnbatched) {
  nn::InstanceNorm2d in(3, 1e-5, 0.1, /*affine=*/true, /*track_running_stats=*/true);
  EXPECT_EQ(keys_of(in), (std::vector<std::string>{"bias", "num_batches_tracked", "running_mean",
                                                   "running_var", "weight"}));
  nn::init::normal_(in.weight);
  const Tensor x = randn({2, 3, 4, 5}) * 2.0 + 1.0;
  Tensor rm = zeros({3}), rv = ones({3});
  const Tensor y = in(x);
  EXPECT_TRUE(all_close(y, instance_norm(x, rm, rv, in.weight, in.bias), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(in.running_mean, rm, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(in.running_var, rv, 1e-6, 1e-6));
  EXPECT_GT(abs(in.running_mean).max().item<double>(), 0.01);
  EXPECT_EQ(in.num_batches_tracked.item<int64_t>(), 0);  // PyTorch's instance norms never count
  in.eval();
  EXPECT_TRUE(all_close(in(x), instance_norm(x, rm, rv, in.weight, in.bias, false), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(in.running_mean, rm, 0, 0));
  // Unbatched (C, H, W): the batched result of a batch of one.
  EXPECT_TRUE(all_close(in(x.select(0, 1)), in(x).select(0, 1), 1e-6, 1e-6));

  // The defaults: no affine, no running statistics; the input's statistics in eval mode too.
  nn::InstanceNorm1d plain(3);
  EXPECT_TRUE(plain.state_dict().empty());
  plain.eval();
  const Tensor s = randn({2, 3, 6});
  EXPECT_TRUE(all_close(plain(s), instance_norm(s), 0, 0));
  // Without affine or running statistics another channel count passes, as in PyTorch.
  EXPECT_EQ(plain(randn({2, 5, 6})).shape(), (Shape{2, 5, 6}));
  nn::InstanceNorm3d three(2, 1e-5, 0.1, true);
  EXPECT_EQ(three(randn({2, 2, 3, 2, 2})).shape(), (Shape{2, 2, 3, 2, 2}));
  EXPECT_EQ(three(randn({2, 3, 2, 2})).shape(), (Shape{2, 3, 2, 2}));

  expect_error(
      [&] {
        plain(randn({2, 3, 4, 5}));
      },
      {"InstanceNorm1d", "2-D or 3-D input", "[2, 3, 4, 5]"});
  expect_error(
      [&] {
        in(randn({2, 4, 4, 5}));
      },
      {"InstanceNorm2d", "expected 3 channels", "[2, 4, 4, 5]"});
  expect_error([&] { plain(randn({2, 3, 1})); }, {"instance_norm", "more than 1 spatial element"});
  expect_error([] { nn::InstanceNorm2d(0); }, {"InstanceNorm2d", "num_features", "0"});
  expect_error([] { nn::InstanceNorm1d(3, -1.0); }, {"InstanceNorm1d", "eps"});
  expect_error([] { nn::InstanceNorm1d(3, 1e-5, 1.5); }, {"InstanceNorm1d", "momentum", "1.5"});
}

TEST(NnNormLayers, BatchNorm3d) {
  nn::BatchNorm3d bn(2);
  EXPECT_EQ(keys_of(bn), (std::vector<std::string>{"bias", "num_batches_tracked", "running_mean",
                                                   "running_var", "weight"}));
  const Tensor x = randn({3, 2, 2, 3, 2});
  Tensor rm = zeros({2}), rv = ones({2});
  EXPECT_TRUE(all_close(bn(x), batch_norm(x, rm, rv, bn.weight, bn.bias, true), 0, 0));
  EXPECT_TRUE(all_close(bn.running_var, rv, 0, 0));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  expect_error(
      [&] {
        bn(randn({3, 2, 2, 3}));
      },
      {"BatchNorm3d: expected input of shape (N, 2, D, H, W)", "[3, 2, 2, 3]"});
}

TEST(NnResampleLayers, UpsampleAndPixelShuffles) {
  const Tensor x = randn({2, 3, 4, 5});
  nn::Upsample up(
      {.scale_factor = {1.5}, .mode = InterpolateMode::Bilinear, .align_corners = true});
  EXPECT_TRUE(up.state_dict().empty());
  EXPECT_TRUE(all_close(
      up(x),
      interpolate(
          x, {.scale_factor = {1.5}, .mode = InterpolateMode::Bilinear, .align_corners = true}),
      0, 0));
  EXPECT_EQ(nn::Upsample({.size = {8}})(randn({1, 2, 3})).shape(), (Shape{1, 2, 8}));
  nn::PixelShuffle shuffle(2);
  nn::PixelUnshuffle unshuffle(2);
  const Tensor y = shuffle(randn({2, 12, 3, 4}));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 6, 8}));
  EXPECT_TRUE(all_close(shuffle(unshuffle(y)), y, 0, 0));
  expect_error([] { nn::Upsample({}); }, {"Upsample", "exactly one"});
  expect_error([] { nn::Upsample({.size = {4}, .scale_factor = {2}}); },
               {"Upsample", "exactly one"});
  expect_error([] { nn::Upsample({.size = {0}}); }, {"Upsample", "size", "0"});
  expect_error([] { nn::Upsample({.scale_factor = {-1}}); }, {"Upsample", "scale_factor", "-1"});
  expect_error([] { nn::Upsample({.size = {4}, .align_corners = true}); },
               {"Upsample", "align_corners"});
  expect_error([&] { nn::Upsample({.size = {4}, .mode = InterpolateMode::Trilinear})(x); },
               {"interpolate", "trilinear needs a 5-D input"});
  expect_error([] { nn::PixelShuffle(0); }, {"PixelShuffle", "0"});
  expect_error([] { nn::PixelUnshuffle(-2); }, {"PixelUnshuffle", "-2"});
  expect_error([&] { shuffle(randn({2, 6, 3, 4})); }, {"pixel_shuffle", "6 channels"});
}

}  // namespace
}  // namespace sinter
