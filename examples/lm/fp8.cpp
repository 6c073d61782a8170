// lm's --fp8: the hidden Linear layers' GEMMs in FP8 (Note [lm fp8]).
#include <cstdio>
#include <string>
#include <vector>

#include "lm/run.h"

namespace example::lm {

// Note [lm fp8]
// --fp8 current|delayed|block runs the GEMMs of the hidden Linear layers in FP8 under that
// recipe (Notes [fp8 scaling], [fp8 training]): fp8::prepare takes every Linear but the model's
// first (layer 0's first projection) and last (the Llama's output head; with the GPT's head tied
// to the embedding, the last block's output projection), and the training forward and
// backward, and the evaluations, run under fp8::Autocast. The embeddings, norms, attention's
// products and softmax, and the loss stay in the autocast dtype (--amp) or f32. Under --ddp and
// --fsdp the delayed recipe's amaxes are all-reduced (max) over the ranks, so that every rank keeps
// the same history and scales (under --fsdp each layer quantizes its gathered weight whole, so the
// weights' amaxes agree already; the inputs' and gradients' are each rank's own batch's); its
// history (fp8_amax_history, fp8_scale, fp8_steps of each layer) is in the
// checkpoint with the weights, so a resumed run continues the same scales. The recipe is a run
// setting ("config.fp8"; checkpoints from before it ran with "off"). On the CPU the FP8 GEMMs are
// emulated exactly (Note [fp8 gemm]); on a Hopper GPU they are the wgmma kernels (Note [fp8
// wgmma]), with the quantization kernels of Note [fp8 quantize kernels] (the delayed recipe's
// history kept and updated on the device).
// Under --tp the whole model is prepared before it is split, and the split layers take its marks
// (ParallelGPT::load_full): they quantize their shards with the whole tensors' scales (Note [fp8
// tensor parallel]), and the delayed recipe's amaxes are all-reduced over all the ranks.
// --cuda-graph is refused.
void prepare_fp8(Run& r) {
  if (r.cfg.fp8 == "off") return;
  const Args& a = r.args;
  if (a.cuda_graph) {
    throw st::Error("--fp8 " + r.cfg.fp8 + " does not combine with --cuda-graph yet");
  }
  st::fp8::Recipe recipe{.scaling = st::fp8::parse_scaling(r.cfg.fp8, "--fp8")};
  if (recipe.scaling == st::fp8::Scaling::Delayed && (a.ddp || a.fsdp || a.tp > 1)) {
    recipe.amax_group = r.pg.get();
  }
  r.fp8 = recipe;
  const std::vector<std::string> taken = st::fp8::prepare(*r.model.module, recipe);
  if (r.main_rank) {
    std::printf("FP8 (%s scaling; e4m3 forward, e5m2 gradients) in %zu Linear layers, %s to %s\n",
                r.cfg.fp8.c_str(), taken.size(), taken.empty() ? "-" : taken.front().c_str(),
                taken.empty() ? "-" : taken.back().c_str());
  }
}

LanguageModel make_trained_model(const RunConfig& c, int64_t vocab) {
  LanguageModel m = make_model(c, vocab);
  // The run's recipe: only its scaling comes from the config (prepare_fp8), the rest the defaults.
  if (c.fp8 != "off") st::fp8::prepare(*m.module, {.scaling = st::fp8::parse_scaling(c.fp8)});
  return m;
}

}  // namespace example::lm
