// CUDA graphs and the no-sync guard: the guard's rules (any machine), GraphedStep's eager warm-up,
// and on a device: capture and replay with static inputs, a captured training step replayed 100
// times against 100 eager steps, and the clear errors of code a capture cannot record.
#include <string>
#include <vector>

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

// A linear model trained with SGD (momentum) on mse_loss: 100 replays of a captured step give the
// parameters of 100 eager steps, bit for bit in f32 (the same kernels in the same order).
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
    r->opt = std::make_unique<optim::SGD>(r->model.parameters(),
                                          optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
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

}  // namespace
}  // namespace sinter
