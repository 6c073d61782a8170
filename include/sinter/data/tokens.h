// Token data for language models: shards in llm.c's format written atomically and read
// memory-mapped, and random windows of tokens as a Dataset.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sinter/data/dataset.h"

namespace sinter::data {

// Note [token shards]
// A shard is a header of 256 little-endian int32, then the tokens as little-endian uint16 (so a
// vocabulary of at most 65536): header[0] is the magic 20240520, header[1] the version 1,
// header[2] the token count n, the rest 0. The file is exactly 1024 + 2 n bytes. This is the
// format of llm.c's data scripts (e.g. fineweb.py), so shards pass between the two as they are.
constexpr int32_t kTokenShardMagic = 20240520;
constexpr int32_t kTokenShardVersion = 1;

// Writes `tokens` (each in [0, 65536)) as a shard at `path`, atomically (Note [atomic writes]).
void write_token_shard(const std::string& path, std::span<const int32_t> tokens);

// A run of tokens in memory, kept alive by `owner` (a mapped shard or a vector), named by
// `source` (the file) in errors.
struct TokenSpan {
  const uint16_t* data = nullptr;
  int64_t size = 0;
  std::shared_ptr<const void> owner;
  std::string source;
};

// The tokens of the shard at `path`, memory-mapped read-only. A file that is missing, shorter
// than the header, of another magic or version, or whose size is not 1024 + 2 n is a
// sinter::Error naming it and what is wrong.
TokenSpan read_token_shard(const std::string& path);

// The tokens of a shard's bytes (as read_token_shard checks them; `source` names them in errors),
// still pointing into `bytes`, which the caller keeps alive.
TokenSpan parse_token_shard(std::span<const uint8_t> bytes, const std::string& source);

// The shards of `paths`: each a shard file, or a folder whose *.bin files are read in order of
// name. Paths that hold no shard are an error.
std::vector<TokenSpan> read_token_shards(const std::vector<std::string>& paths);

// Tokens held in a vector (from a tokenizer): each must be in [0, 65536).
TokenSpan token_span(const std::vector<int32_t>& tokens, const std::string& source);

// The largest token of a span (-1 when it is empty): a model's vocabulary must exceed it. Reads
// every token.
int64_t max_token(const TokenSpan& span);

struct TokenWindowsOptions {
  int64_t context = 256;  // T: the tokens a window feeds the model; it holds T + 1
  int64_t windows = 0;    // examples per epoch; 0: the tokens / context, rounded down
  uint64_t seed = 0;      // draws the window positions
  uint32_t split = 0;     // the Philox stream: 0 for training, 1 for validation by convention
};

// Windows of T + 1 tokens over spans, as a Dataset: example i is input = tokens [p, p + T) and
// target = tokens [p + 1, p + T + 1), i64 of shape (T), at the window drawn as Note [text
// windows] draws a TextCorpus split's (from seed, split and i; every window equally likely). A
// window never runs from one span into the next.
class TokenWindows : public Dataset {
 public:
  TokenWindows(std::vector<TokenSpan> spans, const TokenWindowsOptions& options = {});
  int64_t size() const override { return windows_; }
  Example get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  // The span and the offset in it of example `index`'s window.
  std::pair<size_t, int64_t> position(int64_t index) const;
  int64_t context() const { return options_.context; }
  const std::vector<TokenSpan>& spans() const { return spans_; }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  void fill(int64_t index, int64_t* in, int64_t* target) const;

  std::vector<TokenSpan> spans_;
  TokenWindowsOptions options_;
  std::vector<int64_t> window_ends_;
  int64_t windows_ = 0, num_tokens_ = 0;
};

}  // namespace sinter::data
