// Training-step time of the reference workloads mlp, cnn and resnet20
// (shared/reference/workloads.md) in fp32 and tf32: median ms per step (zero grads, forward,
// cross-entropy, backward, optimizer step) on one fixed random batch on the device. `--smoke` runs
// one step of each on the CPU instead.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"

namespace {

using namespace sinter;

enum class Opt { SgdMomentum, Adam, SgdResNet };

// One row of the workloads table. `sample` is one input's shape; the batch dim goes in front.
struct Workload {
  const char* name;
  nn::Sequential (*make)();
  Shape sample;
  int64_t batch;
  Opt opt;
};

const Workload kWorkloads[] = {
    {"mlp", nn::models::mlp, {784}, 256, Opt::SgdMomentum},
    {"cnn", nn::models::cnn, {1, 28, 28}, 256, Opt::Adam},
    {"resnet20", nn::models::resnet20, {3, 32, 32}, 128, Opt::SgdResNet},
};

constexpr int64_t kClasses = 10;

std::unique_ptr<optim::Optimizer> make_optimizer(Opt opt, const std::vector<Tensor>& params) {
  switch (opt) {
    case Opt::SgdMomentum:
      return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
    case Opt::Adam:
      return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 1e-3});
    case Opt::SgdResNet:
      return std::make_unique<optim::SGD>(
          params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
  }
  SINTER_THROW("train_step: unknown optimizer");
}

// A model with its optimizer and a fixed batch x (batch, *sample), y (batch) of class indices.
struct Setup {
  nn::Sequential model;
  std::unique_ptr<optim::Optimizer> opt;
  Tensor x, y;
};

Setup make_setup(const Workload& w, Device device, int64_t batch) {
  manual_seed(0);
  Setup s{w.make(), nullptr, {}, {}};
  s.model.to(device);
  s.opt = make_optimizer(w.opt, s.model.parameters());
  Shape shape{batch};
  shape.insert(shape.end(), w.sample.begin(), w.sample.end());
  s.x = randn(shape, {.dtype = DType::f32, .device = device});
  s.y = randint(0, kClasses, {batch}, {.dtype = DType::i64, .device = device});
  return s;
}

// One training step; returns the loss before the update (still on the device).
Tensor train_step(Setup& s) {
  s.opt->zero_grad();
  Tensor loss = cross_entropy(s.model(s.x), s.y);
  loss.backward();
  s.opt->step();
  return loss;
}

// Sets the matmul precision for a scope and restores the previous one, also on an error.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(const std::string& precision) : previous_(get_matmul_precision()) {
    set_matmul_precision(precision);
  }
  ~PrecisionGuard() { set_matmul_precision(previous_); }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  std::string previous_;
};

#ifdef SINTER_WITH_CUDA

// Runs `steps` steps and returns "" when every loss was finite and the last one is below the
// first (the model fits its one fixed batch), else what went wrong.
std::string check_training(Setup& s, int steps) {
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(train_step(s).item<float>());
  std::string trace;
  for (float l : losses) {
    trace += ' ';
    trace += std::to_string(l);
  }
  for (float l : losses) {
    if (!std::isfinite(l)) return "non-finite loss:" + trace;
  }
  if (!(losses.back() < losses.front())) return "loss did not decrease:" + trace;
  return "";
}

// Milliseconds per step over `reps` steps queued back to back, between two CUDA events on the
// current stream. Unlike bench::time_ms this does not hold the stream until the host has queued
// the batch: the host's work (launches, autograd bookkeeping, optimizer loops) is part of a
// training step, and PyTorch eager's figures in workloads.md include it too.
double time_steps_ms(Setup& s, int reps) {
  const cuda::Stream stream = cuda::current_stream();
  cuda::Event start, stop;
  start.record(stream);
  for (int i = 0; i < reps; ++i) (void)train_step(s);
  stop.record(stream);
  stop.synchronize();
  return static_cast<double>(start.elapsed_ms(stop)) / reps;
}

void run_train_step(benchmark::State& state, const Workload& w, const std::string& precision) {
  PrecisionGuard guard(precision);
  Setup s = make_setup(w, Device::cuda(0), w.batch);

  // Validate before timing: a fast step that does not train is a bug, not a result.
  const std::string bad = check_training(s, 5);
  if (!bad.empty()) {
    bench::fail(state, std::string(w.name) + ": " + bad);
    return;
  }

  time_steps_ms(s, 3);  // warm-up: caching allocator, optimizer state, library heuristics
  const int reps = bench::reps_for(time_steps_ms(s, 3), 50.0, 100);
  std::vector<double> ms;
  for (auto _ : state) {
    const double t = time_steps_ms(s, reps);
    ms.push_back(t);
    state.SetIterationTime(t * 1e-3);
  }
  const double med = bench::median(ms);
  state.counters["ms_per_step"] = med;
  state.counters["steps_per_s"] = med > 0.0 ? 1e3 / med : 0.0;
  state.counters["batch"] = static_cast<double>(w.batch);
  state.counters["reps"] = reps;
}

#endif  // SINTER_WITH_CUDA

void bm_train_step(benchmark::State& state, const Workload* w, std::string precision) {
  if (bench::skip_without_cuda(state)) return;
#ifdef SINTER_WITH_CUDA
  bench::guarded(state, [&] { run_train_step(state, *w, precision); });
#else
  (void)w;
  (void)precision;
#endif
}

void register_all() {
  for (const Workload& w : kWorkloads) {
    // fp32: no TF32 anywhere ("highest"); tf32: matmul and conv may use TF32 ("high").
    for (const auto& [label, precision] : {std::pair<const char*, const char*>{"fp32", "highest"},
                                           std::pair<const char*, const char*>{"tf32", "high"}}) {
      const std::string name = std::string("train_step/") + w.name + "/" + label;
      benchmark::RegisterBenchmark(name.c_str(), bm_train_step, &w, std::string(precision))
          ->Iterations(7)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

// One step of each workload on the CPU with a batch of 2: the models, losses and optimizers of the
// benchmark stay runnable where there is no GPU. Returns the exit code.
int smoke() {
  int failed = 0;
  for (const Workload& w : kWorkloads) {
    try {
      PrecisionGuard guard("highest");
      Setup s = make_setup(w, Device::cpu(), 2);
      const float loss = train_step(s).item<float>();
      bool params_finite = true;
      for (const Tensor& p : s.model.parameters()) {
        for (float v : p.to_vector<float>()) params_finite = params_finite && std::isfinite(v);
      }
      const bool ok = std::isfinite(loss) && params_finite;
      std::printf("smoke %-8s loss %.4f%s\n", w.name, loss,
                  ok ? "" : "  FAILED: non-finite loss or parameters");
      failed += ok ? 0 : 1;
    } catch (const std::exception& e) {
      std::printf("smoke %-8s FAILED: %s\n", w.name, e.what());
      ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) return smoke();
  }
  register_all();
  return sinter::bench::run_main(argc, argv);
}
