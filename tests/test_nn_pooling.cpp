// The 3-D pooling layers of nn/pooling.h (MaxPool3d, AvgPool3d): the ops they run, no parameters,
// their errors when built, and 3-D pooling on CUDA without the host waiting for the device.
#include "sinter/cuda.h"
#include "sinter/nn.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::ramp;

TEST(NnPooling, Pool3dLayersRunTheirOps) {
  const Tensor x = ramp({2, 3, 5, 6, 4});
  nn::MaxPool3d max({3, 2, 2}, {.stride = {2, 1, 2}, .padding = {1, 1, 0}, .dilation = {1, 2, 1}});
  EXPECT_TRUE(all_close(
      max.forward(x),
      max_pool3d(x, {3, 2, 2}, {.stride = {2, 1, 2}, .padding = {1, 1, 0}, .dilation = {1, 2, 1}}),
      0, 0));
  nn::AvgPool3d avg(2, {.ceil_mode = true, .count_include_pad = false});
  EXPECT_TRUE(all_close(avg.forward(x),
                        avg_pool3d(x, 2, {.ceil_mode = true, .count_include_pad = false}), 0, 0));
  // The default stride is the kernel size: (5, 6, 4) -> (3, 3, 2) in ceil mode, else (2, 3, 2).
  EXPECT_EQ(avg.forward(x).shape(), (Shape{2, 3, 3, 3, 2}));
  EXPECT_EQ(nn::MaxPool3d(2).forward(x).shape(), (Shape{2, 3, 2, 3, 2}));
  EXPECT_TRUE(max.named_parameters().empty());
  EXPECT_TRUE(avg.state_dict().empty());
  EXPECT_EQ(max.name(), "MaxPool3d");
  EXPECT_EQ(avg.name(), "AvgPool3d");
}

// Average pooling of a constant is that constant wherever no padding is counted; max pooling's
// gradient lands on one element per window.
TEST(NnPooling, Pool3dOfAConstantAndMaxGradient) {
  const Tensor c = full({1, 2, 5, 4, 3}, 1.5, {.dtype = DType::f64});
  const Tensor y = avg_pool3d(c, 3, {.stride = 2, .padding = 1, .count_include_pad = false});
  EXPECT_TRUE(all_close(y, full(y.shape(), 1.5, {.dtype = DType::f64}), 1e-15, 1e-15));
  Tensor x = randn({1, 1, 4, 4, 4}, {.dtype = DType::f64}).requires_grad_();
  sum(max_pool3d(x, 2)).backward();
  EXPECT_EQ(sum(x.grad()).item<double>(), 8.0);  // 2 x 2 x 2 windows, one element each
}

TEST(NnPooling, ErrorsNameTheLayerAndTheValues) {
  expect_error(
      [] {
        nn::MaxPool3d({2, 0, 2});
      },
      {"MaxPool3d", "kernel_size must be positive", "(2, 0, 2)"});
  expect_error([] { nn::MaxPool3d(2, {.padding = 2}); },
               {"MaxPool3d", "padding (2, 2, 2)", "half the kernel size"});
  expect_error(
      [] {
        nn::AvgPool3d(2, {.stride = {0, 1, 1}});
      },
      {"AvgPool3d", "stride must be positive", "(0, 1, 1)"});
  expect_error([] { nn::MaxPool3d(2, {.dilation = 0}); },
               {"MaxPool3d", "dilation must be positive", "(0, 0, 0)"});
  nn::AvgPool3d avg(2);
  expect_error([&] { avg.forward(zeros({1, 2, 1, 4, 4})); }, {"avg_pool3d", "too small"});
}

// Per Note [3-D pooling as 2-D and 1-D] in src/ops/pool.cpp, no step reads back to the host.
TEST(CudaNnPooling, Pool3dRunsWithoutWaitingForTheDevice) {
  SINTER_REQUIRE_CUDA();
  manual_seed(testing::fresh_seed());
  const Tensor x = randn({2, 3, 5, 6, 4});
  Tensor xc = x.clone().requires_grad_(), xg = x.to(Device::cuda()).requires_grad_();
  const auto run = [](const Tensor& in) {
    auto [y, i] = max_pool3d_with_indices(in, {3, 2, 2}, {.stride = 2, .padding = 1});
    return std::make_tuple(y + avg_pool3d(in, {3, 2, 2}, {.stride = 2, .padding = 1}), i);
  };
  Tensor yg, ig;
  {
    const cuda::NoSyncGuard no_sync;
    std::tie(yg, ig) = run(xg);
    sum(yg).backward();
  }
  const auto [yc, ic] = run(xc);
  sum(yc).backward();
  EXPECT_TRUE(all_close(yg.cpu(), yc, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(ig.cpu().to(DType::f64), ic.to(DType::f64), 0, 0));
  EXPECT_TRUE(all_close(xg.grad().cpu(), xc.grad(), 1e-5, 1e-5));
}

}  // namespace
}  // namespace sinter
