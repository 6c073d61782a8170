// A byte-level BPE tokenizer: trained on a corpus to a vocabulary size, encoding any bytes and
// decoding them back exactly, saved and loaded as a Hugging Face tokenizer.json that the
// `tokenizers` package encodes to the same ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sinter::data {

// Note [bpe pre-tokenization]
// Text is cut into words before the merges apply, and no merge crosses a word's edge. Bytes fall
// in four classes: letters (A-Z, a-z and every byte >= 0x80, so that UTF-8 letters of any script
// stay in their word), digits (0-9), white space (\t \n \v \f \r and space) and the rest
// (punctuation, control bytes). A word is a run of letters, of digits or of the rest, with the
// space before it when there is one; a run of white space is a word of its own, except that where
// a word follows the run, the run's last character goes with it: joined to the word when it is a
// space, a word alone otherwise ("a  \n b" is "a", "  \n", " b"; "a \nb" is "a", " ", "\n", "b").
// This is GPT-2's pre-tokenization without its contractions ('s, 't, ...) and with byte classes
// in place of Unicode categories; saved, it is the regular expression kBpeSplitPattern of a
// "Split" pre-tokenizer followed by a ByteLevel one without its own expression, which the
// `tokenizers` package applies the same way.

// The pre-tokenizer's expression, as tokenizer.json holds it (Oniguruma syntax).
extern const char* const kBpeSplitPattern;

struct BpeTrainOptions {
  // Tokens in all: the 256 bytes, the merges, the special tokens.
  int64_t vocab_size = 4096;
  // Strings encoded as one token each wherever they appear (never merged from bytes), with the
  // ids after the merges in this order: the end-of-text token separates documents.
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
  // A pair of tokens merges only if it occurs at least this often; training stops early when no
  // pair does.
  int64_t min_frequency = 2;
};

class BpeTokenizer {
 public:
  // The byte tokenizer: 256 tokens, token b the byte b; no merges, no special tokens.
  BpeTokenizer();

  // Learns merges from `text` (special tokens in it are cut out first): the pair of adjacent
  // tokens occurring most often, counted over the words of Note [bpe pre-tokenization], merges
  // into a new token, until vocab_size or no pair occurs min_frequency times. Ties go to the pair
  // of smaller ids. Ids: the bytes 0..255, the merges in order, then the special tokens.
  static BpeTokenizer train(std::string_view text, const BpeTrainOptions& options = {});

  // A tokenizer.json of a byte-level BPE with the pre-tokenizer of Note [bpe pre-tokenization]
  // (as save() writes). A file that does not parse, or holds another model or pre-tokenizer, is a
  // sinter::Error naming the file and what is wrong.
  static BpeTokenizer load(const std::string& path);
  // The same from the file's text; `source` names it in errors.
  static BpeTokenizer from_json(std::string_view text, const std::string& source);
  // Writes the tokenizer.json atomically (Note [atomic writes]).
  void save(const std::string& path) const;
  // The text of the tokenizer.json.
  std::string to_json() const;

  // The ids of `text`, any bytes: special tokens where their strings appear (the longest where
  // two start at one place), the merges of each word applied by rank.
  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of the tokens, concatenated: decode(encode(s)) == s for every s.
  std::string decode(std::span<const int32_t> ids) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t num_merges() const { return static_cast<int64_t>(merges_.size()); }
  // The bytes of token `id`.
  const std::string& token(int32_t id) const;
  // The id of a special token, or -1 where there is none of that name.
  int32_t special_id(std::string_view name) const;
  const std::vector<std::pair<std::string, int32_t>>& special_tokens() const { return specials_; }
  // The merges in rank order: the ids of each pair.
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

 private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void add_merge(int32_t a, int32_t b, int32_t id);
  // Appends the ids of one word (no special tokens in it) to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;                  // the bytes of each id
  int32_t byte_ids_[256];                            // the id of each single byte
  std::vector<std::pair<int32_t, int32_t>> merges_;  // in rank order
  std::unordered_map<uint64_t, Merge> merge_of_;     // pair_key -> rank and result
  std::vector<std::pair<std::string, int32_t>> specials_;
};

// Cuts `text` into the words of Note [bpe pre-tokenization], in order; they cover the text.
std::vector<std::string_view> bpe_pretokenize(std::string_view text);

}  // namespace sinter::data
