// GPT-2's byte-level spelling of token bytes as text, which tokenizer.json (src/data/tokenizer.cpp)
// and a GGUF file's vocabulary (src/io/gguf.cpp) both write.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace sinter::detail {

// Note [byte-level characters]
// tokenizer.json spells a token's bytes as text: byte b is the character U+b where b is a printable
// Latin-1 character ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF), and otherwise U+0100 + n for the
// n-th of the remaining bytes in byte order (space is U+0120 'Ġ', newline U+010A 'Ċ'), as GPT-2's
// byte-level BPE and the `tokenizers` package's ByteLevel spell them.

// The character of each byte.
const std::array<uint32_t, 256>& byte_to_character();

// The byte-level text of `bytes`, UTF-8 encoded.
std::string to_byte_level(std::string_view bytes);

// A merge of the tokens of bytes `a` and `b` as tokenizer.json and GGUF write it: "a b" in the
// byte-level spelling (which never holds a space).
inline std::string byte_level_merge(std::string_view a, std::string_view b) {
  return to_byte_level(a) + " " + to_byte_level(b);
}

}  // namespace sinter::detail
