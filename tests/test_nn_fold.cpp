// The sliding-block layers of nn/fold.h (Unfold, Fold): the ops they run, no parameters, their
// errors when built, and unfold and fold on CUDA without the host waiting for the device.
#include <vector>

#include "sinter/cuda.h"
#include "sinter/nn.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::ramp;

TEST(NnFold, UnfoldAndFoldRunTheirOps) {
  nn::Unfold u({2, 3}, {.dilation = {2, 1}, .padding = 1, .stride = {1, 2}});
  const Tensor x = ramp({2, 3, 6, 7});
  EXPECT_TRUE(all_close(
      u.forward(x), unfold(x, {2, 3}, {.dilation = {2, 1}, .padding = 1, .stride = {1, 2}}), 0, 0));
  nn::Fold f({6, 7}, {2, 3}, {.dilation = {2, 1}, .padding = 1, .stride = {1, 2}});
  const Tensor cols = u.forward(x);
  EXPECT_EQ(cols.shape(), (Shape{2, 18, 24}));
  EXPECT_TRUE(all_close(
      f.forward(cols),
      fold(cols, {6, 7}, {2, 3}, {.dilation = {2, 1}, .padding = 1, .stride = {1, 2}}), 0, 0));
  // Non-overlapping blocks that cover the image: fold undoes unfold.
  nn::Unfold tiles(2, {.stride = 2});
  nn::Fold untile({6, 8}, 2, {.stride = 2});
  const Tensor img = ramp({1, 2, 6, 8});
  EXPECT_TRUE(all_close(untile.forward(tiles.forward(img)), img, 0, 0));
  EXPECT_TRUE(u.named_parameters().empty());
  EXPECT_TRUE(f.state_dict().empty());
  EXPECT_EQ(u.name(), "Unfold");
  EXPECT_EQ(f.name(), "Fold");
}

TEST(NnFold, ErrorsNameTheLayerAndTheValues) {
  expect_error([] { nn::Unfold(0); }, {"Unfold", "kernel_size must be positive", "(0, 0)"});
  expect_error(
      [] {
        nn::Unfold(2, {.stride = {1, 0}});
      },
      {"Unfold", "stride must be positive", "(1, 0)"});
  expect_error([] { nn::Fold({4, 0}, 2); }, {"Fold", "output_size must be positive", "(4, 0)"});
  expect_error(
      [] {
        nn::Fold(4, 2, {.padding = {0, -2}});
      },
      {"Fold", "padding must be non-negative", "(0, -2)"});
  expect_error([] { nn::Fold(4, 2, {.dilation = 0}); },
               {"Fold", "dilation must be positive", "(0, 0)"});
  nn::Fold f(4, 2);
  expect_error([&] { f.forward(zeros({1, 4, 8})); }, {"fold", "last dim 8", "3 * 3 = 9"});
}

// Per Note [sliding blocks as views] in src/ops/shape.cpp, the forward and backward pass read
// nothing back to the host, and match the CPU's.
TEST(CudaNnFold, RunsWithoutWaitingForTheDevice) {
  SINTER_REQUIRE_CUDA();
  manual_seed(testing::fresh_seed());
  const FoldOptions o{.dilation = {1, 2}, .padding = {1, 0}, .stride = {2, 1}};
  const Tensor x = randn({2, 3, 7, 8});
  Tensor xc = x.clone().requires_grad_(), xg = x.to(Device::cuda()).requires_grad_();
  const auto run = [&o](const Tensor& in) {
    const Tensor cols = unfold(in, {2, 3}, o);
    return fold(cols * cols, {7, 8}, {2, 3}, o);
  };
  Tensor yg;
  {
    const cuda::NoSyncGuard no_sync;
    yg = run(xg);
    sum(yg).backward();
  }
  const Tensor yc = run(xc);
  sum(yc).backward();
  EXPECT_TRUE(all_close(yg.cpu(), yc, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(xg.grad().cpu(), xc.grad(), 1e-5, 1e-5));
}

}  // namespace
}  // namespace sinter
