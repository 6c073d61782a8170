// libFuzzer target: an input is a token shard (Note [token shards]). It is read, or a
// sinter::Error names the file; when read, its tokens fit in the file, and the windows of a
// TokenWindows over it (context from the first token) lie inside it.
#include <cstdint>
#include <filesystem>

#include "fuzz_util.h"
#include "sinter/data/tokens.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sinter;
  const std::string path = fuzz::write_file("shard.bin", data, size);
  data::TokenSpan span;
  if (!fuzz::reads_or_names_the_file(path, [&] { span = data::read_token_shard(path); })) {
    return 0;
  }
  if (span.size < 0 || 1024 + 2 * static_cast<uint64_t>(span.size) != size) {
    fuzz::fail("a shard's tokens do not fill the file");
  }
  if (span.size < 2) return 0;
  const int64_t context = 1 + span.data[0] % 8;
  if (span.size <= context) return 0;
  const data::TokenWindows windows({span}, {.context = context, .windows = 16});
  for (int64_t i = 0; i < windows.size(); ++i) {
    const auto [s, p] = windows.position(i);
    if (s != 0 || p < 0 || p + context + 1 > span.size) fuzz::fail("a window outside the shard");
  }
  const data::Batch batch = windows.get_batch({0, windows.size() - 1});
  const int64_t* in = batch.input.data<int64_t>();
  for (int64_t j = 0; j < 2 * context; ++j) {
    if (in[j] < 0 || in[j] > data::max_token(span)) fuzz::fail("a token not in the shard");
  }
  return 0;
}
