// The byte-level text data: reading files and folders (order and exclusions), the chunked
// train/validation split, the windows drawn from each split and their batches, the unigram and
// bigram baselines against hand-computed values, every error, and the installed fortunes corpus.
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sinter/data.h"
#include "test_util.h"

namespace sinter {
namespace {

namespace fs = std::filesystem;
using data::ByteBaselines;
using data::TextCorpus;
using data::TextCorpusOptions;
using data::TextSpan;
using data::TextWindows;
using ::sinter::testing::expect_error;
using ::sinter::testing::TempDir;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

// n bytes of every value, from a fixed generator.
std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(gen() & 0xff);
  return s;
}

// A corpus of one file holding `text`.
TextCorpus corpus_of(const TempDir& dir, const std::string& text, const TextCorpusOptions& o) {
  write_text(dir.file("corpus.txt"), text);
  return TextCorpus({dir.file("corpus.txt")}, o);
}

std::vector<std::pair<int64_t, int64_t>> pairs(const std::vector<TextSpan>& spans) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const TextSpan& s : spans) out.emplace_back(s.begin, s.end);
  return out;
}

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

std::vector<int64_t> corpus_i64(const TextCorpus& c, int64_t begin, int64_t end) {
  return std::vector<int64_t>(c.bytes().begin() + begin, c.bytes().begin() + end);
}

TEST(TextCorpus, ReadsFoldersInNameOrderSkippingIndexFilesLinksAndHiddenEntries) {
  TempDir dir;
  const fs::path root = dir.path() / "texts";
  fs::create_directories(root / "sub");
  fs::create_directories(root / ".git");
  write_text((root / "b.txt").string(), "BBB");
  write_text((root / "a.txt").string(), "AAA");
  write_text((root / "sub" / "c").string(), "CC");
  write_text((root / "a.dat").string(), "index");
  write_text((root / "a.u8").string(), "utf8 copy");
  write_text((root / ".hidden").string(), "hidden");
  write_text((root / ".git" / "HEAD").string(), "hidden folder");
  fs::create_symlink(root / "b.txt", root / "link");
  fs::create_directory_symlink(root / "sub", root / "sublink");
  ASSERT_EQ(::mkfifo((root / "pipe").c_str(), 0600), 0);
  // A file named explicitly is read whatever its name.
  write_text(dir.file("extra.dat"), "DD");

  TextCorpus c({root.string(), dir.file("extra.dat")},
               {.context = 1, .val_fraction = 0.5, .chunk_size = 2});
  EXPECT_EQ(std::string(c.bytes().begin(), c.bytes().end()), "AAABBBCCDD");
  EXPECT_EQ(c.files(),
            (std::vector<std::string>{(root / "a.txt").string(), (root / "b.txt").string(),
                                      (root / "sub" / "c").string(), dir.file("extra.dat")}));
}

TEST(TextCorpus, SplitTakesEveryKthChunkForValidation) {
  TempDir dir;
  // 0.1 of 100-byte chunks: chunk 9 of 11 (the last one 37 bytes).
  TextCorpus tenth = corpus_of(dir, random_bytes(1037, 1), {.context = 8, .chunk_size = 100});
  EXPECT_EQ(pairs(tenth.val()->spans()), (Pairs{{900, 1000}}));
  EXPECT_EQ(pairs(tenth.train()->spans()), (Pairs{{0, 900}, {1000, 1037}}));
  EXPECT_EQ(tenth.train()->num_bytes(), 937);
  EXPECT_EQ(tenth.val()->num_bytes(), 100);

  // 0.25: chunks 3 and 7; 0.7: 7 of the first 10, adjacent ones merged into one run.
  const std::string text = random_bytes(100, 2);
  TextCorpus quarter = corpus_of(dir, text, {.context = 2, .val_fraction = 0.25, .chunk_size = 10});
  EXPECT_EQ(pairs(quarter.val()->spans()), (Pairs{{30, 40}, {70, 80}}));
  EXPECT_EQ(pairs(quarter.train()->spans()), (Pairs{{0, 30}, {40, 70}, {80, 100}}));
  TextCorpus most = corpus_of(dir, text, {.context = 2, .val_fraction = 0.7, .chunk_size = 10});
  EXPECT_EQ(pairs(most.val()->spans()), (Pairs{{10, 30}, {40, 60}, {70, 100}}));
  EXPECT_EQ(pairs(most.train()->spans()), (Pairs{{0, 10}, {30, 40}, {60, 70}}));
}

TEST(TextCorpus, SplitsAreDisjointCoverTheCorpusAndAreDeterministic) {
  TempDir dir;
  const std::string text = random_bytes(20000, 3);
  const TextCorpusOptions o = {.context = 32, .val_fraction = 0.15, .chunk_size = 300};
  TextCorpus a = corpus_of(dir, text, o);
  TextCorpus b = corpus_of(dir, text, o);
  EXPECT_EQ(pairs(a.train()->spans()), pairs(b.train()->spans()));
  EXPECT_EQ(pairs(a.val()->spans()), pairs(b.val()->spans()));

  // Every byte in exactly one split: the spans of both, in order, tile [0, n).
  std::map<int64_t, int64_t> all;
  for (const auto* split : {a.train().get(), a.val().get()}) {
    for (const TextSpan& s : split->spans()) {
      ASSERT_GT(s.size(), 0);
      ASSERT_TRUE(all.emplace(s.begin, s.end).second) << "two spans start at " << s.begin;
    }
  }
  int64_t at = 0;
  for (const auto& [begin, end] : all) {
    EXPECT_EQ(begin, at) << "a gap or an overlap at " << at;
    at = end;
  }
  EXPECT_EQ(at, static_cast<int64_t>(text.size()));
  EXPECT_EQ(a.train()->num_bytes() + a.val()->num_bytes(), static_cast<int64_t>(text.size()));
  // 67 chunks, floor(67 * 0.15) = 10 of them held out, the last (200 bytes) among them.
  EXPECT_EQ(a.val()->num_bytes(), 9 * 300 + 200);
}

TEST(TextWindows, WindowsAreTheCorpusBytesAtTheDrawnPositionInsideOneSpan) {
  TempDir dir;
  const int64_t t = 16;
  TextCorpus c = corpus_of(dir, random_bytes(5000, 4),
                           {.context = t, .val_fraction = 0.3, .chunk_size = 64, .seed = 7});
  for (const auto& split : {c.train(), c.val()}) {
    ASSERT_EQ(split->context(), t);
    ASSERT_EQ(split->size(), split->num_bytes() / t);
    for (int64_t i = 0; i < split->size(); ++i) {
      const int64_t p = split->position(i);
      bool inside = false;
      for (const TextSpan& s : split->spans()) inside |= s.begin <= p && p + t + 1 <= s.end;
      ASSERT_TRUE(inside) << "window " << i << " at " << p << " leaves its split's spans";
      const data::Example e = split->get(i);
      ASSERT_EQ(e.input.dtype(), DType::i64);
      ASSERT_EQ(e.input.shape(), (Shape{t}));
      ASSERT_EQ(e.target.shape(), (Shape{t}));
      ASSERT_EQ(e.input.to_vector<int64_t>(), corpus_i64(c, p, p + t)) << "window " << i;
      ASSERT_EQ(e.target.to_vector<int64_t>(), corpus_i64(c, p + 1, p + t + 1)) << "window " << i;
    }
  }
}

TEST(TextWindows, EveryWindowThatFitsIsDrawnAboutEquallyOften) {
  TempDir dir;
  // 0.5 of 10-byte chunks of 40 bytes: training spans [0, 10) and [20, 30), 5 windows of 6 bytes
  // in each: positions 0..4 and 20..24.
  TextCorpus c = corpus_of(dir, random_bytes(40, 5),
                           {.context = 5,
                            .val_fraction = 0.5,
                            .chunk_size = 10,
                            .seed = ::sinter::testing::fresh_seed(),
                            .train_windows = 4000});
  SCOPED_TRACE("seed " + std::to_string(c.options().seed));
  std::map<int64_t, int64_t> hits;
  for (int64_t i = 0; i < c.train()->size(); ++i) ++hits[c.train()->position(i)];
  std::vector<int64_t> drawn;
  for (const auto& [p, n] : hits) {
    drawn.push_back(p);
    // 400 expected; 5 standard deviations either way.
    EXPECT_GT(n, 300) << "position " << p;
    EXPECT_LT(n, 500) << "position " << p;
  }
  EXPECT_EQ(drawn, (std::vector<int64_t>{0, 1, 2, 3, 4, 20, 21, 22, 23, 24}));
}

TEST(TextWindows, PositionsDependOnlyOnSeedSplitAndIndex) {
  TempDir dir;
  const std::string text = random_bytes(30000, 6);
  const TextCorpusOptions o = {.context = 8, .val_fraction = 0.5, .chunk_size = 1000, .seed = 11};
  TextCorpus a = corpus_of(dir, text, o);
  TextCorpus b = corpus_of(dir, text, o);
  TextCorpusOptions reseeded = o;
  reseeded.seed = 12;
  TextCorpus other = corpus_of(dir, text, reseeded);
  // The two splits have the same shape here, so their windows differ only by their streams.
  ASSERT_EQ(a.train()->num_bytes(), a.val()->num_bytes());
  int64_t same_split_offset = 0, same_seed = 0;
  for (int64_t i = 0; i < a.train()->size(); ++i) {
    EXPECT_EQ(a.train()->position(i), b.train()->position(i));
    EXPECT_EQ(a.val()->position(i), b.val()->position(i));
    same_split_offset += a.train()->position(i) + 1000 == a.val()->position(i);
    same_seed += a.train()->position(i) == other.train()->position(i);
  }
  // 1875 windows, each equal by chance with probability 1 / 14880 (15 spans of 992 windows).
  EXPECT_LE(same_split_offset, 5);
  EXPECT_LE(same_seed, 5);
}

TEST(TextWindows, GetBatchStacksGetAndFeedsTheDataLoader) {
  TempDir dir;
  TextCorpus c = corpus_of(dir, random_bytes(3000, 7),
                           {.context = 12, .chunk_size = 100, .seed = 3, .val_windows = 9});
  const std::vector<int64_t> indices = {3, 0, 3, 7, 200};
  const data::Batch batch = c.train()->get_batch(indices);
  const data::Batch stacked = c.train()->data::Dataset::get_batch(indices);
  EXPECT_EQ(batch.input.shape(), (Shape{5, 12}));
  EXPECT_EQ(batch.target.shape(), (Shape{5, 12}));
  EXPECT_EQ(batch.input.dtype(), DType::i64);
  EXPECT_EQ(batch.input.to_vector<int64_t>(), stacked.input.to_vector<int64_t>());
  EXPECT_EQ(batch.target.to_vector<int64_t>(), stacked.target.to_vector<int64_t>());

  // val_windows sets the epoch's size; the default is the split's bytes / context.
  EXPECT_EQ(c.val()->size(), 9);
  EXPECT_EQ(c.train()->size(), 2700 / 12);
  data::DataLoader loader(c.val(), {.batch_size = 4, .shuffle = true, .seed = 1});
  int64_t rows = 0;
  for (const data::Batch& b : loader) {
    EXPECT_EQ(b.input.size(1), 12);
    // Each row's target is its input moved one byte on.
    const std::vector<int64_t> in = b.input.to_vector<int64_t>();
    const std::vector<int64_t> target = b.target.to_vector<int64_t>();
    for (int64_t r = 0; r < b.input.size(0); ++r) {
      for (int64_t j = 0; j + 1 < 12; ++j) EXPECT_EQ(in[r * 12 + j + 1], target[r * 12 + j]);
    }
    rows += b.input.size(0);
  }
  EXPECT_EQ(rows, 9);
}

TEST(ByteBaselines, MatchHandComputedValues) {
  TempDir dir;
  const TextCorpusOptions o = {.context = 1, .val_fraction = 0.5, .chunk_size = 4};
  // Training "aabb", validation "abba": it predicts b after a, b after b, a after b.
  TextCorpus c = corpus_of(dir, "aabbabba", o);
  for (double alpha : {0.5, 1.0}) {
    SCOPED_TRACE("alpha " + std::to_string(alpha));
    const ByteBaselines got = data::byte_baselines(c, alpha);
    EXPECT_EQ(got.alpha, alpha);
    // Unigram: n(a) = n(b) = 2 of N = 4.
    EXPECT_NEAR(got.unigram, -std::log((2 + alpha) / (4 + 256 * alpha)), 1e-12);
    // Bigram: training pairs aa, ab, bb; n(a, *) = 2, n(b, *) = 1, n(b, a) = 0.
    const double b_after_a = (1 + alpha) / (2 + 256 * alpha);
    const double b_after_b = (1 + alpha) / (1 + 256 * alpha);
    const double a_after_b = alpha / (1 + 256 * alpha);
    EXPECT_NEAR(got.bigram, -(std::log(b_after_a) + std::log(b_after_b) + std::log(a_after_b)) / 3,
                1e-12);
  }
  // Validation bytes never seen in training keep a finite loss: "aaaa" then "qrst".
  TextCorpus unseen = corpus_of(dir, "aaaaqrst", o);
  const ByteBaselines u = data::byte_baselines(unseen, 0.5);
  EXPECT_NEAR(u.unigram, std::log((4 + 128.0) / 0.5), 1e-12);
  EXPECT_NEAR(u.bigram, std::log(256.0), 1e-12);
}

TEST(ByteBaselines, CountNoPairAcrossAJoinOfTheTrainingSplit) {
  TempDir dir;
  // Chunks "ab" (training), "bc" (validation), "cd" (training): the training text joins b to c,
  // which the bigram model must not count, so c after b is unseen: p = alpha / (256 alpha).
  TextCorpus c = corpus_of(dir, "abbccd", {.context = 1, .val_fraction = 0.5, .chunk_size = 2});
  ASSERT_EQ(pairs(c.train()->spans()), (Pairs{{0, 2}, {4, 6}}));
  const ByteBaselines got = data::byte_baselines(c, 1.0);
  EXPECT_NEAR(got.bigram, std::log(256.0), 1e-12);
  EXPECT_NEAR(got.unigram, -std::log(2.0 / 260.0), 1e-12);
}

TEST(TextCorpus, Errors) {
  TempDir dir;
  write_text(dir.file("text.txt"), random_bytes(100, 8));
  const std::vector<std::string> text = {dir.file("text.txt")};

  expect_error([&] { TextCorpus({dir.file("missing")}); }, {"TextCorpus", "missing", "not exist"});
  ASSERT_EQ(::mkfifo(dir.file("pipe").c_str(), 0600), 0);
  expect_error([&] { TextCorpus({dir.file("pipe")}); },
               {"TextCorpus", "pipe", "neither a file nor a folder"});
  expect_error([] { TextCorpus(std::vector<std::string>{}); }, {"TextCorpus", "no paths"});
  fs::create_directories(dir.path() / "empty");
  write_text(dir.file("empty/index.dat"), "not text");
  write_text(dir.file("empty/blank.txt"), "");
  expect_error([&] { TextCorpus({dir.file("empty")}); },
               {"TextCorpus", "no text in", "empty", "1 files read"});

  // A split with no room for context + 1 bytes: the 10-byte validation chunk for context 10, no
  // validation chunk at all in 5 chunks at 0.1, a 2-byte training chunk for context 2.
  expect_error([&] { TextCorpus(text, {.context = 10, .chunk_size = 10}); },
               {"validation split of", text[0], "(10 bytes in 1 runs", "context + 1 = 11"});
  expect_error([&] { TextCorpus(text, {.context = 2, .chunk_size = 20}); },
               {"validation split of", text[0], "(0 bytes in 0 runs", "context + 1 = 3"});
  expect_error([&] { TextCorpus(text, {.context = 2, .val_fraction = 0.5, .chunk_size = 2}); },
               {"training split of", text[0], "longest 2 bytes", "context + 1 = 3"});

  // Bad options.
  expect_error([&] { TextCorpus(text, {.context = 0}); }, {"context must be >= 1", "0"});
  expect_error([&] { TextCorpus(text, {.chunk_size = -4}); }, {"chunk_size must be >= 1", "-4"});
  for (double f : {0.0, 1.0, -0.25, 1e-9, std::nan("")}) {
    expect_error([&] { TextCorpus(text, {.val_fraction = f}); },
                 {"val_fraction must be in (0, 1)"});
  }
  expect_error([&] { TextCorpus(text, {.train_windows = -1}); }, {"train_windows", "-1"});
  expect_error([&] { TextCorpus(text, {.val_windows = -2}); }, {"val_windows", "-2"});

  // Indices out of range.
  TextCorpus c(text, {.context = 4, .chunk_size = 10});
  const int64_t n = c.train()->size();
  expect_error([&] { c.train()->get(n); },
               {"TextWindows: index " + std::to_string(n), "training split"});
  expect_error([&] { c.val()->get(-1); }, {"TextWindows: index -1", "validation split"});
  expect_error([&] { c.train()->get_batch({0, n + 3}); }, {std::to_string(n + 3), "out of range"});
  expect_error([&] { c.train()->get_batch({}); }, {"TextWindows::get_batch: no indices"});
  expect_error([&] { c.val()->position(c.val()->size()); }, {"out of range"});

  for (double alpha : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    expect_error([&] { data::byte_baselines(c, alpha); },
                 {"byte_baselines: alpha must be finite and > 0"});
  }
}

TEST(TextCorpus, Fortunes) {
  const std::string root = data::default_text_corpus();
  if (!fs::is_directory(root)) {
    GTEST_SKIP() << root << " is missing (Debian package fortunes; scripts/test.sh installs it)";
  }
  TextCorpus c({root});
  EXPECT_GT(c.bytes().size(), 2'000'000u);
  EXPECT_GT(c.files().size(), 10u);
  for (const std::string& f : c.files()) {
    EXPECT_FALSE(f.ends_with(".dat") || f.ends_with(".u8")) << f;
  }
  const double held_out = static_cast<double>(c.val()->num_bytes()) / c.bytes().size();
  EXPECT_NEAR(held_out, 0.1, 0.005);
  const ByteBaselines b = data::byte_baselines(c);
  std::printf("fortunes: %zu bytes in %zu files; unigram %.4f, bigram %.4f nats/byte\n",
              c.bytes().size(), c.files().size(), b.unigram, b.bigram);
  // English: about 3 nats per byte from letter frequencies, well under log 256 = 5.55.
  EXPECT_GT(b.unigram, 2.5);
  EXPECT_LT(b.unigram, 3.5);
  EXPECT_LT(b.bigram, b.unigram - 0.3);
  const data::Batch batch = c.train()->get_batch({0, 1, 2});
  EXPECT_EQ(batch.input.shape(), (Shape{3, c.options().context}));
}

}  // namespace
}  // namespace sinter
