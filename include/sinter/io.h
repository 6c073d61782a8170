// Saving and loading state dicts as safetensors files (https://github.com/huggingface/safetensors):
// readable by the safetensors libraries of other frameworks, written atomically.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sinter/core/device.h"
#include "sinter/state_dict.h"

namespace sinter {

// Free-form string pairs stored in the header's "__metadata__".
using Metadata = std::map<std::string, std::string>;

// Writes `dict` (any devices, any strides) to `path`. The file is built at "<path>.tmp.<pid>",
// flushed to disk, then renamed over `path`, so a failure leaves any previous file untouched.
void save(const StateDict& dict, const std::string& path, const Metadata& metadata = {});

// Reads every tensor of a safetensors file onto `device`. The whole header is validated first (see
// Note [safetensors checks] in src/io/safetensors.cpp); a sinter::Error names the file and the
// problem.
StateDict load(const std::string& path, Device device = Device::cpu());
// The header's "__metadata__" (empty when it has none).
Metadata load_metadata(const std::string& path);

// Copies the file's tensors into the existing tensors of `target` (on their devices), after
// reading the whole file and checking every name, shape and dtype, so that a bad or mismatched file
// changes nothing. strict: the names must match exactly; otherwise the names in both are copied and
// the rest reported.
LoadResult load_into(StateDict& target, const std::string& path, bool strict = true);

}  // namespace sinter
