// The small Llama the formula test (test_transformer.cpp) and the PyTorch comparison
// (tools/llama_reference_dump.cpp) are built on: grouped-query attention (4 query heads on 2 K/V
// heads), and a rope base and an RMSNorm eps away from the defaults, so that a model that ignored
// either would fail them.
#pragma once

#include <cstdint>

#include "sinter/nn/models.h"

namespace sinter::testing {

inline nn::models::LlamaConfig small_llama(int64_t n_layer, int64_t n_embd, int64_t mlp_hidden) {
  nn::models::LlamaConfig c;
  c.n_layer = n_layer;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = n_embd;
  c.mlp_hidden = mlp_hidden;
  c.rope_base = 500.0;
  c.norm_eps = 1e-6;
  return c;
}

}  // namespace sinter::testing
