// The byte-level BPE tokenizer (see sinter/data/tokenizer.h).
#include "sinter/data/tokenizer.h"

#include <algorithm>
#include <array>
#include <climits>
#include <fstream>
#include <queue>
#include <sstream>

#include "internal/atomic_file.h"
#include "internal/byte_level.h"
#include "internal/json_text.h"
#include "sinter/core/error.h"

#ifdef SINTER_WITH_NLOHMANN_JSON
#include <nlohmann/json.hpp>
#endif

namespace sinter::detail {

const std::array<uint32_t, 256>& byte_to_character() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> cp{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      cp[b] = printable ? b : next++;
    }
    return cp;
  }();
  return table;
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    const uint32_t cp = byte_to_character()[static_cast<uint8_t>(c)];
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {  // every byte-level character is below U+0800: two bytes
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

}  // namespace sinter::detail

namespace sinter::data {

const char* const kBpeSplitPattern =
    R"( ?[^\x00-\x40\x5B-\x60\x7B-\x7F]+| ?[0-9]+| ?[\x00-\x08\x0E-\x1F\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7F]+|[\x09-\x0D\x20]+(?![^\x09-\x0D\x20])|[\x09-\x0D\x20]+)";

namespace {

// --- bytes as characters (Note [byte-level characters] in src/internal/byte_level.h) ---

using sinter::detail::byte_to_character;
using sinter::detail::to_byte_level;

// The bytes of byte-level text; false where it holds a character of no byte.
bool from_byte_level(std::string_view text, std::string& out) {
  static const std::array<int, 0x800> byte_of = [] {
    std::array<int, 0x800> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_character()[static_cast<size_t>(b)]] = b;
    return t;
  }();
  out.clear();
  for (size_t i = 0; i < text.size();) {
    const auto c0 = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < text.size() &&
               (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80) {
      cp = ((c0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;
    }
    if (cp >= byte_of.size() || byte_of[cp] < 0) return false;
    out += static_cast<char>(byte_of[cp]);
  }
  return true;
}

// --- pre-tokenization (Note [bpe pre-tokenization]) ---

enum class ByteClass : uint8_t { Letter, Digit, Space, Other };

ByteClass byte_class(char ch) {
  const auto c = static_cast<uint8_t>(ch);
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c >= 0x80) return ByteClass::Letter;
  if (c >= '0' && c <= '9') return ByteClass::Digit;
  if ((c >= 0x09 && c <= 0x0D) || c == ' ') return ByteClass::Space;
  return ByteClass::Other;
}

// The end of the run of class `c` from i.
size_t run_end(std::string_view s, size_t i, ByteClass c) {
  while (i < s.size() && byte_class(s[i]) == c) ++i;
  return i;
}

// Calls f(piece, special id or -1) for the pieces of `text` between and at special tokens, in
// order: at each place the earliest occurrence of any special token, the longest where several
// start there.
template <class F>
void split_specials(std::string_view text,
                    const std::vector<std::pair<std::string, int32_t>>& specials, F&& f) {
  size_t at = 0;
  while (at < text.size()) {
    size_t best = std::string_view::npos, best_len = 0;
    int32_t best_id = -1;
    for (const auto& [name, id] : specials) {
      const size_t p = text.find(name, at);
      if (p < best || (p == best && p != std::string_view::npos && name.size() > best_len)) {
        best = p;
        best_len = name.size();
        best_id = id;
      }
    }
    if (best == std::string_view::npos) {
      f(text.substr(at), -1);
      return;
    }
    if (best > at) f(text.substr(at, best - at), -1);
    f(text.substr(best, best_len), best_id);
    at = best + best_len;
  }
}

}  // namespace

std::vector<std::string_view> bpe_pretokenize(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    const ByteClass c = byte_class(s[i]);
    if (c != ByteClass::Space) {
      const size_t e = run_end(s, i, c);
      words.push_back(s.substr(i, e - i));
      i = e;
      continue;
    }
    const size_t e = run_end(s, i, ByteClass::Space);
    if (e == s.size()) {  // white space to the end
      words.push_back(s.substr(i));
      break;
    }
    if (e - i >= 2) {  // all but the last white space character, which goes with the next word
      words.push_back(s.substr(i, e - 1 - i));
      i = e - 1;
    }
    if (s[i] == ' ') {  // " word"
      const size_t w = run_end(s, i + 1, byte_class(s[i + 1]));
      words.push_back(s.substr(i, w - i));
      i = w;
    } else {
      words.push_back(s.substr(i, 1));
      ++i;
    }
  }
  return words;
}

// --- the tokenizer ---

BpeTokenizer::BpeTokenizer() {
  tokens_.reserve(256);
  for (int b = 0; b < 256; ++b) {
    tokens_.emplace_back(1, static_cast<char>(b));
    byte_ids_[b] = b;
  }
}

const std::string& BpeTokenizer::token(int32_t id) const {
  SINTER_CHECK(id >= 0 && id < vocab_size(), "BpeTokenizer: token id ", id, " is outside 0 to ",
               vocab_size() - 1);
  return tokens_[static_cast<size_t>(id)];
}

int32_t BpeTokenizer::special_id(std::string_view name) const {
  for (const auto& [n, id] : specials_) {
    if (n == name) return id;
  }
  return -1;
}

void BpeTokenizer::add_merge(int32_t a, int32_t b, int32_t id) {
  merge_of_.emplace(pair_key(a, b), Merge{static_cast<int32_t>(merges_.size()), id});
  merges_.emplace_back(a, b);
}

namespace {

void check_train_options(const BpeTrainOptions& o) {
  const auto n_special = static_cast<int64_t>(o.special_tokens.size());
  SINTER_CHECK(o.vocab_size >= 256 + n_special, "BpeTokenizer::train: vocab_size ", o.vocab_size,
               " is too small for the 256 bytes and ", n_special, " special tokens (at least ",
               256 + n_special, ")");
  SINTER_CHECK(o.vocab_size <= INT32_MAX, "BpeTokenizer::train: vocab_size ", o.vocab_size,
               " is too large");
  SINTER_CHECK(o.min_frequency >= 1, "BpeTokenizer::train: min_frequency must be at least 1, got ",
               o.min_frequency);
  for (size_t i = 0; i < o.special_tokens.size(); ++i) {
    SINTER_CHECK(!o.special_tokens[i].empty(), "BpeTokenizer::train: special token ", i,
                 " is empty");
    for (size_t j = 0; j < i; ++j) {
      SINTER_CHECK(o.special_tokens[i] != o.special_tokens[j],
                   "BpeTokenizer::train: special token \"", o.special_tokens[i], "\" is repeated");
    }
  }
}

// The distinct words of `text` outside the special tokens, in byte order (so that training is
// deterministic), as byte ids, and how often each occurs.
struct WordCounts {
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> freq;
};
WordCounts count_words(std::string_view text, const std::vector<std::string>& specials) {
  std::vector<std::pair<std::string, int32_t>> cut;  // the special tokens to cut out of `text`
  for (const std::string& s : specials) cut.emplace_back(s, 0);
  std::unordered_map<std::string_view, int64_t> counts;
  split_specials(text, cut, [&](std::string_view piece, int32_t special) {
    if (special >= 0) return;
    for (const std::string_view w : bpe_pretokenize(piece)) ++counts[w];
  });
  std::vector<std::string_view> sorted;
  sorted.reserve(counts.size());
  for (const auto& [w, n] : counts) sorted.push_back(w);
  std::sort(sorted.begin(), sorted.end());
  WordCounts wc{std::vector<std::vector<int32_t>>(sorted.size()),
                std::vector<int64_t>(sorted.size())};
  for (size_t w = 0; w < sorted.size(); ++w) {
    for (const char c : sorted[w]) wc.words[w].push_back(static_cast<uint8_t>(c));
    wc.freq[w] = counts[sorted[w]];
  }
  return wc;
}

// s with every pair (a, b), left to right, replaced by id.
std::vector<int32_t> merge_pair(const std::vector<int32_t>& s, int32_t a, int32_t b, int32_t id) {
  std::vector<int32_t> merged;
  merged.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
      merged.push_back(id);
      i += 2;
    } else {
      merged.push_back(s[i++]);
    }
  }
  return merged;
}

}  // namespace

BpeTokenizer BpeTokenizer::train(std::string_view text, const BpeTrainOptions& o) {
  check_train_options(o);
  const auto n_special = static_cast<int64_t>(o.special_tokens.size());
  BpeTokenizer t;
  auto [words, freq] = count_words(text, o.special_tokens);

  // Pair counts, the words holding each pair (possibly repeated, possibly no longer), and a heap
  // of (count, pair) entries in which each pair's largest entry is at least its count: a popped
  // entry whose count is stale goes back with the current one, so the first current entry popped
  // is the most frequent pair.
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (size_t w = 0; w < words.size(); ++w) {
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t k = pair_key(words[w][i], words[w][i + 1]);
      pair_count[k] += freq[w];
      where[k].push_back(static_cast<int32_t>(w));
    }
  }
  struct Entry {
    int64_t count;
    uint64_t key;
    bool operator<(const Entry& e) const {  // the heap's top: largest count, then smallest pair
      return count != e.count ? count < e.count : key > e.key;
    }
  };
  std::priority_queue<Entry> heap;
  for (const auto& [k, n] : pair_count) heap.push({n, k});

  std::unordered_map<std::string, int32_t> id_of;  // the bytes of every token
  for (int32_t b = 0; b < 256; ++b) id_of.emplace(t.tokens_[static_cast<size_t>(b)], b);
  std::vector<int64_t> seen(words.size(), -1);
  const auto model_tokens = static_cast<size_t>(o.vocab_size - n_special);
  while (t.tokens_.size() < model_tokens && !heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const auto it = pair_count.find(top.key);
    const int64_t current = it == pair_count.end() ? 0 : it->second;
    if (current != top.count) {
      if (current > 0) heap.push({current, top.key});
      continue;
    }
    if (current < o.min_frequency) break;
    const auto a = static_cast<int32_t>(top.key >> 32), b = static_cast<int32_t>(top.key);
    std::string bytes = t.tokens_[static_cast<size_t>(a)] + t.tokens_[static_cast<size_t>(b)];
    auto [at, added] = id_of.emplace(bytes, static_cast<int32_t>(t.tokens_.size()));
    if (added) t.tokens_.push_back(std::move(bytes));
    const int32_t id = at->second;
    const auto merge_index = static_cast<int64_t>(t.merges_.size());
    t.add_merge(a, b, id);

    std::vector<uint64_t> grown;  // the pairs with the new token, whose counts went up
    std::vector<int32_t> holders = std::move(where[top.key]);
    where.erase(top.key);
    for (const int32_t w : holders) {
      if (seen[static_cast<size_t>(w)] == merge_index) continue;
      seen[static_cast<size_t>(w)] = merge_index;
      std::vector<int32_t>& s = words[static_cast<size_t>(w)];
      const int64_t f = freq[static_cast<size_t>(w)];
      bool holds = false;
      for (size_t i = 0; i + 1 < s.size() && !holds; ++i) holds = s[i] == a && s[i + 1] == b;
      if (!holds) continue;
      for (size_t i = 0; i + 1 < s.size(); ++i) pair_count[pair_key(s[i], s[i + 1])] -= f;
      s = merge_pair(s, a, b, id);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t k = pair_key(s[i], s[i + 1]);
        pair_count[k] += f;
        if (s[i] == id || s[i + 1] == id) {
          where[k].push_back(w);
          grown.push_back(k);
        }
      }
    }
    pair_count.erase(top.key);
    std::sort(grown.begin(), grown.end());
    grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
    for (const uint64_t k : grown) heap.push({pair_count[k], k});
  }
  for (const std::string& s : o.special_tokens) {
    t.specials_.emplace_back(s, static_cast<int32_t>(t.tokens_.size()));
    t.tokens_.push_back(s);
  }
  return t;
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<int32_t> s;
  s.reserve(word.size());
  for (const char c : word) s.push_back(byte_ids_[static_cast<uint8_t>(c)]);
  // The pair of lowest rank merges, the leftmost where it occurs more than once, until no pair
  // of the word has a merge.
  while (s.size() >= 2) {
    int32_t best_rank = INT32_MAX, best_id = -1;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const auto it = merge_of_.find(pair_key(s[i], s[i + 1]));
      if (it != merge_of_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        best_id = it->second.id;
        best_at = i;
      }
    }
    if (best_id < 0) break;
    s[best_at] = best_id;
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  out.insert(out.end(), s.begin(), s.end());
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;
  std::vector<int32_t> word_ids;
  split_specials(text, specials_, [&](std::string_view piece, int32_t special) {
    if (special >= 0) {
      ids.push_back(special);
      return;
    }
    for (const std::string_view w : bpe_pretokenize(piece)) {
      auto it = cache.find(w);
      if (it == cache.end()) {
        word_ids.clear();
        encode_word(w, word_ids);
        it = cache.emplace(w, word_ids).first;
      }
      ids.insert(ids.end(), it->second.begin(), it->second.end());
    }
  });
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    SINTER_CHECK(id >= 0 && id < vocab_size(), "BpeTokenizer::decode: token id ", id,
                 " is outside 0 to ", vocab_size() - 1);
    out += tokens_[static_cast<size_t>(id)];
  }
  return out;
}

// --- tokenizer.json ---

namespace {

// The ByteLevel pre-tokenizer and decoder of tokenizer.json, without their own expression.
const char* const kByteLevel =
    R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false})";

}  // namespace

void BpeTokenizer::save(const std::string& path) const {
  const std::string text = to_json();
  sinter::detail::write_file_atomically(path, {{text.data(), text.size()}}, "BpeTokenizer::save");
}

std::string BpeTokenizer::to_json() const {
  using sinter::detail::json_string;
  std::ostringstream j;
  j << "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  j << "  \"added_tokens\": [";
  for (size_t i = 0; i < specials_.size(); ++i) {
    j << (i ? ",\n" : "\n") << "    {\"id\": " << specials_[i].second
      << ", \"content\": " << json_string(specials_[i].first)
      << ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
         "\"special\": true}";
  }
  j << (specials_.empty() ? "],\n" : "\n  ],\n");
  j << "  \"normalizer\": null,\n";
  j << "  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
       "\"pattern\": {\"Regex\": "
    << json_string(kBpeSplitPattern) << "}, \"behavior\": \"Isolated\", \"invert\": false}, "
    << kByteLevel << "]},\n";
  j << "  \"post_processor\": null,\n";
  j << "  \"decoder\": " << kByteLevel << ",\n";
  j << "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
       "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
       "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"vocab\": {";
  const int64_t model_tokens = vocab_size() - static_cast<int64_t>(specials_.size());
  for (int64_t id = 0; id < model_tokens; ++id) {
    j << (id ? ",\n" : "\n") << "      "
      << json_string(to_byte_level(tokens_[static_cast<size_t>(id)])) << ": " << id;
  }
  j << "\n    },\n    \"merges\": [";
  for (size_t i = 0; i < merges_.size(); ++i) {
    j << (i ? ",\n" : "\n") << "      "
      << json_string(
             sinter::detail::byte_level_merge(tokens_[static_cast<size_t>(merges_[i].first)],
                                              tokens_[static_cast<size_t>(merges_[i].second)]));
  }
  j << (merges_.empty() ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n");
  return j.str();
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SINTER_CHECK(in.good(), "BpeTokenizer::load: cannot open ", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return from_json(buffer.str(), path);
}

#ifdef SINTER_WITH_NLOHMANN_JSON

namespace {

using json = nlohmann::json;

// A member of a JSON object, or an error naming the file and the member.
const json& member(const std::string& path, const json& j, const char* parent, const char* name) {
  SINTER_CHECK(j.is_object() && j.contains(name), "BpeTokenizer::load: ", path, ": ", parent,
               " has no \"", name, "\"");
  return j.at(name);
}

bool is_byte_level(const json& j, bool pre_tokenizer) {
  if (!j.is_object() || j.value("type", "") != "ByteLevel") return false;
  // A pre-tokenizer with its own expression would cut the words again, GPT-2's way.
  return !pre_tokenizer || (j.contains("use_regex") && j["use_regex"] == false &&
                            j.value("add_prefix_space", false) == false);
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(std::string_view text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    SINTER_THROW("BpeTokenizer::load: ", path, " is not JSON: ", e.what());
  }
  try {
    const json& model = member(path, j, "the file", "model");
    SINTER_CHECK(model.value("type", "") == "BPE", "BpeTokenizer::load: ", path,
                 ": the model is not a BPE (type ", model.value("type", "?"), ")");
    SINTER_CHECK(!j.contains("normalizer") || j["normalizer"].is_null(),
                 "BpeTokenizer::load: ", path, ": a normalizer is not supported");
    const json& pre = member(path, j, "the file", "pre_tokenizer");
    const bool ours = pre.is_object() && pre.value("type", "") == "Sequence" &&
                      pre.contains("pretokenizers") && pre["pretokenizers"].size() == 2 &&
                      pre["pretokenizers"][0].value("type", "") == "Split" &&
                      pre["pretokenizers"][0].contains("pattern") &&
                      pre["pretokenizers"][0]["pattern"].value("Regex", "") == kBpeSplitPattern &&
                      pre["pretokenizers"][0].value("behavior", "") == "Isolated" &&
                      pre["pretokenizers"][0].value("invert", true) == false &&
                      is_byte_level(pre["pretokenizers"][1], true);
    SINTER_CHECK(ours, "BpeTokenizer::load: ", path,
                 ": the pre-tokenizer is not the Split and ByteLevel of Note [bpe "
                 "pre-tokenization] (got ",
                 pre.dump().substr(0, 200), ")");
    SINTER_CHECK(is_byte_level(member(path, j, "the file", "decoder"), false),
                 "BpeTokenizer::load: ", path, ": the decoder is not ByteLevel");

    BpeTokenizer t;
    const json& vocab = member(path, model, "model", "vocab");
    SINTER_CHECK(vocab.is_object(), "BpeTokenizer::load: ", path, ": model.vocab is not an object");
    std::vector<std::string> tokens(vocab.size());
    std::vector<bool> filled(vocab.size(), false);
    std::unordered_map<std::string, int32_t> id_of;  // the byte-level spelling of every token
    for (const auto& [spelling, id_json] : vocab.items()) {
      SINTER_CHECK(id_json.is_number_integer(), "BpeTokenizer::load: ", path, ": token \"",
                   spelling, "\" has no integer id");
      const auto id = id_json.get<int64_t>();
      SINTER_CHECK(
          id >= 0 && id < static_cast<int64_t>(tokens.size()) && !filled[static_cast<size_t>(id)],
          "BpeTokenizer::load: ", path, ": token \"", spelling, "\" has id ", id,
          ", not one of 0 to ", tokens.size() - 1, " unused");
      SINTER_CHECK(from_byte_level(spelling, tokens[static_cast<size_t>(id)]),
                   "BpeTokenizer::load: ", path, ": token \"", spelling,
                   "\" is not byte-level text");
      filled[static_cast<size_t>(id)] = true;
      id_of.emplace(spelling, static_cast<int32_t>(id));
    }
    for (int b = 0; b < 256; ++b) {
      const auto it = id_of.find(to_byte_level(std::string(1, static_cast<char>(b))));
      SINTER_CHECK(it != id_of.end(), "BpeTokenizer::load: ", path, ": the vocabulary (",
                   tokens.size(), " tokens) lacks the byte ", b, ", so some text cannot encode");
      t.byte_ids_[b] = it->second;
    }
    t.tokens_ = std::move(tokens);
    const json& merges = member(path, model, "model", "merges");
    SINTER_CHECK(merges.is_array(), "BpeTokenizer::load: ", path, ": model.merges is not a list");
    for (size_t i = 0; i < merges.size(); ++i) {
      std::string left, right;
      const json& m = merges[i];
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        SINTER_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos,
                     "BpeTokenizer::load: ", path, ": merge ", i, " \"", s, "\" is not two tokens");
        left = s.substr(0, space);
        right = s.substr(space + 1);
      } else {
        SINTER_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                     "BpeTokenizer::load: ", path, ": merge ", i, " is not two tokens");
        left = m[0].get<std::string>();
        right = m[1].get<std::string>();
      }
      const auto a = id_of.find(left), b = id_of.find(right), c = id_of.find(left + right);
      SINTER_CHECK(a != id_of.end() && b != id_of.end() && c != id_of.end(),
                   "BpeTokenizer::load: ", path, ": merge ", i, " (\"", left, "\", \"", right,
                   "\") names a token not in the vocabulary");
      t.add_merge(a->second, b->second, c->second);
    }
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      for (const json& a : j["added_tokens"]) {
        const auto id = member(path, a, "an added token", "id").get<int64_t>();
        const auto content = member(path, a, "an added token", "content").get<std::string>();
        SINTER_CHECK(!content.empty(), "BpeTokenizer::load: ", path, ": added token ", id,
                     " is empty");
        // A new id after the vocabulary's, or a token of the vocabulary of the same bytes.
        SINTER_CHECK(id == t.vocab_size() || (id >= 0 && id < t.vocab_size() &&
                                              t.tokens_[static_cast<size_t>(id)] == content),
                     "BpeTokenizer::load: ", path, ": added token \"", content, "\" has id ", id,
                     ", neither the next id ", t.vocab_size(), " nor a token of its bytes");
        t.specials_.emplace_back(content, static_cast<int32_t>(id));
        if (id == t.vocab_size()) t.tokens_.push_back(content);
      }
    }
    return t;
  } catch (const json::exception& e) {
    SINTER_THROW("BpeTokenizer::load: ", path, ": ", e.what());
  }
}

#else

BpeTokenizer BpeTokenizer::from_json(std::string_view, const std::string& path) {
  SINTER_THROW("BpeTokenizer::load: ", path,
               ": Sinter was built without nlohmann_json, which reads it");
}

#endif

}  // namespace sinter::data
