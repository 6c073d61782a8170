// Writes a small Llama's weights, an input, and Sinter's logits, loss and gradients for it to one
// safetensors file (f64), for tests/scripts/check_llama_torch.py to compare with the PyTorch Llama
// of benchmarks/pytorch_reference.py loaded with the same weights.
//   llama_reference_dump OUT.safetensors
#include <cstdio>
#include <exception>
#include <string>

#include "sinter/autograd.h"
#include "sinter/io.h"
#include "sinter/nn/models.h"
#include "sinter/sinter.h"
#include "small_llama.h"

int main(int argc, char** argv) {
  using namespace sinter;
  if (argc != 2) {
    std::fprintf(stderr, "usage: llama_reference_dump OUT.safetensors\n");
    return 2;
  }
  try {
    manual_seed(5);
    nn::models::LlamaConfig c = testing::small_llama(2, 32, 40);
    c.vocab_size = 50;
    c.context_length = 16;
    c.tie_weights = false;
    nn::models::Llama llama(c);
    llama.to(DType::f64);
    const Tensor idx = randint(0, c.vocab_size, {3, 12}, {.dtype = DType::i64});
    const Tensor targets = randint(0, c.vocab_size, {3, 12}, {.dtype = DType::i64});
    const Tensor logits = llama.forward(idx);
    const Tensor loss = cross_entropy(logits.reshape({36, c.vocab_size}), targets.reshape({36}));
    loss.backward();
    StateDict out = llama.state_dict();
    for (const auto& [name, p] : llama.named_parameters()) out["grad." + name] = p.grad();
    out["input_ids"] = idx;
    out["targets"] = targets;
    out["logits"] = logits.detach();
    out["loss"] = loss.detach();
    save(out, argv[1],
         {{"vocab", std::to_string(c.vocab_size)},
          {"layers", std::to_string(c.n_layer)},
          {"heads", std::to_string(c.n_head)},
          {"kv_heads", std::to_string(c.n_kv_head)},
          {"width", std::to_string(c.n_embd)},
          {"hidden", std::to_string(c.mlp_hidden)},
          {"base", "500"},
          {"eps", "1e-6"}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_reference_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
