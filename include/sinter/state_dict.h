// StateDict: named tensors, the unit of saving and loading for modules, optimizers and schedulers.
#pragma once

#include <map>
#include <string>

#include "sinter/tensor.h"

namespace sinter {

// Ordered by name, so files and comparisons are deterministic. Scalars (a step count, a learning
// rate) are stored as 0-dim tensors.
using StateDict = std::map<std::string, Tensor>;

}  // namespace sinter
