// TextCorpus: reading files and folders into one byte buffer, the chunked train/validation split
// (Note [text split]), the Philox-drawn windows of each split (Note [text windows]) and the byte
// n-gram baselines.
#include "sinter/data/text.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "windows.h"

namespace sinter::data {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMillion = 1000000;

// val_fraction in millionths (Note [text split]).
int64_t val_millionths(double val_fraction) {
  return std::isfinite(val_fraction) ? std::llround(val_fraction * kMillion) : -1;
}

void check_options(const TextCorpusOptions& o) {
  SINTER_CHECK(o.context >= 1, "TextCorpus: context must be >= 1, got ", o.context);
  SINTER_CHECK(o.chunk_size >= 1, "TextCorpus: chunk_size must be >= 1, got ", o.chunk_size);
  const int64_t m = val_millionths(o.val_fraction);
  SINTER_CHECK(m >= 1 && m < kMillion, "TextCorpus: val_fraction must be in (0, 1), at least ",
               "one millionth from either end, got ", o.val_fraction);
  SINTER_CHECK(o.train_windows >= 0 && o.val_windows >= 0,
               "TextCorpus: train_windows and val_windows must be >= 0 (0: the default), got ",
               o.train_windows, " and ", o.val_windows);
}

// Appends the text files under `dir` to `files`, depth first, entries in order of name.
void walk_folder(const fs::path& dir, std::vector<fs::path>& files) {
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(*it);
  }
  SINTER_CHECK(!ec, "TextCorpus: cannot list the folder ", dir.string(), ": ", ec.message());
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.path().filename().string() < b.path().filename().string();
  });
  for (const fs::directory_entry& e : entries) {
    const std::string name = e.path().filename().string();
    if (name.starts_with('.')) continue;
    // symlink_status: a link is neither folder nor regular file here, so it is skipped (fortune's
    // .u8 links would read its files twice; a link to a folder could loop).
    const fs::file_status st = e.symlink_status(ec);
    SINTER_CHECK(!ec, "TextCorpus: cannot inspect ", e.path().string(), ": ", ec.message());
    if (fs::is_directory(st)) {
      walk_folder(e.path(), files);
    } else if (fs::is_regular_file(st) && !name.ends_with(".dat") && !name.ends_with(".u8")) {
      files.push_back(e.path());
    }
  }
}

void append_file(const fs::path& path, std::vector<uint8_t>& out) {
  std::error_code ec;
  const auto size = static_cast<std::streamsize>(fs::file_size(path, ec));
  SINTER_CHECK(!ec, "TextCorpus: cannot read the size of ", path.string(), ": ", ec.message());
  std::ifstream in(path, std::ios::binary);
  SINTER_CHECK(in.is_open(), "TextCorpus: cannot open ", path.string(), ": ", std::strerror(errno));
  const size_t old = out.size();
  out.resize(old + static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(out.data() + old), size);
  SINTER_CHECK(in.gcount() == size, "TextCorpus: read ", in.gcount(), " of ", size, " bytes from ",
               path.string());
}

// The chunks of a corpus of n bytes, as the spans of the training and validation splits.
std::pair<std::vector<TextSpan>, std::vector<TextSpan>> split_spans(int64_t n,
                                                                    const TextCorpusOptions& o) {
  const int64_t m = val_millionths(o.val_fraction);
  std::vector<TextSpan> train, val;
  for (int64_t c = 0; c * o.chunk_size < n; ++c) {
    const TextSpan chunk{c * o.chunk_size, std::min(n, (c + 1) * o.chunk_size)};
    std::vector<TextSpan>& spans = (c + 1) * m / kMillion > c * m / kMillion ? val : train;
    if (!spans.empty() && spans.back().end == chunk.begin) {
      spans.back().end = chunk.end;
    } else {
      spans.push_back(chunk);
    }
  }
  return {std::move(train), std::move(val)};
}

}  // namespace

std::string default_text_corpus() { return "/usr/share/games/fortunes"; }

TextWindows::TextWindows(std::shared_ptr<const std::vector<uint8_t>> bytes,
                         std::vector<TextSpan> spans, const char* name, uint32_t split,
                         int64_t context, int64_t windows, uint64_t seed,
                         const std::vector<std::string>& source)
    : bytes_(std::move(bytes)),
      spans_(std::move(spans)),
      name_(name),
      split_(split),
      context_(context),
      seed_(seed) {
  int64_t longest = 0;
  std::vector<int64_t> sizes;
  for (const TextSpan& s : spans_) {
    sizes.push_back(s.size());
    num_bytes_ += s.size();
    longest = std::max(longest, s.size());
  }
  window_ends_ = detail::window_ends(sizes, context_);
  SINTER_CHECK(!window_ends_.empty() && window_ends_.back() > 0, "TextCorpus: the ", name_,
               " split of ", source, " (", num_bytes_, " bytes in ", spans_.size(),
               " runs of adjacent text, the longest ", longest,
               " bytes) is too small for one window of context + 1 = ", context_ + 1,
               " bytes; lower context, raise chunk_size, or give more text");
  windows_ = windows > 0 ? windows : num_bytes_ / context_;
}

int64_t TextWindows::position(int64_t index) const {
  SINTER_CHECK(index >= 0 && index < windows_, "TextWindows: index ", index, " out of range for ",
               windows_, " windows of the ", name_, " split");
  const auto [s, offset] = detail::pick_window(window_ends_, index, split_, seed_);
  return spans_[s].begin + offset;
}

void TextWindows::fill(int64_t index, int64_t* in, int64_t* target) const {
  const uint8_t* src = bytes_->data() + position(index);
  for (int64_t j = 0; j < context_; ++j) {
    in[j] = src[j];
    target[j] = src[j + 1];
  }
}

Example TextWindows::get(int64_t index) const {
  Tensor in = empty({context_}, {.dtype = DType::i64});
  Tensor target = empty({context_}, {.dtype = DType::i64});
  fill(index, in.data<int64_t>(), target.data<int64_t>());
  return {in, target};
}

Batch TextWindows::get_batch(const std::vector<int64_t>& indices) const {
  SINTER_CHECK(!indices.empty(), "TextWindows::get_batch: no indices");
  const auto b = static_cast<int64_t>(indices.size());
  Tensor in = empty({b, context_}, {.dtype = DType::i64});
  Tensor target = empty({b, context_}, {.dtype = DType::i64});
  int64_t* in_rows = in.data<int64_t>();
  int64_t* target_rows = target.data<int64_t>();
  for (int64_t k = 0; k < b; ++k) {
    fill(indices[static_cast<size_t>(k)], in_rows + k * context_, target_rows + k * context_);
  }
  return {in, target};
}

TextCorpus::TextCorpus(const std::vector<std::string>& paths, const TextCorpusOptions& options)
    : options_(options) {
  check_options(options_);
  SINTER_CHECK(!paths.empty(), "TextCorpus: no paths given");
  std::vector<fs::path> found;
  for (const std::string& path : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    SINTER_CHECK(st.type() != fs::file_type::not_found, "TextCorpus: ", path, " does not exist");
    SINTER_CHECK(st.type() != fs::file_type::none, "TextCorpus: cannot inspect ", path, ": ",
                 ec.message());
    if (fs::is_regular_file(st)) {
      found.emplace_back(path);
    } else {
      SINTER_CHECK(fs::is_directory(st), "TextCorpus: ", path, " is neither a file nor a folder");
      walk_folder(path, found);
    }
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  for (const fs::path& f : found) {
    append_file(f, *bytes);
    files_.push_back(f.string());
  }
  SINTER_CHECK(!bytes->empty(), "TextCorpus: no text in ", paths, " (", files_.size(),
               " files read, all empty)");
  bytes_ = std::move(bytes);
  auto [train, val] = split_spans(static_cast<int64_t>(bytes_->size()), options_);
  // TextWindows' constructor is private to TextCorpus, out of make_shared's reach.
  train_.reset(new TextWindows(bytes_, std::move(train), "training", 0, options_.context,
                               options_.train_windows, options_.seed, paths));
  val_.reset(new TextWindows(bytes_, std::move(val), "validation", 1, options_.context,
                             options_.val_windows, options_.seed, paths));
}

ByteBaselines byte_baselines(const TextCorpus& corpus, double alpha) {
  SINTER_CHECK(std::isfinite(alpha) && alpha > 0,
               "byte_baselines: alpha must be finite and > 0, got ", alpha);
  const uint8_t* b = corpus.bytes().data();
  // unigram[x] = n(x); pairs[a * 256 + x] = n(a, x); from[a] = n(a, *).
  std::vector<int64_t> unigram(256, 0), pairs(256 * 256, 0), from(256, 0);
  int64_t n = 0;
  for (const TextSpan& s : corpus.train()->spans()) {
    for (int64_t k = s.begin; k < s.end; ++k) {
      ++unigram[b[k]];
      if (k > s.begin) {
        ++pairs[b[k - 1] * 256 + b[k]];
        ++from[b[k - 1]];
      }
    }
    n += s.size();
  }
  double unigram_nll = 0, bigram_nll = 0;
  int64_t predicted = 0;
  for (const TextSpan& s : corpus.val()->spans()) {
    for (int64_t k = s.begin + 1; k < s.end; ++k) {
      const uint8_t a = b[k - 1], x = b[k];
      unigram_nll -= std::log((static_cast<double>(unigram[x]) + alpha) /
                              (static_cast<double>(n) + 256 * alpha));
      bigram_nll -= std::log((static_cast<double>(pairs[a * 256 + x]) + alpha) /
                             (static_cast<double>(from[a]) + 256 * alpha));
      ++predicted;
    }
  }
  // predicted >= 1: the validation split holds a span of context + 1 >= 2 bytes.
  return {unigram_nll / static_cast<double>(predicted), bigram_nll / static_cast<double>(predicted),
          alpha};
}

}  // namespace sinter::data
