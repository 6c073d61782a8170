// Generator: the seed and counter of the Philox stream behind every random op, on CPU and CUDA
// alike.
#pragma once

#include <cstdint>
#include <mutex>

namespace sinter {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}
  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  // Reserves `n` Philox counters (Note [philox streams]): returns the seed and the first counter,
  // read together so that a concurrent manual_seed cannot pair one seed with another's counters.
  GeneratorState reserve(uint64_t n);
  GeneratorState state() const;
  void set_state(const GeneratorState& s);

 private:
  mutable std::mutex mu_;
  GeneratorState state_;
};

// The process-wide generator used when an op is given none.
Generator& default_generator();
// Seeds the default generator.
void manual_seed(uint64_t seed);

}  // namespace sinter
