// The data of an lm run (data.h): text and token shards read into tokens, their hash, and the
// shards --write-shards writes.
#include "lm/data.h"

#include <sinter/data.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lm/config.h"
#include "training.h"

namespace example::lm {

namespace {

constexpr const char* kEndOfText = "<|endoftext|>";

// 64-bit FNV-1a of the training data, so that --resume notices different data.
class Fnv {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 1099511628211ull;
  }
  std::string hex() const { return format("%016llx", static_cast<unsigned long long>(h_)); }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

}  // namespace

int64_t total_tokens(const std::vector<st::data::TokenSpan>& spans) {
  int64_t n = 0;
  for (const auto& s : spans) n += s.size;
  return n;
}

bool are_shards(const std::vector<std::string>& paths) {
  if (paths.empty()) return false;
  if (paths.size() == 1 && fs::is_directory(paths[0])) {
    for (const auto& e : fs::directory_iterator(paths[0])) {
      if (e.path().extension() == ".bin") return true;
    }
    return false;
  }
  return std::all_of(paths.begin(), paths.end(),
                     [](const std::string& p) { return fs::path(p).extension() == ".bin"; });
}

void load_text(TokenData& d, const std::vector<std::string>& paths, const RunConfig& c,
               const std::optional<st::data::BpeTokenizer>& given) {
  d.corpus = std::make_unique<st::data::TextCorpus>(
      paths, st::data::TextCorpusOptions{.context = c.tokenizer == "bytes" ? c.context : 1,
                                         .seed = c.seed});
  const std::vector<uint8_t>& bytes = d.corpus->bytes();
  const auto text_of = [&](const st::data::TextSpan& s) {
    return std::string_view(reinterpret_cast<const char*>(bytes.data()) + s.begin,
                            static_cast<size_t>(s.size()));
  };
  if (given) {
    d.tokenizer = *given;
  } else if (c.tokenizer == "bpe") {
    std::string train_text;  // the training runs, apart: end-of-text is cut out before counting
    for (const st::data::TextSpan& s : d.corpus->train()->spans()) {
      train_text.append(text_of(s)).append(kEndOfText);
    }
    const auto t0 = Clock::now();
    d.tokenizer = st::data::BpeTokenizer::train(
        train_text, {.vocab_size = c.vocab, .special_tokens = {kEndOfText}});
    std::printf("BPE: %lld tokens (%lld merges) trained on %lld bytes in %.1f s\n",
                static_cast<long long>(d.tokenizer.vocab_size()),
                static_cast<long long>(d.tokenizer.num_merges()),
                static_cast<long long>(d.corpus->train()->num_bytes()), seconds_since(t0));
  }
  const auto encode = [&](const std::vector<st::data::TextSpan>& spans, const char* name) {
    std::vector<st::data::TokenSpan> out;
    for (const st::data::TextSpan& s : spans) {
      out.push_back(st::data::token_span(d.tokenizer.encode(text_of(s)), name));
    }
    return out;
  };
  d.train = encode(d.corpus->train()->spans(), "the training text");
  d.val = encode(d.corpus->val()->spans(), "the validation text");
  d.val_bytes = d.corpus->val()->num_bytes();
  Fnv h;
  h.add(bytes.data(), bytes.size());
  d.hash = h.hex();
  d.source = format("%zu files, %zu bytes", d.corpus->files().size(), bytes.size());
}

void load_shards(TokenData& d, const std::vector<std::string>& paths) {
  const std::vector<st::data::TokenSpan> all = st::data::read_token_shards(paths);
  Fnv h;
  for (const st::data::TokenSpan& s : all) {
    (fs::path(s.source).filename().string().find("val") != std::string::npos ? d.val : d.train)
        .push_back(s);
    h.add(s.data, static_cast<size_t>(s.size) * sizeof(uint16_t));
  }
  require(!d.train.empty() && !d.val.empty(),
          "--data: the shards need training and validation files (names with \"val\" validate), "
          "got " +
              std::to_string(d.train.size()) + " and " + std::to_string(d.val.size()));
  const fs::path folder =
      fs::is_directory(paths[0]) ? fs::path(paths[0]) : fs::path(paths[0]).parent_path();
  if (fs::exists(folder / "tokenizer.json")) {
    d.tokenizer = st::data::BpeTokenizer::load((folder / "tokenizer.json").string());
  }
  for (const std::vector<st::data::TokenSpan>* spans : {&d.train, &d.val}) {
    for (const st::data::TokenSpan& s : *spans) {
      const int64_t top = st::data::max_token(s);
      if (top >= d.tokenizer.vocab_size()) {
        throw st::Error(format("--data: %s holds token %lld, outside the %lld tokens of %s",
                               s.source.c_str(), static_cast<long long>(top),
                               static_cast<long long>(d.tokenizer.vocab_size()),
                               fs::exists(folder / "tokenizer.json")
                                   ? (folder / "tokenizer.json").string().c_str()
                                   : "the byte tokenizer (no tokenizer.json beside the shards)"));
      }
    }
  }
  // The bytes each token stands for (none for the special tokens), summed over the validation
  // tokens.
  std::vector<int64_t> bytes_of(static_cast<size_t>(d.tokenizer.vocab_size()));
  for (int32_t id = 0; id < d.tokenizer.vocab_size(); ++id) {
    bytes_of[static_cast<size_t>(id)] = static_cast<int64_t>(d.tokenizer.token(id).size());
  }
  for (const auto& special : d.tokenizer.special_tokens()) {
    bytes_of[static_cast<size_t>(special.second)] = 0;
  }
  for (const st::data::TokenSpan& s : d.val) {
    for (int64_t i = 0; i < s.size; ++i) d.val_bytes += bytes_of[s.data[i]];
  }
  const std::string json = d.tokenizer.to_json();
  h.add(json.data(), json.size());
  d.hash = h.hex();
  d.source = format("%zu shards", all.size());
}

void write_shards(const TokenData& d, const std::string& dir) {
  make_out_folder(dir);
  const int32_t eot = d.tokenizer.special_id(kEndOfText);
  for (const auto& split : {std::pair{"train", &d.train}, std::pair{"val", &d.val}}) {
    const char* const name = split.first;
    const std::vector<st::data::TokenSpan>* const spans = split.second;
    std::vector<int32_t> tokens;
    int shard = 0;
    const auto flush = [&] {
      const std::string path = (fs::path(dir) / format("%s_%06d.bin", name, shard++)).string();
      st::data::write_token_shard(path, tokens);
      std::printf("%s: %zu tokens\n", path.c_str(), tokens.size());
      tokens.clear();
    };
    for (const st::data::TokenSpan& s : *spans) {
      if (!tokens.empty() && eot >= 0) tokens.push_back(eot);
      tokens.insert(tokens.end(), s.data, s.data + s.size);
      if (tokens.size() >= 100'000'000) flush();
    }
    if (!tokens.empty() || shard == 0) flush();
  }
  if (d.tokenizer.num_merges() > 0 || !d.tokenizer.special_tokens().empty()) {
    d.tokenizer.save((fs::path(dir) / "tokenizer.json").string());
    std::printf("%s\n", (fs::path(dir) / "tokenizer.json").string().c_str());
  }
}

}  // namespace example::lm
