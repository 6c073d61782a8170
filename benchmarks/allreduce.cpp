// bench_allreduce, run under `mpirun -np N`: the bus bandwidth of ProcessGroup's all_reduce,
// reduce_scatter and all_gather_into by message size (8 B .. 256 MB, each size validated before it
// is timed); the overlap DDP achieves in a training step: backward with and without gradient
// communication on the mlp, cnn and resnet20 workloads; and ZeRO stages 1 and 2 against DDP on a
// GPT: step time, optimizer state and gradient memory per rank; and FSDP on the same GPT: the bytes
// all-gathered and reduce-scattered per step and the time the host waited for them. CUDA tensors
// (NCCL) when the build has NCCL and a GPU is there, else CPU tensors (MPI).
// `--smoke` runs tiny sizes on the CPU. Rank 0 prints; a failure on any rank fails the program.
//
// The figures follow nccl-tests (doc/PERFORMANCE.md there): algbw = bytes / time, and
// busbw = algbw * 2(n-1)/n, the rate each link runs at in a ring all-reduce, which is comparable
// with the hardware's link bandwidth whatever n is (and 0 for n = 1, where nothing crosses a link).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "dist_util.h"
#include "sinter/dist.h"
#include "sinter/fsdp.h"

namespace {

using namespace sinter;
using bench::all_ranks;
using bench::Clock;
using bench::max_over_ranks;
using bench::seconds;
using bench::state_bytes;
using bench::sync_device;

struct Config {
  bool smoke = false;
  std::string device = "auto";  // auto, cpu, cuda
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{256} << 20;
  int reps = 0;  // 0: by message size
};

bool parse_int(const char* arg, const char* flag, int64_t& out) {
  const size_t n = std::strlen(flag);
  if (std::strncmp(arg, flag, n) != 0) return false;
  out = std::strtoll(arg + n, nullptr, 10);
  return true;
}

const char* kUsage =
    "usage: mpirun -np N bench_allreduce [--smoke] [--device=auto|cpu|cuda] [--min-bytes=B]\n"
    "         [--max-bytes=B] [--reps=R] [--summary_out=FILE]\n"
    "  all-reduce, reduce-scatter and all-gather bandwidth by message size (doubling from min\n"
    "  to max bytes, f32), the backward time of a DDP step with and without communication, and\n"
    "  ZeRO stages 1 and 2 against DDP on a GPT; rank 0 prints.\n";

std::string bytes_str(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%lld MB", static_cast<long long>(b >> 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%lld KB", static_cast<long long>(b >> 10));
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  }
  return buf;
}

// Repetitions of one size: many for small messages (latency-bound, microseconds each), a few for
// large ones. A function of the size alone, so that every rank runs the same number.
int reps_for(int64_t bytes, const Config& cfg) {
  if (cfg.reps > 0) return cfg.reps;
  const int64_t r = (int64_t{1} << 30) / std::max<int64_t>(bytes, 1);
  return static_cast<int>(std::clamp<int64_t>(r, 5, cfg.smoke ? 20 : 200));
}

// ---------------------------------------------------------------------------------------------
// Bandwidth by message size

enum class Collective { AllReduce, ReduceScatter, AllGather };

// One collective of `bytes` in all (the all-reduce's buffer, the reduce-scatter's input, the
// all-gather's output) on f32 tensors, validated once, then timed. nccl-tests' bus bandwidth
// factors: 2(n-1)/n for all-reduce, (n-1)/n for the other two.
void bandwidth(dist::ProcessGroup& pg, Device dev, const Config& cfg, bool print, Collective c) {
  const int n = pg.size();
  const int rank = pg.rank();
  const char* label = c == Collective::AllReduce       ? "allreduce"
                      : c == Collective::ReduceScatter ? "reducescatter"
                                                       : "allgather";
  const double bus_factor = (c == Collective::AllReduce ? 2.0 : 1.0) * (n - 1) / n;
  if (print) {
    const char* what = c == Collective::AllReduce ? "all_reduce (sum, f32, in place)"
                       : c == Collective::ReduceScatter
                           ? "reduce_scatter (sum, f32; size = the input, n x the output)"
                           : "all_gather_into (f32; size = the output, n x the input)";
    std::printf("\n%s on %s, %d rank(s): busbw = algbw * %.3f\n", what, dev.str().c_str(), n,
                bus_factor);
    std::printf("%12s %12s %6s %12s %12s %12s %8s\n", "size", "count", "reps", "time (us)",
                "algbw (GB/s)", "busbw (GB/s)", "check");
  }
  for (int64_t bytes = cfg.min_bytes; bytes <= cfg.max_bytes; bytes *= cfg.smoke ? 4 : 2) {
    // Elements per rank's part (the whole buffer for all-reduce).
    const int64_t part = std::max<int64_t>(bytes / 4 / (c == Collective::AllReduce ? 1 : n), 1);
    const int64_t count = c == Collective::AllReduce ? part : part * n;
    const int64_t size = count * 4;
    const std::string name = std::string(label) + "/" + bytes_str(size);
    bench::begin(name);
    // Validate first. Rank r sends (i mod 251) + r at index i (the all-gather: of its part), so
    // every result is an exact small integer in f32; a pattern that varies along the buffer
    // catches chunks summed or placed in the wrong spot.
    bool ok = true;
    std::string why;
    Tensor in, out;
    auto run = [&] {
      if (c == Collective::AllReduce) {
        pg.all_reduce(in);
      } else if (c == Collective::ReduceScatter) {
        pg.reduce_scatter(out, in);
      } else {
        pg.all_gather_into(out, in);
      }
    };
    try {
      const int64_t sent = c == Collective::AllGather ? part : count;
      std::vector<float> mine(static_cast<size_t>(sent));
      for (int64_t i = 0; i < sent; ++i) {
        mine[static_cast<size_t>(i)] = static_cast<float>(i % 251 + rank);
      }
      in = from_vector(mine).to(dev);
      std::vector<float> want;
      if (c == Collective::AllReduce) {
        for (int64_t i = 0; i < count; ++i)
          want.push_back(static_cast<float>(n * (i % 251) + n * (n - 1) / 2));
      } else if (c == Collective::ReduceScatter) {
        out = empty({part}, {.device = dev});
        for (int64_t j = 0; j < part; ++j)
          want.push_back(static_cast<float>(n * ((rank * part + j) % 251) + n * (n - 1) / 2));
      } else {
        out = empty({count}, {.device = dev});
        for (int r = 0; r < n; ++r)
          for (int64_t i = 0; i < part; ++i) want.push_back(static_cast<float>(i % 251 + r));
      }
      run();
      const Tensor got = c == Collective::AllReduce ? in : out;
      const double err = max(abs(sub(got, from_vector(want).to(dev)))).item<double>();
      if (err != 0.0) {
        ok = false;
        why = "wrong result: max |error| " + std::to_string(err);
      }
    } catch (const std::exception& e) {
      ok = false;
      why = e.what();
    }
    if (!all_ranks(pg, ok)) {
      if (why.empty()) why = "wrong on another rank";
      ++bench::failures();
      bench::summary().push_back(bench::status_row(name, "FAILED: " + why));
      if (print)
        std::printf("%12s %12lld %6s %12s %12s %12s %8s  %s\n", bytes_str(size).c_str(),
                    static_cast<long long>(count), "-", "-", "-", "-", "FAILED", why.c_str());
      continue;
    }
    // Zeros from here on, so that repeated sums stay finite.
    in.zero_();
    const int reps = reps_for(size, cfg);
    for (int i = 0; i < std::min(reps, 3); ++i) run();  // warm-up
    sync_device(dev);
    pg.barrier();
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < reps; ++i) run();
    sync_device(dev);
    const double secs = max_over_ranks(pg, seconds(t0, Clock::now())) / reps;
    const double algbw = static_cast<double>(size) / secs * 1e-9;
    const double busbw = algbw * bus_factor;
    if (print) {
      std::printf("%12s %12lld %6d %12.2f %12.3f %12.3f %8s\n", bytes_str(size).c_str(),
                  static_cast<long long>(count), reps, secs * 1e6, algbw, busbw, "ok");
    }
    // The summary keeps the latency of the smallest size and the bandwidth of a few large ones.
    const bool smallest = bytes == cfg.min_bytes;
    const bool large = size == (int64_t{1} << 20) || size == (int64_t{16} << 20) ||
                       size == (int64_t{256} << 20) || cfg.smoke;
    if (smallest) {
      bench::summary().push_back({name + " latency", "us", secs * 1e6, "", NAN, NAN, "ok"});
    } else if (large) {
      char status[64];
      std::snprintf(status, sizeof status, "ok (algbw %.3g GB/s)", algbw);
      bench::summary().push_back({name + " busbw", "GB/s", busbw, "", NAN, NAN, status});
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Overlap in a DDP step

struct Workload {
  const char* name;
  nn::Sequential (*make)();
  Shape sample;
  int64_t batch;  // per rank
};

const Workload kWorkloads[] = {
    {"mlp", nn::models::mlp, {784}, 256},
    {"cnn", nn::models::cnn, {1, 28, 28}, 256},
    {"resnet20", nn::models::resnet20, {3, 32, 32}, 128},
};

// "" when `got` matches `want` within float tolerance, else by how much they differ.
std::string compare_tensors(const Tensor& got, const Tensor& want) {
  const double err = max(abs(sub(got, want))).item<double>();
  const double scale = max(abs(want)).item<double>();
  if (err <= 1e-6 + 1e-5 * scale) return "";
  return "max |error| " + std::to_string(err) + " against max |value| " + std::to_string(scale);
}

void overlap(const std::shared_ptr<dist::ProcessGroup>& pg, Device dev, const Config& cfg,
             bool print) {
  if (print) {
    std::printf(
        "\nDDP backward on %s, %d rank(s), 25 MB buckets: without communication (no_sync),"
        " with it, and the all-reduce of every gradient alone (ms, slowest rank)\n",
        dev.str().c_str(), pg->size());
    std::printf("%10s %6s %10s %12s %12s %12s %12s %8s\n", "workload", "batch", "grad MB",
                "no comm", "with comm", "comm alone", "exposed", "hidden");
  }
  for (const Workload& w : kWorkloads) {
    if (cfg.smoke && std::strcmp(w.name, "resnet20") == 0) continue;  // seconds on a CPU
    const std::string name = std::string("ddp_backward/") + w.name;
    bench::begin(name);
    const int64_t batch = cfg.smoke ? 2 : w.batch;
    const int reps = cfg.smoke ? 2 : 20;
    std::string why;
    bool ok = true;
    double local_ms = NAN, ddp_ms = NAN, comm_ms = NAN, grad_mb = 0;
    try {
      manual_seed(0);
      auto model = std::make_shared<nn::Sequential>(w.make());
      model->to(dev);
      dist::DistributedDataParallel ddp(model, pg);
      // Each rank its own batch, so that the averaged gradient differs from every rank's own.
      manual_seed(1000 + static_cast<uint64_t>(pg->rank()));
      Shape shape{batch};
      shape.insert(shape.end(), w.sample.begin(), w.sample.end());
      const Tensor x = randn(shape, {.device = dev});
      const Tensor y = randint(0, 10, {batch}, {.dtype = DType::i64, .device = dev});
      const std::vector<Tensor> params = model->parameters();
      int64_t numel = 0;
      for (const Tensor& p : params) numel += p.numel();
      grad_mb = static_cast<double>(numel) * 4.0 / (1 << 20);

      // Returns the seconds of backward alone (the forward is not timed).
      auto backward_s = [&](bool communicate) {
        model->zero_grad();
        Tensor loss = cross_entropy(ddp.forward(x), y);
        sync_device(dev);
        const Clock::time_point t0 = Clock::now();
        if (communicate) {
          loss.backward();
        } else {
          auto no_sync = ddp.no_sync();
          loss.backward();
        }
        sync_device(dev);
        return seconds(t0, Clock::now());
      };

      // Validate before timing: DDP's gradients are the average of the ranks' local ones.
      backward_s(false);
      std::vector<Tensor> averaged;
      for (const Tensor& p : params) averaged.push_back(p.grad().clone());
      for (Tensor& g : averaged) pg->all_reduce(g, dist::ReduceOp::Average);
      backward_s(true);
      for (size_t i = 0; i < params.size() && why.empty(); ++i) {
        const std::string bad = compare_tensors(params[i].grad(), averaged[i]);
        if (!bad.empty()) why = "gradient " + std::to_string(i) + " is not the average: " + bad;
      }
      ok = why.empty();
      if (all_ranks(*pg, ok)) {
        std::vector<double> local, with_comm, comm;
        for (int i = 0; i < reps; ++i) {
          local.push_back(backward_s(false));
          with_comm.push_back(backward_s(true));
        }
        // The same bytes in one all-reduce, nothing to overlap with: the communication a step
        // would add if none of it were hidden.
        Tensor flat = zeros({numel}, {.device = dev});
        pg->all_reduce(flat);
        for (int i = 0; i < reps; ++i) {
          sync_device(dev);
          pg->barrier();
          const Clock::time_point t0 = Clock::now();
          pg->all_reduce(flat, dist::ReduceOp::Average);
          sync_device(dev);
          comm.push_back(seconds(t0, Clock::now()));
        }
        local_ms = max_over_ranks(*pg, bench::median(local)) * 1e3;
        ddp_ms = max_over_ranks(*pg, bench::median(with_comm)) * 1e3;
        comm_ms = max_over_ranks(*pg, bench::median(comm)) * 1e3;
      }
    } catch (const std::exception& e) {
      ok = false;
      why = e.what();
    }
    // After an exception the ranks may be out of step; this agreement is then best effort.
    if (!all_ranks(*pg, ok) || !std::isfinite(ddp_ms)) {
      if (why.empty()) why = "failed on another rank";
      ++bench::failures();
      bench::summary().push_back(bench::status_row(name, "FAILED: " + why));
      if (print) std::printf("%10s  FAILED: %s\n", w.name, why.c_str());
      continue;
    }
    const double exposed = ddp_ms - local_ms;
    const double hidden = comm_ms > 0 ? 1.0 - std::max(exposed, 0.0) / comm_ms : NAN;
    if (print) {
      std::printf("%10s %6lld %10.2f %12.3f %12.3f %12.3f %12.3f %7.0f%%\n", w.name,
                  static_cast<long long>(batch), grad_mb, local_ms, ddp_ms, comm_ms, exposed,
                  100.0 * std::clamp(hidden, 0.0, 1.0));
    }
    char status[96];
    std::snprintf(status, sizeof status, "ok (comm alone %.3g ms, %.0f%% of it hidden)", comm_ms,
                  100.0 * std::clamp(hidden, 0.0, 1.0));
    // Sinter with communication against the same backward without it: the ratio is the share of
    // backward time left after communication's cost (1: all of it hidden).
    bench::summary().push_back(
        {name, "ms", ddp_ms, "no comm", local_ms, ddp_ms > 0 ? local_ms / ddp_ms : NAN, status});
  }
}

// ---------------------------------------------------------------------------------------------
// ZeRO against DDP: a GPT trained with AdamW, per rank: the step time, the optimizer state and the
// gradients held after backward.

// DDP's parameters after 3 steps and its step time, for the sharded layouts to compare with.
struct DdpReference {
  Tensor params;
  double step_ms = NAN;
};

DdpReference zero(const std::shared_ptr<dist::ProcessGroup>& pg, Device dev, const Config& cfg,
                  bool print) {
  const nn::models::GPTConfig gc = bench::bench_gpt(cfg.smoke);
  const int64_t batch = cfg.smoke ? 2 : 4;
  const int reps = cfg.smoke ? 2 : 10;
  if (print) {
    std::printf(
        "\nZeRO on %s, %d rank(s): GPT (%lld layers, n_embd %lld, T %lld, batch %lld per rank), "
        "AdamW, clipping at norm 1; per rank: step ms (median), optimizer state MB, gradient MB "
        "held after backward\n",
        dev.str().c_str(), pg->size(), static_cast<long long>(gc.n_layer),
        static_cast<long long>(gc.n_embd), static_cast<long long>(gc.context_length),
        static_cast<long long>(batch));
    std::printf("%8s %10s %12s %12s %14s %10s\n", "mode", "step ms", "state MB", "grad MB",
                "vs DDP params", "check");
  }
  const std::pair<Tensor, Tensor> data = bench::gpt_batch(gc, batch, pg->rank(), dev);
  const Tensor &x = data.first, &y = data.second;
  double ddp_ms = NAN;
  Tensor ddp_params;
  for (int stage = 0; stage <= 2; ++stage) {
    const std::string name =
        stage == 0 ? "zero/ddp_step" : "zero/stage" + std::to_string(stage) + "_step";
    bench::begin(name);
    bool ok = true;
    std::string why;
    double step_ms = NAN, state_mb = 0, grad_mb = 0, diff = 0;
    try {
      manual_seed(0);
      auto model = std::make_shared<nn::models::GPT>(gc);
      model->to(dev);
      dist::DistributedDataParallel ddp(model, pg);
      auto adamw = [](const std::vector<Tensor>& params) {
        return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 1e-3});
      };
      std::unique_ptr<optim::Optimizer> opt;
      dist::ZeroRedundancyOptimizer* zero_opt = nullptr;
      if (stage == 0) {
        opt = adamw(model->parameters());
      } else {
        auto z = std::make_unique<dist::ZeroRedundancyOptimizer>(ddp, adamw,
                                                                 dist::ZeroOptions{.stage = stage});
        zero_opt = z.get();
        opt = std::move(z);
      }
      auto step = [&](bool measure) {
        opt->zero_grad();
        Tensor loss = cross_entropy(ddp.forward(x).reshape({-1, gc.vocab_size}), y.reshape({-1}));
        loss.backward();
        if (measure) {
          grad_mb = 0;
          for (const Tensor& p : model->parameters()) {
            if (p.grad().defined()) grad_mb += p.grad().numel() * 4.0 / (1 << 20);
          }
          if (zero_opt && stage == 2) {  // at stage 1 they are views of the all-reduced buckets
            for (const Tensor& sh : zero_opt->shards()) {
              if (sh.grad().defined()) grad_mb += sh.grad().numel() * 4.0 / (1 << 20);
            }
          }
        }
        if (zero_opt) {
          zero_opt->clip_grad_norm_(1.0);
        } else {
          optim::clip_grad_norm_(model->parameters(), 1.0);
        }
        opt->step();
      };
      // Validate: 3 steps from the same start as DDP's reach its parameters.
      for (int i = 0; i < 3; ++i) step(i == 2);
      std::vector<Tensor> flat;
      for (const Tensor& p : model->parameters()) flat.push_back(p.detach().flatten().cpu());
      const Tensor params = cat(flat);
      if (stage == 0) {
        ddp_params = params;
      } else {
        diff =
            max(abs(sub(params, ddp_params))).item<double>() / max(abs(ddp_params)).item<double>();
        if (!(diff < 1e-5)) why = "parameters differ from DDP's by " + std::to_string(diff);
      }
      state_mb = static_cast<double>(state_bytes(zero_opt ? zero_opt->local_optimizer() : *opt)) /
                 (1 << 20);
      std::vector<double> times;
      for (int i = 0; i < reps; ++i) {
        sync_device(dev);
        const Clock::time_point t0 = Clock::now();
        step(false);
        sync_device(dev);
        times.push_back(seconds(t0, Clock::now()));
      }
      step_ms = max_over_ranks(*pg, bench::median(times)) * 1e3;
      ok = why.empty();
    } catch (const std::exception& e) {
      ok = false;
      why = e.what();
    }
    if (!all_ranks(*pg, ok) || !std::isfinite(step_ms)) {
      if (why.empty()) why = "failed on another rank";
      ++bench::failures();
      bench::summary().push_back(bench::status_row(name, "FAILED: " + why));
      if (print) std::printf("%8s  FAILED: %s\n", name.c_str(), why.c_str());
      continue;
    }
    if (stage == 0) ddp_ms = step_ms;
    if (print) {
      std::printf("%8s %10.2f %12.3f %12.3f %14.2e %10s\n",
                  stage == 0 ? "ddp" : (stage == 1 ? "zero-1" : "zero-2"), step_ms, state_mb,
                  grad_mb, diff, "ok");
    }
    char status[96];
    std::snprintf(status, sizeof status, "ok (state %.2f MB, grads %.2f MB per rank)", state_mb,
                  grad_mb);
    bench::summary().push_back({name, "ms", step_ms, stage == 0 ? "" : "ddp",
                                stage == 0 ? NAN : ddp_ms, stage == 0 ? NAN : ddp_ms / step_ms,
                                status});
  }
  return {ddp_params, ddp_ms};
}

// ---------------------------------------------------------------------------------------------
// Fully sharded data parallel on the same GPT: per rank, the step time, the bytes all-gathered and
// reduce-scattered per step, and the time the host waited for them (on CPU ranks, the
// communication not hidden behind computation), with the next block's gather prefetched, without,
// and with the blocks kept whole from forward to backward.

void fsdp(const std::shared_ptr<dist::ProcessGroup>& pg, Device dev, const Config& cfg, bool print,
          const DdpReference& ddp) {
  const nn::models::GPTConfig gc = bench::bench_gpt(cfg.smoke);
  const int64_t batch = cfg.smoke ? 2 : 4;
  const int reps = cfg.smoke ? 2 : 10;
  if (print) {
    std::printf(
        "\nFSDP on %s, %d rank(s), the GPT above (each block a unit): per rank and step, MB "
        "all-gathered and reduce-scattered (whole buffers), ms the host waited for them\n",
        dev.str().c_str(), pg->size());
    std::printf("%-22s %10s %12s %12s %10s %10s %12s\n", "layout", "step ms", "gathered MB",
                "reduced MB", "wait ms", "state MB", "vs DDP params");
  }
  const std::pair<Tensor, Tensor> data = bench::gpt_batch(gc, batch, pg->rank(), dev);
  const Tensor &x = data.first, &y = data.second;
  struct Layout {
    const char* name;
    const char* label;
    bool prefetch, reshard;
  };
  for (const Layout& l : {Layout{"fsdp/prefetch_step", "fsdp", true, true},
                          Layout{"fsdp/no_prefetch_step", "fsdp, no prefetch", false, true},
                          Layout{"fsdp/kept_whole_step", "fsdp, kept whole", true, false}}) {
    bench::begin(l.name);
    std::string why;
    double step_ms = NAN, wait_ms = NAN, gathered_mb = 0, reduced_mb = 0, state_mb = 0, diff = 0;
    try {
      manual_seed(0);
      auto model = std::make_shared<nn::models::GPT>(gc);
      model->to(dev);
      dist::FullyShardedDataParallel f(model, pg,
                                       {.units = model->blocks->children(),
                                        .reshard_after_forward = l.reshard,
                                        .prefetch = l.prefetch});
      optim::AdamW opt(f.parameters(), optim::AdamWOptions{.lr = 1e-3});
      auto step = [&] {
        opt.zero_grad();
        f.call([&] {
           return cross_entropy(model->forward(x).reshape({-1, gc.vocab_size}), y.reshape({-1}));
         }).backward();
        f.clip_grad_norm_(1.0);
        opt.step();
      };
      for (int i = 0; i < 3; ++i) step();  // DDP's 3 validation steps
      std::vector<Tensor> flat;
      const StateDict whole = f.state_dict();
      for (const auto& [name, p] : model->named_parameters()) {
        flat.push_back(whole.at(name).flatten().cpu());
      }
      if (ddp.params.defined()) {
        diff = max(abs(sub(cat(flat), ddp.params))).item<double>() /
               max(abs(ddp.params)).item<double>();
        if (!(diff < 1e-5)) why = "parameters differ from DDP's by " + std::to_string(diff);
      }
      state_mb = static_cast<double>(state_bytes(opt)) / (1 << 20);
      std::vector<double> times, waits;
      for (int i = 0; i < reps; ++i) {
        sync_device(dev);
        f.reset_traffic();
        const Clock::time_point t0 = Clock::now();
        step();
        sync_device(dev);
        times.push_back(seconds(t0, Clock::now()));
        waits.push_back(f.traffic().wait_seconds);
      }
      const dist::FSDPTraffic t = f.traffic();
      gathered_mb = static_cast<double>(t.gathered_bytes) / (1 << 20);
      reduced_mb = static_cast<double>(t.reduced_bytes) / (1 << 20);
      step_ms = max_over_ranks(*pg, bench::median(times)) * 1e3;
      wait_ms = max_over_ranks(*pg, bench::median(waits)) * 1e3;
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!all_ranks(*pg, why.empty()) || !std::isfinite(step_ms)) {
      if (why.empty()) why = "failed on another rank";
      ++bench::failures();
      bench::summary().push_back(bench::status_row(l.name, "FAILED: " + why));
      if (print) std::printf("%-22s  FAILED: %s\n", l.label, why.c_str());
      continue;
    }
    if (print) {
      std::printf("%-22s %10.2f %12.3f %12.3f %10.2f %10.3f %12.2e\n", l.label, step_ms,
                  gathered_mb, reduced_mb, wait_ms, state_mb, diff);
    }
    char status[128];
    std::snprintf(status, sizeof status,
                  "ok (%.2f MB gathered, %.2f MB reduced, %.2f ms waited per step)", gathered_mb,
                  reduced_mb, wait_ms);
    bench::summary().push_back(
        {l.name, "ms", step_ms, "ddp", ddp.step_ms, ddp.step_ms / step_ms, status});
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Options opts = bench::parse_options(argc, argv);
  Config cfg;
  cfg.smoke = opts.smoke;
  if (cfg.smoke) cfg.max_bytes = 64 << 10;
  for (int i = 1; i < argc; ++i) {
    int64_t v = 0;
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("%s", kUsage);
      return 0;
    } else if (std::strncmp(argv[i], "--device=", 9) == 0) {
      cfg.device = argv[i] + 9;
    } else if (parse_int(argv[i], "--min-bytes=", v)) {
      cfg.min_bytes = v;
    } else if (parse_int(argv[i], "--max-bytes=", v)) {
      cfg.max_bytes = v;
    } else if (parse_int(argv[i], "--reps=", v)) {
      cfg.reps = static_cast<int>(v);
    } else {
      std::fprintf(stderr, "bench_allreduce: unknown argument %s\n%s", argv[i], kUsage);
      return 2;
    }
  }
  if (cfg.min_bytes < 4 || cfg.max_bytes < cfg.min_bytes ||
      (cfg.device != "auto" && cfg.device != "cpu" && cfg.device != "cuda")) {
    std::fprintf(stderr, "bench_allreduce: bad --device, --min-bytes or --max-bytes\n%s", kUsage);
    return 2;
  }
  if (cfg.smoke) cfg.device = "cpu";

  return bench::run_distributed(
      "bench_allreduce", opts, cfg.device,
      [&](const std::shared_ptr<dist::ProcessGroup>& pg, Device dev) {
        const bool print = pg->rank() == 0;
        if (print) {
          std::printf("bench_allreduce: %d rank(s), %d on this node, %s tensors (%s)%s\n",
                      pg->size(), pg->local_size(), dev.is_cuda() ? "CUDA" : "CPU",
                      dev.is_cuda() ? "NCCL" : "MPI", cfg.smoke ? ", smoke sizes" : "");
          if (pg->size() == 1) {
            std::printf(
                "one rank: nothing crosses a link, so busbw is 0 and the overlap figures only "
                "show DDP's own overhead\n");
          }
        }
        for (Collective c :
             {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather}) {
          bandwidth(*pg, dev, cfg, print, c);
        }
        overlap(pg, dev, cfg, print);
        const DdpReference ddp = zero(pg, dev, cfg, print);
        fsdp(pg, dev, cfg, print, ddp);
      });
}
