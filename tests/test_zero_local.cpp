// ZeroRedundancyOptimizer with in-process ranks (tests/thread_group.h): stages 1 and 2 against
// plain DDP with the same optimizer, the state and gradient memory per rank, clipping by the global
// norm, GradScaler, schedules, consolidation of the shards and loading at another world size, and
// the errors. tests/dist/test_zero.cpp repeats the comparison over MPI at 2 and 4 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "sinter/autograd.h"
#include "sinter/dist.h"
#include "sinter/nn.h"
#include "sinter/nn/models.h"
#include "sinter/ops.h"
#include "sinter/optim.h"
#include "test_util.h"
#include "thread_group.h"

namespace sinter::testing {
namespace {

using dist::DistributedDataParallel;
using dist::ZeroOptions;
using dist::ZeroRedundancyOptimizer;

enum class Mode { Ddp, Zero1, Zero2 };

const char* mode_name(Mode m) {
  return m == Mode::Ddp ? "ddp" : m == Mode::Zero1 ? "zero1" : "zero2";
}

struct RunSetup {
  int ranks = 2;
  bool gpt = false;
  bool clip = false;
  int steps = 50;
  double bucket_cap_mb = 0.002;  // several buckets, so that reduce-scatters overlap backward
  std::string optimizer = "adamw";
};

std::shared_ptr<nn::Module> make_model(const RunSetup& s) {
  manual_seed(11);
  if (s.gpt) {
    return std::make_shared<nn::models::GPT>(nn::models::GPTConfig{
        .vocab_size = 23, .context_length = 8, .n_layer = 2, .n_head = 2, .n_embd = 16});
  }
  return std::make_shared<Mlp>(5, 24, 3);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name,
                                                 const std::vector<Tensor>& params) {
  if (name == "sgd") {
    return std::make_unique<optim::SGD>(
        params, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3});
  }
  if (name == "adam") {
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 1e-2});
  }
  return std::make_unique<optim::AdamW>(params,
                                        optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1});
}

// Rank r's batch of step t.
std::pair<Tensor, Tensor> batch(const RunSetup& s, int rank, int step) {
  Generator gen(1000 + 97 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(step));
  if (s.gpt) {
    return {randint(0, 23, {3, 8}, {.dtype = DType::i64}, &gen),
            randint(0, 23, {3, 8}, {.dtype = DType::i64}, &gen)};
  }
  return {randn({6, 5}, {}, &gen), randn({6, 3}, {}, &gen)};
}

Tensor loss_of(const RunSetup& s, DistributedDataParallel& ddp, const Tensor& x, const Tensor& y) {
  if (s.gpt) return cross_entropy(ddp.forward(x).reshape({-1, 23}), y.reshape({-1}));
  return sub(ddp.forward(x), y).pow(2.0).mean();
}

std::vector<double> flat(const std::vector<Tensor>& ts) { return flat_values(ts); }

// Trains s.steps steps on every rank and returns each rank's parameters.
std::vector<std::vector<double>> train(const RunSetup& s, Mode mode) {
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < s.ranks; ++r) models.push_back(make_model(s));
  std::vector<std::vector<double>> params(static_cast<size_t>(s.ranks));
  run_ranks(s.ranks, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto& model = models[static_cast<size_t>(rank)];
    DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = s.bucket_cap_mb});
    std::unique_ptr<optim::Optimizer> opt;
    ZeroRedundancyOptimizer* zero = nullptr;
    if (mode == Mode::Ddp) {
      opt = make_optimizer(s.optimizer, model->parameters());
    } else {
      auto z = std::make_unique<ZeroRedundancyOptimizer>(
          ddp,
          [&](const std::vector<Tensor>& shards) { return make_optimizer(s.optimizer, shards); },
          ZeroOptions{.stage = mode == Mode::Zero1 ? 1 : 2});
      zero = z.get();
      opt = std::move(z);
    }
    for (int t = 0; t < s.steps; ++t) {
      opt->zero_grad();
      auto [x, y] = batch(s, rank, t);
      loss_of(s, ddp, x, y).backward();
      if (s.clip) {
        const double norm =
            zero ? zero->clip_grad_norm_(0.5) : optim::clip_grad_norm_(model->parameters(), 0.5);
        EXPECT_TRUE(std::isfinite(norm));
      }
      opt->step();
    }
    params[static_cast<size_t>(rank)] = flat(model->parameters());
  });
  return params;
}

// The acceptance check (tests/dist/test_zero.cpp makes it over MPI): 50 AdamW steps.
TEST(ZeroLocal, MatchesDdpAfter50Steps) {
  for (const int ranks : {2, 4}) {
    for (const bool gpt : {false, true}) {
      RunSetup s{.ranks = ranks, .gpt = gpt};
      SCOPED_TRACE(::testing::Message() << ranks << " ranks, " << (gpt ? "gpt" : "mlp"));
      const auto ddp = train(s, Mode::Ddp);
      for (Mode mode : {Mode::Zero1, Mode::Zero2}) {
        SCOPED_TRACE(mode_name(mode));
        const auto zero = train(s, mode);
        for (int r = 0; r < ranks; ++r) {
          // Every rank holds the same parameters, bitwise (they were all-gathered).
          EXPECT_EQ(zero[r], zero[0]) << "rank " << r;
          EXPECT_LT(relative_difference(zero[r], ddp[0]), 1e-6) << "rank " << r;
        }
        // And they moved: 50 steps of lr 1e-2 change the model.
        const auto start = flat(make_model(s)->parameters());
        EXPECT_GT(relative_difference(zero[0], start), 1e-2);
      }
    }
  }
}

// With clipping by the global norm: ZeRO's norm is summed over the ranks' shards, DDP's over the
// parameters, so the two can differ in the last bit of f32, and a GPT trained at lr 1e-2 lets that
// grow (to 5e-5 in 50 steps). After 3 steps they agree within 1e-5: 1.2e-7 with GCC's build here,
// 1.6e-6 with Clang's (the sanitizer builds), where the kernels' rounding differs; a clipping by
// the wrong norm is off by far more.
TEST(ZeroLocal, ClippedStepsMatchDdp) {
  for (const int ranks : {2, 4}) {
    RunSetup s{.ranks = ranks, .gpt = true, .clip = true, .steps = 3};
    const auto ddp = train(s, Mode::Ddp);
    for (Mode mode : {Mode::Zero1, Mode::Zero2}) {
      SCOPED_TRACE(::testing::Message() << ranks << " ranks, " << mode_name(mode));
      EXPECT_LT(relative_difference(train(s, mode)[0], ddp[0]), 1e-5);
    }
  }
}

TEST(ZeroLocal, SgdAndAdamMatchDdpToo) {
  for (const std::string name : {"sgd", "adam"}) {
    SCOPED_TRACE(name);
    RunSetup s{.ranks = 3, .steps = 20, .optimizer = name};
    const auto ddp = train(s, Mode::Ddp);
    const auto zero = train(s, Mode::Zero2);
    EXPECT_LT(relative_difference(zero[1], ddp[1]), 1e-6);
  }
}

// The optimizer states of two runs: Adam's second moments are squares of gradients whose last
// bits depend on the order the ranks' values were summed in, hence 1e-5.
void expect_same_state(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, t] : b) {
    ASSERT_TRUE(a.count(key)) << key;
    ASSERT_EQ(a.at(key).shape(), t.shape()) << key;
    EXPECT_LT(relative_difference(flat({a.at(key)}), flat({t})), 1e-5) << key;
  }
}

TEST(ZeroLocal, ParameterGroupsMatchDdpAndConsolidate) {
  // Weight decay on the matrices only, as the lm example does.
  const auto grouped = [](const std::vector<Tensor>& decay, const std::vector<Tensor>& rest) {
    return std::make_unique<optim::AdamW>(
        std::vector<optim::AdamWGroup>{{.params = decay, .weight_decay = 0.2},
                                       {.params = rest, .weight_decay = 0.0}},
        optim::AdamWOptions{.lr = 1e-2});
  };
  RunSetup s{.ranks = 3, .gpt = true, .steps = 10};
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < 2 * s.ranks; ++r) models.push_back(make_model(s));
  std::vector<StateDict> ddp_state(3), shards(3);
  run_ranks(s.ranks, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto& model = models[rank];
    DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = s.bucket_cap_mb});
    std::vector<Tensor> decay, rest;
    for (const Tensor& p : model->parameters()) (p.dim() >= 2 ? decay : rest).push_back(p);
    auto opt = grouped(decay, rest);
    for (int t = 0; t < s.steps; ++t) {
      opt->zero_grad();
      auto [x, y] = batch(s, rank, t);
      loss_of(s, ddp, x, y).backward();
      opt->step();
    }
    ddp_state[rank] = opt->state_dict();
  });
  run_ranks(s.ranks, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto& model = models[rank + 3];
    DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = s.bucket_cap_mb});
    ZeroRedundancyOptimizer opt(
        ddp,
        ZeroRedundancyOptimizer::MakeGroupedOptimizer(
            [&](const std::vector<std::vector<Tensor>>& g) { return grouped(g[0], g[1]); }),
        {.group_of = [](const std::string&, const Tensor& p) { return p.dim() >= 2 ? 0 : 1; }});
    EXPECT_EQ(opt.num_param_groups(), 2u);
    // No bucket mixes the groups.
    for (const auto& bucket : ddp.bucket_layout()) {
      const bool matrix = model->parameters()[bucket[0]].dim() >= 2;
      for (size_t i : bucket) EXPECT_EQ(model->parameters()[i].dim() >= 2, matrix);
    }
    for (int t = 0; t < s.steps; ++t) {
      opt.zero_grad();
      auto [x, y] = batch(s, rank, t);
      loss_of(s, ddp, x, y).backward();
      opt.step();
    }
    shards[rank] = opt.state_dict();
  });
  EXPECT_LT(relative_difference(flat(models[3]->parameters()), flat(models[0]->parameters())),
            1e-6);
  expect_same_state(ZeroRedundancyOptimizer::consolidate(shards), ddp_state[0]);
  // The one-group form of the function cannot take two groups.
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(make_model(s), pg);
    expect_error(
        [&] {
          ZeroRedundancyOptimizer(
              ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("sgd", shards); },
              {.group_of = [](const std::string&, const Tensor& p) {
                return p.dim() >= 2 ? 0 : 1;
              }});
        },
        {"group_of makes 2 parameter groups"});
    (void)rank;
  });
}

// Muon with its matrices in a Muon group and the rest in an AdamW group (ns_bf16 off: f32
// throughout), over whole parameters or, under ZeRO, over shards (Note [muon shards]).
std::unique_ptr<optim::Muon> muon_over(const std::vector<Tensor>& matrices,
                                       const std::vector<Tensor>& rest, bool shards) {
  const std::vector<optim::MuonGroup> groups{{.params = matrices},
                                             {.params = rest, .lr = 1e-2, .adamw = true}};
  const optim::MuonOptions o{.lr = 0.02, .ns_bf16 = false};
  return shards ? optim::Muon::over_shards(groups, o) : std::make_unique<optim::Muon>(groups, o);
}

// s.steps Muon steps under DDP or ZeRO: every rank's parameters, and the optimizer state of each
// rank (DDP's whole, ZeRO's shards).
std::pair<std::vector<std::vector<double>>, std::vector<StateDict>> train_muon(const RunSetup& s,
                                                                               Mode mode) {
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < s.ranks; ++r) models.push_back(make_model(s));
  std::vector<std::vector<double>> params(static_cast<size_t>(s.ranks));
  std::vector<StateDict> states(static_cast<size_t>(s.ranks));
  run_ranks(s.ranks, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto& model = models[static_cast<size_t>(rank)];
    DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = s.bucket_cap_mb});
    std::unique_ptr<optim::Optimizer> opt;
    if (mode == Mode::Ddp) {
      std::vector<Tensor> matrices, rest;
      for (const Tensor& p : model->parameters()) (p.dim() == 2 ? matrices : rest).push_back(p);
      opt = muon_over(matrices, rest, false);
    } else {
      opt = std::make_unique<ZeroRedundancyOptimizer>(
          ddp,
          ZeroRedundancyOptimizer::MakeGroupedOptimizer(
              [](const std::vector<std::vector<Tensor>>& g) {
                return muon_over(g[0], g[1], true);
              }),
          ZeroOptions{.stage = mode == Mode::Zero1 ? 1 : 2,
                      .group_of = [](const std::string&, const Tensor& p) {
                        return p.dim() == 2 ? 0 : 1;
                      }});
    }
    for (int t = 0; t < s.steps; ++t) {
      opt->zero_grad();
      auto [x, y] = batch(s, rank, t);
      loss_of(s, ddp, x, y).backward();
      opt->step();
    }
    params[static_cast<size_t>(rank)] = flat(model->parameters());
    states[static_cast<size_t>(rank)] = opt->state_dict();
  });
  return {params, states};
}

// Muon under ZeRO (Note [muon shards]) trains as Muon over the whole parameters under DDP: the
// momentum sharded, each matrix orthogonalized whole from the gathered updates. The buckets are
// small, so matrices are cut between the ranks' parts; the consolidated shards are DDP's state.
TEST(ZeroLocal, MuonMatchesDdp) {
  for (const int ranks : {2, 3}) {
    for (const bool gpt : {false, true}) {
      const RunSetup s{.ranks = ranks, .gpt = gpt, .steps = 10};
      SCOPED_TRACE(::testing::Message() << ranks << " ranks, " << (gpt ? "gpt" : "mlp"));
      const auto [ddp, ddp_state] = train_muon(s, Mode::Ddp);
      for (Mode mode : {Mode::Zero1, Mode::Zero2}) {
        SCOPED_TRACE(mode_name(mode));
        const auto [zero, shards] = train_muon(s, mode);
        for (int r = 0; r < ranks; ++r) {
          EXPECT_EQ(zero[r], zero[0]) << "rank " << r;
          EXPECT_LT(relative_difference(zero[r], ddp[0]), 1e-5) << "rank " << r;
        }
        EXPECT_GT(relative_difference(zero[0], flat(make_model(s)->parameters())), 1e-2);
        expect_same_state(ZeroRedundancyOptimizer::consolidate(shards), ddp_state[0]);
      }
    }
  }
  // A Muon over whole matrices cannot take shards, nor one over shards a vector in a Muon group.
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(make_model({}), pg);
    expect_error(
        [&] {
          ZeroRedundancyOptimizer(ddp, [](const std::vector<Tensor>& shards) {
            return std::make_unique<optim::Muon>(shards);
          });
        },
        {"Muon: parameter 0 of group 0 has shape", "Muon::over_shards"});
    expect_error(
        [&] {
          ZeroRedundancyOptimizer(ddp, [](const std::vector<Tensor>& shards) {
            return optim::Muon::over_shards({{.params = shards}});
          });
        },
        {"Muon's group 0 holds parameter", "adamw group"});
    (void)rank;
  });
}

size_t tensor_bytes(const Tensor& t) { return t.numel() * element_size(t.dtype()); }

// Bytes of the optimizer's per-parameter buffers (not its 0-dim step counts).
size_t state_bytes(const optim::Optimizer& opt) {
  size_t total = 0;
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    for (size_t i = 0; i < opt.params(g).size(); ++i) {
      for (const auto& [name, t] : opt.state(g, i)) {
        if (t.dim() > 0) total += tensor_bytes(t);
      }
    }
  }
  return total;
}

TEST(ZeroLocal, StateAndGradientsAreOneNthPerRank) {
  const int n = 4;
  RunSetup s{.ranks = n, .gpt = true, .steps = 1};
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < n; ++r) models.push_back(make_model(s));
  size_t param_bytes = 0;
  for (const Tensor& p : models[0]->parameters()) param_bytes += tensor_bytes(p);
  for (Mode mode : {Mode::Zero1, Mode::Zero2}) {
    SCOPED_TRACE(mode_name(mode));
    run_ranks(n, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
      auto& model = models[static_cast<size_t>(rank)];
      DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = s.bucket_cap_mb});
      ZeroRedundancyOptimizer opt(
          ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("adamw", shards); },
          {.stage = mode == Mode::Zero1 ? 1 : 2});
      const size_t buckets = ddp.bucket_layout().size();
      ASSERT_GT(buckets, 2u);
      opt.zero_grad();
      auto [x, y] = batch(s, rank, 0);
      loss_of(s, ddp, x, y).backward();
      size_t param_grad_bytes = 0, shard_grad_bytes = 0;
      for (const Tensor& p : model->parameters()) {
        if (p.grad().defined()) param_grad_bytes += tensor_bytes(p.grad());
      }
      for (const Tensor& sh : opt.shards()) shard_grad_bytes += tensor_bytes(sh.grad());
      // Each bucket is padded by fewer than n elements (4 bytes each): the shard of a rank is
      // 1/n of the parameters plus at most one element per bucket.
      const size_t slack = buckets * 4;
      EXPECT_LE(shard_grad_bytes, param_bytes / n + slack);
      EXPECT_GE(shard_grad_bytes, param_bytes / n);
      if (mode == Mode::Zero2) {
        EXPECT_EQ(param_grad_bytes, 0u) << "stage 2 keeps no full gradient";
      } else {
        EXPECT_EQ(param_grad_bytes, param_bytes);
      }
      opt.step();
      // AdamW: two buffers per element of the shard, against two per parameter element in DDP.
      const size_t bytes = state_bytes(opt.local_optimizer());
      EXPECT_LE(bytes, 2 * (param_bytes / n + slack));
      EXPECT_GE(bytes, 2 * param_bytes / n);
    });
  }
}

TEST(ZeroLocal, ClipsByTheGlobalNormOfEveryRanksShard) {
  // The norm returned on every rank is the norm of the whole averaged gradient, as
  // clip_grad_norm_ over a DDP model's parameters gives.
  RunSetup s{.ranks = 3, .gpt = true, .steps = 1};
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < 2 * s.ranks; ++r) models.push_back(make_model(s));
  std::vector<double> ddp_norm(3), zero_norm(3);
  run_ranks(s.ranks, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(models[rank], pg, {.bucket_cap_mb = s.bucket_cap_mb});
    auto [x, y] = batch(s, rank, 0);
    loss_of(s, ddp, x, y).backward();
    ddp_norm[rank] = optim::clip_grad_norm_(models[rank]->parameters(), 0.1);
  });
  run_ranks(s.ranks, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto& model = models[rank + 3];
    DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = s.bucket_cap_mb});
    ZeroRedundancyOptimizer opt(
        ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("sgd", shards); });
    auto [x, y] = batch(s, rank, 0);
    loss_of(s, ddp, x, y).backward();
    zero_norm[rank] = opt.clip_grad_norm_(0.1);
    // After clipping, the shards' norm over all ranks is 0.1.
    Tensor sq = zeros({});
    for (const Tensor& sh : opt.shards()) sq = add(sq, sum(mul(sh.grad(), sh.grad())));
    pg->all_reduce(sq);
    EXPECT_NEAR(std::sqrt(sq.item<double>()), 0.1, 1e-6);
    expect_error([&] { opt.clip_grad_norm_(-1.0); }, {"clip_grad_norm_", "max_norm must be >= 0"});
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_NEAR(zero_norm[r], ddp_norm[0], 1e-6 * ddp_norm[0]);
    EXPECT_GT(ddp_norm[0], 0.1);
  }
}

TEST(ZeroLocal, GradScalerAndSchedulesWorkThroughTheWrapper) {
  RunSetup s{.ranks = 2};
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < 2; ++r) models.push_back(make_model(s));
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto& model = models[rank];
    DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = s.bucket_cap_mb});
    ZeroRedundancyOptimizer opt(
        ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("adamw", shards); });
    optim::GradScaler scaler({.init_scale = 256.0, .process_group = pg});
    optim::StepLR schedule(opt, 1, 0.5);
    for (int t = 0; t < 3; ++t) {
      opt.zero_grad();
      auto [x, y] = batch(s, rank, t);
      Tensor loss = loss_of(s, ddp, x, y);
      // Step 1: rank 1's loss is infinite, so its gradients are; every rank must skip the step.
      if (t == 1 && rank == 1) loss = mul(loss, std::numeric_limits<double>::infinity());
      scaler.scale(loss).backward();
      scaler.unscale_(opt);
      const std::vector<double> before = flat(model->parameters());
      const bool stepped = scaler.step(opt);
      scaler.update();
      EXPECT_EQ(stepped, t != 1) << "rank " << rank << " step " << t;
      if (!stepped) {
        EXPECT_EQ(flat(model->parameters()), before);
      }
      schedule.step();
    }
    EXPECT_DOUBLE_EQ(opt.lr(), 1e-2 / 8);
    EXPECT_DOUBLE_EQ(opt.local_optimizer().lr(), 1e-2 / 8);
    EXPECT_DOUBLE_EQ(scaler.get_scale(), 128.0);
    opt.set_hyperparameter(0, "weight_decay", 0.25);
    EXPECT_DOUBLE_EQ(opt.local_optimizer().hyperparameter(0, "weight_decay"), 0.25);
    expect_error([&] { opt.set_lr(-1.0); }, {"learning rate -1"});
    EXPECT_DOUBLE_EQ(opt.local_optimizer().lr(), 1e-2 / 8);
  });
  // The ranks still agree.
  EXPECT_EQ(flat(models[0]->parameters()), flat(models[1]->parameters()));
}

TEST(ZeroLocal, AccumulationUnderNoSyncMatchesDdp) {
  RunSetup s{.ranks = 2, .steps = 4};
  std::vector<std::vector<double>> results;
  for (Mode mode : {Mode::Ddp, Mode::Zero2}) {
    std::vector<std::shared_ptr<nn::Module>> models;
    for (int r = 0; r < 2; ++r) models.push_back(make_model(s));
    run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
      DistributedDataParallel ddp(models[rank], pg, {.bucket_cap_mb = s.bucket_cap_mb});
      std::unique_ptr<optim::Optimizer> opt;
      if (mode == Mode::Ddp) {
        opt = make_optimizer("adamw", models[rank]->parameters());
      } else {
        opt = std::make_unique<ZeroRedundancyOptimizer>(
            ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("adamw", shards); });
      }
      for (int t = 0; t < s.steps; ++t) {
        opt->zero_grad();
        for (int m = 0; m < 3; ++m) {
          auto [x, y] = batch(s, rank, 10 * t + m);
          Tensor loss = loss_of(s, ddp, x, y);
          if (m < 2) {
            auto guard = ddp.no_sync();
            loss.backward();
          } else {
            loss.backward();
          }
        }
        opt->step();
      }
    });
    results.push_back(flat(models[0]->parameters()));
  }
  EXPECT_LT(relative_difference(results[1], results[0]), 1e-6);
}

// Trains `steps` steps at `ranks` ranks; returns every rank's state_dict() (ZeRO) or rank 0's
// optimizer state dict (DDP), and the parameters.
struct Trained {
  std::vector<StateDict> dicts;
  std::vector<double> params;
};

Trained train_and_save(const RunSetup& s, Mode mode, const StateDict* load = nullptr,
                       const std::vector<double>* start = nullptr) {
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < s.ranks; ++r) models.push_back(make_model(s));
  if (start) {
    for (auto& m : models) {
      NoGradGuard ng;
      int64_t at = 0;
      for (Tensor p : m->parameters()) {
        std::vector<double> part(start->begin() + at, start->begin() + at + p.numel());
        p.copy_(from_vector(part, p.shape()).to(p.dtype()));
        at += p.numel();
      }
    }
  }
  Trained out;
  out.dicts.resize(static_cast<size_t>(s.ranks));
  run_ranks(s.ranks, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(models[rank], pg, {.bucket_cap_mb = s.bucket_cap_mb});
    std::unique_ptr<optim::Optimizer> opt;
    if (mode == Mode::Ddp) {
      opt = make_optimizer(s.optimizer, models[rank]->parameters());
    } else {
      opt = std::make_unique<ZeroRedundancyOptimizer>(
          ddp,
          [&](const std::vector<Tensor>& shards) { return make_optimizer(s.optimizer, shards); },
          ZeroOptions{.stage = mode == Mode::Zero1 ? 1 : 2});
    }
    if (load) opt->load_state_dict(*load);
    for (int t = 0; t < s.steps; ++t) {
      opt->zero_grad();
      auto [x, y] = batch(s, rank % 2, t);
      loss_of(s, ddp, x, y).backward();
      opt->step();
    }
    out.dicts[rank] = opt->state_dict();
  });
  out.params = flat(models[0]->parameters());
  return out;
}

TEST(ZeroLocal, ConsolidatedShardsEqualTheUnshardedStateAndLoadAtAnotherWorldSize) {
  // Data of ranks r and r + 2 is the same (batch(rank % 2)), so 4 and 2 ranks train alike.
  RunSetup s4{.ranks = 4, .gpt = true, .steps = 5};
  RunSetup s2 = s4;
  s2.ranks = 2;
  const Trained ddp = train_and_save(s2, Mode::Ddp);
  const Trained zero4 = train_and_save(s4, Mode::Zero2);
  const StateDict consolidated = ZeroRedundancyOptimizer::consolidate(zero4.dicts);
  expect_same_state(consolidated, ddp.dicts[0]);

  // The consolidated state is a plain AdamW's: loaded into DDP's, and into a ZeRO at 2 ranks
  // (stage 1), both from the 4 ranks' parameters, 5 more steps agree.
  RunSetup more = s2;
  const Trained ddp_more = train_and_save(more, Mode::Ddp, &consolidated, &zero4.params);
  const Trained zero2 = train_and_save(more, Mode::Zero1, &consolidated, &zero4.params);
  EXPECT_LT(relative_difference(zero2.params, ddp_more.params), 1e-6);
  expect_same_state(ZeroRedundancyOptimizer::consolidate(zero2.dicts), ddp_more.dicts[0]);
}

TEST(ZeroLocal, ShardFilesConsolidateAndLoadAtAnotherWorldSize) {
  const TempDir tmp;
  const std::string dir = tmp.str();
  const std::string path = dir + "/opt.safetensors";
  RunSetup s{.ranks = 4, .gpt = true, .steps = 3};
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < 4; ++r) models.push_back(make_model(s));
  std::vector<StateDict> dicts(4);
  run_ranks(4, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(models[rank], pg, {.bucket_cap_mb = s.bucket_cap_mb});
    ZeroRedundancyOptimizer opt(
        ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("adamw", shards); });
    for (int t = 0; t < s.steps; ++t) {
      opt.zero_grad();
      auto [x, y] = batch(s, rank % 2, t);
      loss_of(s, ddp, x, y).backward();
      opt.step();
    }
    opt.save_sharded(path);
    dicts[rank] = opt.state_dict();
    // Its own shard loads back at the same world size.
    opt.load_sharded(path);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(
        std::filesystem::exists(dir + "/opt.rank" + std::to_string(r) + "-of-4.safetensors"));
  }
  const std::string whole = dir + "/whole.safetensors";
  ZeroRedundancyOptimizer::consolidate_files(path, whole);
  expect_same_state(load(whole), ZeroRedundancyOptimizer::consolidate(dicts));

  // At 2 ranks: the shards of 4 are refused (naming the file), the consolidated file loads.
  models.resize(2);
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(models[rank], pg, {.bucket_cap_mb = s.bucket_cap_mb});
    ZeroRedundancyOptimizer opt(
        ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("adamw", shards); });
    expect_error([&] { opt.load_sharded(path); },
                 {"opt.rank" + std::to_string(rank) + "-of-2.safetensors does not exist",
                  "-of-4.safetensors does", "consolidate"});
    opt.load_state_dict(load(whole));
    std::vector<StateDict> mine(2);
    mine[rank] = opt.state_dict();
    // The 2-rank shards consolidate to the same state again.
    for (const auto& [key, t] : mine[rank]) {
      Tensor all = pg->all_gather(t.contiguous());
      for (int r = 0; r < 2; ++r) mine[r][key] = all.select(0, r).clone();
    }
    if (rank == 0) expect_same_state(ZeroRedundancyOptimizer::consolidate(mine), load(whole));
  });

  // Mismatched optimizer types: an SGD loading AdamW's shard names the file and keeps its state.
  models.resize(4);
  for (int r = 2; r < 4; ++r) models[r] = make_model(s);
  run_ranks(4, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(models[rank], pg, {.bucket_cap_mb = s.bucket_cap_mb});
    ZeroRedundancyOptimizer opt(
        ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("sgd", shards); });
    const StateDict before = opt.state_dict();
    expect_error([&] { opt.load_sharded(path); },
                 {"load_sharded", "opt.rank" + std::to_string(rank) + "-of-4.safetensors", "SGD"});
    expect_same_state(opt.state_dict(), before);
  });

  // A missing shard: named, and nothing written.
  std::filesystem::remove(dir + "/opt.rank2-of-4.safetensors");
  const std::string other = dir + "/other.safetensors";
  expect_error([&] { ZeroRedundancyOptimizer::consolidate_files(path, other); },
               {"opt.rank2-of-4.safetensors is missing", "nothing was written"});
  EXPECT_FALSE(std::filesystem::exists(other));
  expect_error(
      [&] { ZeroRedundancyOptimizer::consolidate_files(dir + "/none.safetensors", other); },
      {"no shard of", "none.rank0-of-N.safetensors"});
}

// A trainer's members may go in any order: the wrapper keeps what it shares with the DDP.
TEST(ZeroLocal, OutlivesItsDdp) {
  RunSetup s{.ranks = 2, .steps = 2};
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < 2; ++r) models.push_back(make_model(s));
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    auto ddp = std::make_unique<DistributedDataParallel>(models[rank], pg);
    auto opt = std::make_unique<ZeroRedundancyOptimizer>(
        *ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("adamw", shards); });
    auto [x, y] = batch(s, rank, 0);
    loss_of(s, *ddp, x, y).backward();
    opt->step();
    ddp.reset();
    opt.reset();
  });
  EXPECT_EQ(flat(models[0]->parameters()), flat(models[1]->parameters()));
}

TEST(ZeroLocal, BadShardsAndOptionsAreClearErrors) {
  RunSetup s{.ranks = 2, .gpt = true, .steps = 1};
  const Trained zero = train_and_save(s, Mode::Zero2);
  expect_error([&] { ZeroRedundancyOptimizer::consolidate({zero.dicts[0]}); },
               {"consolidate", "shard 0 was saved by one of 2 ranks, but 1 shards were given"});
  expect_error(
      [&] {
        ZeroRedundancyOptimizer::consolidate({zero.dicts[1], zero.dicts[0]});
      },
      {"consolidate", "shard 0 is rank 1's"});
  expect_error(
      [&] {
        ZeroRedundancyOptimizer::consolidate({zero.dicts[0], StateDict{}});
      },
      {"consolidate", "missing \"zero.world_size\""});

  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < 4; ++r) models.push_back(make_model(s));
  // A shard of 2 ranks at 4 ranks, an SGD shard into AdamW, a rank's shard at another rank.
  run_ranks(4, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(models[rank], pg, {.bucket_cap_mb = s.bucket_cap_mb});
    ZeroRedundancyOptimizer opt(
        ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("adamw", shards); });
    expect_error([&] { opt.load_state_dict(zero.dicts[0]); },
                 {"load_state_dict", "saved by one of 2 ranks, but this group has 4",
                  "consolidate the shards"});
  });
  models.resize(2);
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(models[rank], pg, {.bucket_cap_mb = s.bucket_cap_mb});
    ZeroRedundancyOptimizer opt(
        ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("sgd", shards); });
    const StateDict before = opt.state_dict();
    expect_error([&] { opt.load_state_dict(zero.dicts[rank]); }, {"SGD", "load_state_dict"});
    expect_error([&] { opt.load_state_dict(zero.dicts[1 - rank]); },
                 {"the shard is rank " + std::to_string(1 - rank)});
    expect_same_state(opt.state_dict(), before);
  });
  run_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> pg) {
    DistributedDataParallel ddp(models[rank], pg);
    expect_error(
        [&] {
          ZeroRedundancyOptimizer(
              ddp, [](const std::vector<Tensor>& shards) { return make_optimizer("sgd", shards); },
              {.stage = 3});
        },
        {"ZeroRedundancyOptimizer: stage must be 1 or 2, got 3"});
    expect_error(
        [&] {
          ZeroRedundancyOptimizer(ddp, [&](const std::vector<Tensor>&) {
            return make_optimizer("sgd", models[rank]->parameters());
          });
        },
        {"must be made over the", "shard tensors"});
  });
}

}  // namespace
}  // namespace sinter::testing
