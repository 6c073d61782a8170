// libFuzzer target: an input is a text file for TextCorpus. Its first two bytes pick the context
// and chunk size, so that short inputs reach the split and window code. The corpus is built, or a
// sinter::Error names the file; when built, every window of both splits lies inside the corpus and
// the byte baselines are finite.
#include <cmath>
#include <cstdint>

#include "fuzz_util.h"
#include "sinter/data/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sinter;
  if (size < 2) return 0;
  data::TextCorpusOptions options;
  options.context = 1 + data[0] % 16;
  options.chunk_size = 1 + data[1] % 64;
  options.val_fraction = 0.25;
  const std::string path = fuzz::write_file("corpus.txt", data + 2, size - 2);
  std::unique_ptr<data::TextCorpus> corpus;
  if (!fuzz::reads_or_names_the_file(
          path, [&] { corpus = std::make_unique<data::TextCorpus>(
                          std::vector<std::string>{path}, options); })) {
    return 0;
  }
  const int64_t n = static_cast<int64_t>(corpus->bytes().size());
  for (const auto& split : {corpus->train(), corpus->val()}) {
    for (int64_t i = 0; i < split->size(); ++i) {
      const int64_t p = split->position(i);
      if (p < 0 || p + options.context + 1 > n) fuzz::fail("a window outside the corpus");
    }
    if (split->size() > 0) (void)split->get_batch({0, split->size() - 1});
  }
  data::ByteBaselines b;
  try {
    b = data::byte_baselines(*corpus);
  } catch (const Error&) {
    return 0;  // a split too small for a baseline: a clear error is all it owes
  }
  if (!std::isfinite(b.unigram) || !std::isfinite(b.bigram)) fuzz::fail("a baseline not finite");
  return 0;
}
