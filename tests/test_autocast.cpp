// Autocast: the policy table op by op (every row run under a guard: low precision or f32 out), the
// ops outside it following promotion, the cast cache for parameters, gradients reaching f32
// parameters in f32, guard nesting, and the errors.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "internal/autocast_impl.h"
#include "test_util.h"

namespace sinter {
namespace {

using autocast::Policy;
using testing::expect_error;

// Each row of the policy table as a call on inputs of dtype `in`; the result's dtype is checked.
std::map<std::string, std::function<Tensor(DType)>> table_calls() {
  auto t = [](Shape s, DType d) { return randn(s).to(d); };
  auto target = [] { return from_vector<double>({1, 0, 2}, {3}).to(DType::i64); };
  return {
      {"matmul",
       [=](DType d) {
         return matmul(t({3, 4}, d), t({4, 2}, d));
       }},
      {"linear",
       [=](DType d) {
         return linear(t({3, 4}, d), t({2, 4}, d), t({2}, d));
       }},
      {"conv2d",
       [=](DType d) {
         return conv2d(t({1, 2, 5, 5}, d), t({3, 2, 3, 3}, d));
       }},
      {"conv1d",
       [=](DType d) {
         return conv1d(t({1, 2, 5}, d), t({3, 2, 3}, d));
       }},
      {"conv3d",
       [=](DType d) {
         return conv3d(t({1, 2, 3, 4, 4}, d), t({3, 2, 2, 3, 3}, d));
       }},
      {"conv_transpose1d",
       [=](DType d) {
         return conv_transpose1d(t({1, 2, 5}, d), t({2, 3, 3}, d));
       }},
      {"conv_transpose2d",
       [=](DType d) {
         return conv_transpose2d(t({1, 2, 4, 4}, d), t({2, 3, 3, 3}, d));
       }},
      {"conv_transpose3d",
       [=](DType d) {
         return conv_transpose3d(t({1, 2, 2, 3, 3}, d), t({2, 3, 2, 2, 2}, d));
       }},
      {"lstm_cell",
       [=](DType d) {
         return std::get<0>(
             lstm_cell(t({2, 4}, d), t({2, 3}, d), t({2, 3}, d), t({12, 4}, d), t({12, 3}, d)));
       }},
      {"gru_cell",
       [=](DType d) {
         return gru_cell(t({2, 4}, d), t({2, 3}, d), t({9, 4}, d), t({9, 3}, d));
       }},
      {"rnn_tanh_cell",
       [=](DType d) {
         return rnn_tanh_cell(t({2, 4}, d), t({2, 3}, d), t({3, 4}, d), t({3, 3}, d));
       }},
      {"rnn_relu_cell",
       [=](DType d) {
         return rnn_relu_cell(t({2, 4}, d), t({2, 3}, d), t({3, 4}, d), t({3, 3}, d));
       }},
      {"lstm_cell_step",
       [=](DType d) {
         return std::get<1>(lstm_cell_step(t({2, 12}, d), t({2, 3}, d)));
       }},
      {"gru_cell_step",
       [=](DType d) {
         return gru_cell_step(t({2, 9}, d), t({2, 9}, d), t({2, 3}, d));
       }},
      {"scaled_dot_product_attention",
       [=](DType d) {
         return scaled_dot_product_attention(t({1, 2, 3, 4}, d), t({1, 2, 3, 4}, d),
                                             t({1, 2, 3, 4}, d), {.causal = true});
       }},
      {"einsum",
       [=](DType d) {
         return einsum("bij,bjk->bik", {t({2, 3, 4}, d), t({2, 4, 2}, d)});
       }},
      {"bmm",
       [=](DType d) {
         return bmm(t({2, 3, 4}, d), t({2, 4, 2}, d));
       }},
      {"baddbmm",
       [=](DType d) {
         return baddbmm(t({3, 2}, d), t({2, 3, 4}, d), t({2, 4, 2}, d));
       }},
      {"softmax",
       [=](DType d) {
         return softmax(t({3, 4}, d), 1);
       }},
      {"log_softmax",
       [=](DType d) {
         return log_softmax(t({3, 4}, d), 1);
       }},
      {"layer_norm",
       [=](DType d) {
         return layer_norm(t({3, 4}, d), {4}, t({4}, d), t({4}, d));
       }},
      {"rms_norm",
       [=](DType d) {
         return rms_norm(t({3, 4}, d), {4}, t({4}, d));
       }},
      {"batch_norm",
       [=](DType d) {
         return batch_norm(t({3, 4}, d), zeros({4}), ones({4}), t({4}, d), t({4}, d), true);
       }},
      {"group_norm",
       [=](DType d) {
         return group_norm(t({2, 4, 3}, d), 2, t({4}, d), t({4}, d));
       }},
      {"instance_norm",
       [=](DType d) {
         return instance_norm(t({2, 4, 3}, d), zeros({4}), ones({4}), t({4}, d), t({4}, d));
       }},
      {"interpolate",
       [=](DType d) {
         return interpolate(t({1, 2, 3, 4}, d), {.size = {5, 6}, .mode = InterpolateMode::Bicubic});
       }},
      {"cross_entropy",
       [=](DType d) {
         return cross_entropy(t({3, 4}, d), target());
       }},
      {"nll_loss",
       [=](DType d) {
         return nll_loss(t({3, 4}, d), target());
       }},
      {"mse_loss",
       [=](DType d) {
         return mse_loss(t({3, 4}, d), t({3, 4}, d));
       }},
      {"binary_cross_entropy_with_logits",
       [=](DType d) {
         return binary_cross_entropy_with_logits(t({3, 4}, d), t({3, 4}, d));
       }},
      {"binary_cross_entropy",
       [=](DType d) {
         return binary_cross_entropy(sigmoid(t({3, 4}, d)), sigmoid(t({3, 4}, d)));
       }},
      {"kl_div",
       [=](DType d) {
         return kl_div(t({3, 4}, d), sigmoid(t({3, 4}, d)), Reduction::BatchMean);
       }},
      {"l1_loss",
       [=](DType d) {
         return l1_loss(t({3, 4}, d), t({3, 4}, d));
       }},
      {"smooth_l1_loss",
       [=](DType d) {
         return smooth_l1_loss(t({3, 4}, d), t({3, 4}, d));
       }},
      {"huber_loss",
       [=](DType d) {
         return huber_loss(t({3, 4}, d), t({3, 4}, d));
       }},
      {"cosine_embedding_loss",
       [=](DType d) {
         return cosine_embedding_loss(t({3, 4}, d), t({3, 4}, d),
                                      from_vector<double>({1, -1, 1}, {3}).to(d));
       }},
      {"margin_ranking_loss",
       [=](DType d) {
         return margin_ranking_loss(t({3}, d), t({3}, d),
                                    from_vector<double>({1, -1, 1}, {3}).to(d));
       }},
      {"ctc_loss",
       [=](DType d) {
         const auto len = [](std::vector<int64_t> v) {
           return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())});
         };
         return ctc_loss(t({4, 2, 3}, d), len({1, 2, 1}), len({4, 3}), len({2, 1}));
       }},
      {"max_pool3d",
       [=](DType d) {
         return max_pool3d(t({1, 2, 3, 4, 4}, d), 2);
       }},
      {"avg_pool3d",
       [=](DType d) {
         return avg_pool3d(t({1, 2, 3, 4, 4}, d), {1, 2, 2}, {.count_include_pad = false});
       }},
      {"adaptive_avg_pool3d",
       [=](DType d) {
         return adaptive_avg_pool3d(t({1, 2, 3, 4, 4}, d), {2, 3, 2});
       }},
      {"sum",
       [=](DType d) {
         return sum(t({3, 4}, d), {1});
       }},
      {"mean",
       [=](DType d) {
         return mean(t({3, 4}, d), {0});
       }},
      {"var",
       [=](DType d) {
         return var(t({3, 4}, d), {1});
       }},
      {"logsumexp",
       [=](DType d) {
         return logsumexp(t({3, 4}, d), {1});
       }},
      {"cumsum",
       [=](DType d) {
         return cumsum(t({3, 4}, d), 1);
       }},
      {"cumprod",
       [=](DType d) {
         return cumprod(t({3, 4}, d), 1);
       }},
      {"prod",
       [=](DType d) {
         return prod(t({3, 4}, d), 1);
       }},
      {"expm1",
       [=](DType d) {
         return expm1(t({3, 4}, d));
       }},
      {"erfinv",
       [=](DType d) {
         return erfinv(mul(tanh(t({3, 4}, d)), 0.5));
       }},
      {"log1p",
       [=](DType d) {
         return log1p(abs(t({3, 4}, d)));
       }},
      {"tan",
       [=](DType d) {
         return tan(t({3, 4}, d));
       }},
      {"asin",
       [=](DType d) {
         return asin(mul(tanh(t({3, 4}, d)), 0.5));
       }},
      {"acos",
       [=](DType d) {
         return acos(mul(tanh(t({3, 4}, d)), 0.5));
       }},
      {"sinh",
       [=](DType d) {
         return sinh(t({3, 4}, d));
       }},
      {"cosh",
       [=](DType d) {
         return cosh(t({3, 4}, d));
       }},
      {"log2",
       [=](DType d) {
         return log2(add(abs(t({3, 4}, d)), 0.5));
       }},
      {"log10",
       [=](DType d) {
         return log10(add(abs(t({3, 4}, d)), 0.5));
       }},
      {"reciprocal",
       [=](DType d) {
         return reciprocal(add(abs(t({3, 4}, d)), 0.5));
       }},
  };
}

TEST(Autocast, EveryRowOfThePolicyTableOnTheCpu) {
  const auto calls = table_calls();
  for (const autocast::PolicyRow& row : autocast::policy_table()) {
    SCOPED_TRACE(std::string(row.op));
    const auto call = calls.find(std::string(row.op));
    ASSERT_NE(call, calls.end()) << "a row of the policy table without a test call";
    // Outside a guard each op keeps its inputs' dtype.
    EXPECT_EQ(call->second(DType::f32).dtype(), DType::f32);
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    switch (row.cpu) {
      case Policy::LowPrecision:
        EXPECT_EQ(call->second(DType::f32).dtype(), DType::bf16);
        break;
      case Policy::Float32:
        EXPECT_EQ(call->second(DType::bf16).dtype(), DType::f32);
        EXPECT_EQ(call->second(DType::f32).dtype(), DType::f32);
        break;
      case Policy::Inputs:
        EXPECT_EQ(call->second(DType::bf16).dtype(), DType::bf16);
        EXPECT_EQ(call->second(DType::f32).dtype(), DType::f32);
        break;
    }
  }
  EXPECT_EQ(calls.size(), autocast::policy_table().size());
  EXPECT_EQ(autocast::policy("relu", DeviceType::cpu), std::nullopt);
  EXPECT_EQ(autocast::policy("matmul", DeviceType::cpu), Policy::LowPrecision);
  EXPECT_EQ(autocast::policy(autocast::Op::matmul, DeviceType::cuda), Policy::LowPrecision);
  // PyTorch's policies of the two device types: the norms, softmax and the reductions in f32 on
  // CUDA, in their inputs' dtype on the CPU; the losses and prod in f32 on both.
  for (const autocast::Op op : {autocast::Op::cumsum, autocast::Op::batch_norm,
                                autocast::Op::layer_norm, autocast::Op::softmax}) {
    EXPECT_EQ(autocast::policy(op, DeviceType::cuda), Policy::Float32);
    EXPECT_EQ(autocast::policy(op, DeviceType::cpu), Policy::Inputs);
  }
  for (const autocast::Op op : {autocast::Op::cross_entropy, autocast::Op::prod}) {
    EXPECT_EQ(autocast::policy(op, DeviceType::cpu), Policy::Float32);
  }
  EXPECT_EQ(autocast::policy_table()[static_cast<size_t>(autocast::Op::softmax)].op, "softmax");
}

// A bf16 activation through the norms with f32 parameters (a module's, under autocast on the CPU):
// the result stays bf16, its statistics and the parameters' gradients f32, as PyTorch's CPU
// autocast gives them.
TEST(Autocast, CpuNormsKeepBf16WithF32Parameters) {
  const autocast::Guard amp(DeviceType::cpu, DType::bf16);
  const Tensor x = randn({4, 6, 5}).to(DType::bf16).requires_grad_();
  Tensor w = randn({6}).requires_grad_(), b = randn({6}).requires_grad_();
  Tensor lw = randn({5}).requires_grad_(), lb = randn({5}).requires_grad_();
  const Tensor rm = zeros({6}), rv = ones({6});
  const std::vector<Tensor> outs = {batch_norm(x, rm, rv, w, b, true), group_norm(x, 3, w, b),
                                    instance_norm(x, Tensor(), Tensor(), w, b, true),
                                    layer_norm(x, {5}, lw, lb), rms_norm(x, {5}, lw)};
  Tensor total = zeros({});
  for (const Tensor& y : outs) {
    EXPECT_EQ(y.dtype(), DType::bf16);
    total = add(total, sum(y.to(DType::f32)));
  }
  total.backward();
  for (const Tensor* p : {&w, &b, &lw, &lb}) EXPECT_EQ(p->grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  // The running mean took the batch's (bf16) mean, in its own f32.
  EXPECT_EQ(rm.dtype(), DType::f32);
  EXPECT_TRUE(
      testing::all_close(rm, mul(mean(x.detach().to(DType::f32), {0, 2}), 0.1), 1e-2, 1e-2));
}

TEST(Autocast, OpsOutsideTheTableFollowPromotion) {
  const autocast::Guard amp(DeviceType::cpu, DType::bf16);
  const Tensor x = randn({3, 4}), w = randn({4, 5}), b = randn({5});
  const Tensor y = matmul(x, w);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(relu(y).dtype(), DType::bf16);
  EXPECT_EQ(add(y, b).dtype(), DType::f32);             // bf16 with f32 promotes
  EXPECT_EQ(softmax(relu(y), 1).dtype(), DType::bf16);  // on the CPU, in its input's dtype
  // Integer operands are never cast.
  EXPECT_EQ(sum(arange(4.0).to(DType::i64)).dtype(), DType::i64);
}

TEST(Autocast, MatchesTheOpOnInputsCastByHand) {
  const Tensor x = randn({6, 8}), w = randn({5, 8}), b = randn({5});
  Tensor got;
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    got = linear(x, w, b, Activation::Relu);
  }
  const Tensor want =
      linear(x.to(DType::bf16), w.to(DType::bf16), b.to(DType::bf16), Activation::Relu);
  EXPECT_TRUE(testing::all_close(got, want, 0, 0));
}

TEST(Autocast, ParametersStayF32AndGetF32Gradients) {
  Tensor w = randn({5, 8}).requires_grad_(true), b = randn({5}).requires_grad_(true);
  const Tensor x = randn({6, 8});
  Tensor loss;
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    loss = mse_loss(linear(x, w, b), zeros({6, 5}));
    EXPECT_EQ(loss.dtype(), DType::f32);
  }
  loss.backward();
  EXPECT_EQ(w.dtype(), DType::f32);
  ASSERT_TRUE(w.grad().defined() && b.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(b.grad().dtype(), DType::f32);
  // The same gradient as the f32 computation, within bf16's precision.
  Tensor w32 = w.detach().requires_grad_(true), b32 = b.detach().requires_grad_(true);
  mse_loss(linear(x, w32, b32), zeros({6, 5})).backward();
  EXPECT_TRUE(testing::all_close(w.grad(), w32.grad(), 5e-2, 5e-2));
}

TEST(Autocast, AParameterIsCastOncePerGuardUntilItChanges) {
  Tensor w = randn({4, 4}).requires_grad_(true);
  const Tensor plain = randn({4, 4});
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    const Tensor c1 = autocast::detail::cast(w, DType::bf16);
    const Tensor c2 = autocast::detail::cast(w, DType::bf16);
    EXPECT_TRUE(c1.is_same(c2));
    // A tensor that is not a parameter is cast afresh.
    EXPECT_FALSE(autocast::detail::cast(plain, DType::bf16)
                     .is_same(autocast::detail::cast(plain, DType::bf16)));
    {
      NoGradGuard ng;
      w.mul_(2.0);  // a new version: cast again
    }
    const Tensor c3 = autocast::detail::cast(w, DType::bf16);
    EXPECT_FALSE(c3.is_same(c1));
    EXPECT_TRUE(testing::all_close(c3.to(DType::f32), w.detach(), 1e-2, 1e-2));
  }
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);  // a new guard: a fresh cache
    const Tensor c4 = autocast::detail::cast(w, DType::bf16);
    const Tensor c5 = autocast::detail::cast(w, DType::bf16);
    EXPECT_TRUE(c4.is_same(c5));
  }
}

TEST(Autocast, GuardsNestRestoreAndArePerDeviceType) {
  EXPECT_EQ(autocast::dtype(DeviceType::cpu), std::nullopt);
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    EXPECT_EQ(autocast::dtype(DeviceType::cpu), DType::bf16);
    EXPECT_EQ(autocast::dtype(DeviceType::cuda), std::nullopt);
    {
      const autocast::Guard off(DeviceType::cpu, DType::bf16, false);
      EXPECT_EQ(autocast::dtype(DeviceType::cpu), std::nullopt);
      EXPECT_EQ(matmul(randn({2, 2}), randn({2, 2})).dtype(), DType::f32);
    }
    EXPECT_EQ(autocast::dtype(DeviceType::cpu), DType::bf16);
    // A CUDA guard leaves CPU tensors alone.
    const autocast::Guard cuda_amp(DeviceType::cuda, DType::f16);
    EXPECT_EQ(matmul(randn({2, 2}), randn({2, 2})).dtype(), DType::bf16);
  }
  EXPECT_EQ(autocast::dtype(DeviceType::cpu), std::nullopt);
  EXPECT_EQ(autocast::dtype(DeviceType::cuda), std::nullopt);
}

TEST(Autocast, BackwardInsideTheGuardKeepsTheForwardsDtypes) {
  Tensor w = randn({3, 3}).requires_grad_(true);
  const autocast::Guard amp(DeviceType::cpu, DType::bf16);
  Tensor h = matmul(randn({2, 3}), w);  // bf16
  Tensor loss = sum(mul(h, h));         // sum runs in f32
  loss.backward();
  EXPECT_EQ(w.grad().dtype(), DType::f32);
}

// Regression: the cached cast of a parameter was reused after a backward had released its link
// to the parameter (the second backward of gradient accumulation threw), and a cast made under
// NoGradGuard (an evaluation pass) was reused in training (the parameter got no gradient).
TEST(Autocast, TheCachedCastFollowsBackwardsAndGradMode) {
  const Tensor x = randn({6, 8});
  Tensor w = randn({5, 8}).requires_grad_(true);
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    sum(linear(x, w)).backward();
    const Tensor once = w.grad().clone();
    sum(linear(x, w)).backward();  // accumulates
    EXPECT_TRUE(testing::all_close(w.grad(), mul(once, 2.0), 0, 0));
  }
  w.set_grad(Tensor());
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    {
      NoGradGuard ng;
      EXPECT_FALSE(linear(x, w).requires_grad());
    }
    const Tensor loss = sum(linear(x, w));
    ASSERT_TRUE(loss.requires_grad());
    loss.backward();
    EXPECT_TRUE(w.grad().defined());
  }
}

// An additive f32 mask is cast with q, k and v (it was refused as not of q's dtype); f64 tensors
// keep their precision under autocast, as in PyTorch.
TEST(Autocast, AttentionMasksAndF64) {
  const Tensor q = randn({1, 2, 4, 8}), k = randn({1, 2, 4, 8}), v = randn({1, 2, 4, 8});
  const Tensor mask = randn({4, 4});
  Tensor got;
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    got = scaled_dot_product_attention(q, k, v, {.mask = mask});
    EXPECT_EQ(got.dtype(), DType::bf16);
    const Tensor x64 = randn({3, 4}, {.dtype = DType::f64});
    EXPECT_EQ(matmul(x64, x64.t()).dtype(), DType::f64);
    EXPECT_EQ(sum(x64).dtype(), DType::f64);
  }
  const Tensor want = scaled_dot_product_attention(
      q.to(DType::bf16), k.to(DType::bf16), v.to(DType::bf16), {.mask = mask.to(DType::bf16)});
  EXPECT_TRUE(testing::all_close(got, want, 0, 0));
}

TEST(Autocast, Errors) {
  expect_error([] { autocast::Guard g(DeviceType::cpu, DType::f32); },
               {"autocast::Guard", "bf16 or f16", "f32"});
  expect_error([] { autocast::Guard g(DeviceType::cpu, DType::f16); },
               {"autocast::Guard", "f16", "CUDA", "bf16"});
}

TEST(Autocast, CudaF16AndBf16) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions cuda{.device = Device::cuda()};
  const Tensor x = randn({8, 16}, cuda), w = randn({4, 16}, cuda);
  for (DType low : {DType::f16, DType::bf16}) {
    const autocast::Guard amp(DeviceType::cuda, low);
    const Tensor y = linear(x, w);
    EXPECT_EQ(y.dtype(), low);
    EXPECT_EQ(log_softmax(y, 1).dtype(), DType::f32);
    EXPECT_TRUE(testing::all_close(y.cpu(), linear(x.to(low), w.to(low)).cpu(), 0, 0));
  }
}

}  // namespace
}  // namespace sinter
