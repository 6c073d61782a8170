// CUDA graphs and the no-sync guard: the guard's rules (any machine), GraphedStep's eager warm-up,
// and on a device: capture and replay with static inputs, a captured training step replayed 100
// times against 100 eager steps, and the clear errors of code a capture cannot record.
#include <memory>
#include <string>
#include <vector>

#include "internal/dispatch.h"
#include "kern/ctx.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::expect_error;

TEST(NoSyncGuard, NestsAndNamesTheCall) {
  EXPECT_TRUE(cuda::host_sync_allowed());
  {
    const cuda::NoSyncGuard outer;
    EXPECT_FALSE(cuda::host_sync_allowed());
    {
      const cuda::NoSyncGuard inner;
      EXPECT_FALSE(cuda::host_sync_allowed());
    }
    EXPECT_FALSE(cuda::host_sync_allowed());
    expect_error([] { cuda::check_host_sync("Tensor::item"); },
                 {"Tensor::item", "NoSyncGuard", "on the device"});
    // CPU tensors never make the host wait.
    EXPECT_EQ(sum(ones({4})).item<float>(), 4.0f);
  }
  EXPECT_TRUE(cuda::host_sync_allowed());
  cuda::check_host_sync("anything");  // allowed again
}

TEST(GraphedStep, RunsEagerlyThroughTheWarmUp) {
  int calls = 0;
  cuda::GraphedStep step([&] { ++calls; }, 2);
  step.run();
  step.run();
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(step.graphed());
  EXPECT_FALSE(cuda::is_capturing());
  expect_error([] { cuda::GraphedStep s([] {}, 0); }, {"GraphedStep", "warmup", "0"});
  expect_error([] { cuda::GraphedStep s(nullptr); }, {"GraphedStep", "empty"});
}

TEST(CudaGraph, ReplaysOnStaticInputs) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions cuda{.device = Device::cuda()};
  Tensor x = zeros({1000}, cuda);
  Tensor y;
  cuda::Graph graph;
  graph.capture([&] { y = add(mul(x, 2.0), 1.0); });
  EXPECT_TRUE(graph.captured());
  for (double v : {1.0, -3.0, 0.5}) {
    x.copy_(full({1000}, v, cuda));
    graph.replay();
    EXPECT_TRUE(testing::all_close(y.cpu(), full({1000}, 2 * v + 1), 0, 0)) << v;
  }
  expect_error([&] { graph.capture([] {}); }, {"Graph::capture", "already"});
}

TEST(CudaGraph, CaptureRefusesHostReadsWithAClearError) {
  SINTER_REQUIRE_CUDA();
  const Tensor x = ones({8}, {.device = Device::cuda()});
  cuda::Graph graph;
  expect_error([&] { graph.capture([&] { (void)sum(x).item<float>(); }); },
               {"NoSyncGuard", "device to the host"});
  EXPECT_FALSE(cuda::is_capturing());
  // The device and the current stream work as before.
  EXPECT_EQ(sum(x).item<float>(), 8.0f);
}

// A linear model trained with capturable SGD (momentum) on mse_loss: 100 replays of a captured step
// give the parameters of 100 eager steps, bit for bit in f32 (the same kernels in the same order).
TEST(CudaGraph, CapturedStepMatchesEagerSteps) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions cuda{.device = Device::cuda()};
  struct Run {
    nn::Linear model{16, 4};
    std::unique_ptr<optim::SGD> opt;
    Tensor x, y;
  };
  auto make = [&] {
    manual_seed(5);
    auto r = std::make_unique<Run>();
    r->model.to(Device::cuda());
    r->opt = std::make_unique<optim::SGD>(
        r->model.parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .capturable = true});
    r->x = randn({32, 16}, cuda);
    r->y = randn({32, 4}, cuda);
    return r;
  };
  auto step = [](Run& r) {
    r.opt->zero_grad();
    mse_loss(r.model.forward(r.x), r.y).backward();
    r.opt->step();
  };
  auto eager = make();
  for (int i = 0; i < 100; ++i) step(*eager);
  auto graphed = make();
  cuda::GraphedStep g([&] { step(*graphed); }, 3);
  for (int i = 0; i < 100; ++i) g.run();
  EXPECT_TRUE(g.graphed());
  const std::vector<Tensor> a = eager->model.parameters(), b = graphed->model.parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(testing::all_close(b[i].cpu(), a[i].cpu(), 0, 0)) << "parameter " << i;
  }
  // The eager step makes no host synchronization either.
  const cuda::NoSyncGuard no_sync;
  step(*eager);
}

// The mlp on cross-entropy with capturable Adam (Note [capturable adam]): a graphed run and an
// eager one take the same 30 steps, on the same batches copied into static inputs, bit for bit.
TEST(CudaGraph, CapturedMlpWithCapturableAdamMatchesEager) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions cuda{.device = Device::cuda()};
  manual_seed(9);
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 30; ++i) {
    xs.push_back(randn({16, 784}, cuda));
    ys.push_back(randint(0, 10, {16}, {.dtype = DType::i64}).to(Device::cuda()));
  }
  struct Run {
    nn::Sequential model = nn::models::mlp();
    std::unique_ptr<optim::Adam> opt;
    Tensor x, y;
    void step() {
      opt->zero_grad();
      cross_entropy(model.forward(x), y).backward();
      opt->step();
    }
  };
  auto make = [&] {
    manual_seed(3);
    auto r = std::make_unique<Run>();
    r->model.to(Device::cuda());
    r->opt = std::make_unique<optim::Adam>(r->model.parameters(),
                                           optim::AdamOptions{.lr = 1e-3, .capturable = true});
    r->x = xs[0].clone();
    r->y = ys[0].clone();
    return r;
  };
  auto eager = make(), graphed = make();
  cuda::GraphedStep g([&] { graphed->step(); }, 3);
  for (size_t i = 0; i < xs.size(); ++i) {
    eager->x.copy_(xs[i]);
    eager->y.copy_(ys[i]);
    eager->step();
    graphed->x.copy_(xs[i]);
    graphed->y.copy_(ys[i]);
    g.run();
  }
  EXPECT_TRUE(g.graphed());
  const std::vector<Tensor> a = eager->model.parameters(), b = graphed->model.parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(testing::all_close(b[i].cpu(), a[i].cpu(), 0, 0)) << "parameter " << i;
  }
}

// Activation checkpointing inside a captured step (Note [activation checkpointing]): the blocks'
// forward runs without grad and backward recomputes them, all on the device; a graphed GPT with
// checkpointed blocks and capturable AdamW takes the eager run's 10 steps bit for bit.
TEST(CudaGraph, CheckpointedGptStepMatchesEager) {
  SINTER_REQUIRE_CUDA();
  manual_seed(4);
  const Tensor idx = randint(0, 50, {4, 16}, {.dtype = DType::i64}).to(Device::cuda());
  struct Run {
    std::unique_ptr<nn::models::GPT> model;
    std::unique_ptr<optim::AdamW> opt;
    Tensor x;
    void step() {
      opt->zero_grad();
      cross_entropy(model->forward(x).reshape({-1, 50}), x.reshape({-1})).backward();
      opt->step();
    }
  };
  auto make = [&] {
    manual_seed(6);
    auto r = std::make_unique<Run>();
    r->model = std::make_unique<nn::models::GPT>(nn::models::GPTConfig{.vocab_size = 50,
                                                                       .context_length = 16,
                                                                       .n_layer = 2,
                                                                       .n_head = 2,
                                                                       .n_embd = 32,
                                                                       .checkpoint_blocks = true});
    r->model->to(Device::cuda());
    r->opt = std::make_unique<optim::AdamW>(r->model->parameters(),
                                            optim::AdamWOptions{.lr = 1e-3, .capturable = true});
    r->x = idx.clone();
    return r;
  };
  auto eager = make(), graphed = make();
  cuda::GraphedStep g([&] { graphed->step(); }, 3);
  for (int i = 0; i < 10; ++i) {
    eager->step();
    g.run();
  }
  EXPECT_TRUE(g.graphed());
  const std::vector<Tensor> a = eager->model->parameters(), b = graphed->model->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(testing::all_close(b[i].cpu(), a[i].cpu(), 0, 0)) << "parameter " << i;
  }
}

// Per Note [deferred device checks], the CPU throws at once, with the message CUDA gives later.
TEST(DeviceChecks, TheCpuThrowsAtOnce) {
  const Tensor t = from_vector<int64_t>({1, -100, 7}, {3});
  const auto* p = static_cast<const int64_t*>(t.data_ptr());
  expect_error(
      [&] {
        SINTER_DISPATCH(Device::cpu(), check_indices, p, 3, 0, 5, -100,
                        kern::DeviceCheck::CrossEntropyTarget);
      },
      {"cross_entropy: target 7", "out of range [0, 5)", "ignore_index (-100)"});
  SINTER_DISPATCH(Device::cpu(), check_indices, p, 2, 0, 5, -100,
                  kern::DeviceCheck::CrossEntropyTarget);  // 1 and the ignored -100 pass
  expect_error(
      [&] {
        SINTER_DISPATCH(Device::cpu(), check_indices, p, 3, 0, 4, 0,
                        kern::DeviceCheck::EmbeddingIndex);
      },
      {"embedding", "index -100", "4 rows"});
}

TEST(CudaDeviceChecks, ABadTargetIsReportedAtTheNextSynchronization) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions cuda{.device = Device::cuda()};
  const Tensor logits = randn({4, 5}, cuda);
  const Tensor bad = from_vector<int64_t>({0, 9, 1, -100}, {4}).to(Device::cuda());
  Tensor loss;
  {
    const cuda::NoSyncGuard no_sync;  // the check does not wait for the device
    loss = cross_entropy(logits, bad);
  }
  expect_error([&] { (void)loss.item<float>(); },
               {"cross_entropy: target 9", "out of range [0, 5)", "reported at this"});
  // Reported once: the device and later results are fine.
  const Tensor good = from_vector<int64_t>({0, 4, 1, -100}, {4}).to(Device::cuda());
  EXPECT_TRUE(testing::all_close(cross_entropy(logits, good).cpu(),
                                 cross_entropy(logits.cpu(), good.cpu()), 1e-5, 1e-5));
  const Tensor table = randn({4, 3}, cuda);
  const Tensor rows = embedding(table, from_vector<int64_t>({1, 4}, {2}).to(Device::cuda()));
  expect_error([&] { cuda::synchronize(); }, {"embedding", "index 4", "4 rows"});
  EXPECT_TRUE(testing::all_close(rows.cpu().narrow(0, 1, 1), zeros({1, 3}), 0, 0));
}

// Per Note [cuda graphs], optimizer state made inside a capture would start afresh at every replay
// (a momentum buffer set to the update each time, Adam's moments and step count zeroed), and a host
// learning rate would be baked in: each is refused, and the Graph stays as new.
TEST(CudaGraph, OptimizersRefuseToMakeStateInsideACapture) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions cuda{.device = Device::cuda()};
  Tensor a = randn({64}, cuda).requires_grad_(true), b = randn({3, 5}, cuda).requires_grad_(true);
  a.set_grad(randn({64}, cuda));
  auto refused = [&](optim::Optimizer& opt, std::initializer_list<std::string> words) {
    cuda::Graph graph;
    expect_error([&] { graph.capture([&] { opt.step(); }); }, words);
    EXPECT_FALSE(graph.captured());
    EXPECT_FALSE(cuda::is_capturing());
  };
  optim::SGD sgd({a, b}, {.lr = 0.1, .momentum = 0.9, .capturable = true});
  refused(sgd, {"SGD", "parameter 0 of group 0", "\"momentum_buffer\"", "capture", "eagerly"});
  optim::SGD plain({a, b}, {.lr = 0.1});
  refused(plain, {"SGD", "capturable = true"});
  // A parameter whose first gradient comes after the eager steps.
  optim::Adam adam({a, b}, {.lr = 1e-3, .capturable = true});
  adam.step();
  b.set_grad(randn({3, 5}, cuda));
  refused(adam, {"Adam", "parameter 1 of group 0", "\"step\"", "capture"});
  adam.step();  // made eagerly, the state captures
  cuda::Graph graph;
  graph.capture([&] { adam.step(); });
  EXPECT_TRUE(graph.captured());
}

// Every reference workload's eager training step runs without a host synchronization.
TEST(CudaGraph, WorkloadStepsNeverWaitForTheDevice) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions cuda{.device = Device::cuda()};
  const auto labels = [&](int64_t n, int64_t classes, Shape shape) {
    return randint(0, classes, shape.empty() ? Shape{n} : shape, {.dtype = DType::i64})
        .to(Device::cuda());
  };
  auto check = [&](nn::Module& model, const Tensor& x, const Tensor& y, int64_t classes,
                   const std::string& name) {
    SCOPED_TRACE(name);
    model.to(Device::cuda());
    optim::SGD opt(model.parameters(), {.lr = 0.01, .momentum = 0.9});
    for (int i = 0; i < 2; ++i) {  // the second step with the momentum buffers in place
      const cuda::NoSyncGuard no_sync;
      opt.zero_grad();
      cross_entropy(model.forward(x).reshape({-1, classes}), y.reshape({-1})).backward();
      opt.step();
    }
  };
  nn::Sequential mlp = nn::models::mlp(), cnn = nn::models::cnn(), resnet = nn::models::resnet20();
  check(mlp, randn({8, 1, 28, 28}, cuda), labels(8, 10, {}), 10, "mlp");
  check(cnn, randn({8, 1, 28, 28}, cuda), labels(8, 10, {}), 10, "cnn");
  check(resnet, randn({4, 3, 32, 32}, cuda), labels(4, 10, {}), 10, "resnet20");
  nn::models::GPT gpt({.context_length = 32, .n_layer = 2, .n_head = 2, .n_embd = 64});
  check(gpt, labels(2, 256, {2, 32}), labels(2, 256, {2, 32}), 256, "gpt");
}

}  // namespace
}  // namespace sinter
