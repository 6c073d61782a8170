// What the benchmarks run under mpirun share (bench_allreduce, bench_parallel): a device
// synchronization, the slowest rank's figure and agreement across ranks, the GPT workload they
// train and each data rank's batch of it, the bytes of an optimizer's state, and a process group
// that counts the traffic through it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "bench_util.h"
#include "sinter/dist.h"

namespace sinter::bench {

using Clock = std::chrono::steady_clock;

inline void sync_device(Device dev) {
  if (dev.is_cuda()) cuda::synchronize(dev.index);
}

inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The largest of every rank's value: a collective is as slow as its slowest rank.
inline double max_over_ranks(dist::ProcessGroup& pg, double v) {
  Tensor t = from_vector<double>({v});
  pg.all_reduce(t, dist::ReduceOp::Max);
  return t.item<double>();
}

// True when every rank says true, so that all ranks take the same branch (and call the same
// collectives) after a check that only some of them failed.
inline bool all_ranks(dist::ProcessGroup& pg, bool ok) {
  return max_over_ranks(pg, ok ? 0.0 : 1.0) == 0.0;
}

// The bytes of an optimizer's per-parameter state tensors (the step counts, 0-dim, not counted).
inline size_t state_bytes(const optim::Optimizer& opt) {
  size_t total = 0;
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    for (size_t i = 0; i < opt.params(g).size(); ++i) {
      for (const auto& [key, t] : opt.state(g, i)) {
        if (t.dim() > 0) total += static_cast<size_t>(t.numel()) * element_size(t.dtype());
      }
    }
  }
  return total;
}

// The GPT the distributed benchmarks train: 4 layers, width 256, T = 128, 3.3 M parameters (a
// toy one with --smoke). Its heads, width, vocabulary and T divide by 4: tensor parallel over up
// to 4 ranks, with sequence parallelism.
inline nn::models::GPTConfig bench_gpt(bool smoke) {
  return smoke ? nn::models::GPTConfig{.vocab_size = 64,
                                       .context_length = 16,
                                       .n_layer = 1,
                                       .n_head = 4,
                                       .n_embd = 32}
               : nn::models::GPTConfig{.vocab_size = 256,
                                       .context_length = 128,
                                       .n_layer = 4,
                                       .n_head = 4,
                                       .n_embd = 256};
}

// The `batch` token sequences and their targets of data rank `data_rank` (drawn from seed 2000 +
// data_rank, on `dev`): a layout that puts several data ranks' batches on one rank joins theirs.
inline std::pair<Tensor, Tensor> gpt_batch(const nn::models::GPTConfig& gc, int64_t batch,
                                           int data_rank, Device dev) {
  manual_seed(2000 + static_cast<uint64_t>(data_rank));
  const TensorOptions opts{.dtype = DType::i64, .device = dev};
  Tensor x = randint(0, gc.vocab_size, {batch, gc.context_length}, opts);
  Tensor y = randint(0, gc.vocab_size, {batch, gc.context_length}, opts);
  return {x, y};
}

// A process group that passes every call on to another and counts what goes through it: the
// bytes of each collective's buffer on this rank (an all-reduce's or a broadcast's tensor, a
// reduce-scatter's input and an all-gather's output: all N parts, as FSDPTraffic counts them), the
// bytes this rank sends in a ring algorithm (nccl-tests' bus factors: 2(N-1)/N of an all-reduce's
// buffer, (N-1)/N of a reduce-scatter's or an all-gather's, so an all-reduce costs what the two
// cost together; a broadcast's whole buffer), and the seconds the host spent in the calls and in
// their Work::wait(). On CPU ranks (MPI) that time is the communication not hidden behind
// computation; on NCCL the host only queues the work.
class CountingGroup final : public dist::ProcessGroup {
 public:
  struct Counts {
    int64_t bytes = 0;
    double sent_bytes = 0;
    int64_t calls = 0;
    double wait_seconds = 0;
  };

  explicit CountingGroup(std::shared_ptr<dist::ProcessGroup> inner)
      : inner_(std::move(inner)), counts_(std::make_shared<Counts>()) {}

  Counts counts() const { return *counts_; }
  void reset() { *counts_ = {}; }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_size() const override { return inner_->local_size(); }
  int cuda_device() const override { return inner_->cuda_device(); }

  std::shared_ptr<dist::Work> all_reduce_async(Tensor& tensor, dist::ReduceOp op) override {
    return timed(bytes(tensor), 2, [&] { return inner_->all_reduce_async(tensor, op); });
  }
  std::shared_ptr<dist::Work> broadcast_async(Tensor& tensor, int root) override {
    return timed(bytes(tensor), 0, [&] { return inner_->broadcast_async(tensor, root); });
  }
  Tensor all_gather(const Tensor& tensor) override {
    const Clock::time_point t0 = Clock::now();
    Tensor out = inner_->all_gather(tensor);
    count(bytes(out), 1, t0);
    return out;
  }
  void barrier() override { inner_->barrier(); }
  // The inner group's subgroup, not counted: wrap it in a CountingGroup of its own to count it.
  std::shared_ptr<dist::ProcessGroup> split(int color, int key) override {
    return inner_->split(color, key);
  }
  std::shared_ptr<dist::Work> reduce_scatter_async(Tensor& output, const Tensor& input,
                                                   dist::ReduceOp op) override {
    return timed(bytes(input), 1, [&] { return inner_->reduce_scatter_async(output, input, op); });
  }
  std::shared_ptr<dist::Work> all_gather_into_async(Tensor& output, const Tensor& input) override {
    return timed(bytes(output), 1, [&] { return inner_->all_gather_into_async(output, input); });
  }

 private:
  class CountingWork final : public dist::Work {
   public:
    CountingWork(std::shared_ptr<dist::Work> inner, std::shared_ptr<Counts> counts)
        : inner_(std::move(inner)), counts_(std::move(counts)) {}
    void wait() override {
      const Clock::time_point t0 = Clock::now();
      inner_->wait();
      counts_->wait_seconds += seconds(t0, Clock::now());
    }
    bool is_completed() override { return inner_->is_completed(); }

   private:
    std::shared_ptr<dist::Work> inner_;
    std::shared_ptr<Counts> counts_;
  };

  static int64_t bytes(const Tensor& t) {
    return t.numel() * static_cast<int64_t>(element_size(t.dtype()));
  }
  // `n` bytes in a collective whose ring sends `factor` (N-1)/N of them from each rank (factor 0:
  // a broadcast, whose chain has each rank but the last send all n, nccl-tests' factor 1).
  void count(int64_t n, int factor, Clock::time_point t0) {
    const int ranks = inner_->size();
    counts_->bytes += n;
    counts_->sent_bytes += factor == 0 ? static_cast<double>(n)
                                       : static_cast<double>(n) * factor * (ranks - 1) / ranks;
    counts_->calls += 1;
    counts_->wait_seconds += seconds(t0, Clock::now());
  }
  template <class Issue>
  std::shared_ptr<dist::Work> timed(int64_t n, int factor, Issue&& issue) {
    const Clock::time_point t0 = Clock::now();
    std::shared_ptr<dist::Work> work = issue();
    count(n, factor, t0);
    return std::make_shared<CountingWork>(std::move(work), counts_);
  }

  std::shared_ptr<dist::ProcessGroup> inner_;
  std::shared_ptr<Counts> counts_;
};

// The body of a benchmark's main() under mpirun: the world group, the device (`device`: "cpu",
// "cuda", or "auto": this rank's GPU where the build has NCCL and a GPU is there, else the CPU),
// `body(world, dev)` on every rank, then rank 0's summary (with --smoke, its writers checked too).
// Returns the exit code: 1 when a check failed on this rank or an error was thrown (named with the
// rank), else 0.
template <class Body>
int run_distributed(const char* program, const Options& opts, const std::string& device,
                    Body&& body) {
  int rank = -1;
  try {
    const std::shared_ptr<dist::ProcessGroup> world = dist::ProcessGroup::init();
    rank = world->rank();
#ifdef SINTER_WITH_NCCL
    const bool nccl = true;
#else
    const bool nccl = false;
#endif
    const bool use_cuda = device == "cuda" || (device == "auto" && nccl && cuda::is_available());
    const Device dev = use_cuda ? Device::cuda(world->cuda_device()) : Device::cpu();
    if (use_cuda) cuda::set_device(dev.index);
    body(world, dev);
    world->barrier();
    if (rank == 0) {
      if (opts.smoke) smoke_guarded("summary writers", check_summary_writers);
      if (!write_summary(program, opts)) return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s (rank %d): %s\n", program, rank, e.what());
    return 1;
  }
  if (failures() > 0) {
    std::printf("%s (rank %d): %d check(s) FAILED\n", program, rank, failures());
    return 1;
  }
  return 0;
}

}  // namespace sinter::bench
