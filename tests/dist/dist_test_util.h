// Shared by the multi-process tests (tests/dist/): the process group that main() made over all
// ranks. Every test must make the same collectives on every rank, in the same order; a test that
// returns early on one rank only (ASSERT_*) leaves the others waiting until the group's timeout.
#pragma once

#include <memory>

#include "sinter/dist.h"
#include "sinter/nn/models.h"

namespace sinter::testing {

// All ranks, 60 s timeout, shape checks on.
dist::ProcessGroup& world();
std::shared_ptr<dist::ProcessGroup> world_ptr();

// The small GPT and Llama the mesh tests train (2 layers, width 8, 4 heads, vocabulary 12,
// context 8; the Llama with 2 K/V heads and an MLP of 12), split over a tp group of 2.
inline nn::models::GPTConfig mesh_gpt() {
  return {.vocab_size = 12, .context_length = 8, .n_layer = 2, .n_head = 4, .n_embd = 8};
}
inline nn::models::LlamaConfig mesh_llama() {
  return {.vocab_size = 12,
          .context_length = 8,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = 2,
          .n_embd = 8,
          .mlp_hidden = 12};
}

}  // namespace sinter::testing
