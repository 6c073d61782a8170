// DistributedDataParallel over the MPI process group, 2 ranks: training stays bitwise identical on
// every rank and matches one process on the combined batch; no_sync; bucket all-reduces launch
// during backward; buffers from rank 0; a model that differs across ranks is a clear error.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "sinter/autograd.h"
#include "sinter/dist.h"
#include "sinter/nn.h"
#include "sinter/ops.h"
#include "sinter/optim.h"
#include "test_util.h"

using namespace sinter;
using sinter::dist::DistributedDataParallel;
using sinter::dist::ProcessGroup;

namespace {

std::shared_ptr<ProcessGroup> group() { return sinter::testing::world_ptr(); }

// 6 -> hidden -> hidden -> 4.
class Mlp : public sinter::testing::Mlp {
 public:
  explicit Mlp(int64_t hidden = 16) : sinter::testing::Mlp(6, hidden, 4) {}
};

// BatchNorm2d over (N, 3, 2, 2), then a Linear on the flattened result.
class BnNet : public nn::Module {
 public:
  BnNet() {
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(3));
    fc = register_module("fc", std::make_shared<nn::Linear>(12, 2));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(bn->forward(x).flatten(1)); }
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::Linear> fc;
};

// An Mlp with weights drawn from `seed`.
std::shared_ptr<Mlp> make_mlp(uint64_t seed = 7) {
  Generator gen(seed);
  auto m = std::make_shared<Mlp>();
  NoGradGuard no_grad;
  for (Tensor& p : m->parameters()) p.copy_(randn(p.shape(), {}, &gen).mul_(0.4));
  return m;
}

Tensor batch(int rank, int step, int64_t n = 4) {
  Generator gen(1000 + 37 * static_cast<uint64_t>(step) + static_cast<uint64_t>(rank));
  return randn({n, 6}, {}, &gen);
}

Tensor loss_of(nn::Module& m, const Tensor& x) { return m.forward(x).pow(2.0).mean(); }

Tensor flat(const std::vector<Tensor>& ts) {
  std::vector<Tensor> parts;
  for (const Tensor& t : ts) parts.push_back(t.detach().contiguous().flatten());
  return cat(parts);
}

std::vector<Tensor> grads(nn::Module& m) {
  std::vector<Tensor> g;
  for (const Tensor& p : m.parameters()) g.push_back(p.grad());
  return g;
}

// True when every rank holds the same bytes in `t`.
bool same_on_all_ranks(const Tensor& t) {
  Tensor all = group()->all_gather(t.contiguous()).contiguous();
  const size_t bytes = static_cast<size_t>(t.numel()) * element_size(t.dtype());
  const char* base = static_cast<const char*>(all.data_ptr());
  for (int r = 1; r < group()->size(); ++r)
    if (std::memcmp(base, base + r * bytes, bytes) != 0) return false;
  return true;
}

void expect_close(const Tensor& a, const Tensor& b, double tol) {
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol) << "element " << i;
}

}  // namespace

TEST(Ddp, TrainingIsIdenticalOnRanksAndMatchesTheCombinedBatch) {
  const int steps = 5, n = group()->size();
  auto m = make_mlp(100 + group()->rank());  // construction must replace these with rank 0's
  DistributedDataParallel ddp(m, group(), {.bucket_cap_mb = 1e-3});  // ~1 KB: several buckets
  ASSERT_GE(ddp.bucket_layout().size(), 2u);
  optim::SGD opt(m->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    loss_of(ddp.module(), batch(group()->rank(), s)).backward();
    EXPECT_TRUE(same_on_all_ranks(flat(grads(*m)))) << "step " << s;
    opt.step();
  }
  Tensor trained = flat(m->parameters());
  EXPECT_TRUE(same_on_all_ranks(trained));

  // One process, the ranks' batches concatenated, from rank 0's initial weights.
  auto ref = make_mlp(100);
  optim::SGD ref_opt(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int s = 0; s < steps; ++s) {
    ref_opt.zero_grad();
    std::vector<Tensor> parts;
    for (int r = 0; r < n; ++r) parts.push_back(batch(r, s));
    loss_of(*ref, cat(parts)).backward();
    ref_opt.step();
  }
  expect_close(trained, flat(ref->parameters()), 1e-5);
}

TEST(Ddp, NoSyncAccumulatesLikeOneBackwardOfTheSum) {
  auto m = make_mlp();
  DistributedDataParallel ddp(m, group(), {.bucket_cap_mb = 1e-3});
  const int rank = group()->rank();
  {
    auto guard = ddp.no_sync();
    loss_of(ddp.module(), batch(rank, 50)).backward();
  }
  EXPECT_FALSE(same_on_all_ranks(flat(grads(*m))));  // local until the synced backward
  loss_of(ddp.module(), batch(rank, 51)).backward();
  Tensor accumulated = flat(grads(*m));
  EXPECT_TRUE(same_on_all_ranks(accumulated));

  m->zero_grad();
  add(loss_of(ddp.module(), batch(rank, 50)), loss_of(ddp.module(), batch(rank, 51))).backward();
  expect_close(accumulated, flat(grads(*m)), 1e-6);
}

TEST(Ddp, BucketAllReducesStartBeforeBackwardEnds) {
  // A 200-byte cap gives one bucket per layer or parameter; each launches from the hook of its last
  // gradient, so every launch is recorded before the end of backward, and the waits after it.
  DistributedDataParallel ddp(make_mlp(), group(), {.bucket_cap_mb = 200.0 / (1 << 20)});
  const size_t k = ddp.bucket_layout().size();
  ASSERT_GE(k, 3u);
  loss_of(ddp.module(), batch(group()->rank(), 60)).backward();
  std::vector<std::string> expected;
  for (size_t i = 0; i < k; ++i) expected.push_back("launch " + std::to_string(i));
  expected.push_back("backward end");
  for (size_t i = 0; i < k; ++i) expected.push_back("wait " + std::to_string(i));
  EXPECT_EQ(ddp_debug_events(ddp), expected);  // found by argument-dependent lookup
}

TEST(Ddp, BatchNormBuffersComeFromRankZero) {
  auto m = std::make_shared<BnNet>();
  DistributedDataParallel ddp(m, group());
  const int rank = group()->rank();
  Tensor x = randn({4, 3, 2, 2});
  m->bn->running_mean.fill_(rank + 1.0);
  m->bn->running_var.fill_(rank + 2.0);
  m->eval();  // forward leaves the buffers alone: they must be exactly rank 0's
  ddp.forward(x);
  EXPECT_EQ(m->bn->running_mean.to_vector<float>(), std::vector<float>(3, 1.0f));
  EXPECT_EQ(m->bn->running_var.to_vector<float>(), std::vector<float>(3, 2.0f));

  m->train();
  m->bn->running_mean.fill_(rank * 5.0);
  Generator gen(3);
  ddp.forward(randn({4, 3, 2, 2}, {}, &gen));  // same batch on every rank
  for (auto& [name, b] : m->named_buffers()) EXPECT_TRUE(same_on_all_ranks(b)) << name;
}

TEST(Ddp, MismatchedModelsAreAnError) {
  auto m = std::make_shared<Mlp>(group()->rank() == 0 ? 16 : 17);
  try {
    DistributedDataParallel ddp(m, group());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("ranks hold different models"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 0 has parameter 'fc1.weight' [16, 6]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 1 has parameter 'fc1.weight' [17, 6]"), std::string::npos) << msg;
  }
  group()->barrier();
}
