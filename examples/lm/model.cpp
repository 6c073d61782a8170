// The model of an lm run (model.h): a GPT or a Llama made from the run's settings, its FLOPs per
// token, and the peak FLOP/s of the device, from a table of GPUs or measured on the CPU.
#include "lm/model.h"

#include <sinter/nn/models.h>
#include <sinter/sinter.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "lm/config.h"
#include "training.h"

namespace example::lm {

LanguageModel make_model(const RunConfig& c, int64_t vocab) {
  LanguageModel m;
  m.vocab = vocab;
  if (c.model == "gpt") {
    m.gpt =
        std::make_shared<st::nn::models::GPT>(st::nn::models::GPTConfig{.vocab_size = vocab,
                                                                        .context_length = c.context,
                                                                        .n_layer = c.n_layer,
                                                                        .n_head = c.n_head,
                                                                        .n_embd = c.n_embd,
                                                                        .dropout = c.dropout});
    m.module = m.gpt;
  } else {
    m.llama = std::make_shared<st::nn::models::Llama>(
        st::nn::models::LlamaConfig{.vocab_size = vocab,
                                    .context_length = c.context,
                                    .n_layer = c.n_layer,
                                    .n_head = c.n_head,
                                    .n_kv_head = c.n_kv_head,
                                    .n_embd = c.n_embd});
    m.module = m.llama;
  }
  return m;
}

st::Tensor LanguageModel::loss(const st::Tensor& x, const st::Tensor& y,
                               st::Reduction reduction) const {
  if (tp_gpt) return tp_gpt->loss(x, y, {.reduction = reduction});
  if (tp_llama) return tp_llama->loss(x, y, {.reduction = reduction});
  return st::cross_entropy(module->forward(x).reshape({-1, vocab}), y.reshape({-1}),
                           {.reduction = reduction});
}

LanguageModel split_model(const LanguageModel& whole,
                          const std::shared_ptr<st::dist::ProcessGroup>& group) {
  LanguageModel m;
  m.vocab = whole.vocab;
  const st::Device dev = whole.module->parameters()[0].device();
  // Made without drawing from the run's random stream (the shards come from `whole`), so that a
  // split run's dropout draws what the whole run's does.
  const st::GeneratorState stream = st::default_generator().state();
  if (whole.gpt) {
    m.tp_gpt = std::make_shared<st::dist::tp::ParallelGPT>(whole.gpt->config, group);
    m.tp_gpt->to(dev);
    m.tp_gpt->load_full(*whole.gpt);
    m.module = m.tp_gpt;
  } else {
    m.tp_llama = std::make_shared<st::dist::tp::ParallelLlama>(whole.llama->config, group);
    m.tp_llama->to(dev);
    m.tp_llama->load_full(*whole.llama);
    m.module = m.tp_llama;
  }
  st::default_generator().set_state(stream);
  return m;
}

LanguageModel LanguageModel::joined(const RunConfig& c) const {
  // Made without drawing from the run's random stream (its initialization is overwritten): a
  // checkpoint written in the middle of a run must not change the draws after it.
  const st::GeneratorState stream = st::default_generator().state();
  LanguageModel whole = make_model(c, vocab);  // on the CPU: the joined copy may not fit a GPU
  st::default_generator().set_state(stream);
  if (tp_gpt) tp_gpt->to_full(*whole.gpt);
  if (tp_llama) tp_llama->to_full(*whole.llama);
  return whole;
}

double flops_per_token(const LanguageModel& m, const RunConfig& c) {
  double matmul = 0;
  for (const auto& [name, p] : m.module->named_parameters()) {
    if (p.dim() == 2 && name.find("wte") == std::string::npos &&
        name.find("wpe") == std::string::npos && name.find("embed_tokens") == std::string::npos) {
      matmul += static_cast<double>(p.numel());
    }
  }
  const bool tied = m.gpt ? m.gpt->lm_head == nullptr : m.llama->lm_head == nullptr;
  if (tied) matmul += static_cast<double>(m.vocab * c.n_embd);
  return 6 * matmul + 12.0 * static_cast<double>(c.n_layer * c.n_embd * c.context);
}

double peak_flops(st::Device dev, std::optional<st::DType> amp, bool fp8, std::string& what) {
  if (dev.is_cuda()) {
    const std::string name = st::cuda::get_device_properties(dev.index).name;
    struct Peak {
      const char* part;
      double fp8, bf16, tf32, fp32;  // fp8 0: no FP8 tensor cores
    };
    const Peak table[] = {{"H200", 1979e12, 989e12, 494e12, 67e12},
                          {"H100", 1979e12, 989e12, 494e12, 67e12},
                          {"A100", 0, 312e12, 156e12, 19.5e12},
                          {"L40S", 733e12, 362e12, 183e12, 91.6e12},
                          {"RTX 4090", 330e12, 165e12, 82.6e12, 82.6e12}};
    for (const Peak& p : table) {
      if (name.find(p.part) == std::string::npos) continue;
      const bool tf32 = st::get_matmul_precision() != "highest";
      const double peak = fp8 ? p.fp8 : amp ? p.bf16 : tf32 ? p.tf32 : p.fp32;
      const char* kind = fp8 ? "fp8" : amp ? "bf16" : tf32 ? "tf32" : "fp32";
      what = peak > 0 ? format("%s's %s peak %.0f TFLOP/s", p.part, kind, peak / 1e12)
                      : format("%s has no %s tensor cores", p.part, kind);
      return peak;
    }
    what = name + ": peak unknown";
    return 0;
  }
  const st::DType dt = amp ? *amp : st::DType::f32;
  st::Generator gen(0);  // not the default one, whose state the run's results depend on
  const st::Tensor a = st::randn({1024, 1024}, {}, &gen).to(dt);
  const st::Tensor b = st::randn({1024, 1024}, {}, &gen).to(dt);
  // The FP8 operands only for an FP8 run: quantizing costs start-up time.
  std::optional<st::fp8::Quantized> qa, qb;
  if (fp8) {
    qa = st::fp8::quantize(a, st::DType::f8e4m3, 1024, 1024);
    qb = st::fp8::quantize(b, st::DType::f8e4m3, 1024, 1024);
  }
  double best = 1e30;
  for (int i = 0; i < 12; ++i) {
    const auto t0 = Clock::now();
    (void)(fp8 ? st::fp8::gemm(*qa, *qb, dt) : st::matmul(a, b));
    if (i > 0) best = std::min(best, seconds_since(t0));  // the first warms up
  }
  const double peak = 2.0 * 1024 * 1024 * 1024 / best;
  what = format("measured %s 1024^3 matmul %.0f GFLOP/s",
                fp8 ? "fp8 (emulated)" : st::dtype_name(dt), peak / 1e9);
  return peak;
}

}  // namespace example::lm
