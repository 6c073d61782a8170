// Shared by the multi-process tests (tests/dist/): the process group that main() made over all
// ranks. Every test must make the same collectives on every rank, in the same order; a test that
// returns early on one rank only (ASSERT_*) leaves the others waiting until the group's timeout.
#pragma once

#include <memory>

#include "sinter/dist.h"

namespace sinter::testing {

// All ranks, 60 s timeout, shape checks on.
dist::ProcessGroup& world();
std::shared_ptr<dist::ProcessGroup> world_ptr();

}  // namespace sinter::testing
