// Exports two small Llamas to GGUF, for tests/scripts/check_gguf.py to read back with the `gguf`
// package (and run in llama.cpp where llama-cpp-python is installed):
//   - "bpe": untied, on a BPE tokenizer trained on CORPUS (with "<|endoftext|>"), width 64 and MLP
//     80 (so that q8_0 falls back to f16 for ffn_down), as bpe-{f32,f16,bf16,q8_0}.gguf;
//   - "tied": the head tied to the embedding, on the byte tokenizer, width 48 (no q8_0 matrix at
//     all), as tied-q8_0.gguf.
// Beside each: <name>.safetensors with the model's state dict, a prompt's ids ("input_ids"),
// Sinter's logits for it ("logits", f32) and its greedy continuation ("greedy"), and
// <name>-tokenizer.json. The weights are drawn wider than the initialization (norms around 1,
// matrices of std 0.1), so that the logits spread and a misplaced row shows.
//   gguf_reference_dump CORPUS OUT_DIR
#include <cstdio>
#include <exception>
#include <string>

#include "sinter/autograd.h"
#include "sinter/data/text.h"
#include "sinter/gguf.h"
#include "sinter/io.h"
#include "sinter/nn/models.h"
#include "sinter/sinter.h"
#include "small_llama.h"

namespace {

using namespace sinter;

const char* const kPrompt = "The cat sat on the mat, and then the dog ran home.";

void dump(const std::string& dir, const std::string& name, nn::models::LlamaConfig c,
          const data::BpeTokenizer& tokenizer, const std::vector<gguf::Type>& types) {
  c.vocab_size = tokenizer.vocab_size();
  nn::models::Llama llama(c);
  {
    NoGradGuard no_grad;
    for (auto& [key, p] : llama.named_parameters()) {
      const Tensor noise = randn(p.shape());
      p.copy_(key.find("norm") != std::string::npos ? noise * 0.1 + 1.0 : noise * 0.1);
    }
  }
  llama.eval();
  const std::vector<int32_t> ids = tokenizer.encode(kPrompt);
  Tensor idx = empty({1, static_cast<int64_t>(ids.size())}, {.dtype = DType::i64});
  for (size_t i = 0; i < ids.size(); ++i) idx.data<int64_t>()[i] = ids[i];
  StateDict out = llama.state_dict();
  {
    NoGradGuard no_grad;
    out["input_ids"] = idx;
    out["logits"] = llama.forward(idx).reshape({idx.shape()[1], c.vocab_size});
    out["greedy"] = llama.generate(idx, 8, {.top_k = 1});
  }
  save(out, dir + "/" + name + ".safetensors",
       {{"n_head", std::to_string(c.n_head)},
        {"n_kv_head", std::to_string(c.n_kv_head)},
        {"context", std::to_string(c.context_length)},
        {"rope_base", std::to_string(c.rope_base)},
        {"norm_eps", std::to_string(c.norm_eps)},
        {"prompt", kPrompt}});
  tokenizer.save(dir + "/" + name + "-tokenizer.json");
  for (const gguf::Type t : types) {
    const std::string path = dir + "/" + name + "-" + gguf::type_name(t) + ".gguf";
    gguf::export_model(llama, tokenizer, path, {.type = t, .name = name});
    std::printf("%s\n", path.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gguf_reference_dump CORPUS OUT_DIR\n");
    return 2;
  }
  try {
    manual_seed(11);
    const data::TextCorpus corpus({argv[1]}, {.context = 8});
    const std::string text(corpus.bytes().begin(), corpus.bytes().end());
    const data::BpeTokenizer bpe = data::BpeTokenizer::train(text, {.vocab_size = 320});

    nn::models::LlamaConfig c = testing::small_llama(2, 64, 80);
    c.context_length = 64;
    dump(argv[2], "bpe", c, bpe,
         {gguf::Type::f32, gguf::Type::f16, gguf::Type::bf16, gguf::Type::q8_0});

    nn::models::LlamaConfig tied = testing::small_llama(1, 48, 64);
    tied.context_length = 64;
    tied.tie_weights = true;
    dump(argv[2], "tied", tied, data::BpeTokenizer(), {gguf::Type::q8_0});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_reference_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
