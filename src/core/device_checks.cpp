// The messages of Note [deferred device checks] in src/kern/index.h, the same for the CPU's
// immediate errors and the errors CUDA's records raise at a synchronization.
#include <string>

#include "kern/index.h"

namespace sinter::kern {

std::string device_check_message(const DeviceCheckRecord& r) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  switch (static_cast<DeviceCheck>(r.what)) {
    case DeviceCheck::CrossEntropyTarget:
      return "cross_entropy: target " + n(r.value) + " is out of range [" + n(r.lo) + ", " +
             n(r.hi) + ") and is not ignore_index (" + n(r.skip) + ")";
    case DeviceCheck::EmbeddingIndex:
      return "embedding: index out of range: index " + n(r.value) + " but the table has " +
             n(r.hi) + " rows";
  }
  return "a device-side check failed: value " + n(r.value) + " outside [" + n(r.lo) + ", " +
         n(r.hi) + ")";
}

}  // namespace sinter::kern
