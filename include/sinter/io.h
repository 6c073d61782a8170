// Saving and loading state dicts as safetensors files (https://github.com/huggingface/safetensors):
// readable by the safetensors libraries of other frameworks, written atomically.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sinter/core/device.h"
#include "sinter/core/generator.h"
#include "sinter/state_dict.h"

namespace sinter {

// Free-form string pairs stored in the header's "__metadata__".
using Metadata = std::map<std::string, std::string>;

// Writes `dict` (any devices, any strides) to `path`. The file is built at "<path>.tmp.<pid>",
// flushed to disk, then renamed over `path`, so a failure leaves any previous file untouched. The
// metadata's "format" is "pt" unless given as "tf", "flax" or "mlx" (any other is an Error: see
// Note [safetensors format] in src/io/safetensors.cpp).
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

// --- checkpoints of several parts (a model, its optimizer, a schedule, the generator) ---

// The entries of `dict` under "prefix." with the prefix taken off: one part of a checkpoint.
StateDict sub_dict(const StateDict& dict, const std::string& prefix);
// Adds `part`'s entries to `dict` as "prefix.<name>" (an entry already there is an Error).
void add_prefixed(StateDict& dict, const std::string& prefix, const StateDict& part);

// A generator's state as {"rng_seed", "rng_offset"}: 0-dim i64 tensors holding the bit patterns
// of its seed and offset (so that seeds above 2^63 survive), and back. A resumed run that loads
// it draws the numbers the uninterrupted one would have.
StateDict generator_state_dict(const Generator& gen = default_generator());
void load_generator_state(const StateDict& dict, Generator& gen = default_generator());

// Writes `contents` to `path` whole or not at all (Note [atomic writes] in
// src/internal/atomic_file.h): a metrics file or a plot script that a reader, or a run killed
// halfway, never sees half-written.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace sinter
