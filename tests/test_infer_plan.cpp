// The CPU inference plans of fused models (Note [cpu inference plan]): the reference models and
// layer mixes the plans take (strides, padding, groups, dilation, pooling windows that overlap,
// channels-last values flattened into a Linear, inputs and outputs of several channels, batches
// whose last chunk is shorter) against the module-by-module forward; the same bits at every
// thread count; a weight changed in place; and the cases that run module by module instead.
#include <memory>
#include <string>
#include <vector>

#include "sinter/nn/activations.h"
#include "sinter/nn/fuse.h"
#include "sinter/quantize.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;

#define SKIP_WITHOUT_ONEDNN()                                                         \
  if (!onednn_available()) {                                                          \
    GTEST_SKIP() << "built without oneDNN (SINTER_DNNL): fused models run module by " \
                    "module, which the inference tests cover";                        \
  }

int64_t plans_compiled(const nn::Module& fused) { return nn::inference_plans_made(fused); }

// The fused model under InferenceMode against the original in eval mode, module by module, within
// f32 rounding of the largest output.
void expect_planned_matches(nn::Module& original, const Shape& input, const std::string& name,
                            bool planned = true) {
  SCOPED_TRACE(name + " input " + shape_str(input));
  original.eval();
  const std::shared_ptr<nn::Module> fused = nn::fuse_for_inference(original);
  const Tensor x = randn(input);
  const int64_t before = plans_compiled(*fused);
  Tensor got, expected;
  {
    InferenceMode im;
    got = fused->forward(x);
    expected = original.forward(x);
  }
  EXPECT_EQ(plans_compiled(*fused), before + (planned ? 1 : 0)) << "planned: " << planned;
  ASSERT_EQ(got.shape(), expected.shape());
  const double scale = expected.abs().max().item<double>();
  EXPECT_TRUE(all_close(got, expected, 1e-5 * scale, 1e-5));
}

TEST(InferencePlan, ReferenceModelsMatchModuleByModule) {
  SKIP_WITHOUT_ONEDNN();
  manual_seed(testing::fresh_seed());
  nn::Sequential mlp = nn::models::mlp(), cnn = nn::models::cnn();
  nn::Sequential resnet = nn::models::resnet20(1), resnet3 = nn::models::resnet20(3);
  for (const int64_t batch : {1, 3, 37}) {
    expect_planned_matches(mlp, {batch, 1, 28, 28}, "mlp");
    expect_planned_matches(cnn, {batch, 1, 28, 28}, "cnn");
    expect_planned_matches(resnet, {batch, 1, 32, 32}, "resnet20");
  }
  // Three input channels: the input is reordered to channels-last first.
  expect_planned_matches(resnet3, {5, 3, 32, 32}, "resnet20 rgb");
}

TEST(InferencePlan, LayerMixesMatchModuleByModule) {
  SKIP_WITHOUT_ONEDNN();
  manual_seed(testing::fresh_seed());
  // Strided and padded convolutions with and without bias, overlapping padded max pooling, groups,
  // dilation, a ReLU after a pooling's convolution, a 4-D output of several channels.
  nn::Sequential convs(
      nn::Conv2d(3, 16, 3, {.stride = 2, .padding = 1}), nn::ReLU(),
      nn::MaxPool2d(3, {.stride = 1, .padding = 1}),
      nn::Conv2d(16, 12, 3, {.padding = 2, .dilation = 2, .groups = 4, .bias = false}), nn::ReLU(),
      nn::MaxPool2d(3, {.stride = 2, .padding = 1}),
      nn::Conv2d(12, 6, {1, 3}, {.padding = {0, 1}}));
  // At batch 1 the larger layers run in bands of output rows, each with its own padding.
  for (const int64_t batch : {7, 1}) {
    expect_planned_matches(convs, {batch, 3, 60, 50}, "convolutions");
  }
  // A channels-last value of several channels and pixels flattened into a Linear, then Linears
  // with and without bias.
  nn::Sequential head(nn::Conv2d(2, 5, 3), nn::ReLU(), nn::MaxPool2d({2, 3}), nn::Flatten(),
                      nn::Linear(5 * 4 * 3, 16), nn::ReLU(), nn::Linear(16, 4, false));
  for (const int64_t batch : {9, 1}) expect_planned_matches(head, {batch, 2, 10, 11}, "head");
  // Poolings after convolutions at batch 1, run in the convolutions' bands (fuse_poolings): a
  // padded one whose rows do not divide the image, one of 3 x 3 windows at stride 3; and a
  // pooling first, over an image one pixel wide.
  nn::Sequential pooled(nn::Conv2d(1, 32, 3, {.padding = 1}), nn::ReLU(),
                        nn::MaxPool2d(2, {.padding = 1}), nn::Conv2d(32, 24, 3), nn::ReLU(),
                        nn::MaxPool2d(3, {.stride = 3}), nn::Flatten(), nn::Linear(24 * 4 * 3, 7));
  for (const int64_t batch : {1, 5}) expect_planned_matches(pooled, {batch, 1, 29, 23}, "pooled");
  nn::Sequential narrow(nn::MaxPool2d(3, {.stride = 2, .padding = 1}), nn::Conv2d(1, 16, 1));
  expect_planned_matches(narrow, {1, 1, 4, 1}, "narrow");
  // A model over features alone.
  nn::Sequential features(nn::Linear(20, 30), nn::ReLU(), nn::Identity(), nn::Linear(30, 5));
  expect_planned_matches(features, {6, 20}, "features");
  // A fused block whose shortcut is a ReLU of the block's input: conv1 reads the input itself, so
  // the ReLU cannot become the epilogue of the layer before, and the model runs module by module.
  nn::Sequential relu_shortcut(nn::Conv2d(3, 8, 3, {.padding = 1}));
  relu_shortcut.push_back(nn::models::BasicBlock::folded(
      8, 8, 1, std::make_shared<nn::Conv2d>(8, 8, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::Conv2d>(8, 8, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::Sequential>(nn::ReLU())));
  expect_planned_matches(relu_shortcut, {3, 3, 9, 10}, "relu shortcut", false);
  // A block with a strided projection shortcut, then the global average.
  nn::Sequential blocks(nn::Conv2d(3, 8, 3, {.padding = 1}), nn::ReLU(),
                        nn::models::BasicBlock(8, 16, 2), nn::models::BasicBlock(16, 16, 1),
                        nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(16, 3));
  for (const int64_t batch : {4, 1}) expect_planned_matches(blocks, {batch, 3, 12, 10}, "blocks");
}

// An int8 model's plan computes what its int8 layers compute module by module: the same int32
// sums (oneDNN's VNNI kernels are exact) and the same f32 epilogue, so the same bits.
TEST(InferencePlan, Int8ModelsGiveTheBitsOfTheirLayers) {
  SKIP_WITHOUT_ONEDNN();
  manual_seed(testing::fresh_seed());
  struct Model {
    std::string name;
    nn::Sequential model;
    Shape input;
  };
  std::vector<Model> models = {{"mlp", nn::models::mlp(), {1, 1, 28, 28}},
                               {"cnn", nn::models::cnn(), {1, 1, 28, 28}},
                               {"resnet20", nn::models::resnet20(3), {1, 3, 32, 32}}};
  for (Model& m : models) {
    SCOPED_TRACE(m.name);
    m.model.eval();
    Shape calibration = m.input;
    calibration[0] = 16;
    const std::shared_ptr<nn::Module> int8 =
        quant::quantize(m.model, 2, [&](int64_t) { return randn(calibration); });
    for (const int64_t batch : {1, 6, 37}) {
      Shape input = m.input;
      input[0] = batch;
      const Tensor x = randn(input);
      InferenceMode im;
      const int64_t before = plans_compiled(*int8);
      const Tensor planned = int8->forward(x);
      if (plans_compiled(*int8) == before) {
        GTEST_SKIP() << "no int8 plan on this CPU (oneDNN's int8 kernels are exact with VNNI "
                        "only): the int8 layers ran module by module";
      }
      set_onednn_enabled(false);
      const Tensor layers = int8->forward(x);
      set_onednn_enabled(true);
      EXPECT_TRUE(all_close(planned, layers, 0, 0)) << "batch " << batch;
    }
  }
}

TEST(InferencePlan, SameBitsAtEveryThreadCount) {
  SKIP_WITHOUT_ONEDNN();
  manual_seed(3);
  nn::Sequential resnet = nn::models::resnet20(1), cnn = nn::models::cnn();
  resnet.eval();
  cnn.eval();
  const std::shared_ptr<nn::Module> r = nn::fuse_for_inference(resnet);
  const std::shared_ptr<nn::Module> c = nn::fuse_for_inference(cnn);
  const Tensor xr = randn({21, 1, 32, 32}), xc = randn({45, 1, 28, 28});
  const Tensor xr1 = randn({1, 1, 32, 32}), xc1 = randn({1, 1, 28, 28});  // in bands
  testing::expect_same_bits_at_every_thread_count([&] {
    InferenceMode im;
    return std::vector<Tensor>{r->forward(xr), c->forward(xc), r->forward(xr1), c->forward(xc1)};
  });
  EXPECT_GT(plans_compiled(*r), 0);
}

// The plans hold the weights in their own layouts: a weight changed in place, or replaced, makes
// new ones; calls with an unchanged model and shape reuse the plan.
TEST(InferencePlan, AChangedWeightMakesANewPlan) {
  SKIP_WITHOUT_ONEDNN();
  manual_seed(testing::fresh_seed());
  nn::Sequential cnn = nn::models::cnn();
  cnn.eval();
  const std::shared_ptr<nn::Module> fused = nn::fuse_for_inference(cnn);
  const Tensor x = randn({4, 1, 28, 28});
  NoGradGuard no_grad;
  const Tensor first = fused->forward(x);
  EXPECT_TRUE(all_close(fused->forward(x), first, 0, 0));
  EXPECT_EQ(plans_compiled(*fused), 1);
  auto& seq = dynamic_cast<nn::Sequential&>(*fused);
  auto conv = seq.at<nn::Conv2d>(0);
  conv->weight.mul_(2.0);
  const Tensor doubled = fused->forward(x);
  EXPECT_EQ(plans_compiled(*fused), 2);
  EXPECT_FALSE(all_close(doubled, first, 1e-3, 1e-3));
  {
    const bool before = onednn_enabled();
    set_onednn_enabled(false);  // module by module
    const Tensor expected = fused->forward(x);
    set_onednn_enabled(before);
    const double scale = expected.abs().max().item<double>();
    EXPECT_TRUE(all_close(doubled, expected, 1e-5 * scale, 1e-5));
  }
  seq.at<nn::Linear>(seq.size() - 1)->bias = zeros({10});
  (void)fused->forward(x);
  EXPECT_EQ(plans_compiled(*fused), 3);
  (void)fused->forward(randn({5, 1, 28, 28}));  // another batch: another plan
  EXPECT_EQ(plans_compiled(*fused), 4);
}

TEST(InferencePlan, WhatNoPlanTakesRunsModuleByModule) {
  SKIP_WITHOUT_ONEDNN();
  manual_seed(testing::fresh_seed());
  // A module the plans do not describe (Tanh): module by module, the same result.
  nn::Sequential tanh(nn::Conv2d(1, 4, 3), nn::Tanh(), nn::Flatten(), nn::Linear(4 * 6 * 6, 2));
  tanh.eval();
  const std::shared_ptr<nn::Module> fused = nn::fuse_for_inference(tanh);
  const Tensor x = randn({3, 1, 8, 8});
  {
    InferenceMode im;
    EXPECT_TRUE(all_close(fused->forward(x), tanh.forward(x), 0, 0));
  }
  EXPECT_EQ(plans_compiled(*fused), 0);
  // With grad mode on, the forward records its graph module by module.
  nn::Sequential cnn = nn::models::cnn();
  cnn.eval();
  const std::shared_ptr<nn::Module> fc = nn::fuse_for_inference(cnn);
  Tensor xg = randn({2, 1, 28, 28}).requires_grad_();
  fc->forward(xg).sum().backward();
  EXPECT_TRUE(xg.grad().defined());
  EXPECT_EQ(plans_compiled(*fc), 0);
  // An f64 input and a non-contiguous one likewise.
  {
    NoGradGuard no_grad;
    const Tensor xt = randn({28, 28, 2, 1}).permute({2, 3, 0, 1});
    EXPECT_TRUE(all_close(fc->forward(xt), cnn.forward(xt.contiguous()), 1e-5, 1e-5));
  }
  EXPECT_EQ(plans_compiled(*fc), 0);
  // A wrong input gives the module's own error; so do a window larger than the padded input (the
  // integer division of the output size would make it one row) and a kernel larger than it.
  InferenceMode im;
  testing::expect_error([&] { (void)fc->forward(randn({2, 3, 28, 28})); }, {"Conv2d", "3"});
  nn::Sequential pool(nn::Conv2d(1, 2, 1), nn::MaxPool2d(2));
  pool.eval();
  const std::shared_ptr<nn::Module> fp = nn::fuse_for_inference(pool);
  EXPECT_THROW((void)fp->forward(randn({2, 1, 1, 4})), Error);
  nn::Sequential conv(nn::Conv2d(1, 2, 3, {.stride = 2}));
  conv.eval();
  const std::shared_ptr<nn::Module> fconv = nn::fuse_for_inference(conv);
  EXPECT_THROW((void)fconv->forward(randn({2, 1, 2, 2})), Error);
  EXPECT_EQ(plans_compiled(*fp) + plans_compiled(*fconv), 0);
}

}  // namespace
}  // namespace sinter
