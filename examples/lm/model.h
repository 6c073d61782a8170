// The model of an lm run, a GPT or a Llama, and the FLOPs its throughput is measured in: FLOPs per
// token (Note [model flops]) and the device's peak FLOP/s.
#pragma once

#include <sinter/nn/models.h>
#include <sinter/sinter.h>
#include <sinter/tensor_parallel.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lm/config.h"

namespace example::lm {

// A GPT or a Llama; both map (B, T) token ids to (B, T, vocab) logits through Module::forward.
// Under --tp, the same model split over a tensor-parallel group (tp_gpt or tp_llama, then
// `module`), whose forward gives this rank's slice of the vocabulary.
struct LanguageModel {
  std::shared_ptr<st::nn::Module> module;
  std::shared_ptr<st::nn::models::GPT> gpt;
  std::shared_ptr<st::nn::models::Llama> llama;
  std::shared_ptr<st::dist::tp::ParallelGPT> tp_gpt;
  std::shared_ptr<st::dist::tp::ParallelLlama> tp_llama;
  int64_t vocab = 0;

  bool split() const { return tp_gpt || tp_llama; }
  // The cross-entropy of the next tokens y after x (B, T): the split model's loss from its
  // vocabulary slices, or the whole logits'.
  st::Tensor loss(const st::Tensor& x, const st::Tensor& y,
                  st::Reduction reduction = st::Reduction::Mean) const;
  // Under --tp (collective over the group): the whole model the shards make up, on the CPU.
  LanguageModel joined(const RunConfig& c) const;

  st::Tensor generate(const st::Tensor& prompt, int64_t n,
                      const st::nn::models::GenerateOptions& o) const {
    return gpt ? gpt->generate(prompt, n, o) : llama->generate(prompt, n, o);
  }
};

LanguageModel make_model(const RunConfig& c, int64_t vocab);
// `whole` split over `group` (tensor parallelism), its parameters those of `whole`.
LanguageModel split_model(const LanguageModel& whole,
                          const std::shared_ptr<st::dist::ProcessGroup>& group);

// Note [model flops]
// FLOPs per trained token, as PaLM's appendix B counts them: 6 per parameter of the matrix
// products (every Linear weight and the output head, tied or not; not the embedding tables, which
// are gathered), plus 12 L E T for attention's two products over a context of T (forward and
// backward, without halving for the causal mask). Model FLOPs utilization is the rate of these
// FLOPs over the device's peak (peak_flops()).
double flops_per_token(const LanguageModel& m, const RunConfig& c);

// The peak FLOP/s model FLOPs utilization is measured against: on CUDA, the datasheet's dense
// figure for the precision of the run (FP8 tensor cores with --fp8, with f32 accumulation; tensor
// cores for bf16 and f16, TF32 for f32 at matmul precision "high", the FP32 units otherwise) on
// the GPUs of the table, else 0 (unknown); on the CPU, the rate of a 1024^3 matrix product of the
// run's dtype (fp8::gemm of e4m3 operands with --fp8), measured now (the best of 11).
double peak_flops(st::Device dev, std::optional<st::DType> amp, bool fp8, std::string& what);

}  // namespace example::lm
