// libFuzzer target: an input is an IDX file, read three ways: as it is, as a .gz file (the bytes
// are the compressed stream: gzip framing and inflate errors), and gzip-compressed here (the IDX
// parser behind the gzip reader). Each read succeeds with a u8 tensor whose size the header gives,
// or throws a sinter::Error naming the file.
#include <zlib.h>

#include <cstdint>

#include "fuzz_util.h"
#include "sinter/data/vision.h"

namespace {

using namespace sinter;

void read_one(const std::string& path, size_t payload_limit) {
  Tensor t;
  if (!fuzz::reads_or_names_the_file(path, [&] { t = data::read_idx(path); })) return;
  if (t.dtype() != DType::u8) fuzz::fail("read_idx returned a tensor that is not u8");
  if (static_cast<size_t>(t.numel()) > payload_limit) {
    fuzz::fail("read_idx returned more elements than the file holds");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  read_one(fuzz::write_file("input.idx", data, size), size);
  // Any payload a gzip stream of `size` bytes holds: inflate expands at most about 1032x.
  read_one(fuzz::write_file("input.idx.gz", data, size), size * 1032 + 64);
  const std::string packed = fuzz::work_dir() + "/packed.idx.gz";
  gzFile gz = gzopen(packed.c_str(), "wb");
  if (!gz || (size > 0 && gzwrite(gz, data, static_cast<unsigned>(size)) == 0) ||
      gzclose(gz) != Z_OK) {
    fuzz::fail("cannot write " + packed);
  }
  read_one(packed, size);
  return 0;
}
