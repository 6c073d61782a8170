// The trained model's files for other tools: --export-weights (safetensors under the state-dict
// names), --export-hf (a Hugging Face folder), --export-onnx and --export-gguf (llama.cpp). Each
// is checked before training, so that a run does not end with nowhere to write its model.
#pragma once

#include <sinter/data.h>
#include <sinter/nn/module.h>

#include "lm/config.h"

namespace example::lm {

// The export options against the run's settings and the file system.
void check_exports(const Args& args, const RunConfig& c);

// Writes every export asked for, saying where on stdout; `tokenizer` is the run's.
void write_exports(const Args& args, const RunConfig& c, st::nn::Module& model,
                   const st::data::BpeTokenizer& tokenizer, st::Device dev);

}  // namespace example::lm
