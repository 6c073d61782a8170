// The data of an lm run: the tokens of text files (split, tokenized with bytes or a BPE) or of
// token shards, with the hash that --resume checks them by, and --write-shards.
#pragma once

#include <sinter/data.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lm/config.h"

namespace example::lm {

// The tokens of a run: training and validation spans, the tokenizer, and what they cover.
struct TokenData {
  st::data::BpeTokenizer tokenizer;
  std::vector<st::data::TokenSpan> train, val;
  int64_t val_bytes = 0;  // the bytes the validation tokens encode, for nats per byte
  std::unique_ptr<st::data::TextCorpus> corpus;  // text data only: for the baselines
  std::string hash;
  std::string source;  // "fortunes (2576674 bytes)", "4 shards"
};

int64_t total_tokens(const std::vector<st::data::TokenSpan>& spans);

// Whether `paths` name token shards: .bin files, or one folder holding .bin files.
bool are_shards(const std::vector<std::string>& paths);

// Text: the corpus split as Note [text split] says, each split's runs of adjacent text tokenized
// apart (so no window joins text that is not adjacent), with the byte tokenizer or a BPE trained
// on the training text (or `given`, the checkpoint's, on --resume).
void load_text(TokenData& d, const std::vector<std::string>& paths, const RunConfig& c,
               const std::optional<st::data::BpeTokenizer>& given);

// Shards: *val* files validate, the others train; a tokenizer.json beside them is their tokenizer
// (else they hold bytes).
void load_shards(TokenData& d, const std::vector<std::string>& paths);

// --write-shards DIR: each split's tokens as one shard per 100M tokens (llm.c's size), the runs of
// text joined by the end-of-text token (BPE) or directly (bytes), and tokenizer.json for BPE.
void write_shards(const TokenData& d, const std::string& dir);

}  // namespace example::lm
