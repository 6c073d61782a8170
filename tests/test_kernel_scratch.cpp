// The scratch memory of split kernels (split row reductions, batch-norm statistics, split-K
// convolution weight gradients) comes from the caching allocator, so it shows in the memory
// statistics; the results still match the CPU reference. One row per kernel; CUDA only.
#include <cmath>
#include <functional>
#include <vector>

#include "internal/dispatch.h"
#include "kern/conv.h"
#include "kern/norm.h"
#include "kern/reduce.h"
#include "test_util.h"

namespace sinter {
namespace {

// The shapes make each kernel split its work (too few rows, channels or output tiles to fill a
// GPU), which is when it needs scratch. Inputs are uniform in [0, 1), so sums do not cancel.
struct SplitCase {
  const char* name;
  DType in_dtype, out_dtype;
  std::vector<Shape> inputs, outputs;
  double rtol;
  // cpu or cudak (same signatures), on the data of `in` and `out`.
  std::function<void(bool cuda, const kern::Ctx& ctx, const std::vector<Tensor>& in,
                     const std::vector<Tensor>& out)>
      launch;
};

kern::Conv2dGeom wgrad_geom() {
  kern::Conv2dGeom g;
  g.n = 8, g.c_in = 4, g.h = 32, g.w = 32;
  g.c_out = 8, g.kh = 3, g.kw = 3, g.h_out = 32, g.w_out = 32;
  g.pad_h = 1, g.pad_w = 1;
  return g;
}

const std::vector<SplitCase>& split_cases() {
  static const std::vector<SplitCase> all = {
      {"reduce_rows",
       DType::f64,
       DType::f64,
       {{2, 1 << 20}},
       {{2}},
       1e-10,
       [](bool cuda, const kern::Ctx& ctx, const auto& in, const auto& out) {
         const auto f = SINTER_TEST_KERNEL(cuda, reduce_rows);
         f(ctx, in[0].data_ptr(), DType::f64, 2, 1 << 20, kern::ReduceOp::Sum, out[0].data_ptr(),
           DType::f64, nullptr);
       }},
      {"batch_norm_stats",
       DType::f64,
       DType::f64,
       {{16, 2, 4096}},
       {{2}, {2}, {2}},
       1e-9,
       [](bool cuda, const kern::Ctx& ctx, const auto& in, const auto& out) {
         const auto f = SINTER_TEST_KERNEL(cuda, batch_norm_stats);
         f(ctx, in[0].data_ptr(), DType::f64, 16, 2, 4096, 1e-5, out[0].data_ptr(),
           out[1].data_ptr(), out[2].data_ptr());
       }},
      {"conv2d_backward_weight",
       DType::bf16,
       DType::bf16,
       {{8, 4, 32, 32}, {8, 8, 32, 32}},
       {{8, 4, 3, 3}},
       1e-2,
       [](bool cuda, const kern::Ctx& ctx, const auto& in, const auto& out) {
         const auto f = SINTER_TEST_KERNEL(cuda, conv2d_backward_weight);
         f(ctx, wgrad_geom(), DType::bf16, in[0].data_ptr(), in[1].data_ptr(), out[0].data_ptr());
       }},
  };
  return all;
}

// Regression: the scratch came from cudaMallocAsync, outside the caching allocator's statistics
// and its out-of-memory retry.
TEST(CudaAllocatorKernelScratch, SplitKernelsTakeItFromTheCache) {
  SINTER_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  const uint64_t seed = testing::fresh_seed();
  Generator gen(seed);
  for (const SplitCase& c : split_cases()) {
    SCOPED_TRACE(::testing::Message() << c.name << " seed " << seed);
    std::vector<Tensor> in, in_dev, want, got;
    for (const Shape& s : c.inputs) {
      in.push_back(rand(s, {.dtype = c.in_dtype}, &gen));
      in_dev.push_back(in.back().to(dev));
    }
    for (const Shape& s : c.outputs) {
      want.push_back(empty(s, {.dtype = c.out_dtype}));
      got.push_back(full(s, std::nan(""), {.dtype = c.out_dtype, .device = dev}));
    }
    c.launch(false, kernel_ctx(Device::cpu()), in, want);

    cuda::reset_peak_memory_stats(dev.index);
    const cuda::MemoryStats before = cuda::memory_stats(dev.index);
    c.launch(true, kernel_ctx(dev), in_dev, got);
    const cuda::MemoryStats after = cuda::memory_stats(dev.index);
    EXPECT_EQ(after.num_allocs, before.num_allocs + 1);
    EXPECT_EQ(after.num_frees, before.num_frees + 1);
    EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
    EXPECT_GT(after.peak_allocated_bytes, before.allocated_bytes);

    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(testing::all_close(got[i].cpu(), want[i], 0.0, c.rtol)) << "output " << i;
    }
  }
}

}  // namespace
}  // namespace sinter
