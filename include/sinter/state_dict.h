// StateDict: named tensors, the unit of saving and loading for modules, optimizers and schedulers.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sinter/tensor.h"

namespace sinter {

// Ordered by name, so files and comparisons are deterministic. Scalars (a step count, a learning
// rate) are stored as 0-dim tensors.
using StateDict = std::map<std::string, Tensor>;

// What a non-strict load left out: the names the target has and the source lacks (left as they
// were), and the names the source has and the target lacks (ignored). Module::load_state_dict and
// load_into both return it.
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

}  // namespace sinter
