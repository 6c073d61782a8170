// ZeroRedundancyOptimizer over MPI (run at 2 ranks by DistTests and at 4 by
// DistTestsZeroFourRanks): after 50 AdamW steps of the mlp and of a small GPT, stages 1 and 2 hold
// DDP's parameters within 1e-6 relative; the optimizer state and (stage 2) the gradients of a rank
// are 1/N of DDP's plus at most an element a bucket; every rank's shard consolidates to DDP's
// optimizer state. The same checks with in-process ranks, and the errors, are in
// tests/test_zero_local.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "dist_test_util.h"
#include "sinter/autograd.h"
#include "sinter/dist.h"
#include "sinter/nn.h"
#include "sinter/nn/models.h"
#include "sinter/ops.h"
#include "sinter/optim.h"
#include "test_util.h"

namespace sinter::testing {
namespace {

using dist::DistributedDataParallel;
using dist::ZeroRedundancyOptimizer;

constexpr double kCapMb = 0.004;  // several buckets

std::shared_ptr<nn::Module> make_model(bool gpt) {
  manual_seed(5);
  if (gpt) {
    return std::make_shared<nn::models::GPT>(nn::models::GPTConfig{
        .vocab_size = 31, .context_length = 12, .n_layer = 2, .n_head = 2, .n_embd = 24});
  }
  return std::make_shared<Mlp>(7, 32, 4);
}

std::unique_ptr<optim::Optimizer> adamw(const std::vector<Tensor>& params) {
  return std::make_unique<optim::AdamW>(params,
                                        optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1});
}

Tensor loss_at(bool gpt, DistributedDataParallel& ddp, int step, Device dev = Device::cpu()) {
  Generator gen(500 + 31 * static_cast<uint64_t>(world().rank()) + static_cast<uint64_t>(step));
  if (gpt) {
    const Tensor x = randint(0, 31, {2, 12}, {.dtype = DType::i64}, &gen).to(dev);
    const Tensor y = randint(0, 31, {2, 12}, {.dtype = DType::i64}, &gen).to(dev);
    return cross_entropy(ddp.forward(x).reshape({-1, 31}), y.reshape({-1}));
  }
  const Tensor x = randn({5, 7}, {}, &gen).to(dev);
  const Tensor y = randn({5, 4}, {}, &gen).to(dev);
  return sub(ddp.forward(x), y).pow(2.0).mean();
}

std::vector<double> flat(const std::vector<Tensor>& ts) { return flat_values(ts); }

struct Result {
  std::vector<double> params;
  StateDict state;
  size_t state_bytes = 0;  // the optimizer's per-element buffers
  size_t grad_bytes = 0;   // gradients held after the last backward (not counting views)
  size_t buckets = 0;
};

// stage 0: DDP with AdamW over the parameters.
Result train(bool gpt, int stage, int steps, Device dev = Device::cpu()) {
  std::shared_ptr<nn::Module> model = make_model(gpt);
  model->to(dev);
  DistributedDataParallel ddp(model, world_ptr(), {.bucket_cap_mb = kCapMb});
  std::unique_ptr<optim::Optimizer> opt;
  ZeroRedundancyOptimizer* zero = nullptr;
  if (stage == 0) {
    opt = adamw(model->parameters());
  } else {
    auto z =
        std::make_unique<ZeroRedundancyOptimizer>(ddp, adamw, dist::ZeroOptions{.stage = stage});
    zero = z.get();
    opt = std::move(z);
  }
  Result r;
  r.buckets = ddp.bucket_layout().size();
  for (int t = 0; t < steps; ++t) {
    opt->zero_grad();
    loss_at(gpt, ddp, t, dev).backward();
    if (t + 1 == steps) {
      for (const Tensor& p : model->parameters()) {
        if (p.grad().defined()) r.grad_bytes += p.grad().numel() * element_size(p.dtype());
      }
      if (zero && stage == 2) {  // at stage 1 they are views of the all-reduced buckets
        for (const Tensor& s : zero->shards()) {
          if (s.grad().defined()) r.grad_bytes += s.grad().numel() * element_size(s.dtype());
        }
      }
    }
    opt->step();
  }
  r.params = flat(model->parameters());
  r.state = opt->state_dict();
  const optim::Optimizer& local = zero ? zero->local_optimizer() : *opt;
  for (size_t g = 0; g < local.num_param_groups(); ++g) {
    for (size_t i = 0; i < local.params(g).size(); ++i) {
      for (const auto& [name, t] : local.state(g, i)) {
        if (t.dim() > 0) r.state_bytes += t.numel() * element_size(t.dtype());
      }
    }
  }
  return r;
}

TEST(Zero, MatchesDdpAfter50AdamWSteps) {
  const size_t n = static_cast<size_t>(world().size());
  for (const bool gpt : {false, true}) {
    SCOPED_TRACE(gpt ? "gpt" : "mlp");
    const Result ddp = train(gpt, 0, 50);
    for (const int stage : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "stage " << stage);
      const Result zero = train(gpt, stage, 50);
      EXPECT_LT(relative_difference(zero.params, ddp.params), 1e-6);
      // 4 bytes an element, under one element of padding a bucket.
      const size_t slack = 4 * zero.buckets;
      EXPECT_LE(zero.state_bytes, ddp.state_bytes / n + 2 * slack);
      EXPECT_GE(zero.state_bytes, ddp.state_bytes / n);
      if (stage == 2) {
        EXPECT_LE(zero.grad_bytes, ddp.grad_bytes / n + slack);
      } else {
        EXPECT_GE(zero.grad_bytes, ddp.grad_bytes);
      }
      if (world().rank() == 0) {
        std::printf(
            "[zero] %s, %zu ranks, stage %d: state %zu B/rank (DDP %zu), gradients "
            "%zu B/rank (DDP %zu), %zu buckets\n",
            gpt ? "gpt" : "mlp", n, stage, zero.state_bytes, ddp.state_bytes, zero.grad_bytes,
            ddp.grad_bytes, zero.buckets);
      }
      // Every rank's shard, gathered, consolidates to DDP's state.
      std::vector<StateDict> shards(n);
      for (size_t r = 0; r < n; ++r) {
        for (const auto& [key, t] : zero.state) {
          Tensor all = world().all_gather(t.contiguous());
          shards[r][key] = all.select(0, static_cast<int64_t>(r)).clone();
        }
      }
      const StateDict consolidated = ZeroRedundancyOptimizer::consolidate(shards);
      ASSERT_EQ(consolidated.size(), ddp.state.size());
      for (const auto& [key, t] : ddp.state) {
        ASSERT_TRUE(consolidated.count(key)) << key;
        EXPECT_LT(relative_difference(flat({consolidated.at(key)}), flat({t})), 1e-5) << key;
      }
    }
  }
}

// NCCL's reduce-scatter and all-gather under ZeRO, one GPU per rank (DistTestsCudaOneRank runs
// it on a machine with one GPU, where NCCL still runs its kernels for one rank).
TEST(CudaZero, StagesMatchDdpOnTheGpu) {
  SINTER_REQUIRE_CUDA();
  if (cuda::device_count() < world().local_size()) GTEST_SKIP() << "needs one GPU per rank";
  const Device dev = Device::cuda(world().cuda_device());
  for (const bool gpt : {false, true}) {
    SCOPED_TRACE(gpt ? "gpt" : "mlp");
    const Result ddp = train(gpt, 0, 10, dev);
    for (const int stage : {1, 2}) {
      const Result zero = train(gpt, stage, 10, dev);
      EXPECT_LT(relative_difference(zero.params, ddp.params), 1e-5) << "stage " << stage;
    }
  }
}

}  // namespace
}  // namespace sinter::testing
