// libFuzzer target: an input is a safetensors file. load() and load_metadata() must read it or
// throw a sinter::Error naming it; what load() returns must be what the header promised.
#include <cstdint>

#include "fuzz_util.h"
#include "sinter/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sinter;
  const std::string path = fuzz::write_file("input.safetensors", data, size);
  StateDict dict;
  const bool ok = fuzz::reads_or_names_the_file(path, [&] { dict = load(path); });
  fuzz::reads_or_names_the_file(path, [&] { (void)load_metadata(path); });
  if (!ok) return 0;
  // Every tensor's bytes came from the file, after the 8-byte length and the header.
  size_t bytes = 0;
  for (const auto& [name, t] : dict) {
    if (!t.is_contiguous()) fuzz::fail("load returned a strided tensor for " + name);
    bytes += static_cast<size_t>(t.numel()) * element_size(t.dtype());
  }
  if (bytes > size) fuzz::fail("load returned more bytes than the file holds");
  return 0;
}
