// Training-step time of the reference workloads mlp, cnn, resnet20, gpt-mini, llama-mini and vit-tiny
// (shared/reference/workloads.md) in fp32, tf32 and bf16 (autocast to bf16 around the forward and
// the loss, f32 master weights and optimizer state, as PyTorch's autocast): median ms per step
// (zero grads, forward, cross-entropy, backward, optimizer step) on one fixed random batch on the
// device, each eager and replayed as a CUDA graph ("<precision>+graph", cuda::GraphedStep, with
// Adam and AdamW in their capturable mode). `--device=cpu` times fp32 and bf16 on the CPU instead
// (wall clock, at get_num_threads() threads: `--threads=N` sets it), the same workloads and batches
// as pytorch_reference.py --device cpu. `--smoke` runs one step of each on the CPU.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"

namespace {

using namespace sinter;

enum class Opt { SgdMomentum, Adam, SgdResNet, AdamWGpt };

template <nn::Sequential (*make)()>
std::shared_ptr<nn::Module> sequential() {
  return std::make_shared<nn::Sequential>(make());
}

std::shared_ptr<nn::Module> gpt_mini() {
  return std::make_shared<nn::models::GPT>(nn::models::gpt_mini());
}

std::shared_ptr<nn::Module> llama_mini() {
  return std::make_shared<nn::models::Llama>(nn::models::llama_mini());
}

std::shared_ptr<nn::Module> vit_tiny() {
  return std::make_shared<nn::models::ViT>(nn::models::vit_tiny());
}

// One row of the workloads table. `sample` is one input's shape; the batch dim goes in front. An
// image workload's targets are one of `classes` per input; a language model's inputs are `classes`
// token ids and its targets the next token at every position.
struct Workload {
  const char* name;
  std::shared_ptr<nn::Module> (*make)();
  Shape sample;
  int64_t batch;
  Opt opt;
  int64_t classes = 10;
  bool tokens = false;
};

const Workload kWorkloads[] = {
    {"mlp", sequential<nn::models::mlp>, {784}, 256, Opt::SgdMomentum},
    {"cnn", sequential<nn::models::cnn>, {1, 28, 28}, 256, Opt::Adam},
    {"resnet20", sequential<nn::models::resnet20>, {3, 32, 32}, 128, Opt::SgdResNet},
    {"gpt-mini", gpt_mini, {256}, 32, Opt::AdamWGpt, 256, true},
    {"llama-mini", llama_mini, {256}, 32, Opt::AdamWGpt, 256, true},
    {"vit-tiny", vit_tiny, {3, 32, 32}, 128, Opt::AdamWGpt},
};

std::unique_ptr<optim::Optimizer> make_optimizer(Opt opt, const std::vector<Tensor>& params,
                                                 bool capturable) {
  switch (opt) {
    case Opt::SgdMomentum:
      return std::make_unique<optim::SGD>(
          params, optim::SGDOptions{.lr = 0.01, .momentum = 0.9, .capturable = capturable});
    case Opt::Adam:
      return std::make_unique<optim::Adam>(
          params, optim::AdamOptions{.lr = 1e-3, .capturable = capturable});
    case Opt::SgdResNet:
      return std::make_unique<optim::SGD>(
          params, optim::SGDOptions{
                      .lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4, .capturable = capturable});
    case Opt::AdamWGpt:
      return std::make_unique<optim::AdamW>(
          params, optim::AdamWOptions{.lr = 3e-4, .weight_decay = 0.1, .capturable = capturable});
  }
  SINTER_THROW("train_step: unknown optimizer");
}

// A model with its optimizer and a fixed batch: x (batch, *sample) and y (batch) of class indices,
// or, for a language model, x (batch, length) token ids and y the same shape of next tokens.
struct Setup {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;
  Tensor x, y;
  int64_t classes;
  std::optional<DType> amp;  // the autocast dtype of the forward and the loss
};

// `length` shortens a language model's sequences (0: the workload's).
Setup make_setup(const Workload& w, Device device, int64_t batch, int64_t length = 0,
                 bool capturable = false) {
  manual_seed(0);
  Setup s{w.make(), nullptr, {}, {}, w.classes, std::nullopt};
  s.model->to(device);
  s.opt = make_optimizer(w.opt, s.model->parameters(), capturable);
  const TensorOptions ids{.dtype = DType::i64, .device = device};
  if (w.tokens) {
    const Tensor t = randint(0, w.classes, {batch, (length ? length : w.sample[0]) + 1}, ids);
    s.x = t.narrow(1, 0, t.size(1) - 1).contiguous();
    s.y = t.narrow(1, 1, t.size(1) - 1).contiguous();
    return s;
  }
  Shape shape{batch};
  shape.insert(shape.end(), w.sample.begin(), w.sample.end());
  s.x = randn(shape, {.device = device});
  s.y = randint(0, w.classes, {batch}, ids);
  return s;
}

// One training step; returns the loss before the update (still on the device).
Tensor train_step(Setup& s) {
  s.opt->zero_grad();
  Tensor loss;
  {
    std::optional<autocast::Guard> amp;
    if (s.amp) amp.emplace(s.x.device().type, *s.amp);
    const Tensor out = s.model->forward(s.x);
    loss = cross_entropy(out.reshape({-1, s.classes}), s.y.reshape({-1}));
  }
  loss.backward();
  s.opt->step();
  return loss;
}

// The three precisions: the matmul precision and the autocast dtype, if any.
struct Precision {
  const char* label;
  const char* matmul;  // "highest": no TF32 anywhere; "high": matmul and conv may use TF32
  std::optional<DType> amp;
};

const Precision kPrecisions[] = {
    {"fp32", "highest", std::nullopt},
    {"tf32", "high", std::nullopt},
    {"bf16", "highest", DType::bf16},
};

// Runs `steps` steps and returns "" when every loss was finite and the last one is below the
// first (the model fits its one fixed batch), else what went wrong. Under bf16 autocast a small
// learning rate's progress in 5 steps may hide in bf16's rounding of the forward, so there the
// loss need only not grow by more than that (1%).
std::string check_training(Setup& s, int steps, bool bf16) {
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
  const float limit = bf16 ? losses.front() * 1.01f : losses.front();
  if (!(losses.back() < limit)) return "loss did not decrease:" + trace;
  return "";
}

// The timed iterations of a workload's step (time_ms(reps): ms per step over `reps` steps), then
// its counters and summary row: the median ms per step.
template <class TimeMs>
void time_and_report(benchmark::State& state, const Workload& w, int reps, TimeMs time_ms) {
  std::vector<double> ms;
  for (auto _ : state) {
    const double t = time_ms(reps);
    ms.push_back(t);
    state.SetIterationTime(t * 1e-3);
  }
  const double med = bench::median(ms);
  state.counters["ms_per_step"] = med;
  state.counters["steps_per_s"] = med > 0.0 ? 1e3 / med : 0.0;
  state.counters["batch"] = static_cast<double>(w.batch);
  state.counters["reps"] = reps;
  bench::report("ms", med, "", NAN, NAN);
}

#ifdef SINTER_WITH_CUDA

// Milliseconds per step over `reps` steps queued back to back, between two CUDA events on the
// current stream. Unlike bench::time_ms this does not hold the stream until the host has queued
// the batch: the host's work (launches, autograd bookkeeping, optimizer loops) is part of a
// training step, and PyTorch eager's figures in workloads.md include it too.
template <class Step>
double time_steps_ms(Step& step, int reps) {
  return bench::time_ms_host_synced(reps, [&](int) { step(); });
}

void run_train_step(benchmark::State& state, const Workload& w, const Precision& precision,
                    bool graphed) {
  bench::PrecisionGuard guard(precision.matmul);
  Setup s = make_setup(w, Device::cuda(0), w.batch, 0, graphed);
  s.amp = precision.amp;

  // Validate before timing: a fast step that does not train is a bug, not a result. These eager
  // steps are also the graph's warm-up.
  if (bench::failed(state, std::string(w.name) + ": ",
                    check_training(s, 5, precision.amp.has_value()))) {
    return;
  }
  cuda::GraphedStep graph([&] { (void)train_step(s); }, 1);
  std::function<void()> step = [&] { (void)train_step(s); };
  if (graphed) {
    graph.run();  // the one eager run of its warm-up
    step = [&] { graph.run(); };
  }

  time_steps_ms(step, 3);  // warm-up: caching allocator, optimizer state, heuristics, capture
  const int reps = bench::reps_for(time_steps_ms(step, 3), 50.0, 100);
  time_and_report(state, w, reps, [&](int n) { return time_steps_ms(step, n); });
}

#endif  // SINTER_WITH_CUDA

// Milliseconds per step of `reps` steps back to back on the CPU, by the wall clock; the last loss
// is read, so that the time includes the whole step.
double time_cpu_steps_ms(Setup& s, int reps) {
  const auto start = std::chrono::steady_clock::now();
  Tensor loss;
  for (int i = 0; i < reps; ++i) loss = train_step(s);
  (void)loss.item<float>();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         reps;
}

void run_train_step_cpu(benchmark::State& state, const Workload& w, const Precision& precision) {
  bench::PrecisionGuard guard(precision.matmul);
  Setup s = make_setup(w, Device::cpu(), w.batch);
  s.amp = precision.amp;
  if (bench::failed(state, std::string(w.name) + ": ",
                    check_training(s, 3, precision.amp.has_value()))) {
    return;
  }
  const int reps = bench::reps_for(time_cpu_steps_ms(s, 1), 1000.0, 20);
  state.counters["threads"] = get_num_threads();
  time_and_report(state, w, reps, [&](int n) { return time_cpu_steps_ms(s, n); });
}

// fp32 and bf16 autocast (TF32 is a GPU format) of each workload on the CPU.
void register_cpu() {
  for (const Workload& w : kWorkloads) {
    for (const Precision& p : kPrecisions) {
      if (std::strcmp(p.label, "tf32") == 0) continue;
      const std::string name = std::string("train_step/") + w.name + "/" + p.label;
      benchmark::RegisterBenchmark(name.c_str(),
                                   [name, w, p](benchmark::State& state) {
                                     bench::begin(name);
                                     bench::guarded(state,
                                                    [&] { run_train_step_cpu(state, w, p); });
                                     (void)bench::save_summary();
                                   })
          ->Iterations(bench::iterations(5))
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void register_all() {
  for (bool graphed : {false, true}) {
    for (const Workload& w : kWorkloads) {
      for (const Precision& p : kPrecisions) {
        auto body = [=]([[maybe_unused]] benchmark::State& state) {
#ifdef SINTER_WITH_CUDA
          run_train_step(state, w, p, graphed);
#endif
        };
        bench::register_device(
            std::string("train_step/") + w.name + "/" + p.label + (graphed ? "+graph" : ""), 7,
            benchmark::kMillisecond, body);
      }
    }
  }
}

// One step of each workload in each precision on the CPU with a batch of 2 (sequences of 32 tokens
// for gpt-mini): the models (also cast to bf16), losses and optimizers of the benchmark stay
// runnable where there is no GPU.
void smoke() {
  for (const Workload& w : kWorkloads) {
    for (const Precision& p : kPrecisions) {
      const std::string name = std::string("train_step/") + w.name + "/" + p.label + " (batch 2)";
      bench::smoke_guarded(name, [&]() -> std::string {
        bench::PrecisionGuard guard(p.matmul);
        Setup s = make_setup(w, Device::cpu(), 2, w.tokens ? 32 : 0);
        s.amp = p.amp;
        const float loss = train_step(s).item<float>();
        bool params_finite = true;
        for (const Tensor& param : s.model->parameters()) {
          if (param.dtype() != DType::f32)  // master weights stay f32 under autocast too
            return "a parameter is " + std::string(dtype_name(param.dtype()));
          for (float v : param.to_vector<float>())
            params_finite = params_finite && std::isfinite(v);
        }
        if (!std::isfinite(loss)) return "non-finite loss " + std::to_string(loss);
        return params_finite ? "" : "non-finite parameters after the step";
      });
    }
  }
}

}  // namespace

// Takes --device=cpu|cuda out of argv; true for the CPU.
bool parse_device(int& argc, char** argv) {
  bool cpu = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--device=cpu" || arg == "--device=cuda") {
      cpu = arg == "--device=cpu";
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return cpu;
}

int main(int argc, char** argv) {
  sinter::bench::take_threads_option(argc, argv);
  const bool cpu = parse_device(argc, argv);
  if (cpu) {
    std::printf("CPU: %s, %d threads\n", sinter::cpu_description().c_str(),
                sinter::get_num_threads());
  }
  return sinter::bench::bench_main("bench_train_step", argc, argv, smoke,
                                   cpu ? register_cpu : register_all);
}
