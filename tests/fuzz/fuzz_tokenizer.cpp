// libFuzzer target: an input is a tokenizer.json for BpeTokenizer::load. It loads, or a
// sinter::Error names the file; when loaded, a text of every byte and of its special tokens
// decodes back from its ids, and every id is in the vocabulary.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "sinter/data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sinter;
  const std::string path = fuzz::write_file("tokenizer.json", data, size);
  data::BpeTokenizer bpe;
  if (!fuzz::reads_or_names_the_file(path, [&] { bpe = data::BpeTokenizer::load(path); })) {
    return 0;
  }
  std::string text;
  for (int b = 0; b < 256; ++b) text += static_cast<char>(b);
  text += " the quick brown fox";
  for (const auto& [name, id] : bpe.special_tokens()) text += name + "x";
  const std::vector<int32_t> ids = bpe.encode(text);
  for (const int32_t id : ids) {
    if (id < 0 || id >= bpe.vocab_size()) fuzz::fail("an id outside the vocabulary");
  }
  if (bpe.decode(ids) != text) fuzz::fail("decode(encode(text)) differs from the text");
  return 0;
}
