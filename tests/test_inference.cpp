// Inference: the convolution's epilogue activation (CPU reference, oneDNN and CUDA against the
// separate ops), nn::fuse_for_inference (Note [inference fusion]) against the unfused modules, and
// its errors. InferenceMode itself is tested with the autograd engine (test_autograd.cpp).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;

Tensor unfused(const Tensor& y, Activation act) {
  return act == Activation::Relu ? relu(y) : act == Activation::None ? y : gelu(y, act);
}

struct ConvCase {
  Shape x, w;
  bool bias;
  Conv2dOptions o;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {{2, 3, 7, 6}, {5, 3, 3, 3}, true, {.padding = 1}},
      {{3, 4, 9, 8}, {6, 2, 3, 2}, false, {.stride = {2, 1}, .padding = {1, 0}, .groups = 2}},
      {{1, 6, 5, 5}, {6, 1, 3, 3}, true, {.padding = 2, .dilation = 2, .groups = 6}},
      {{2, 8, 4, 4}, {3, 8, 1, 1}, true, {}},
  };
  return cases;
}

constexpr Activation kActs[] = {Activation::Relu, Activation::Gelu, Activation::GeluTanh};

// conv2d(..., act) without a graph runs the epilogue; against act(conv2d(...)).
void check_epilogue(DType dtype, double tol) {
  for (const ConvCase& c : conv_cases()) {
    const Tensor x = randn(c.x, {.dtype = dtype}), w = randn(c.w, {.dtype = dtype});
    const Tensor b = c.bias ? randn({c.w[0]}, {.dtype = dtype}) : Tensor();
    for (const Activation act : kActs) {
      NoGradGuard no_grad;
      const Tensor fused = conv2d(x, w, b, c.o, act);
      EXPECT_TRUE(all_close(fused, unfused(conv2d(x, w, b, c.o), act), tol, tol))
          << dtype << " act " << static_cast<int>(act) << " x " << shape_str(c.x);
    }
  }
}

TEST(Inference, ConvEpilogueActivationMatchesTheSeparateOp) {
  manual_seed(testing::fresh_seed());
  for (const bool onednn : {true, false}) {
    const bool before = onednn_enabled();
    set_onednn_enabled(onednn);
    check_epilogue(DType::f32, 1e-5);
    check_epilogue(DType::bf16, 2e-2);
    set_onednn_enabled(before);
  }
  check_epilogue(DType::f64, 1e-12);
}

TEST(Inference, ConvWithActivationIsDifferentiable) {
  manual_seed(testing::fresh_seed());
  const ConvCase& c = conv_cases()[1];
  for (const Activation act : kActs) {
    Tensor x = randn(c.x, {.dtype = DType::f64}).requires_grad_(true);
    Tensor w = randn(c.w, {.dtype = DType::f64}).requires_grad_(true);
    Tensor b = randn({c.w[0]}, {.dtype = DType::f64}).requires_grad_(true);
    const Tensor g = randn({c.x[0], c.w[0], 5, 7}, {.dtype = DType::f64});
    sum(conv2d(x, w, b, c.o, act) * g).backward();
    const std::vector<double> fused = testing::flat_values({x.grad(), w.grad(), b.grad()});
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    sum(unfused(conv2d(x, w, b, c.o), act) * g).backward();
    EXPECT_LE(
        testing::relative_difference(fused, testing::flat_values({x.grad(), w.grad(), b.grad()})),
        1e-13);
  }
}

TEST(CudaInference, ConvEpilogueMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  manual_seed(testing::fresh_seed());
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const double tol = dtype == DType::f32 ? 2e-4 : 3e-2;
    for (const ConvCase& c : conv_cases()) {
      const Tensor x = randn(c.x, {.dtype = dtype}), w = randn(c.w, {.dtype = dtype});
      const Tensor b = c.bias ? randn({c.w[0]}, {.dtype = dtype}) : Tensor();
      for (const Activation act : kActs) {
        NoGradGuard no_grad;
        const Tensor gpu =
            conv2d(x.cuda(), w.cuda(), b.defined() ? b.cuda() : Tensor(), c.o, act).cpu();
        const Tensor cpu = unfused(conv2d(x.to(DType::f32), w.to(DType::f32),
                                          b.defined() ? b.to(DType::f32) : Tensor(), c.o),
                                   act);
        EXPECT_TRUE(all_close(gpu.to(DType::f32), cpu, tol, tol))
            << dtype << " act " << static_cast<int>(act) << " x " << shape_str(c.x);
      }
    }
  }
}

// Every module of the tree, depth first.
void visit(nn::Module& m, const std::function<void(nn::Module&)>& f) {
  f(m);
  for (const auto& child : m.children()) visit(*child, f);
}

// Batch and instance norm statistics and affine parameters away from their starts, as training
// leaves them.
void randomize_batch_norms(nn::Module& m) {
  NoGradGuard no_grad;
  visit(m, [](nn::Module& mod) {
    auto* bn = dynamic_cast<nn::NormBase*>(&mod);
    if (bn == nullptr) return;
    if (bn->track_running_stats) {
      bn->running_mean.copy_(randn(bn->running_mean.shape()) * 0.5);
      bn->running_var.copy_(rand(bn->running_var.shape()) * 1.5 + 0.5);
    }
    if (bn->affine) {
      bn->weight.copy_(randn(bn->weight.shape()) * 0.3 + 1.0);
      bn->bias.copy_(randn(bn->bias.shape()) * 0.3);
    }
  });
}

int64_t count_of(nn::Module& m, const std::string& type) {
  int64_t n = 0;
  visit(m, [&](nn::Module& mod) { n += mod.name() == type; });
  return n;
}

TEST(Inference, BatchNorm1dNormalizesDimOne) {
  manual_seed(testing::fresh_seed());
  nn::BatchNorm1d bn(5);
  randomize_batch_norms(bn);
  for (const Shape& s : {Shape{7, 5}, Shape{3, 5, 4}}) {
    const Tensor x = randn(s);
    bn.eval();
    NoGradGuard no_grad;
    EXPECT_TRUE(all_close(bn.forward(x),
                          batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, false),
                          0, 0));
    bn.train();
    EXPECT_TRUE(all_close(bn.forward(x),
                          batch_norm(x, Tensor(), Tensor(), bn.weight, bn.bias, true), 1e-6, 1e-6));
  }
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  expect_error([&] { (void)bn.forward(randn({2, 5, 3, 3})); }, {"BatchNorm1d", "(N, 5)"});
  expect_error([&] { (void)bn.forward(randn({1, 5})); }, {"BatchNorm1d", "more than one value"});
  EXPECT_EQ(bn.state_dict().size(), 5u);
}

struct FuseCase {
  std::string name;
  std::function<std::shared_ptr<nn::Module>()> make;
  Shape input;
  int64_t batch_norms_left = 0;
  int64_t relus_left = 0;  // after a module that takes no epilogue
};

template <class M>
std::function<std::shared_ptr<nn::Module>()> make(std::function<M()> f) {
  return [f] { return std::make_shared<M>(f()); };
}

std::vector<FuseCase> fuse_cases() {
  using nn::Sequential;
  return {
      {"Mlp", make<Sequential>(nn::models::mlp), {5, 1, 28, 28}},
      {"Cnn", make<Sequential>(nn::models::cnn), {5, 1, 28, 28}},
      {"ResNet20", make<Sequential>([] { return nn::models::resnet20(1); }), {3, 1, 32, 32}},
      {"ConvBnReluDropoutNotAffine",
       make<Sequential>([] {
         return Sequential(nn::Conv2d(3, 4, 3, {.groups = 1, .bias = false}),
                           nn::BatchNorm2d(4, 1e-3, 0.1, false), nn::ReLU(), nn::Dropout(0.3),
                           nn::Conv2d(4, 6, 3, {.stride = 2, .groups = 2}), nn::BatchNorm2d(6),
                           nn::GELU(Activation::GeluTanh), nn::Flatten(), nn::Linear(6 * 16, 3),
                           nn::GELU());
       }),
       {4, 3, 12, 12}},
      {"LinearBatchNorm1dRelu",
       make<Sequential>([] {
         return Sequential(nn::Flatten(), nn::Linear(16, 8), nn::BatchNorm1d(8), nn::ReLU(),
                           nn::Linear(8, 6, false), nn::BatchNorm1d(6, 1e-3, 0.1, false),
                           nn::Linear(6, 3));
       }),
       {4, 1, 4, 4}},
      // A BatchNorm after a pool (nothing to fold into) and one without running statistics stay.
      {"UnfoldableBatchNormsStay",
       make<Sequential>([] {
         return Sequential(nn::Conv2d(2, 3, 1), nn::MaxPool2d(2), nn::BatchNorm2d(3), nn::ReLU(),
                           nn::Conv2d(3, 3, 1), nn::BatchNorm2d(3, 1e-5, 0.1, true, false));
       }),
       {4, 2, 6, 6},
       2,
       1},
      // The layers of the other model families, copied with their state and settings.
      {"NormsResamplingActivations",
       make<Sequential>([] {
         return Sequential(
             nn::Conv2d(2, 8, 3, {.padding = 1}), nn::GroupNorm(2, 8), nn::Mish(),
             nn::Upsample({.scale_factor = {2, 2}, .mode = InterpolateMode::Bilinear}),
             nn::InstanceNorm2d(8, 1e-5, 0.1, true, true), nn::ELU(0.5), nn::PixelUnshuffle(2),
             nn::Conv2d(32, 8, 1), nn::PReLU(8, 0.1), nn::Hardswish(), nn::MaxPool2d(2),
             nn::Identity(), nn::SELU(), nn::Hardsigmoid(), nn::Flatten(), nn::Linear(128, 6),
             nn::LogSoftmax(1));
       }),
       {3, 2, 8, 8}},
  };
}

TEST(Inference, FusedModelsMatchTheOriginal) {
  for (const FuseCase& c : fuse_cases()) {
    SCOPED_TRACE(c.name);
    manual_seed(testing::fresh_seed());
    std::shared_ptr<nn::Module> m = c.make();
    randomize_batch_norms(*m);
    const std::vector<double> before = testing::flat_values(m->parameters());
    const GeneratorState rng = default_generator().state();
    const std::shared_ptr<nn::Module> fused = nn::fuse_for_inference(*m);
    // The original is left as it was, and so is the default generator.
    EXPECT_TRUE(m->is_training());
    EXPECT_EQ(testing::flat_values(m->parameters()), before);
    EXPECT_EQ(default_generator().state().offset, rng.offset);
    EXPECT_FALSE(fused->is_training());
    EXPECT_EQ(count_of(*fused, "BatchNorm2d"), c.batch_norms_left);
    EXPECT_EQ(count_of(*fused, "ReLU"), c.relus_left);
    EXPECT_EQ(count_of(*fused, "Dropout"), 0);
    for (const Tensor& p : fused->parameters()) {
      for (const Tensor& q : m->parameters()) EXPECT_NE(p.data_ptr(), q.data_ptr());
    }

    const Tensor x = randn(c.input);
    m->eval();
    Tensor expected, got;
    {
      InferenceMode im;
      expected = m->forward(x);
      got = fused->forward(x);
    }
    EXPECT_TRUE(got.is_inference());
    const double error =
        testing::relative_difference(testing::flat_values({got}), testing::flat_values({expected}));
    std::printf("%s: fused relative error %.3g\n", c.name.c_str(), error);
    EXPECT_LE(error, 1e-5);

    // In f64 the folding is exact to f64 rounding.
    m->to(DType::f64);
    const std::shared_ptr<nn::Module> fused64 = nn::fuse_for_inference(*m);
    NoGradGuard no_grad;
    const Tensor x64 = x.to(DType::f64);
    const Tensor out64 = fused64->forward(x64);
    EXPECT_EQ(out64.dtype(), DType::f64);
    EXPECT_LE(testing::relative_difference(testing::flat_values({out64}),
                                           testing::flat_values({m->forward(x64)})),
              1e-12);
  }
}

TEST(Inference, FuseCopiesAModuleDictEntryByEntry) {
  manual_seed(testing::fresh_seed());
  nn::ModuleDict d({{"enc", std::make_shared<nn::Sequential>(nn::Conv2d(1, 4, 3),
                                                             nn::BatchNorm2d(4), nn::ReLU())},
                    {"up", std::make_shared<nn::ConvTranspose2d>(
                               4, 2, 2, nn::ConvTranspose2dOptions{.stride = 2})}});
  randomize_batch_norms(d);
  const auto fused = std::dynamic_pointer_cast<nn::ModuleDict>(nn::fuse_for_inference(d));
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->keys(), (std::vector<std::string>{"enc", "up"}));
  const auto enc = fused->at<nn::Sequential>("enc");
  ASSERT_EQ(enc->size(), 1u);  // the batch norm and the relu folded into the convolution
  const Tensor x = randn({2, 1, 6, 6});
  d.eval();
  NoGradGuard no_grad;
  const Tensor h = d["enc"]->forward(x);
  EXPECT_TRUE(all_close(enc->forward(x), h, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(fused->at<nn::ConvTranspose2d>("up")->forward(h),
                        d.at<nn::ConvTranspose2d>("up")->forward(h), 0, 0));
}

TEST(Inference, FusedResNetBlocksHoldOnlyConvolutions) {
  manual_seed(testing::fresh_seed());
  nn::Sequential m = nn::models::resnet20(1);
  const std::shared_ptr<nn::Module> fused = nn::fuse_for_inference(m);
  const auto* seq = dynamic_cast<const nn::Sequential*>(fused.get());
  ASSERT_NE(seq, nullptr);
  // conv (bn and relu folded in), nine blocks, pool, flatten, linear.
  ASSERT_EQ(seq->size(), 13u);
  const auto first = seq->at<nn::Conv2d>(0);
  EXPECT_EQ(first->activation, Activation::Relu);
  EXPECT_TRUE(first->bias.defined());
  const auto block = seq->at<nn::models::BasicBlock>(4);  // stage 2's first: a projection
  EXPECT_TRUE(block->fused);
  EXPECT_EQ(block->bn1, nullptr);
  EXPECT_EQ(block->conv1->activation, Activation::Relu);
  EXPECT_EQ(block->conv2->activation, Activation::None);
  ASSERT_NE(block->shortcut, nullptr);
  EXPECT_EQ(block->shortcut->size(), 1u);
  const StateDict state = fused->state_dict();
  EXPECT_TRUE(state.count("4.conv1.bias"));
  EXPECT_TRUE(state.count("4.shortcut.0.bias"));
  EXPECT_FALSE(state.count("4.bn1.weight"));
  // Fusing a fused model changes nothing.
  const std::shared_ptr<nn::Module> again = nn::fuse_for_inference(*fused);
  const Tensor x = randn({2, 1, 32, 32});
  NoGradGuard no_grad;
  EXPECT_TRUE(all_close(again->forward(x), fused->forward(x), 0, 0));
}

TEST(Inference, FuseKeepsTheDtype) {
  manual_seed(testing::fresh_seed());
  nn::Sequential m = nn::models::cnn();
  m.to(DType::bf16);
  const std::shared_ptr<nn::Module> fused = nn::fuse_for_inference(m);
  for (const Tensor& p : fused->parameters()) EXPECT_EQ(p.dtype(), DType::bf16);
  const Tensor x = randn({2, 1, 28, 28}, {.dtype = DType::bf16});
  NoGradGuard no_grad;
  m.eval();
  EXPECT_TRUE(all_close(fused->forward(x).to(DType::f32), m.forward(x).to(DType::f32), 3e-2, 3e-2));
}

TEST(CudaInference, FusedResNetMatchesTheOriginal) {
  SINTER_REQUIRE_CUDA();
  manual_seed(testing::fresh_seed());
  nn::Sequential m = nn::models::resnet20(1);
  randomize_batch_norms(m);
  m.to(Device::cuda());
  const std::shared_ptr<nn::Module> fused = nn::fuse_for_inference(m);
  for (const Tensor& p : fused->parameters()) EXPECT_TRUE(p.device().is_cuda());
  m.eval();
  const Tensor x = randn({3, 1, 32, 32}).cuda();
  InferenceMode im;
  EXPECT_LE(testing::relative_difference(testing::flat_values({fused->forward(x)}),
                                         testing::flat_values({m.forward(x)})),
            1e-5);
}

class Custom : public nn::Module {
 public:
  std::string name() const override { return "Custom"; }
  Tensor forward(const Tensor& x) override { return x; }
};

TEST(Inference, FuseErrorsNameTheModule) {
  nn::Sequential m(nn::Linear(3, 3), nn::Sequential(nn::ReLU(), Custom()));
  expect_error([&] { (void)nn::fuse_for_inference(m); },
               {"fuse_for_inference", "module '1.1'", "Custom", "Sequential"});
  nn::models::BasicBlock b(4, 4);
  b.bn2 = b.register_module("bn2_untracked", nn::BatchNorm2d(4, 1e-5, 0.1, true, false));
  expect_error([&] { (void)nn::fuse_for_inference(b); },
               {"fuse_for_inference", "module 'bn2'", "running statistics"});
}

// nn::clone: a deep copy, nothing folded, the same names, values, modes and requires_grad.
TEST(Clone, CopiesTheTreeWithNewTensors) {
  manual_seed(3);
  nn::Sequential model(nn::Linear(4, 8), nn::BatchNorm1d(8), nn::ReLU(),
                       nn::models::BasicBlock(8, 8), nn::Dropout(0.5));
  // BasicBlock takes 4-D input: keep the test to the parts that run on (N, C) and the block alone.
  nn::Sequential mlp(nn::Linear(4, 8), nn::BatchNorm1d(8), nn::ReLU(), nn::Linear(8, 3));
  mlp.parameters()[0].requires_grad_(false);
  mlp.eval();
  const GeneratorState before = default_generator().state();
  const std::shared_ptr<nn::Module> copy = nn::clone(mlp);
  EXPECT_EQ(default_generator().state().offset, before.offset);
  EXPECT_EQ(copy->name(), "Sequential");
  EXPECT_FALSE(copy->is_training());
  const auto a = mlp.named_parameters(), b = copy->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.requires_grad(), b[i].second.requires_grad());
    EXPECT_FALSE(a[i].second.storage().is_same(b[i].second.storage()));
    EXPECT_TRUE(all_close(a[i].second, b[i].second, 0.0, 0.0));
  }
  const Tensor x = randn({5, 4});
  EXPECT_TRUE(all_close((*copy)(x), mlp(x), 0.0, 0.0));
  {
    NoGradGuard no_grad;
    copy->parameters()[1].add_(1.0);  // the copy's tensors are its own
  }
  EXPECT_FALSE(all_close((*copy)(x), mlp(x), 1e-3, 1e-3));
  const auto block = nn::clone(*model.named_children()[3].second);
  EXPECT_EQ(block->name(), "BasicBlock");
  EXPECT_EQ(block->named_parameters().size(),
            model.named_children()[3].second->named_parameters().size());
}

TEST(Clone, AnUnknownModuleIsAnErrorNamingIt) {
  struct Custom : nn::Module {
    std::string name() const override { return "Custom"; }
  };
  nn::Sequential model;
  model.push_back(std::make_shared<Custom>());
  expect_error([&] { nn::clone(model); }, {"clone: cannot copy module '0'", "Custom"});
}

}  // namespace
}  // namespace sinter
