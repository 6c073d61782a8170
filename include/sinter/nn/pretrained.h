// Hugging Face model folders, both ways: a GPT or Llama written as the folder `transformers`'
// save_pretrained writes (so AutoModelForCausalLM, AutoTokenizer and vLLM open it; for llama.cpp,
// gguf::export_model in sinter/gguf.h), and such a folder read back into a GPT or Llama, whoever
// wrote it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sinter/core/device.h"
#include "sinter/core/dtype.h"
#include "sinter/data/tokenizer.h"
#include "sinter/nn/models.h"

namespace sinter::nn::models {

struct SavePretrainedOptions {
  // The weights' dtype in the files: f32, bf16 or f16 (config.json's "dtype" says which).
  DType dtype = DType::f32;
  // Files of at most this many bytes of tensors (one tensor larger than it gets a file of its
  // own): "model.safetensors" when one file holds them all, else "model-00001-of-0000N.safetensors"
  // and "model.safetensors.index.json", as transformers shards. 5 GB is transformers 4's default.
  int64_t max_shard_bytes = 5'000'000'000;
  // Written as tokenizer.json and tokenizer_config.json (PreTrainedTokenizerFast, no BOS added;
  // "<|endoftext|>", where the tokenizer has it, is the BOS and EOS token of config.json and
  // generation_config.json). Null: no tokenizer files.
  const data::BpeTokenizer* tokenizer = nullptr;
};

// Writes `model` (a GPT or a Llama, on any device) into the folder `dir` (created with its
// parents), each file atomically (Note [atomic writes] in src/internal/atomic_file.h) and in the
// order of Note [weight file order] in src/nn/pretrained.cpp:
//   config.json             every field the model's class needs (Note [hugging face configs] in
//                           src/nn/pretrained.cpp): a Llama as LlamaForCausalLM, a GPT as GPT-2's
//                           GPT2LMHeadModel
//   generation_config.json  the BOS and EOS ids
//   model*.safetensors      the weights under the class's names (a GPT's attention and MLP
//                           matrices transposed, as GPT-2's Conv1D keeps them), metadata format
//                           "pt"; weight files of an earlier save into `dir` that this one does
//                           not rewrite are removed
//   tokenizer.json, tokenizer_config.json   with options.tokenizer (without it, an earlier
//                           save's are removed)
// Then AutoModelForCausalLM.from_pretrained(dir) and AutoTokenizer.from_pretrained(dir) load it
// with no other argument and give Sinter's logits. A GPT without biases gets zero biases (GPT-2
// has them). Another module is an Error.
void save_pretrained(const Module& model, const std::string& dir,
                     const SavePretrainedOptions& options = {});

struct FromPretrainedOptions {
  Device device = Device::cpu();
  // The GPT's dropout (GPT2LMHeadModel's resid, embd and attn dropouts are not read: fine-tuning
  // chooses its own). A Llama has none.
  double dropout = 0.0;
  // Read tokenizer.json where the folder has one (an Error where it is not a byte-level BPE that
  // BpeTokenizer::load reads); false leaves it.
  bool tokenizer = true;
};

// A model read from a Hugging Face folder: exactly one of gpt and llama is set, and `module` is
// it.
struct Pretrained {
  std::shared_ptr<Module> module;
  std::shared_ptr<GPT> gpt;
  std::shared_ptr<Llama> llama;
  std::optional<data::BpeTokenizer> tokenizer;  // none where the folder has no tokenizer.json
  DType dtype = DType::f32;  // of the files (the model is f32); f32 where they mix dtypes
};

// Reads a folder that save_pretrained above or `transformers`' save_pretrained wrote: config.json
// (model_type "llama" or "gpt2"), the weights in model.safetensors or in the shards that
// model.safetensors.index.json names (model.safetensors first where both are, as transformers;
// f32, bf16 or f16; the model is f32; GPT-2's weights with or without the "transformer." prefix),
// and tokenizer.json.
// A config field whose value Sinter's model does not compute (another rope scaling, biases in a
// Llama, another activation or LayerNorm epsilon, ...) is an Error naming the field and the value,
// never a silently different model; so is a missing or misshapen weight, or a weight the model
// has no place for.
Pretrained from_pretrained(const std::string& dir, const FromPretrainedOptions& options = {});

}  // namespace sinter::nn::models
