// Module forward hooks (Note [forward hooks]) and Storage::swap_memory, the two pieces
// dist::FullyShardedDataParallel stands on: the hooks' order, an output replaced, removal, the
// reference models calling their blocks through them; a tensor's memory swapped out and back with
// its saved views following, and a tensor with no memory an error where its data is read.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sinter/nn.h"
#include "test_util.h"

namespace sinter::testing {
namespace {

TEST(ModuleHooks, RunAroundForwardInOrderAndCanReplaceTheOutput) {
  nn::Linear layer(3, 2);
  std::vector<std::string> log;
  const int a =
      layer.register_forward_pre_hook([&](nn::Module& m) { log.push_back("pre " + m.name()); });
  const int b = layer.register_forward_hook([&](nn::Module&, const Tensor& out) {
    log.push_back("post");
    return out * 2.0;
  });
  layer.register_forward_hook([&](nn::Module&, const Tensor& out) {
    log.push_back("post2");
    return out + 1.0;
  });
  const Tensor x = randn({4, 3});
  const Tensor plain = layer.forward(x);  // a direct forward skips the hooks
  EXPECT_TRUE(log.empty());
  EXPECT_TRUE(all_close(layer(x), plain * 2.0 + 1.0, 1e-6, 1e-6));
  EXPECT_EQ(log, (std::vector<std::string>{"pre Linear", "post", "post2"}));
  layer.remove_forward_hook(a);
  layer.remove_forward_hook(b);
  log.clear();
  EXPECT_TRUE(all_close(layer.call([&] { return layer.forward(x); }), plain + 1.0, 1e-6, 1e-6));
  EXPECT_EQ(log, (std::vector<std::string>{"post2"}));
  expect_error([&] { layer.remove_forward_hook(a); }, {"Linear", "remove_forward_hook", "handle"});
  expect_error([&] { layer.register_forward_hook(nullptr); }, {"Linear", "empty"});
}

// Each reference model calls its blocks through Module::call, so a block's hooks see its input
// run: GPT's blocks (checkpointed too, once per block), Llama's layers, ViT's blocks, Sequential's
// children.
TEST(ModuleHooks, TheReferenceModelsCallTheirBlocksThroughHooks) {
  int calls = 0;
  auto count = [&](nn::Module& m) {
    for (const std::shared_ptr<nn::Module>& block : m.children()) {
      block->register_forward_pre_hook([&](nn::Module&) { ++calls; });
    }
  };
  for (const bool checkpoint : {false, true}) {
    nn::models::GPT gpt({.vocab_size = 8,
                         .context_length = 4,
                         .n_layer = 3,
                         .n_head = 2,
                         .n_embd = 4,
                         .checkpoint_blocks = checkpoint});
    count(*gpt.blocks);
    calls = 0;
    gpt.forward(zeros({1, 4}, {.dtype = DType::i64})).sum().backward();
    EXPECT_EQ(calls, 3) << "checkpoint " << checkpoint;
  }
  nn::models::Llama llama({.vocab_size = 8,
                           .context_length = 4,
                           .n_layer = 2,
                           .n_head = 2,
                           .n_kv_head = 1,
                           .n_embd = 4,
                           .mlp_hidden = 8});
  count(*llama.model->layers);
  calls = 0;
  llama.forward(zeros({1, 4}, {.dtype = DType::i64}));
  EXPECT_EQ(calls, 2);
  nn::models::ViT vit({.image_size = 8, .patch_size = 4, .n_layer = 2, .n_head = 2, .n_embd = 8});
  count(*vit.blocks);
  calls = 0;
  vit.forward(zeros({1, 3, 8, 8}));
  EXPECT_EQ(calls, 2);
  nn::Sequential seq(nn::Linear(2, 2), nn::ReLU());
  count(seq);
  calls = 0;
  seq.forward(zeros({1, 2}));
  EXPECT_EQ(calls, 2);
}

// Storage::swap_memory: a tensor's bytes swapped out (its views, saved for backward, lose them
// too) and back (they follow), so backward through a graph recorded before reads the values
// swapped in; with no memory, reading the tensor is an error naming its shape.
TEST(ModuleHooks, SwappedMemoryIsFollowedByEveryView) {
  Tensor w = from_vector(std::vector<float>{1, 2, 3}, {3}).requires_grad_();
  Tensor x = from_vector(std::vector<float>{4, 5, 6}, {3}).requires_grad_();
  const Tensor y = (w * x).sum();  // saves w for x's gradient (an alias: the same storage)
  Storage kept = w.storage();
  Storage empty = Storage::from_blob(nullptr, 0, Device::cpu());
  kept.swap_memory(empty);  // w has no memory; `empty` holds its old bytes
  expect_error([&] { (void)w.sum(); }, {"shape [3]", "has no memory"});
  expect_error([&] { y.backward(); }, {"has no memory"});
  Storage fresh = from_vector(std::vector<float>{7, 8, 9}, {3}).storage();
  kept.swap_memory(fresh);
  EXPECT_EQ(w.detach().to_vector<float>(), (std::vector<float>{7, 8, 9}));
  const Tensor y2 = (w * x).sum();
  y2.backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{4, 5, 6}));
  Storage gpu_like = Storage::from_blob(nullptr, 0, Device::cuda(0));
  expect_error([&] { kept.swap_memory(gpu_like); }, {"swap_memory", "cuda:0"});
}

}  // namespace
}  // namespace sinter::testing
