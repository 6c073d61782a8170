// The Philox generator state: a seed and the next unused counter (Note [philox streams]).
#include "sinter/core/generator.h"

#include "sinter/core/error.h"
#include "sinter/cuda.h"

namespace sinter {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = {seed, 0};
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_.seed;
}

GeneratorState Generator::reserve(uint64_t n) {
  // The seed and offset become kernel arguments: a graph would replay the same numbers each time.
  SINTER_CHECK(!cuda::is_capturing(),
               "Generator: random numbers (dropout, rand, ...) inside a "
               "CUDA graph capture would repeat at every replay; capture the step without them "
               "(dropout p = 0, or eval mode)");
  std::lock_guard<std::mutex> lock(mu_);
  const GeneratorState first = state_;
  state_.offset += n;
  return first;
}

GeneratorState Generator::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void Generator::set_state(const GeneratorState& s) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = s;
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace sinter
