// Exporting a trained Llama and its BPE tokenizer to a GGUF file (version 3), for llama.cpp and the
// runtimes built on it, under the names and layout llama.cpp's convert_hf_to_gguf.py writes.
#pragma once

#include <cstdint>
#include <string>

#include "sinter/data/tokenizer.h"
#include "sinter/nn/module.h"

namespace sinter::gguf {

// The weights' encoding in the file (general.file_type says which). Norm weights are f32 in
// every type; q8_0 falls back to f16 for a matrix whose rows are not a multiple of 32 long
// (Note [gguf tensor types] in src/io/gguf.cpp).
enum class Type { f32, f16, bf16, q8_0 };

// "f32", "f16", "bf16" or "q8_0"; any other name is an Error naming it.
Type parse_type(const std::string& name);
const char* type_name(Type type);

struct ExportOptions {
  Type type = Type::f16;
  // general.name; empty: "sinter-llama".
  std::string name = "";
  // The tensor data's alignment in the file (general.alignment): a power of two.
  uint32_t alignment = 32;
};

// What an export wrote.
struct ExportSummary {
  int64_t tensors = 0;
  int64_t bytes = 0;  // the file's size
};

// Note [gguf export]
// The file holds what llama.cpp's "llama" architecture reads: the hyperparameters (llama.*), the
// vocabulary as a "gpt2" (byte-level BPE) tokenizer, and the tensors under llama.cpp's names
// (token_embd, blk.N.attn_q/k/v/output, blk.N.ffn_gate/up/down, blk.N.attn_norm/ffn_norm,
// output_norm, output; no output when the head is tied to the embedding). Two things change on
// the way:
//   - Rope. Sinter's Llama turns the two halves of each head (x[i], x[i + D/2]), as Hugging Face's
//     does; llama.cpp's "llama" turns neighbours (x[2i], x[2i + 1]). The rows of q_proj and k_proj
//     are therefore permuted within each head (row 2i + j of a head is row i + j D/2 of Sinter's,
//     j = 0, 1), which gives the same attention scores, as convert_hf_to_gguf.py does.
//   - Pre-tokenization. tokenizer.ggml.pre is "gpt-2", the closest that llama.cpp knows to
//     Note [bpe pre-tokenization] in include/sinter/data/tokenizer.h, but not the same: GPT-2's
//     expression keeps the contractions 's 't 're 've 'm 'll 'd as words of their own (so
//     "'sfoo" is "'s", "foo" there and "'", "sfoo" in Sinter), and it classes characters by
//     their Unicode categories where Sinter takes every byte >= 0x80 for a letter (so non-ASCII
//     punctuation, digits and spaces such as "—" or U+00A0 end a word there and not in Sinter).
//     On ASCII text without those contractions the two cut the same words, and llama.cpp then
//     encodes to Sinter's ids.
// Special tokens are control tokens (type 3) spelled as they are; the others are normal tokens
// (type 1) in GPT-2's byte-level spelling (Note [byte-level characters] in
// src/internal/byte_level.h), with the merges so spelled. "<|endoftext|>", when the tokenizer has
// it, is both the BOS and the EOS token; no BOS is added to prompts. A model with more embedding
// rows than the tokenizer has tokens gets "[PAD<id>]" tokens of type 5 (unused) for the rest.

// Writes `module`, a nn::models::Llama (any device and floating dtype), with `tokenizer` to the
// GGUF file `path`, atomically (Note [atomic writes] in src/internal/atomic_file.h). Another
// module, a tokenizer with more tokens than the model's vocabulary, or bad options are Errors
// naming export_model and the value.
ExportSummary export_model(const nn::Module& module, const data::BpeTokenizer& tokenizer,
                           const std::string& path, const ExportOptions& options = {});

}  // namespace sinter::gguf
