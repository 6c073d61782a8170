// The small Vision Transformer of the benchmarks (sinter/nn/models.h): patch embedding by a strided
// convolution, learned positions, TransformerBlocks, mean pooling and a linear head.
#include <cstdint>

#include "sinter/core/error.h"
#include "sinter/nn/init.h"
#include "sinter/nn/models.h"

namespace sinter::nn::models {

ViTConfig vit_tiny() { return {}; }

ViT::ViT(const ViTConfig& c) : config(c) {
  SINTER_CHECK(c.image_size > 0 && c.patch_size > 0 && c.in_channels > 0 && c.n_layer > 0 &&
                   c.n_head > 0 && c.n_embd > 0 && c.mlp_ratio > 0 && c.num_classes > 0,
               "ViT: every size must be positive, got image_size ", c.image_size, ", patch_size ",
               c.patch_size, ", in_channels ", c.in_channels, ", n_layer ", c.n_layer, ", n_head ",
               c.n_head, ", n_embd ", c.n_embd, ", mlp_ratio ", c.mlp_ratio, ", num_classes ",
               c.num_classes);
  SINTER_CHECK(c.image_size % c.patch_size == 0, "ViT: patch_size ", c.patch_size,
               " does not divide image_size ", c.image_size);
  SINTER_CHECK(c.n_embd % c.n_head == 0, "ViT: n_embd ", c.n_embd, " is not divisible by n_head ",
               c.n_head);
  const int64_t side = c.image_size / c.patch_size;
  patch_embed =
      register_module("patch_embed", Conv2d(c.in_channels, c.n_embd, {c.patch_size, c.patch_size},
                                            {.stride = {c.patch_size, c.patch_size}}));
  pos_embed = register_parameter("pos_embed", empty({1, side * side, c.n_embd}));
  init::trunc_normal_(pos_embed, 0.0, 0.02);
  blocks = register_module("blocks", ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks->push_back(TransformerBlock(c.n_embd, c.n_head,
                                       {.mlp_ratio = c.mlp_ratio, .activation = Activation::Gelu}));
  }
  ln = register_module("ln", LayerNorm({c.n_embd}));
  head = register_module("head", Linear(c.n_embd, c.num_classes));
}

Tensor ViT::forward(const Tensor& x) {
  const ViTConfig& c = config;
  SINTER_CHECK(x.dim() == 4 && x.size(1) == c.in_channels && x.size(2) == c.image_size &&
                   x.size(3) == c.image_size,
               "ViT: expected images (N, ", c.in_channels, ", ", c.image_size, ", ", c.image_size,
               "), got shape ", shape_str(x.shape()));
  // (N, E, side, side) -> (N, patches, E), the patches in row-major order.
  Tensor t = add(patch_embed->forward(x).flatten(2).transpose(1, 2), pos_embed);
  for (const std::shared_ptr<Module>& block : *blocks) t = (*block)(t);
  return head->forward(mean(ln->forward(t), {1}));
}

}  // namespace sinter::nn::models
