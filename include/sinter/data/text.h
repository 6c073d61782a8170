// Byte-level text for character-level language models: a corpus read from files and folders, split
// deterministically into training and validation text, random windows of it as Datasets, and the
// unigram and bigram baselines a model's loss should beat.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sinter/data/dataset.h"

namespace sinter::data {

// Debian's `fortunes` package: about 2.5 MB of English in /usr/share/games/fortunes.
std::string default_text_corpus();

struct TextCorpusOptions {
  int64_t context = 256;  // T: the bytes a window feeds the model; it holds T + 1
  // The share of the corpus held out for validation, in (0, 1), taken in millionths
  // (Note [text split]).
  double val_fraction = 0.1;
  int64_t chunk_size = 4096;  // the bytes of each split chunk (Note [text split])
  uint64_t seed = 0;          // draws the window positions (Note [text windows])
  // Examples per epoch of train() and val(); 0: the split's bytes / context, rounded down.
  int64_t train_windows = 0;
  int64_t val_windows = 0;
};

// Bytes [begin, end) of a corpus.
struct TextSpan {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Note [text split]
// The corpus is cut into chunks of chunk_size bytes (the last may be shorter). With val_fraction
// rounded to m millionths, chunk c (from 0) goes to validation when floor((c + 1) * m / 10^6) >
// floor(c * m / 10^6), so the first n chunks hold floor(n * m / 10^6) validation chunks: for 0.1,
// chunks 9, 19, 29, ... Validation text thus comes from all over the corpus, not from its end
// (which would be the last few source files), and the split depends on nothing but the corpus and
// these two options. Each split is its chunks' runs of adjacent chunks, as spans of the corpus.

// Note [text windows]
// Example i of a split is the window of T + 1 bytes at corpus offset p: input = bytes [p, p + T),
// target = bytes [p + 1, p + T + 1), both i64 of shape (T). A window never leaves one span of its
// split, so it never runs across a place where the split joins text that is not adjacent in the
// corpus (files are concatenated in order, so a window may run from one file into the next). Of
// the W windows that fit in the split's spans (the sum of size - T over spans longer than T), the
// window of example i is number randint_i64(philox4x32_10(counter (i, i >> 32, split, 0), key
// seed), 0, W) in corpus order, split being 0 for training and 1 for validation (Note [philox
// streams]): it depends only on (seed, split, i), and every window is equally likely.

// One split of a TextCorpus as a Dataset of windows (Note [text windows]), made by
// TextCorpus::train() and val(); it shares the corpus bytes, so it may outlive the corpus.
class TextWindows : public Dataset {
 public:
  int64_t size() const override { return windows_; }
  Example get(int64_t index) const override;
  // input and target (B, T), filled in place from the corpus bytes.
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  // The corpus offset p of example `index`'s window.
  int64_t position(int64_t index) const;
  int64_t context() const { return context_; }
  // The split's runs of adjacent corpus text, in corpus order.
  const std::vector<TextSpan>& spans() const { return spans_; }
  // The bytes of all its spans.
  int64_t num_bytes() const { return num_bytes_; }

 private:
  friend class TextCorpus;
  // source: the corpus's paths, for the error when no window fits.
  TextWindows(std::shared_ptr<const std::vector<uint8_t>> bytes, std::vector<TextSpan> spans,
              const char* name, uint32_t split, int64_t context, int64_t windows, uint64_t seed,
              const std::vector<std::string>& source);
  // Writes the window's input to in[0, T) and its target to target[0, T).
  void fill(int64_t index, int64_t* in, int64_t* target) const;

  std::shared_ptr<const std::vector<uint8_t>> bytes_;
  std::vector<TextSpan> spans_;
  // window_ends_[s]: the windows in spans 0..s, so that span s holds window numbers
  // [window_ends_[s - 1], window_ends_[s]).
  std::vector<int64_t> window_ends_;
  const char* name_;
  uint32_t split_;
  int64_t context_;
  int64_t windows_;
  uint64_t seed_;
  int64_t num_bytes_ = 0;
};

// The bytes of `paths`, concatenated in the order given. A file is read whatever its name; a folder
// is walked recursively, its entries in order of name (bytewise), skipping hidden entries (names
// starting with '.'), symbolic links, anything that is neither file nor folder, and files ending in
// .dat (fortune's index files) or .u8 (its links to the same text).
class TextCorpus {
 public:
  explicit TextCorpus(const std::vector<std::string>& paths, const TextCorpusOptions& options = {});

  const std::vector<uint8_t>& bytes() const { return *bytes_; }
  // The files read, in order.
  const std::vector<std::string>& files() const { return files_; }
  const TextCorpusOptions& options() const { return options_; }
  std::shared_ptr<const TextWindows> train() const { return train_; }
  std::shared_ptr<const TextWindows> val() const { return val_; }

 private:
  TextCorpusOptions options_;
  std::shared_ptr<const std::vector<uint8_t>> bytes_;
  std::vector<std::string> files_;
  std::shared_ptr<const TextWindows> train_, val_;
};

// Cross-entropies, in nats per byte, of the validation text under byte models estimated from the
// training text with add-alpha smoothing, so that no byte has probability 0:
//   unigram: p(b) = (n(b) + alpha) / (N + 256 alpha), n counting the training bytes, N of them;
//   bigram:  p(b | a) = (n(a, b) + alpha) / (n(a, *) + 256 alpha), n(a, b) counting the pairs of
//            adjacent bytes inside training spans.
// Both average over the same validation bytes: every byte but the first of each span, i.e. the
// bytes a model predicts from at least one byte of context.
struct ByteBaselines {
  double unigram = 0;
  double bigram = 0;
  double alpha = 0;
};
ByteBaselines byte_baselines(const TextCorpus& corpus, double alpha = 0.5);

}  // namespace sinter::data
