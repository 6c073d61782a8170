// Generation with and without the KV cache on the CPU (wall clock, at get_num_threads() threads:
// --threads=N): gpt-mini and llama-mini, in f32 and eval mode, draw 256 tokens after a one-token
// prompt (batch 1; the window of 256 slides at the last step). The reference is the same call with
// use_cache = false, which feeds the whole window at every step; the ratio is its time over the
// cached call's. Each case first checks that both draw the same tokens for one seed.
#include <cstdint>
#include <string>
#include <vector>

#include "bench_util.h"
#include "sinter/nn/models.h"

namespace sinter {
namespace {

constexpr int64_t kTokens = 256;

template <class Model>
Tensor draw(Model& model, int64_t n, bool cached) {
  Generator g(1234);
  const Tensor prompt = zeros({1, 1}, {.dtype = DType::i64});
  return model.generate(prompt, n, {.generator = &g, .use_cache = cached});
}

// "" when the cached and the uncached generation of n tokens agree token for token.
template <class Model>
std::string check_same_tokens(Model& model, int64_t n) {
  const std::vector<int64_t> cached = draw(model, n, true).template to_vector<int64_t>();
  const std::vector<int64_t> whole = draw(model, n, false).template to_vector<int64_t>();
  for (size_t i = 0; i < cached.size(); ++i) {
    if (cached[i] != whole[i]) {
      return "token " + std::to_string(i) + ": " + std::to_string(cached[i]) + " cached, " +
             std::to_string(whole[i]) + " without the cache";
    }
  }
  return cached.size() == whole.size() ? "" : "lengths differ";
}

template <class Model>
void run_case(benchmark::State& state, Model& model) {
  if (bench::failed(state, "check: ", check_same_tokens(model, 32))) return;
  std::vector<double> ours, theirs, ratios;
  for (auto _ : state) {
    const double c = bench::wall_ms(1, [&] { draw(model, kTokens, true); });
    const double w = bench::wall_ms(1, [&] { draw(model, kTokens, false); });
    ours.push_back(c);
    theirs.push_back(w);
    ratios.push_back(w / c);
    state.SetIterationTime(c * 1e-3);
  }
  const double ratio = bench::median(ratios);
  state.counters["tokens/s"] = static_cast<double>(kTokens) / (bench::median(ours) * 1e-3);
  state.counters["threads"] = get_num_threads();
  state.counters["vs_no_cache"] = ratio;
  bench::report("ms", bench::median(ours), "no cache", bench::median(theirs), ratio);
}

template <class Model, class Config>
void register_model(const std::string& model_name, Config config) {
  const std::string name = "generate/" + model_name + "/" + std::to_string(kTokens);
  benchmark::RegisterBenchmark(name.c_str(),
                               [name, config](benchmark::State& state) {
                                 bench::begin(name);
                                 bench::guarded(state, [&] {
                                   manual_seed(0);
                                   Model model(config);
                                   run_case(state, model);
                                 });
                                 (void)bench::save_summary();
                               })
      ->Iterations(bench::iterations(3))
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

void register_all() {
  register_model<nn::models::GPT>("gpt-mini", nn::models::gpt_mini());
  register_model<nn::models::Llama>("llama-mini", nn::models::llama_mini());
}

// Both models at a small size: 12 tokens past a context of 8, cached and not, token for token.
void smoke() {
  manual_seed(0);
  nn::models::GPT gpt(
      {.vocab_size = 32, .context_length = 8, .n_layer = 2, .n_head = 2, .n_embd = 16});
  nn::models::Llama llama({.vocab_size = 32,
                           .context_length = 8,
                           .n_layer = 2,
                           .n_head = 4,
                           .n_kv_head = 2,
                           .n_embd = 16});
  bench::smoke_guarded("generate/gpt", [&] { return check_same_tokens(gpt, 12); });
  bench::smoke_guarded("generate/llama", [&] { return check_same_tokens(llama, 12); });
}

}  // namespace
}  // namespace sinter

int main(int argc, char** argv) {
  sinter::bench::take_threads_option(argc, argv);
  return sinter::bench::bench_main("bench_generate", argc, argv, sinter::smoke,
                                   sinter::register_all);
}
