// Trains a BPE tokenizer on a corpus and writes it as tokenizer.json with the texts it encoded and
// their ids (cases.json), for tests/scripts/check_tokenizer_hf.py to encode again with the
// `tokenizers` package. The texts: hand-written edge cases of the pre-tokenization (white space
// runs, digits, punctuation, UTF-8 of several scripts, control bytes, special tokens) and lines of
// the corpus, one by one and a long run of them together.
//   bpe_reference_dump CORPUS VOCAB_SIZE OUT_DIR
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "internal/json_text.h"
#include "sinter/data/text.h"
#include "sinter/data/tokenizer.h"

int main(int argc, char** argv) {
  using namespace sinter;
  if (argc != 4) {
    std::fprintf(stderr, "usage: bpe_reference_dump CORPUS VOCAB_SIZE OUT_DIR\n");
    return 2;
  }
  try {
    const data::TextCorpus corpus({argv[1]}, {.context = 8});
    const std::string text(corpus.bytes().begin(), corpus.bytes().end());
    const data::BpeTokenizer bpe =
        data::BpeTokenizer::train(text, {.vocab_size = std::atoll(argv[2])});
    const std::string dir = argv[3];
    bpe.save(dir + "/tokenizer.json");

    std::vector<std::string> cases = {
        "Hello, world!",
        "  leading spaces and trailing   ",
        "tabs\tand\nnewlines\n\n\nend",
        "a  \n b",
        "a \nb",
        " \t \r\n\r\nx  ",
        "digits 12345 and 3.14159, 1,000,000",
        "caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 \xe2\x80\x9cquoted\xe2\x80\x9d",
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae "
        "\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
        "emoji \xf0\x9f\x8e\x89\xf0\x9f\x8e\x89!",
        "<|endoftext|>between<|endoftext|><|endoftext|> tokens",
        "x<|endoftext|",
        std::string("control \x01\x02 \x7f and \0 nul", 22),
        "\v\f vertical\v tab",
        "don't won't it's we'll",
        "((brackets)) [and] {braces} ...!!!???",
        "",
    };
    // Lines of the corpus (whole lines, so valid UTF-8 where the corpus is).
    size_t at = 0, lines = 0, long_end = 0;
    while (at < text.size() && lines < 400) {
      const size_t nl = text.find('\n', at + 1);
      const size_t end = nl == std::string::npos ? text.size() : nl;
      if (lines % 4 == 0) cases.push_back(text.substr(at, end - at));
      at = end;
      ++lines;
      if (at < 200000) long_end = at;
    }
    cases.push_back(text.substr(0, long_end));

    std::ofstream out(dir + "/cases.json", std::ios::binary);
    out << "[\n";
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::vector<int32_t> ids = bpe.encode(cases[i]);
      if (bpe.decode(ids) != cases[i]) {
        std::fprintf(stderr, "case %zu does not decode to itself\n", i);
        return 1;
      }
      out << (i ? ",\n" : "") << "{\"text\": " << detail::json_string(cases[i]) << ", \"ids\": [";
      for (size_t k = 0; k < ids.size(); ++k) out << (k ? ", " : "") << ids[k];
      out << "]}";
    }
    out << "\n]\n";
    std::printf("%lld tokens, %lld merges, %zu cases\n", static_cast<long long>(bpe.vocab_size()),
                static_cast<long long>(bpe.num_merges()), cases.size());
    return out.good() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bpe_reference_dump: %s\n", e.what());
    return 1;
  }
}
