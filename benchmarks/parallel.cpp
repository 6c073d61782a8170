// bench_parallel, run under `mpirun -np N`: a GPT step under each layout of the N ranks that splits
// its layers, against DDP on the same ranks: tensor parallel over all N (tp N), with sequence
// parallelism too, and on 4 or more ranks the meshes dp N/2 x tp 2 and fsdp N/2 x tp 2 (sequence
// parallel). Per rank and step: the time; the bytes it sends through each mesh dim, as a ring
// algorithm sends them (CountingGroup: the tp group's all-reduces, or with sequence parallelism
// its all-gathers and reduce-scatters; the data dim's gradient all-reduces, or FSDP's gathers and
// reduce-scatters) and the host's time in them; the activation bytes saved for backward; the
// parameter and optimizer-state bytes held. Every layout first takes 3 SGD steps from DDP's start
// on the same batch (the ranks of a tp group read the batches of the DDP ranks they stand for) and
// must reach DDP's parameters within 1e-5; then AdamW's steps are timed. CUDA tensors (NCCL) when
// the build has NCCL and a GPU is there, else CPU tensors (MPI). `--smoke`: a toy GPT on the CPU.
// Rank 0 prints; a failure on any rank fails the program.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "dist_util.h"
#include "sinter/device_mesh.h"
#include "sinter/dist.h"
#include "sinter/fsdp.h"
#include "sinter/profiler.h"
#include "sinter/tensor_parallel.h"

namespace {

using namespace sinter;
using bench::Clock;
using bench::CountingGroup;

const char* kUsage =
    "usage: mpirun -np N bench_parallel [--smoke] [--device=auto|cpu|cuda] [--summary_out=FILE]\n"
    "  a GPT step under DDP, tp N, tp N with sequence parallelism and (N >= 4, even) the meshes\n"
    "  dp N/2 x tp 2 and fsdp N/2 x tp 2: per rank, the step time, the bytes each mesh dim moves\n"
    "  and the host's time in them, the activations saved and the memory held; rank 0 prints.\n";

struct Layout {
  std::string name;   // the summary row's
  std::string label;  // as printed
  int data = 1;       // the data-parallel dim's size (dp, or fsdp with `fsdp`)
  int tp = 1;
  bool fsdp = false;
  bool sequence_parallel = false;
};

// The layouts of n ranks: tp n where the GPT's heads, width, vocabulary and T divide by n (4);
// the meshes at even n >= 4.
std::vector<Layout> layouts(int n) {
  const std::string ns = std::to_string(n), half = std::to_string(n / 2);
  std::vector<Layout> out{{"parallel/ddp_step", "ddp " + ns, n, 1}};
  if (n > 1 && 4 % n == 0) {
    out.push_back({"parallel/tp_step", "tp " + ns, 1, n});
    out.push_back({"parallel/tp_sp_step", "tp " + ns + ", seq parallel", 1, n, false, true});
  }
  if (n >= 4 && n % 2 == 0) {
    out.push_back({"parallel/dp_tp_step", "dp " + half + " x tp 2, sp", n / 2, 2, false, true});
    out.push_back({"parallel/fsdp_tp_step", "fsdp " + half + " x tp 2, sp", n / 2, 2, true, true});
  }
  return out;
}

// One layout's figures, per rank and step (times: the median step of the slowest rank).
struct Figures {
  double step_ms = NAN, tp_wait_ms = 0, data_wait_ms = 0;
  CountingGroup::Counts tp, data;
  double saved_mb = 0, params_mb = 0, state_mb = 0, diff = 0;
  Tensor params;  // the whole model's parameters after the 3 validation steps, flat
};

double mb(double bytes) { return bytes / (1 << 20); }

double bytes_of(const std::vector<Tensor>& ts) {
  double total = 0;
  for (const Tensor& t : ts) total += static_cast<double>(t.numel() * element_size(t.dtype()));
  return total;
}

Tensor flat(const nn::Module& m) {
  std::vector<Tensor> parts;
  for (const Tensor& p : m.parameters()) parts.push_back(p.detach().flatten().cpu());
  return cat(parts);
}

// The whole GPT's parameters, flat, that the shards of `split` make up (collective over its group;
// under `fsdp`, over the fsdp dim too).
Tensor joined_params(const dist::tp::ParallelGPT& split, dist::FullyShardedDataParallel* fsdp) {
  nn::models::GPT joined(split.config);
  if (fsdp) {
    dist::tp::ParallelGPT gathered(split.config, split.group, split.sequence_parallel);
    gathered.load_state_dict(fsdp->state_dict());
    gathered.to_full(joined);
  } else {
    split.to_full(joined);
  }
  return flat(joined);
}

// `reps` timed steps: the median step of the slowest rank, and the traffic of the last one
// through each counted group (the same every step) with the host's median time in it.
template <class Step>
void time_steps(Figures& f, dist::ProcessGroup& world, Device dev, int reps, Step&& step,
                CountingGroup* tp, CountingGroup* data) {
  std::vector<double> times, tp_waits, data_waits;
  for (int i = 0; i < reps; ++i) {
    bench::sync_device(dev);
    if (tp) tp->reset();
    if (data) data->reset();
    const Clock::time_point t0 = Clock::now();
    step();
    bench::sync_device(dev);
    times.push_back(bench::seconds(t0, Clock::now()));
    if (tp) f.tp = tp->counts();
    if (data) f.data = data->counts();
    tp_waits.push_back(f.tp.wait_seconds);
    data_waits.push_back(f.data.wait_seconds);
  }
  f.step_ms = bench::max_over_ranks(world, bench::median(times)) * 1e3;
  f.tp_wait_ms = bench::max_over_ranks(world, bench::median(tp_waits)) * 1e3;
  f.data_wait_ms = bench::max_over_ranks(world, bench::median(data_waits)) * 1e3;
}

// The layout's model from the whole GPT's initialization (seed 0, as DDP's), trained 3 steps and
// checked against `ddp_params` (DDP's run defines them), then timed.
Figures run_layout(const std::shared_ptr<dist::ProcessGroup>& world, const Layout& l, Device dev,
                   bool smoke, const Tensor& ddp_params) {
  const nn::models::GPTConfig gc = bench::bench_gpt(smoke);
  const int64_t batch = smoke ? 2 : 4;  // per DDP rank
  std::optional<dist::DeviceMesh> mesh;
  std::shared_ptr<CountingGroup> data_pg, tp_pg;
  const char* data_dim = l.fsdp ? "fsdp" : "dp";
  if (l.tp == 1) {
    data_pg = std::make_shared<CountingGroup>(world);
  } else if (l.data == 1) {
    tp_pg = std::make_shared<CountingGroup>(world);
  } else {  // per Note [device mesh], tp last: each tp group on consecutive ranks
    mesh.emplace(world, std::vector<dist::MeshDim>{{data_dim, l.data}, {"tp", l.tp}});
    data_pg = std::make_shared<CountingGroup>(mesh->group_ptr(data_dim));
    tp_pg = std::make_shared<CountingGroup>(mesh->group_ptr("tp"));
  }
  // The batches of the DDP ranks this rank's data coordinate stands for, joined.
  std::vector<Tensor> xs, ys;
  for (int j = 0; j < l.tp; ++j) {
    std::pair<Tensor, Tensor> b =
        bench::gpt_batch(gc, batch, (world->rank() / l.tp) * l.tp + j, dev);
    xs.push_back(b.first);
    ys.push_back(b.second);
  }
  const Tensor x = cat(xs), y = cat(ys);

  manual_seed(0);
  auto whole = std::make_shared<nn::models::GPT>(gc);
  std::shared_ptr<nn::Module> model = whole;
  std::shared_ptr<dist::tp::ParallelGPT> split;
  if (tp_pg) {
    split = std::make_shared<dist::tp::ParallelGPT>(gc, tp_pg, l.sequence_parallel);
    split->load_full(*whole);
    model = split;
  }
  model->to(dev);
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  std::unique_ptr<dist::FullyShardedDataParallel> fsdp;
  if (l.fsdp) {
    fsdp = std::make_unique<dist::FullyShardedDataParallel>(
        model, data_pg, dist::FSDPOptions{.units = split->blocks->children()});
  } else if (data_pg) {
    ddp = std::make_unique<dist::DistributedDataParallel>(model, data_pg);
  }
  const std::vector<Tensor> params = fsdp ? fsdp->parameters() : model->parameters();
  // Checked with SGD, timed with AdamW: AdamW's update divides by the gradient's own size, which
  // turns the rounding of gradients near 0 (summed in another order when split) into steps of lr.
  // The check clips at a norm every step reaches, so that the whole model's norm is tested too.
  optim::SGD sgd(params, optim::SGDOptions{.lr = 1.0});
  optim::AdamW adamw(params, optim::AdamWOptions{.lr = 1e-3});
  optim::Optimizer* opt = &sgd;
  double max_norm = 0.1;
  auto loss = [&] {
    if (split) return split->loss(x, y);
    return cross_entropy(ddp->forward(x).reshape({-1, gc.vocab_size}), y.reshape({-1}));
  };
  auto step = [&] {
    opt->zero_grad();
    (fsdp ? fsdp->call(loss) : loss()).backward();
    if (fsdp) {
      fsdp->clip_grad_norm_(max_norm, 2.0, tp_pg);
    } else if (split) {
      dist::tp::clip_grad_norm_(*split, max_norm, tp_pg);
    } else {
      optim::clip_grad_norm_(whole->parameters(), max_norm);
    }
    opt->step();
  };
  for (int i = 0; i < 3; ++i) step();
  opt = &adamw;
  max_norm = 1.0;

  Figures f;
  f.params = split ? joined_params(*split, fsdp.get()) : flat(*whole);
  if (ddp_params.defined()) {
    f.diff =
        max(abs(sub(f.params, ddp_params))).item<double>() / max(abs(ddp_params)).item<double>();
  }
  {  // the activations a step saves for backward, at their peak
    const profiler::Guard guard;
    step();
    f.saved_mb = mb(static_cast<double>(guard.peak_saved_bytes()));
  }
  f.params_mb = mb(bytes_of(params));
  f.state_mb = mb(static_cast<double>(bench::state_bytes(adamw)));

  time_steps(f, *world, dev, smoke ? 2 : 10, step, tp_pg.get(), data_pg.get());
  return f;
}

void print_header(const dist::ProcessGroup& world, Device dev, bool smoke) {
  const nn::models::GPTConfig gc = bench::bench_gpt(smoke);
  std::printf(
      "bench_parallel: %d rank(s), %s tensors (%s): GPT (%lld layers, n_embd %lld, %lld heads, T "
      "%lld, vocabulary %lld), AdamW, clipping at norm 1, batch %d per DDP rank; per rank and "
      "step: MB each rank sends through each mesh dim (a ring's) and ms the host spent there\n",
      world.size(), dev.is_cuda() ? "CUDA" : "CPU", dev.is_cuda() ? "NCCL" : "MPI",
      static_cast<long long>(gc.n_layer), static_cast<long long>(gc.n_embd),
      static_cast<long long>(gc.n_head), static_cast<long long>(gc.context_length),
      static_cast<long long>(gc.vocab_size), smoke ? 2 : 4);
  std::printf("%-24s %9s %9s %9s %9s %9s %9s %9s %9s %10s\n", "layout", "step ms", "tp MB", "tp ms",
              "data MB", "data ms", "saved MB", "param MB", "state MB", "vs DDP");
}

// Every layout of the world's ranks in turn, DDP's first (the others are checked against it).
void run_layouts(const std::shared_ptr<dist::ProcessGroup>& world, Device dev, bool smoke) {
  const bool print = world->rank() == 0;
  if (print) print_header(*world, dev, smoke);
  Tensor ddp_params;
  double ddp_ms = NAN;
  for (const Layout& l : layouts(world->size())) {
    bench::begin(l.name);
    std::string why;
    Figures f;
    try {
      f = run_layout(world, l, dev, smoke, ddp_params);
      if (!(f.diff < 1e-5)) why = "parameters differ from DDP's by " + std::to_string(f.diff);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!bench::all_ranks(*world, why.empty()) || !std::isfinite(f.step_ms)) {
      if (why.empty()) why = "failed on another rank";
      ++bench::failures();
      bench::summary().push_back(bench::status_row(l.name, "FAILED: " + why));
      if (print) std::printf("%-24s FAILED: %s\n", l.label.c_str(), why.c_str());
      if (!ddp_params.defined()) break;  // nothing to check the others against
      continue;
    }
    const bool reference = !ddp_params.defined();
    if (reference) {
      ddp_params = f.params;
      ddp_ms = f.step_ms;
    }
    if (print) {
      std::printf("%-24s %9.2f %9.3f %9.2f %9.3f %9.2f %9.3f %9.3f %9.3f %10.2e\n", l.label.c_str(),
                  f.step_ms, mb(f.tp.sent_bytes), f.tp_wait_ms, mb(f.data.sent_bytes),
                  f.data_wait_ms, f.saved_mb, f.params_mb, f.state_mb, f.diff);
    }
    char status[160];
    std::snprintf(
        status, sizeof status,
        "ok (tp %.2f MB sent in %.2f ms, data %.2f MB in %.2f ms, %.2f MB saved per step)",
        mb(f.tp.sent_bytes), f.tp_wait_ms, mb(f.data.sent_bytes), f.data_wait_ms, f.saved_mb);
    bench::summary().push_back({l.name, "ms", f.step_ms, reference ? "" : "ddp",
                                reference ? NAN : ddp_ms, reference ? NAN : ddp_ms / f.step_ms,
                                status});
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Options opts = bench::parse_options(argc, argv);
  std::string device = "auto";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("%s", kUsage);
      return 0;
    } else if (std::strncmp(argv[i], "--device=", 9) == 0) {
      device = argv[i] + 9;
    } else {
      std::fprintf(stderr, "bench_parallel: unknown argument %s\n%s", argv[i], kUsage);
      return 2;
    }
  }
  if (device != "auto" && device != "cpu" && device != "cuda") {
    std::fprintf(stderr, "bench_parallel: bad --device %s\n%s", device.c_str(), kUsage);
    return 2;
  }
  if (opts.smoke) device = "cpu";

  return bench::run_distributed("bench_parallel", opts, device,
                                [&](const std::shared_ptr<dist::ProcessGroup>& world, Device dev) {
                                  run_layouts(world, dev, opts.smoke);
                                });
}
