// The reference models of nn/models.h: exact parameter counts, output shapes, the structure of
// ResNet-20 and its BasicBlock, and one optimizer step of each model on a tiny CPU batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sinter/autograd.h"
#include "sinter/nn/models.h"
#include "sinter/optim.h"
#include "test_util.h"

namespace sinter {
namespace {

using nn::models::BasicBlock;

int64_t count_parameters(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

bool all_finite(const Tensor& t) {
  for (float v : t.to_vector<float>()) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

bool has_key(const std::vector<std::pair<std::string, Tensor>>& named, const std::string& key) {
  for (const auto& [name, t] : named) {
    if (name == key) return true;
  }
  return false;
}

TEST(Models, MlpParameterCount) {
  // 784*1024 + 1024 + 1024*1024 + 1024 + 1024*10 + 10 = 803840 + 1049600 + 10250.
  EXPECT_EQ(count_parameters(nn::models::mlp()), 1863690);
}

TEST(Models, CnnParameterCount) {
  // conv1 1*32*9 + 32 = 320; conv2 32*64*9 + 64 = 18496; fc1 3136*128 + 128 = 401536;
  // fc2 128*10 + 10 = 1290.
  EXPECT_EQ(count_parameters(nn::models::cnn()), 320 + 18496 + 401536 + 1290);
  EXPECT_EQ(count_parameters(nn::models::cnn()), 421642);
}

TEST(Models, ResNet20ParameterCount) {
  // Convs have no bias; a BatchNorm2d(c) has 2c parameters (weight, bias).
  //   stem:    conv 3*16*9 = 432, BN 32                                                 =    464
  //   stage 1: 3 blocks x (2 convs 16*16*9 = 2304 each, 2 BNs 32 each) = 3 x 4672        =  14016
  //   stage 2: block 1: conv 16*32*9 = 4608, conv 32*32*9 = 9216, 1x1 shortcut 16*32 = 512,
  //            3 BNs 64 each -> 14528; blocks 2-3: 2 x (2 x 9216 + 2 x 64) = 2 x 18560   =  51648
  //   stage 3: block 1: conv 32*64*9 = 18432, conv 64*64*9 = 36864, shortcut 32*64 = 2048,
  //            3 BNs 128 each -> 57728; blocks 2-3: 2 x (2 x 36864 + 2 x 128) = 2 x 73984 = 205696
  //   fc:      64*10 + 10                                                                =    650
  //   total                                                                              = 272474
  nn::Sequential model = nn::models::resnet20();
  EXPECT_EQ(count_parameters(model), 464 + 14016 + 51648 + 205696 + 650);
  EXPECT_EQ(count_parameters(model), 272474);
  // 21 BatchNorm2d layers (stem, two per block, two shortcuts), 3 buffers each.
  EXPECT_EQ(model.buffers().size(), 63u);
  // Grey images: the stem conv is 1*16*9 = 144 instead of 432.
  nn::Sequential grey = nn::models::resnet20(1);
  EXPECT_EQ(count_parameters(grey), 272474 - 432 + 144);
  EXPECT_EQ(grey(randn({2, 1, 32, 32})).shape(), (Shape{2, 10}));
  testing::expect_error([] { nn::models::resnet20(0); }, {"resnet20", "in_channels", "0"});
}

TEST(Models, VitTinyParameterCountNamesAndErrors) {
  // patch_embed 3*64*16 + 64 = 3136; pos_embed 64*64 = 4096; per block: ln1 128, qkv 64*192 + 192
  // = 12480, out_proj 64*64 + 64 = 4160, ln2 128, fc 64*256 + 256 = 16640, proj 256*64 + 64 =
  // 16448 -> 49984, four of them 199936; ln 128; head 64*10 + 10 = 650.
  nn::models::ViT vit(nn::models::vit_tiny());
  EXPECT_EQ(count_parameters(vit), 3136 + 4096 + 199936 + 128 + 650);
  EXPECT_EQ(count_parameters(vit), 207946);
  const auto state = vit.state_dict();
  for (const char* key : {"patch_embed.weight", "pos_embed", "blocks.3.attn.qkv.weight",
                          "blocks.0.fc.bias", "ln.weight", "head.weight"}) {
    EXPECT_TRUE(state.count(key)) << key;
  }
  EXPECT_EQ(vit(randn({2, 3, 32, 32})).shape(), (Shape{2, 10}));
  testing::expect_error([&] { vit(randn({2, 3, 28, 28})); }, {"ViT", "(N, 3, 32, 32)", "28"});
  testing::expect_error([] { nn::models::ViT({.image_size = 30}); },
                        {"ViT", "patch_size 4", "image_size 30"});
  testing::expect_error([] { nn::models::ViT({.n_head = 5}); }, {"ViT", "n_embd 64", "n_head 5"});
}

// The blocks attend to every patch and the head pools by the mean: without the position embedding
// the logits do not depend on the patches' order; with it they do.
TEST(Models, VitSeesPatchesThroughThePositionEmbeddingOnly) {
  manual_seed(4);
  nn::models::ViT vit(nn::models::vit_tiny());
  const Tensor x = randn({2, 3, 32, 32});
  // The 8 rows of 4x4 patches in reverse order, each patch's pixels as they were.
  std::vector<double> rev;
  for (int i = 7; i >= 0; --i) rev.push_back(i);
  const Tensor order = from_vector<double>(rev, {8}).to(DType::i64);
  const Tensor moved = index_select(x.reshape({2, 3, 8, 4, 32}), 2, order).reshape({2, 3, 32, 32});
  EXPECT_FALSE(testing::all_close(vit(moved), vit(x), 1e-3, 1e-3));
  {
    NoGradGuard ng;
    vit.pos_embed.zero_();
  }
  EXPECT_TRUE(testing::all_close(vit(moved), vit(x), 1e-5, 1e-5));
}

TEST(Models, OutputShapes) {
  manual_seed(1);
  {
    nn::Sequential m = nn::models::mlp();
    EXPECT_EQ(m(randn({3, 1, 28, 28})).shape(), (Shape{3, 10}));
    EXPECT_EQ(m(randn({2, 784})).shape(), (Shape{2, 10}));
  }
  {
    nn::Sequential m = nn::models::cnn();
    EXPECT_EQ(m(randn({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  }
  {
    nn::Sequential m = nn::models::resnet20();
    EXPECT_EQ(m(randn({2, 3, 32, 32})).shape(), (Shape{2, 10}));
  }
}

TEST(Models, ResNet20Structure) {
  nn::Sequential model = nn::models::resnet20();
  // Conv2d, BatchNorm2d, ReLU, 9 blocks, AdaptiveAvgPool2d, Flatten, Linear.
  ASSERT_EQ(model.size(), 15u);
  EXPECT_EQ(model[0]->name(), "Conv2d");
  EXPECT_EQ(model[1]->name(), "BatchNorm2d");
  EXPECT_EQ(model[2]->name(), "ReLU");
  EXPECT_EQ(model[12]->name(), "AdaptiveAvgPool2d");
  EXPECT_EQ(model[13]->name(), "Flatten");
  EXPECT_EQ(model[14]->name(), "Linear");
  const int64_t want_planes[] = {16, 16, 16, 32, 32, 32, 64, 64, 64};
  for (size_t i = 0; i < 9; ++i) {
    auto block = model.at<BasicBlock>(3 + i);
    EXPECT_EQ(block->planes, want_planes[i]) << "block " << i;
    const bool downsample = i == 3 || i == 6;
    EXPECT_EQ(block->stride, downsample ? 2 : 1) << "block " << i;
    EXPECT_EQ(block->shortcut != nullptr, downsample) << "block " << i;
  }
  EXPECT_FALSE(model.at<nn::Conv2d>(0)->bias.defined());
  EXPECT_FALSE(model.at<BasicBlock>(3)->conv1->bias.defined());
  const auto named = model.named_parameters();
  EXPECT_TRUE(has_key(named, "3.conv1.weight"));
  EXPECT_TRUE(has_key(named, "6.shortcut.0.weight"));
  EXPECT_TRUE(has_key(named, "6.shortcut.1.bias"));
  EXPECT_FALSE(has_key(named, "3.shortcut.0.weight"));
  EXPECT_TRUE(has_key(named, "14.weight"));
}

TEST(Models, BasicBlockShapes) {
  manual_seed(2);
  BasicBlock same(8, 8);
  EXPECT_EQ(same.shortcut, nullptr);
  EXPECT_EQ(same(randn({2, 8, 6, 6})).shape(), (Shape{2, 8, 6, 6}));
  BasicBlock down(8, 16, 2);
  ASSERT_NE(down.shortcut, nullptr);
  EXPECT_EQ(down(randn({2, 8, 6, 6})).shape(), (Shape{2, 16, 3, 3}));
  EXPECT_EQ(down(randn({2, 8, 7, 7})).shape(), (Shape{2, 16, 4, 4}));
  // A change of width alone also needs the projection.
  BasicBlock wider(8, 16, 1);
  EXPECT_NE(wider.shortcut, nullptr);
  EXPECT_EQ(wider(randn({1, 8, 5, 5})).shape(), (Shape{1, 16, 5, 5}));
}

// With conv2 zeroed, bn2 sees a constant zero map and returns its bias (0), so the residual branch
// vanishes and the block reduces to relu(shortcut(x)): the add and the final ReLU are checked
// without restating the block's code.
TEST(Models, BasicBlockResidualPath) {
  manual_seed(3);
  const Tensor x = randn({2, 4, 5, 5});
  BasicBlock same(4, 4);
  {
    NoGradGuard ng;
    same.conv2->weight.zero_();
  }
  EXPECT_TRUE(testing::all_close(same(x), relu(x), 1e-6, 1e-6));

  BasicBlock down(4, 6, 2);
  {
    NoGradGuard ng;
    down.conv2->weight.zero_();
  }
  const Tensor projected = down.shortcut->forward(x);
  EXPECT_TRUE(testing::all_close(down(x), relu(projected), 1e-6, 1e-6));
}

TEST(Models, BasicBlockRejectsBadInput) {
  EXPECT_THROW(BasicBlock(0, 4), Error);
  EXPECT_THROW(BasicBlock(4, 4, 0), Error);
  BasicBlock block(4, 8, 2);
  try {
    (void)block(randn({2, 3, 8, 8}));
    FAIL() << "expected an error for 3 input channels";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BasicBlock"), std::string::npos) << e.what();
  }
}

// One step of the workload's optimizer on a batch of 2 leaves the loss and every parameter finite,
// gives every parameter a gradient, and changes the parameters.
void check_one_step(nn::Module& model, optim::Optimizer& opt, const Tensor& x) {
  const Tensor y = from_vector<int64_t>({3, 7});
  opt.zero_grad();
  const Tensor loss = cross_entropy(model(x), y);
  const float before = loss.item<float>();
  ASSERT_TRUE(std::isfinite(before));
  loss.backward();
  std::vector<Tensor> old;
  for (const Tensor& p : model.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    ASSERT_TRUE(all_finite(p.grad()));
    old.push_back(p.detach().clone());
  }
  opt.step();
  const std::vector<Tensor> params = model.parameters();
  bool changed = false;
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(all_finite(params[i])) << "parameter " << i;
    changed = changed || !testing::all_close(params[i].detach(), old[i], 0.0, 0.0);
  }
  EXPECT_TRUE(changed);
  const float after = cross_entropy(model(x), y).item<float>();
  EXPECT_TRUE(std::isfinite(after));
  for (const Tensor& b : model.buffers()) {
    if (b.dtype() == DType::f32) {
      EXPECT_TRUE(all_finite(b));
    }
  }
}

TEST(Models, MlpSgdStep) {
  manual_seed(4);
  nn::Sequential model = nn::models::mlp();
  optim::SGD opt(model.parameters(), {.lr = 0.01, .momentum = 0.9});
  check_one_step(model, opt, randn({2, 1, 28, 28}));
}

TEST(Models, CnnAdamStep) {
  manual_seed(5);
  nn::Sequential model = nn::models::cnn();
  optim::Adam opt(model.parameters(), {.lr = 1e-3});
  check_one_step(model, opt, randn({2, 1, 28, 28}));
}

TEST(Models, ResNet20SgdStep) {
  manual_seed(6);
  nn::Sequential model = nn::models::resnet20();
  optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
  check_one_step(model, opt, randn({2, 3, 32, 32}));
}

}  // namespace
}  // namespace sinter
