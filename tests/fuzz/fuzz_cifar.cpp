// libFuzzer target: an input is a CIFAR-10 test batch (test_batch.bin). CIFAR10 reads it into a
// dataset of whole records with labels in [0, 9], or throws a sinter::Error naming the file.
#include <cstdint>

#include "fuzz_util.h"
#include "sinter/data/vision.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sinter;
  const std::string path = fuzz::write_file("test_batch.bin", data, size);
  std::unique_ptr<data::CIFAR10> ds;
  if (!fuzz::reads_or_names_the_file(
          path, [&] { ds = std::make_unique<data::CIFAR10>(fuzz::work_dir(), false); })) {
    return 0;
  }
  if (static_cast<size_t>(ds->size()) * 3073 != size) fuzz::fail("records do not match the size");
  for (int64_t label : ds->targets().to_vector<int64_t>()) {
    if (label < 0 || label > 9) fuzz::fail("a label outside [0, 9]");
  }
  return 0;
}
