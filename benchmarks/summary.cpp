// The cost of TensorBoard logging at every step: the fashion_mnist example's mlp training step
// (batch 128, SGD with momentum, cross-entropy, on the CPU or the GPU), timed alone and followed
// by what `--tensorboard DIR --log-every 1` adds to each step (examples/training.h's
// TensorBoard::step_figures: the loss and the batch accuracy read on the host, four scalars queued
// to the SummaryWriter). Blocks of steps alternate between the two so that drift hits both; the
// row's ratio is the logged step's median time over the plain one's (the goal: below 1.02).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "../examples/training.h"
#include "bench_util.h"

namespace sinter {
namespace {

constexpr int64_t kBatch = 128;
constexpr int kBlock = 20;

void bench_logged_step(benchmark::State& state, Device dev) {
  manual_seed(0);
  nn::Sequential model = nn::models::mlp();
  model.to(dev);
  optim::SGD opt(model.parameters(), {.lr = 0.01, .momentum = 0.9});
  const Tensor x = randn({kBatch, 784}).to(dev);
  const Tensor y = randint(0, 10, {kBatch}, {.dtype = DType::i64}).to(dev);
  const auto dir = std::filesystem::temp_directory_path() / "sinter_bench_summary";
  std::filesystem::remove_all(dir);
  example::TensorBoard tb;
  int64_t step = 0;
  tb.open(dir.string(), "mlp", 1, step);
  // One step; with `log`, the example's logging of it.
  const auto train_step = [&](bool log) {
    opt.zero_grad();
    const Tensor logits = model(x);
    const Tensor loss = cross_entropy(logits, y);
    loss.backward();
    opt.step();
    ++step;
    if (log) {
      NoGradGuard no_grad;
      const Tensor correct = sum(eq(argmax(logits, 1), y));
      tb.step_figures(step, loss.item<double>(),
                      static_cast<double>(correct.item<int64_t>()) / kBatch, opt.lr(),
                      static_cast<double>(kBatch), "train/samples_per_second", dev);
    } else {
      (void)loss.item<double>();  // the plain step waits for its result too
    }
  };
  for (int i = 0; i < kBlock; ++i) train_step(i % 2 == 0);  // warm-up
  std::vector<double> plain, logged;
  for (auto _ : state) {
    const double p = bench::wall_ms(kBlock, [&] { train_step(false); });
    const double l = bench::wall_ms(kBlock, [&] { train_step(true); });
    plain.push_back(p);
    logged.push_back(l);
    state.SetIterationTime((p + l) * kBlock * 1e-3);
  }
  tb.close();
  std::filesystem::remove_all(dir);
  const double ratio = bench::median(logged) / bench::median(plain);
  state.counters["plain_ms"] = bench::median(plain);
  state.counters["logged_ms"] = bench::median(logged);
  state.counters["overhead_percent"] = 100.0 * (ratio - 1.0);
  bench::report("ms/step", bench::median(logged), "unlogged", bench::median(plain), ratio);
}

void register_all() {
  std::vector<std::pair<std::string, Device>> devices = {{"cpu", Device::cpu()}};
  if (cuda::is_available()) devices.emplace_back("cuda", Device::cuda(0));
  for (const auto& [name, dev] : devices) {
    const std::string row = "summary/mlp_step_logged/" + name;
    benchmark::RegisterBenchmark(row.c_str(),
                                 [row, dev = dev](benchmark::State& state) {
                                   bench::begin(row);
                                   bench::guarded(state, [&] { bench_logged_step(state, dev); });
                                   (void)bench::save_summary();
                                 })
        ->Iterations(bench::iterations(30))
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

// A few logged steps, and the event file they leave holding every scalar.
void smoke() {
  bench::smoke_guarded("summary/logged_steps", []() -> std::string {
    const auto dir = std::filesystem::temp_directory_path() / "sinter_bench_summary_smoke";
    std::filesystem::remove_all(dir);
    int64_t records = 0;
    {
      SummaryWriter w(dir.string());
      for (int64_t s = 1; s <= 50; ++s) w.add_scalar("loss", 1.0 / static_cast<double>(s), s);
      w.flush();
      records = static_cast<int64_t>(std::filesystem::file_size(w.file_path()));
    }
    std::filesystem::remove_all(dir);
    return records > 50 * 20 ? "" : "the event file is too short: " + std::to_string(records);
  });
}

}  // namespace
}  // namespace sinter

int main(int argc, char** argv) {
  return sinter::bench::bench_main("bench_summary", argc, argv, sinter::smoke,
                                   sinter::register_all);
}
