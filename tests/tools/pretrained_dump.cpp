// Both halves of the Hugging Face folder tests (tests/scripts/check_pretrained_hf.py):
//   pretrained_dump save KIND DIR OUT.safetensors [DTYPE [SHARD_BYTES]]
//     writes a small random model of KIND (llama, llama-tied, gpt, gpt-untied) with a BPE tokenizer
//     through save_pretrained into DIR, and Sinter's view of it into OUT: the ids of a prompt
//     ("ids"), their logits in f32 ("logits") and 8 greedy tokens after them ("greedy");
//   pretrained_dump load DIR IDS.safetensors OUT.safetensors
//     reads DIR with from_pretrained and writes the logits and greedy tokens of IDS's "ids".
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "sinter/autograd.h"
#include "sinter/data/tokenizer.h"
#include "sinter/io.h"
#include "sinter/nn/models.h"
#include "sinter/nn/pretrained.h"
#include "sinter/sinter.h"

namespace {

using namespace sinter;
namespace models = sinter::nn::models;

constexpr const char* kText =
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a "
    "single step.<|endoftext|>To be, or not to be, that is the question: whether 'tis nobler in "
    "the mind to suffer the slings and arrows of outrageous fortune.<|endoftext|>";
constexpr const char* kPrompt = "<|endoftext|>The quick brown fox, or not to be";

// Every parameter moved off its initial value (biases 0 and norm gains 1 would hide a weight
// read as another, or not read at all).
void perturb(nn::Module& m) {
  NoGradGuard no_grad;
  for (Tensor& p : m.parameters()) p.add_(randn(p.shape()) * 0.05);
}

std::shared_ptr<nn::Module> make(const std::string& kind, int64_t vocab) {
  if (kind == "llama" || kind == "llama-tied") {
    return std::make_shared<models::Llama>(
        models::LlamaConfig{.vocab_size = vocab,
                            .context_length = 64,
                            .n_layer = 2,
                            .n_head = 4,
                            .n_kv_head = 2,
                            .n_embd = 64,
                            .mlp_hidden = 96,
                            .rope_base = 500.0,
                            .tie_weights = kind == "llama-tied"});
  }
  if (kind == "gpt" || kind == "gpt-untied") {
    return std::make_shared<models::GPT>(models::GPTConfig{.vocab_size = vocab,
                                                           .context_length = 64,
                                                           .n_layer = 2,
                                                           .n_head = 4,
                                                           .n_embd = 64,
                                                           .bias = kind == "gpt",
                                                           .tie_weights = kind == "gpt"});
  }
  throw Error("pretrained_dump: unknown kind " + kind);
}

// Logits (T, vocab) f32 of ids (T) and the 8 greedy tokens after them.
StateDict run(nn::Module& m, const Tensor& ids) {
  NoGradGuard no_grad;
  m.eval();
  StateDict out;
  out["ids"] = ids;
  out["logits"] = m.forward(ids.reshape({1, -1})).reshape({ids.size(0), -1}).to(DType::f32);
  const models::GenerateOptions greedy{.top_k = 1};
  Tensor all;
  if (auto* g = dynamic_cast<models::GPT*>(&m)) all = g->generate(ids, 8, greedy);
  if (auto* l = dynamic_cast<models::Llama*>(&m)) all = l->generate(ids, 8, greedy);
  out["greedy"] = all.slice(0, ids.size(0), all.size(0));
  return out;
}

DType parse_dtype(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "bf16") return DType::bf16;
  if (s == "f16") return DType::f16;
  throw Error("pretrained_dump: unknown dtype " + s);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "save" && argc >= 5) {
      manual_seed(11);
      const data::BpeTokenizer tok = data::BpeTokenizer::train(
          kText, {.vocab_size = 300, .special_tokens = {"<|endoftext|>"}});
      std::shared_ptr<nn::Module> m = make(argv[2], tok.vocab_size());
      perturb(*m);
      models::SavePretrainedOptions o{.tokenizer = &tok};
      if (argc >= 6) o.dtype = parse_dtype(argv[5]);
      if (argc >= 7) o.max_shard_bytes = std::atoll(argv[6]);
      models::save_pretrained(*m, argv[3], o);
      if (o.dtype != DType::f32) {  // the logits of the weights as the files hold them
        NoGradGuard no_grad;
        for (Tensor& p : m->parameters()) p.copy_(p.to(o.dtype).to(DType::f32));
      }
      const std::vector<int32_t> ids = tok.encode(kPrompt);
      save(run(*m, from_vector<int64_t>(std::vector<int64_t>(ids.begin(), ids.end()))), argv[4]);
      return 0;
    }
    if (mode == "load" && argc == 5) {
      models::Pretrained p = models::from_pretrained(argv[2]);
      const Tensor ids = load(argv[3]).at("ids");
      StateDict out = run(*p.module, ids);
      out["file_dtype_is_f32"] = full({}, p.dtype == DType::f32 ? 1 : 0, {.dtype = DType::i64});
      if (p.tokenizer) {
        const std::vector<int32_t> enc = p.tokenizer->encode(kPrompt);
        out["tokenizer_ids"] = from_vector<int64_t>(std::vector<int64_t>(enc.begin(), enc.end()));
      }
      save(out, argv[4]);
      return 0;
    }
    std::fprintf(stderr,
                 "usage: pretrained_dump save KIND DIR OUT [DTYPE [SHARD_BYTES]]\n"
                 "       pretrained_dump load DIR IDS OUT\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pretrained_dump: %s\n", e.what());
    return 1;
  }
}
