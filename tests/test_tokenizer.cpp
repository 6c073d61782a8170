// The byte-level BPE tokenizer: pre-tokenization against Note [bpe pre-tokenization]'s examples,
// training worked by hand, exact round trips of any bytes, special tokens, tokenizer.json saved
// and loaded, and the errors. tests/scripts/check_tokenizer_hf.py checks the file against the
// `tokenizers` package.
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "sinter/data/tokenizer.h"
#include "test_util.h"

namespace sinter {
namespace {

using data::BpeTokenizer;
using testing::expect_error;

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  for (const std::string_view w : data::bpe_pretokenize(s)) out.emplace_back(w);
  return out;
}

using Words = std::vector<std::string>;

TEST(BpePretokenize, CutsAsTheNoteSays) {
  EXPECT_EQ(words("a  \n b"), (Words{"a", "  \n", " b"}));
  EXPECT_EQ(words("a \nb"), (Words{"a", " ", "\n", "b"}));
  EXPECT_EQ(words("Hello, world!"), (Words{"Hello", ",", " world", "!"}));
  EXPECT_EQ(words("pi 3.14 x2"), (Words{"pi", " 3", ".", "14", " x", "2"}));
  EXPECT_EQ(words("  two"), (Words{" ", " two"}));
  EXPECT_EQ(words("end  "), (Words{"end", "  "}));
  EXPECT_EQ(words("\tx"), (Words{"\t", "x"}));
  EXPECT_EQ(words(" ..."), (Words{" ..."}));
  EXPECT_EQ(words("caf\xc3\xa9!"), (Words{"caf\xc3\xa9", "!"}));  // UTF-8 bytes are letters
  EXPECT_EQ(words(""), Words{});
  // The words cover the text, in order.
  const std::string text = "It's 9 o'clock\r\n\r\n\tand\x01 all's   well.\n";
  std::string joined;
  for (const std::string& w : words(text)) joined += w;
  EXPECT_EQ(joined, text);
}

TEST(BpeTokenizer, BytesAloneAreTheByteTokenizer) {
  const BpeTokenizer bytes;
  EXPECT_EQ(bytes.vocab_size(), 256);
  EXPECT_EQ(bytes.num_merges(), 0);
  const std::string s("\x00\xff z", 4);
  EXPECT_EQ(bytes.encode(s), (std::vector<int32_t>{0, 255, 32, 122}));
  EXPECT_EQ(bytes.decode(bytes.encode(s)), s);
  EXPECT_EQ(bytes.special_id("<|endoftext|>"), -1);
}

TEST(BpeTokenizer, TrainsTheMostFrequentPairsFirst) {
  // Words "ab" x1, " ab" x2, " cd" x1: (a, b) occurs 3 times, then (" ", ab) twice, then
  // (" ", c) and (c, d) once each, the tie going to the smaller ids (" " = 32 before c = 99).
  const BpeTokenizer t =
      BpeTokenizer::train("ab ab ab cd", {.vocab_size = 261, .min_frequency = 1});
  ASSERT_EQ(t.vocab_size(), 261);
  EXPECT_EQ(t.token(256), "ab");
  EXPECT_EQ(t.token(257), " ab");
  EXPECT_EQ(t.token(258), " c");
  EXPECT_EQ(t.token(259), " cd");
  EXPECT_EQ(t.token(260), "<|endoftext|>");
  EXPECT_EQ(t.special_id("<|endoftext|>"), 260);
  EXPECT_EQ(t.encode("ab ab cd<|endoftext|>x"), (std::vector<int32_t>{256, 257, 259, 260, 'x'}));
  // min_frequency 2 stops after the two pairs that occur twice: the vocabulary is smaller.
  const BpeTokenizer t2 = BpeTokenizer::train("ab ab ab cd", {.vocab_size = 261});
  EXPECT_EQ(t2.num_merges(), 2);
  EXPECT_EQ(t2.vocab_size(), 259);
  EXPECT_EQ(t2.encode(" cd"), (std::vector<int32_t>{' ', 'c', 'd'}));
  // Special tokens in the training text are cut out, never merged from.
  const BpeTokenizer t3 = BpeTokenizer::train("<|endoftext|><|endoftext|><|endoftext|>",
                                              {.vocab_size = 300, .min_frequency = 1});
  EXPECT_EQ(t3.num_merges(), 0);
}

TEST(BpeTokenizer, RoundTripsAnyBytes) {
  std::mt19937 rng(7);
  std::string corpus;
  const char* pieces[] = {"the ", "cat ", "sat ", "on ", "mat", ".\n", "  ", "\xc3\xa9", "42"};
  for (int i = 0; i < 4000; ++i) corpus += pieces[rng() % 9];
  const BpeTokenizer t = BpeTokenizer::train(corpus, {.vocab_size = 400});
  EXPECT_GT(t.num_merges(), 20);
  // The corpus shrinks to fewer tokens than bytes, and comes back whole.
  const std::vector<int32_t> ids = t.encode(corpus);
  EXPECT_LT(ids.size() * 3, corpus.size());
  EXPECT_EQ(t.decode(ids), corpus);
  // Random bytes (invalid UTF-8, NUL, pieces of special tokens) come back whole.
  for (int trial = 0; trial < 50; ++trial) {
    std::string s;
    const size_t n = rng() % 300;
    for (size_t i = 0; i < n; ++i) {
      s += rng() % 4 == 0    ? std::string(pieces[rng() % 9])
           : rng() % 20 == 0 ? std::string("<|endoftext|") + ">"
                             : std::string(1, static_cast<char>(rng() & 0xFF));
    }
    EXPECT_EQ(t.decode(t.encode(s)), s) << trial;
  }
}

TEST(BpeTokenizer, SavesAndLoadsTokenizerJson) {
  testing::TempDir dir;
  const std::string corpus = "low lower lowest newer newest wider widest <|endoftext|> low low";
  const BpeTokenizer t = BpeTokenizer::train(
      corpus,
      {.vocab_size = 290, .special_tokens = {"<|endoftext|>", "<|pad|>"}, .min_frequency = 1});
  const std::string path = dir.file("tokenizer.json");
  SINTER_REQUIRE_BUILT_WITH("nlohmann_json", [&] { BpeTokenizer::load(path); });
  t.save(path);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);  // no temporary file left
  const BpeTokenizer back = BpeTokenizer::load(path);
  ASSERT_EQ(back.vocab_size(), t.vocab_size());
  EXPECT_EQ(back.num_merges(), t.num_merges());
  for (int32_t id = 0; id < t.vocab_size(); ++id) EXPECT_EQ(back.token(id), t.token(id)) << id;
  EXPECT_EQ(back.special_id("<|pad|>"), t.special_id("<|pad|>"));
  const std::string probe = "the lowest and widest<|pad|> newer\n\x01\xff";
  EXPECT_EQ(back.encode(probe), t.encode(probe));
}

TEST(BpeTokenizer, BadInputIsAClearError) {
  expect_error(
      [] { BpeTokenizer::train("abc", {.vocab_size = 256}); },
      {"BpeTokenizer::train", "vocab_size 256", "256 bytes and 1 special", "at least 257"});
  expect_error(
      [] {
        BpeTokenizer::train("abc", {.special_tokens = {"<s>", "<s>"}});
      },
      {"BpeTokenizer::train", "\"<s>\"", "repeated"});
  expect_error([] { BpeTokenizer::train("abc", {.min_frequency = 0}); },
               {"BpeTokenizer::train", "min_frequency", "0"});
  const BpeTokenizer bytes;
  expect_error(
      [&] {
        bytes.decode(std::vector<int32_t>{3, 256});
      },
      {"BpeTokenizer::decode", "256", "0 to 255"});
  testing::TempDir dir;
  SINTER_REQUIRE_BUILT_WITH("nlohmann_json", [&] { BpeTokenizer::load(dir.file("x")); });
  expect_error([&] { BpeTokenizer::load(dir.file("missing.json")); },
               {"BpeTokenizer::load", "cannot open", "missing.json"});
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  expect_error([&] { BpeTokenizer::load(write("bad.json", "{\"model\": [1, 2")); },
               {"BpeTokenizer::load", "bad.json", "not JSON"});
  expect_error([&] { BpeTokenizer::load(write("wp.json", R"({"model": {"type": "WordPiece"}})")); },
               {"BpeTokenizer::load", "wp.json", "not a BPE", "WordPiece"});
  // GPT-2's own pre-tokenizer (a ByteLevel with its Unicode expression) cuts words otherwise.
  expect_error(
      [&] {
        BpeTokenizer::load(
            write("gpt2.json", R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
            "decoder": {"type": "ByteLevel"}})"));
      },
      {"BpeTokenizer::load", "gpt2.json", "pre-tokenizer"});
  // A saved file with a byte taken out of the vocabulary, and with a merge of unknown tokens.
  const std::string good = dir.file("good.json");
  BpeTokenizer::train("aaa bbb aaa", {.vocab_size = 260, .min_frequency = 1}).save(good);
  std::string text;
  {
    std::ifstream in(good);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string no_z = text;
  no_z.replace(no_z.find("\"z\": 122"), 8, "\"zz\": 122");
  expect_error([&] { BpeTokenizer::load(write("no_z.json", no_z)); },
               {"BpeTokenizer::load", "no_z.json", "lacks the byte 122"});
  std::string bad_merge = text;
  bad_merge.replace(bad_merge.find("\"a a\""), 5, "\"a q\"");
  expect_error([&] { BpeTokenizer::load(write("merge.json", bad_merge)); },
               {"BpeTokenizer::load", "merge 0", "not in the vocabulary"});
}

}  // namespace
}  // namespace sinter
