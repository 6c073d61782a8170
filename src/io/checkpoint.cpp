// The checkpoint helpers of sinter/io.h: prefixed parts of a state dict, the generator's state, and
// atomic text files.
#include <cstdint>
#include <string>

#include "internal/atomic_file.h"
#include "sinter/io.h"

namespace sinter {

StateDict sub_dict(const StateDict& dict, const std::string& prefix) {
  StateDict out;
  const std::string head = prefix + ".";
  for (auto it = dict.lower_bound(head); it != dict.end() && it->first.rfind(head, 0) == 0; ++it) {
    out[it->first.substr(head.size())] = it->second;
  }
  return out;
}

void add_prefixed(StateDict& dict, const std::string& prefix, const StateDict& part) {
  for (const auto& [name, t] : part) {
    const bool added = dict.emplace(prefix + "." + name, t).second;
    SINTER_CHECK(added, "add_prefixed: \"", prefix, ".", name, "\" is already in the dict");
  }
}

namespace {
Tensor i64_scalar(uint64_t bits) {
  return from_vector<int64_t>({static_cast<int64_t>(bits)}, Shape{});
}
}  // namespace

StateDict generator_state_dict(const Generator& gen) {
  const GeneratorState s = gen.state();
  return {{"rng_seed", i64_scalar(s.seed)}, {"rng_offset", i64_scalar(s.offset)}};
}

void load_generator_state(const StateDict& dict, Generator& gen) {
  uint64_t v[2] = {};
  const char* keys[2] = {"rng_seed", "rng_offset"};
  for (int k = 0; k < 2; ++k) {
    const auto it = dict.find(keys[k]);
    SINTER_CHECK(it != dict.end(), "load_generator_state: the dict has no \"", keys[k], "\"");
    const Tensor& t = it->second;
    SINTER_CHECK(t.defined() && t.numel() == 1 && t.dtype() == DType::i64,
                 "load_generator_state: \"", keys[k], "\" must be one i64 value, got ",
                 t.defined() ? shape_str(t.shape()) : "an undefined tensor", " of dtype ",
                 t.defined() ? dtype_name(t.dtype()) : "none");
    v[k] = static_cast<uint64_t>(t.item<int64_t>());
  }
  gen.set_state({v[0], v[1]});
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  detail::write_file_atomically(path, {{contents.data(), contents.size()}},
                                "write_file_atomically");
}

}  // namespace sinter
