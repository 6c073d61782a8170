// Deterministic mode (Note [deterministic algorithms]): the switch, training steps that touch every
// path the mode changes, bitwise equal from run to run on the CPU and (on a device) on CUDA, and
// each fixed-order CUDA kernel against the CPU on inputs that make the fast path split or collide.
#include <functional>
#include <vector>

#include "internal/dispatch.h"
#include "kern/ctx.h"
#include "kern/norm.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;

TEST(Determinism, GuardSetsAndRestoresTheMode) {
  EXPECT_FALSE(deterministic_algorithms_enabled());
  {
    const DeterministicGuard on;
    EXPECT_TRUE(deterministic_algorithms_enabled());
    {
      const DeterministicGuard off(false);
      EXPECT_FALSE(deterministic_algorithms_enabled());
    }
    EXPECT_TRUE(deterministic_algorithms_enabled());
  }
  EXPECT_FALSE(deterministic_algorithms_enabled());
  use_deterministic_algorithms(true);
  EXPECT_TRUE(deterministic_algorithms_enabled());
  use_deterministic_algorithms(false);
  EXPECT_FALSE(deterministic_algorithms_enabled());
}

// Two SGD steps of a small network through every path of Note [deterministic algorithms]: an
// embedding of 1024 tokens from 50 rows, layer_norm over 1024 rows (many row chunks), a conv2d
// whose weight gradient reduces over 64 x 8 x 8 positions (split K on a GPU), index_select with
// repeated channels and gather with repeated positions. Returns the parameters and the losses.
std::vector<Tensor> train_steps(Device device, DType dtype) {
  Generator gen(1234);
  const auto on_device = [&](const Tensor& t) { return t.to(dtype).to(device); };
  const auto param = [&](const Shape& shape, double scale) {
    return on_device(mul(sub(rand(shape, {}, &gen), 0.5), scale)).requires_grad_();
  };
  std::vector<Tensor> params = {param({50, 16}, 2.0), param({16}, 1.0), param({16}, 1.0),
                                param({8, 4, 3, 3}, 0.5), param({8}, 0.1)};
  const Tensor tokens = randint(0, 50, {64, 16}, {.dtype = DType::i64}, &gen).to(device);
  const Tensor channels = from_vector<int64_t>({0, 0, 1, 3, 3, 3, 7}, {7}).to(device);
  const Tensor positions = randint(0, 7, {64, 20}, {.dtype = DType::i64}, &gen).to(device);
  const Tensor target = randint(0, 7, {64}, {.dtype = DType::i64}, &gen).to(device);
  std::vector<Tensor> out;
  for (int step = 0; step < 2; ++step) {
    Tensor h = embedding(params[0], tokens);        // (64, 16, 16)
    h = layer_norm(h, {16}, params[1], params[2]);  // 1024 rows
    h = conv2d(h.reshape({64, 4, 8, 8}), params[3], params[4], {.padding = 1});
    h = index_select(h, 1, channels);                    // (64, 7, 8, 8)
    const Tensor logits = mean(h, {2, 3});               // (64, 7)
    const Tensor picked = gather(logits, 1, positions);  // (64, 20)
    const Tensor loss =
        add(cross_entropy(logits.to(DType::f32), target), mean(mul(picked, picked)).to(DType::f32));
    loss.backward();
    out.push_back(loss.detach().cpu());
    for (Tensor& p : params) {
      p = sub(p.detach(), p.grad(), 0.5).requires_grad_();
    }
  }
  for (const Tensor& p : params) out.push_back(p.detach().cpu());
  return out;
}

void expect_bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(all_close(a[i], b[i], 0, 0)) << "tensor " << i;
  }
}

TEST(Determinism, TrainingStepsRepeatBitwiseOnTheCpu) {
  const DeterministicGuard on;
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    expect_bitwise_equal(train_steps(Device::cpu(), dtype), train_steps(Device::cpu(), dtype));
  }
}

TEST(CudaDeterminism, TrainingStepsRepeatBitwise) {
  SINTER_REQUIRE_CUDA();
  const DeterministicGuard on;
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<Tensor> first = train_steps(Device::cuda(), dtype);
    for (int run = 0; run < 3; ++run) {
      expect_bitwise_equal(first, train_steps(Device::cuda(), dtype));
    }
    // The same steps on the CPU, up to rounding.
    const std::vector<Tensor> cpu = train_steps(Device::cpu(), dtype);
    const double tol = dtype == DType::f32 ? 1e-4 : 5e-2;
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_TRUE(all_close(first[i].to(DType::f32), cpu[i].to(DType::f32), tol, tol)) << i;
    }
  }
}

// Runs f on CUDA three times in deterministic mode: the results must be bitwise equal, and equal
// to f on the CPU within tol (0: bitwise).
void expect_repeatable(const std::function<Tensor(Device)>& f, double tol) {
  const DeterministicGuard on;
  const Tensor first = f(Device::cuda()).cpu();
  for (int run = 0; run < 2; ++run) {
    EXPECT_TRUE(all_close(f(Device::cuda()).cpu(), first, 0, 0)) << "run " << run + 2;
  }
  EXPECT_TRUE(all_close(first.to(DType::f32), f(Device::cpu()).to(DType::f32), tol, tol));
}

// The gradient of `param` (the leaf made from `value` on `device`) of sum(forward(param) * weight),
// with `weight` a fixed random tensor of the output's shape.
Tensor grad_of(const Tensor& value, Device device,
               const std::function<Tensor(const Tensor&)>& forward) {
  Tensor p = value.to(device).requires_grad_();
  const Tensor y = forward(p);
  Generator gen(77);
  const Tensor w = rand(y.shape(), {}, &gen).to(y.dtype()).to(device);
  sum(mul(y, w)).backward();
  return p.grad();
}

TEST(CudaDeterminism, ConvWeightGradientWithSplitK) {
  SINTER_REQUIRE_CUDA();
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dtype));
    // Few output channels and a long reduction: the weight gradient splits K over many blocks.
    const Tensor x = randn({32, 3, 40, 40}).to(dtype), w = randn({4, 3, 3, 3}).to(dtype);
    const double tol = dtype == DType::f64 ? 1e-10 : (dtype == DType::f32 ? 1e-3 : 0.5);
    expect_repeatable(
        [&](Device d) {
          const Tensor xd = x.to(d);
          return grad_of(w, d, [&](const Tensor& p) { return conv2d(xd, p, {}, {.padding = 1}); });
        },
        tol);
  }
}

TEST(CudaDeterminism, LayerNormParameterGradients) {
  SINTER_REQUIRE_CUDA();
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = randn({5000, 96}).to(dtype), w = randn({96}).to(dtype);
    const double tol = dtype == DType::f32 ? 1e-3 : 0.5;
    expect_repeatable(
        [&](Device d) {
          const Tensor xd = x.to(d);
          return grad_of(w, d, [&](const Tensor& p) { return layer_norm(xd, {96}, p); });
        },
        tol);
  }
}

// The gradient of f(x, index) with respect to x, on the CPU and on the GPU, index moved along:
// bitwise equal (expect_repeatable with tolerance 0).
void expect_index_backward_bitwise(const Tensor& x, const Tensor& index,
                                   const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
  expect_repeatable(
      [&](Device d) {
        const Tensor i = index.to(d);
        return grad_of(x, d, [&](const Tensor& p) { return f(p, i); });
      },
      0);
}

// For f32 the fixed order is the CPU's (position order), so the two agree bitwise.
TEST(CudaDeterminism, EmbeddingAndIndexSelectBackwardMatchTheCpuBitwiseInF32) {
  SINTER_REQUIRE_CUDA();
  expect_index_backward_bitwise(randn({40, 33}), randint(0, 40, {4096}, {.dtype = DType::i64}),
                                [](const Tensor& p, const Tensor& i) { return embedding(p, i); });
  expect_index_backward_bitwise(
      randn({3, 10, 5}), randint(0, 10, {700}, {.dtype = DType::i64}),
      [](const Tensor& p, const Tensor& i) { return index_select(p, 1, i); });
}

TEST(CudaDeterminism, GatherBackwardMatchesTheCpuBitwiseInF32) {
  SINTER_REQUIRE_CUDA();
  expect_index_backward_bitwise(randn({6, 9}), randint(0, 9, {6, 500}, {.dtype = DType::i64}),
                                [](const Tensor& p, const Tensor& i) { return gather(p, 1, i); });
}

// 1000 additions of 1 into one bf16 element: rounding after each addition would stop at 256, the
// fixed-order paths add in f32 and round once.
TEST(CudaDeterminism, LowPrecisionAddsRoundOnce) {
  SINTER_REQUIRE_CUDA();
  const DeterministicGuard on;
  const TensorOptions bf16{.dtype = DType::bf16, .device = Device::cuda()};
  const Tensor zero_idx = zeros({1000}, {.dtype = DType::i64, .device = Device::cuda()});
  Tensor table = zeros({2, 1}, bf16).requires_grad_();
  sum(embedding(table, zero_idx)).backward();
  EXPECT_EQ(table.grad().cpu().to(DType::f32).to_vector<float>(),
            (std::vector<float>{1000.0f, 0.0f}));
  const Tensor out =
      scatter_add(zeros({2, 1}, bf16), 0, zero_idx.reshape({1000, 1}), ones({1000, 1}, bf16));
  EXPECT_EQ(out.cpu().to(DType::f32).to_vector<float>(), (std::vector<float>{1000.0f, 0.0f}));
}

// The fixed-order kernels against the atomic ones where the ops' CPU references cannot say what
// is right: indices out of range (embedding's are checked on the device, after the kernel: they
// must add nothing), layer_norm with a bias gradient alone, and sums added into values already
// there.
TEST(CudaDeterminism, KernelsAgreeWithTheAtomicPathsAtTheEdges) {
  SINTER_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  const kern::Ctx ctx = kernel_ctx(dev);
  const auto index_add = SINTER_TEST_KERNEL(true, index_add);
  const Tensor idx = from_vector<int64_t>({0, -1, 4, 5, 0, 2, 4, 4, 100}).to(dev);
  const Tensor src = randn({2, 9, 3}).to(dev), base = randn({2, 5, 3});
  const auto add_rows = [&](bool fixed_order) {
    const DeterministicGuard mode(fixed_order);
    Tensor out = base.to(dev);
    index_add(ctx, out.data_ptr(), DType::f32, 2, 5, 3, idx.data<int64_t>(), 9, src.data_ptr());
    return out.cpu();
  };
  const Tensor fixed = add_rows(true);
  EXPECT_TRUE(all_close(fixed, add_rows(false), 1e-6, 1e-6));
  // Rows 1 and 3 take no index in range: untouched.
  EXPECT_TRUE(all_close(fixed.narrow(1, 1, 1), base.narrow(1, 1, 1), 0, 0));
  EXPECT_TRUE(all_close(fixed.narrow(1, 3, 1), base.narrow(1, 3, 1), 0, 0));

  const auto forward = SINTER_TEST_KERNEL(true, layer_norm_forward);
  const auto backward = SINTER_TEST_KERNEL(true, layer_norm_backward);
  const int64_t rows = 3000, cols = 40;
  const Tensor x = randn({rows, cols}).to(dev), dy = randn({rows, cols}).to(dev);
  Tensor y = empty({rows, cols}, {.device = dev}), mean = empty({rows}, {.device = dev}),
         rstd = empty({rows}, {.device = dev});
  forward(ctx, x.data_ptr(), DType::f32, rows, cols, kern::RowNorm::Layer, nullptr, nullptr, 1e-5,
          y.data_ptr(), mean.data_ptr(), rstd.data_ptr());
  const Tensor bias_base = randn({cols});
  const auto bias_grad = [&](bool fixed_order) {
    const DeterministicGuard mode(fixed_order);
    Tensor dbias = bias_base.to(dev);
    backward(ctx, dy.data_ptr(), x.data_ptr(), DType::f32, rows, cols, kern::RowNorm::Layer,
             mean.data_ptr(), rstd.data_ptr(), nullptr, nullptr, nullptr, dbias.data_ptr());
    return dbias.cpu();
  };
  const Tensor want = add(bias_base, sum(dy.cpu(), {0}));
  EXPECT_TRUE(all_close(bias_grad(true), want, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(bias_grad(false), want, 1e-4, 1e-4));
}

}  // namespace
}  // namespace sinter
