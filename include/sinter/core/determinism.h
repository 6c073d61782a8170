// Deterministic mode: every kernel that would sum in an order the hardware picks (atomics) takes a
// path with a fixed order instead, so that the same program on the same machine gives the same bits
// run after run (Note [deterministic algorithms] in src/core/determinism.cpp).
#pragma once

#include "sinter/core/noncopyable.h"

namespace sinter {

// Process-wide, like the generator's seed: set it once before training. Off by default, since the
// fixed-order paths need scratch memory and may run slower.
void use_deterministic_algorithms(bool on);
bool deterministic_algorithms_enabled();

// Sets the mode for a scope and restores the previous one at its end.
class DeterministicGuard : NonCopyable {
 public:
  explicit DeterministicGuard(bool on = true) : previous_(deterministic_algorithms_enabled()) {
    use_deterministic_algorithms(on);
  }
  ~DeterministicGuard() { use_deterministic_algorithms(previous_); }

 private:
  bool previous_;
};

}  // namespace sinter
