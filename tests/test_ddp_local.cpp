// DistributedDataParallel in one process: ranks are threads meeting in an in-process ProcessGroup
// (no MPI), so bucket layout, hooks, averaging, unused parameters, no_sync and the order of events
// are tested on every build. tests/dist/test_ddp.cpp repeats the end-to-end checks over MPI.
#include <gtest/gtest.h>

#include <barrier>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>

#include "sinter/autograd.h"
#include "sinter/dist.h"
#include "sinter/nn.h"
#include "sinter/nn/models.h"
#include "sinter/ops.h"
#include "sinter/optim.h"
#include "test_util.h"
#include "thread_group.h"

using namespace sinter;
using sinter::dist::DDPOptions;
using sinter::dist::DistributedDataParallel;
using sinter::dist::ProcessGroup;
using sinter::dist::ReduceOp;
using sinter::dist::Work;
using sinter::testing::Meeting;
using sinter::testing::run_ranks;

namespace {

std::string numbered(const char* prefix, size_t i);

// 4 -> hidden -> hidden -> 3.
class Mlp : public sinter::testing::Mlp {
 public:
  explicit Mlp(int64_t hidden = 8) : sinter::testing::Mlp(4, hidden, 3) {}
};

// Parameters of the given sizes (and dtypes), not used in forward.
class Blobs : public nn::Module {
 public:
  Blobs(const std::vector<int64_t>& sizes, const std::vector<DType>& dtypes = {}) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      DType dt = i < dtypes.size() ? dtypes[i] : DType::f32;
      register_parameter(numbered("p", i), ones({sizes[i]}, {.dtype = dt}));
    }
  }
};

// An Mlp plus a parameter the forward never touches.
class WithUnused : public Mlp {
 public:
  WithUnused() { unused = register_parameter("unused", ones({5})); }
  Tensor unused;
};

class WithBuffer : public Mlp {
 public:
  WithBuffer() { stat = register_buffer("stat", zeros({3})); }
  Tensor stat;
};

Tensor data_for(int rank, int64_t n, uint64_t seed) {
  Generator gen(seed + 1000 * static_cast<uint64_t>(rank));
  return randn({n, 4}, {}, &gen);
}

Tensor loss_of(nn::Module& m, const Tensor& x) { return m.forward(x).pow(2.0).mean(); }

std::vector<float> flat_grads(nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m.parameters()) {
    std::vector<float> g = p.grad().contiguous().to_vector<float>();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

std::vector<float> flat_params(nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m.parameters()) {
    std::vector<float> v = p.contiguous().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "element " << i;
}

void expect_throws_with(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\nlacks: " << p;
  }
}

// "launch 2" and the like (a helper, since GCC 12 warns falsely on "literal" + std::to_string).
std::string numbered(const char* prefix, size_t i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

double mb(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

TEST(DdpLocal, BucketsReverseOrderCappedBigParameterAlone) {
  run_ranks(1, [](int, std::shared_ptr<ProcessGroup> pg) {
    // p0..p3 of 400, 400, 4000 and 40 bytes; cap 1000 bytes. Reverse order: p3, p2, p1, p0.
    auto m = std::make_shared<Blobs>(std::vector<int64_t>{100, 100, 1000, 10});
    DistributedDataParallel ddp(m, pg, {.bucket_cap_mb = mb(1000)});
    EXPECT_EQ(ddp.bucket_layout(), (std::vector<std::vector<size_t>>{{3}, {2}, {1, 0}}));

    auto one = std::make_shared<Blobs>(std::vector<int64_t>{100, 100, 1000, 10});
    DistributedDataParallel all(one, pg);  // 25 MB holds everything
    EXPECT_EQ(all.bucket_layout(), (std::vector<std::vector<size_t>>{{3, 2, 1, 0}}));
  });
}

TEST(DdpLocal, BucketsSeparateDtypesAndSkipFrozen) {
  run_ranks(1, [](int, std::shared_ptr<ProcessGroup> pg) {
    auto m =
        std::make_shared<Blobs>(std::vector<int64_t>{4, 4, 4, 4},
                                std::vector<DType>{DType::f32, DType::f64, DType::f32, DType::f64});
    m->register_parameter("frozen", ones({4}), false);
    DistributedDataParallel ddp(m, pg);
    EXPECT_EQ(ddp.bucket_layout(), (std::vector<std::vector<size_t>>{{3, 1}, {2, 0}}));
  });
}

TEST(DdpLocal, SizeOneLeavesGradientsUnchanged) {
  run_ranks(1, [](int, std::shared_ptr<ProcessGroup> pg) {
    auto m = std::make_shared<Mlp>();
    Tensor x = data_for(0, 6, 1);
    loss_of(*m, x).backward();
    std::vector<float> ref = flat_grads(*m);
    m->zero_grad();
    DistributedDataParallel ddp(m, pg, {.bucket_cap_mb = mb(100)});
    ASSERT_GE(ddp.bucket_layout().size(), 3u);
    loss_of(*m, x).backward();
    EXPECT_TRUE(same_bits(flat_grads(*m), ref));
  });
}

TEST(DdpLocal, TwoRanksBroadcastAndAverage) {
  std::vector<std::vector<float>> grads(2), params(2), local(2);
  std::vector<float> rank0_init;
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    Generator gen(77 + rank);  // different initial weights per rank
    auto m = std::make_shared<Mlp>();
    for (Tensor& p : m->parameters()) {
      NoGradGuard g;
      p.copy_(randn(p.shape(), {}, &gen));
    }
    if (rank == 0) rank0_init = flat_params(*m);
    pg->barrier();
    DistributedDataParallel ddp(m, pg, {.bucket_cap_mb = mb(200)});
    params[rank] = flat_params(*m);
    Tensor x = data_for(rank, 5, 2);
    {
      auto guard = ddp.no_sync();  // the local gradient, for the reference
      loss_of(ddp.module(), x).backward();
      local[rank] = flat_grads(*m);
    }
    m->zero_grad();
    loss_of(ddp.module(), x).backward();
    grads[rank] = flat_grads(*m);
  });
  EXPECT_TRUE(same_bits(params[0], rank0_init));
  EXPECT_TRUE(same_bits(params[1], rank0_init));
  EXPECT_TRUE(same_bits(grads[0], grads[1]));
  std::vector<float> avg(local[0].size());
  for (size_t i = 0; i < avg.size(); ++i) avg[i] = (local[0][i] + local[1][i]) / 2;
  expect_near(grads[0], avg, 1e-6f);
  EXPECT_FALSE(same_bits(local[0], local[1]));
}

TEST(DdpLocal, TrainingMatchesCombinedBatch) {
  const int steps = 5;
  auto make = [] {
    Generator gen(5);
    auto m = std::make_shared<Mlp>();
    for (Tensor& p : m->parameters()) {
      NoGradGuard g;
      p.copy_(randn(p.shape(), {}, &gen).mul_(0.5));
    }
    return m;
  };
  std::vector<std::vector<float>> params(2);
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto m = make();
    DistributedDataParallel ddp(m, pg, {.bucket_cap_mb = mb(150)});
    optim::SGD opt(m->parameters(), {.lr = 0.1, .momentum = 0.9});
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      loss_of(ddp.module(), data_for(rank, 4, 10 + s)).backward();
      opt.step();
    }
    params[rank] = flat_params(*m);
  });
  EXPECT_TRUE(same_bits(params[0], params[1]));

  auto m = make();
  optim::SGD opt(m->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    loss_of(*m, cat({data_for(0, 4, 10 + s), data_for(1, 4, 10 + s)})).backward();
    opt.step();
  }
  expect_near(params[0], flat_params(*m), 1e-5f);
}

TEST(DdpLocal, UnusedParameterIsAnErrorNamingIt) {
  run_ranks(2, [](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto m = std::make_shared<WithUnused>();
    DistributedDataParallel ddp(m, pg, {.bucket_cap_mb = mb(100)});
    Tensor x = data_for(rank, 3, 3);
    expect_throws_with([&] { loss_of(ddp.module(), x).backward(); },
                       {"DistributedDataParallel: parameter 'unused' got no gradient",
                        "find_unused_parameters = true"});
    // The failed backward left nothing behind: the next one fails the same way, not otherwise.
    m->zero_grad();
    expect_throws_with([&] { loss_of(ddp.module(), x).backward(); }, {"'unused'"});

    auto two = std::make_shared<WithUnused>();
    two->register_parameter("unused2", ones({2}));
    DistributedDataParallel ddp2(two, pg);
    expect_throws_with([&] { loss_of(ddp2.module(), x).backward(); },
                       {"parameter 'unused' (and 1 more) got no gradient"});
  });
}

TEST(DdpLocal, FindUnusedParametersGivesZeroGradient) {
  std::vector<std::vector<float>> grads(2);
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto m = std::make_shared<WithUnused>();
    DistributedDataParallel ddp(m, pg, {.bucket_cap_mb = mb(100), .find_unused_parameters = true});
    loss_of(ddp.module(), data_for(rank, 3, 3)).backward();
    ASSERT_TRUE(m->unused.grad().defined());
    EXPECT_EQ(m->unused.grad().abs().sum().item<float>(), 0.0f);
    grads[rank] = flat_grads(*m);
    std::vector<std::string> ev = ddp_debug_events(ddp);
    EXPECT_EQ(ev.back(), numbered("wait ", ddp.bucket_layout().size() - 1));
  });
  EXPECT_TRUE(same_bits(grads[0], grads[1]));
}

TEST(DdpLocal, NoSyncAccumulatesThenSyncsTheSum) {
  std::vector<std::vector<float>> accumulated(2), summed(2), local_after_nosync(2);
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto m = std::make_shared<Mlp>();
    DistributedDataParallel ddp(m, pg, {.bucket_cap_mb = mb(200)});
    Tensor a = data_for(rank, 3, 20), b = data_for(rank, 3, 21);
    {
      auto guard = ddp.no_sync();
      loss_of(ddp.module(), a).backward();
      EXPECT_TRUE(ddp_debug_events(ddp).empty());
    }
    local_after_nosync[rank] = flat_grads(*m);
    loss_of(ddp.module(), b).backward();
    accumulated[rank] = flat_grads(*m);

    m->zero_grad();
    add(loss_of(ddp.module(), a), loss_of(ddp.module(), b)).backward();
    summed[rank] = flat_grads(*m);
  });
  EXPECT_FALSE(same_bits(local_after_nosync[0], local_after_nosync[1]));  // not synced
  EXPECT_TRUE(same_bits(accumulated[0], accumulated[1]));
  expect_near(accumulated[0], summed[0], 1e-6f);
}

// Gradient accumulation as the lm example does it: each rank runs `micro` batches of a language
// model's loss / micro, the backward under no_sync but for the last; the averaged gradient is the
// large batch's (every rank's batches together) to 1e-6 relative, for the GPT and the Llama.
TEST(DdpLocal, AccumulatedMicroBatchesGiveTheLargeBatchsGradient) {
  const int64_t vocab = 50, t = 12, b = 3, micro = 2;
  const auto make = [&](bool llama) -> std::shared_ptr<nn::Module> {
    manual_seed(41);
    if (llama) {
      return std::make_shared<nn::models::Llama>(nn::models::LlamaConfig{.vocab_size = vocab,
                                                                         .context_length = t,
                                                                         .n_layer = 2,
                                                                         .n_head = 4,
                                                                         .n_kv_head = 2,
                                                                         .n_embd = 32});
    }
    return std::make_shared<nn::models::GPT>(nn::models::GPTConfig{
        .vocab_size = vocab, .context_length = t, .n_layer = 2, .n_head = 2, .n_embd = 32});
  };
  // Rank r's micro-batch m: windows [(r micro + m) b, + b) of one set.
  Generator gen(42);
  const Tensor x = randint(0, vocab, {2 * micro * b, t}, {.dtype = DType::i64}, &gen);
  const Tensor y = randint(0, vocab, {2 * micro * b, t}, {.dtype = DType::i64}, &gen);
  const auto loss_of = [&](nn::Module& m, const Tensor& xs, const Tensor& ys) {
    return cross_entropy(m.forward(xs).reshape({-1, vocab}), ys.reshape({-1}));
  };
  for (const bool llama : {false, true}) {
    std::vector<std::vector<float>> grads(2);
    // Made here, one after the other: the seeded initialization draws from the default generator.
    const std::vector<std::shared_ptr<nn::Module>> models{make(llama), make(llama)};
    run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
      const std::shared_ptr<nn::Module>& m = models[static_cast<size_t>(rank)];
      DistributedDataParallel ddp(m, pg);
      for (int64_t k = 0; k < micro; ++k) {
        const int64_t at = (rank * micro + k) * b;
        const Tensor loss =
            loss_of(ddp.module(), x.narrow(0, at, b), y.narrow(0, at, b)) * (1.0 / micro);
        if (k + 1 < micro) {
          auto guard = ddp.no_sync();
          loss.backward();
        } else {
          loss.backward();
        }
      }
      grads[static_cast<size_t>(rank)] = flat_grads(*m);
    });
    EXPECT_TRUE(same_bits(grads[0], grads[1]));
    std::shared_ptr<nn::Module> m = make(llama);
    loss_of(*m, x, y).backward();
    const std::vector<float> large = flat_grads(*m);
    float scale = 0;
    for (float g : large) scale = std::max(scale, std::abs(g));
    expect_near(grads[0], large, 1e-6f * scale);
  }
}

// A model whose blocks run through autograd::checkpoint: their parameters get their gradients in
// the backward each block's recomputation runs, and DDP must still wait for the whole backward
// (queue_callback goes to the outermost one) and average the same gradients, bitwise.
TEST(DdpLocal, CheckpointedBlocksAverageTheSameGradients) {
  const auto make = [](bool checkpointed) {
    manual_seed(43);
    return std::make_shared<nn::models::GPT>(
        nn::models::GPTConfig{.vocab_size = 40,
                              .context_length = 10,
                              .n_layer = 3,
                              .n_head = 2,
                              .n_embd = 16,
                              .checkpoint_blocks = checkpointed});
  };
  Generator gen(44);
  const Tensor x = randint(0, 40, {4, 10}, {.dtype = DType::i64}, &gen);
  std::vector<std::vector<float>> grads[2];
  for (const bool checkpointed : {false, true}) {
    auto& out = grads[checkpointed ? 1 : 0];
    out.resize(2);
    const std::vector<std::shared_ptr<nn::models::GPT>> models{make(checkpointed),
                                                               make(checkpointed)};
    run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
      const std::shared_ptr<nn::models::GPT>& m = models[static_cast<size_t>(rank)];
      DistributedDataParallel ddp(m, pg, {.bucket_cap_mb = mb(4096)});
      const Tensor xs = x.narrow(0, 2 * rank, 2);
      cross_entropy(ddp.module().forward(xs).reshape({-1, 40}), xs.reshape({-1})).backward();
      out[static_cast<size_t>(rank)] = flat_grads(*m);
    });
  }
  EXPECT_TRUE(same_bits(grads[0][0], grads[0][1]));
  EXPECT_TRUE(same_bits(grads[1][0], grads[1][1]));
  EXPECT_TRUE(same_bits(grads[0][0], grads[1][0]));
}

TEST(DdpLocal, BucketsLaunchBeforeBackwardEnds) {
  run_ranks(2, [](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto m = std::make_shared<Mlp>();
    // fc3 (8x3 + 3), fc2 (8x8 + 8), fc1 (8x4 + 8): a 100-byte cap gives one bucket per layer
    // or parameter, at least 4.
    DistributedDataParallel ddp(m, pg, {.bucket_cap_mb = mb(100)});
    const size_t k = ddp.bucket_layout().size();
    ASSERT_GE(k, 4u);
    loss_of(ddp.module(), data_for(rank, 4, 30)).backward();
    std::vector<std::string> expected;
    for (size_t i = 0; i < k; ++i) expected.push_back(numbered("launch ", i));
    expected.push_back("backward end");
    for (size_t i = 0; i < k; ++i) expected.push_back(numbered("wait ", i));
    EXPECT_EQ(ddp_debug_events(ddp), expected);
  });
}

TEST(DdpLocal, ForwardBroadcastsBuffersFromRankZero) {
  std::shared_ptr<Meeting> meeting;
  std::vector<std::vector<float>> stats(2), kept(2);
  run_ranks(
      2,
      [&](int rank, std::shared_ptr<ProcessGroup> pg) {
        auto m = std::make_shared<WithBuffer>();
        DistributedDataParallel ddp(m, pg);
        m->stat.fill_(rank + 1.0);
        ddp.forward(data_for(rank, 2, 4));
        stats[rank] = m->stat.to_vector<float>();

        auto m2 = std::make_shared<WithBuffer>();
        DistributedDataParallel quiet(m2, pg, {.broadcast_buffers = false});
        m2->stat.fill_(rank + 1.0);
        quiet.forward(data_for(rank, 2, 4));
        kept[rank] = m2->stat.to_vector<float>();
      },
      &meeting);
  EXPECT_EQ(stats[1], std::vector<float>(3, 1.0f));
  EXPECT_EQ(kept[1], std::vector<float>(3, 2.0f));
}

TEST(DdpLocal, ConstructionBroadcastsAndChecks) {
  std::shared_ptr<Meeting> meeting;
  run_ranks(
      1,
      [](int, std::shared_ptr<ProcessGroup> pg) {
        auto m = std::make_shared<WithBuffer>();
        DistributedDataParallel ddp(m, pg);
      },
      &meeting);
  // One all_gather (the model check), then a broadcast per parameter (6) and buffer (1).
  std::vector<std::string> expected{"all_gather"};
  for (int i = 0; i < 7; ++i) expected.push_back("broadcast");
  EXPECT_EQ(meeting->ops, expected);
}

TEST(DdpLocal, MismatchedModelsNameTheFirstDifference) {
  run_ranks(2, [](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto m = std::make_shared<Mlp>(rank == 0 ? 8 : 9);
    expect_throws_with([&] { DistributedDataParallel ddp(m, pg); },
                       {"ranks hold different models", "rank 0 has parameter 'fc1.weight' [8, 4]",
                        "rank 1 has parameter 'fc1.weight' [9, 4]"});
    auto extra = std::make_shared<Mlp>();
    if (rank == 1) extra->register_parameter("extra", ones({2}));
    expect_throws_with([&] { DistributedDataParallel ddp(extra, pg); },
                       {"ranks hold different models", "rank 1 has parameter 'extra' [2] f32"});
  });
}

TEST(DdpLocal, HooksOutliveTheWrapperHarmlessly) {
  run_ranks(1, [](int, std::shared_ptr<ProcessGroup> pg) {
    auto m = std::make_shared<Mlp>();
    { DistributedDataParallel ddp(m, pg); }
    loss_of(*m, data_for(0, 2, 5)).backward();
    EXPECT_TRUE(m->fc1->weight.grad().defined());
  });
}

TEST(DdpLocal, RejectsBadOptions) {
  run_ranks(1, [](int, std::shared_ptr<ProcessGroup> pg) {
    expect_throws_with(
        [&] { DistributedDataParallel ddp(std::make_shared<Mlp>(), pg, {.bucket_cap_mb = 0}); },
        {"bucket_cap_mb must be > 0"});
    expect_throws_with([&] { DistributedDataParallel ddp(nullptr, pg); }, {"module is null"});
  });
}

// GradScaler with a process group: one rank's overflow makes every rank skip the step and back off,
// so that the replicas stay equal; a clean step afterwards runs everywhere.
TEST(DdpLocal, GradScalerSkipsTheSameStepsOnEveryRank) {
  std::vector<std::vector<double>> after(2);
  std::vector<double> scales(2);
  std::vector<int> ran(2, 0);
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    Tensor w = from_vector<double>({1.0, 2.0}, {2}).to(DType::f32).requires_grad_(true);
    optim::SGD opt({w}, {.lr = 0.1});
    optim::GradScaler scaler({.init_scale = 8.0, .process_group = pg});
    const double bad = rank == 0 ? std::numeric_limits<double>::infinity() : 1.0;
    const Tensor x = from_vector<double>({1.0, bad}, {2}).to(DType::f32);
    scaler.scale(sum(mul(w, x))).backward();
    ran[rank] += scaler.step(opt) ? 1 : 0;
    scaler.update();
    opt.zero_grad();
    scaler.scale(sum(mul(w, ones({2})))).backward();
    ran[rank] += scaler.step(opt) ? 1 : 0;
    scaler.update();
    after[rank] = w.detach().to_vector<double>();
    scales[rank] = scaler.get_scale();
  });
  EXPECT_EQ(ran, (std::vector<int>{1, 1}));  // the first step skipped on both, the second ran
  EXPECT_EQ(after[0], after[1]);
  EXPECT_NEAR(after[0][0], 0.9, 1e-6);
  EXPECT_NEAR(after[0][1], 1.9, 1e-6);
  EXPECT_EQ(scales, (std::vector<double>{4.0, 4.0}));
}
