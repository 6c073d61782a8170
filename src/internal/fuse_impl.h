// The fusion pass of nn::fuse_for_inference with a hook on the layers it makes, which the
// quantization pass (src/quant/quantize.cpp) uses to put its int8 layers in their place.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "sinter/nn/modules.h"

namespace sinter::nn {

// Each Linear and Conv2d the fused copy holds (folded, with its epilogue activation set), given
// with its path in the original, is replaced by what the function returns (the layer itself
// where a function is unset).
struct LayerWrap {
  std::function<std::shared_ptr<Linear>(std::shared_ptr<Linear>, const std::string& path)> linear;
  std::function<std::shared_ptr<Conv2d>(std::shared_ptr<Conv2d>, const std::string& path)> conv;
};

// fuse_for_inference (Note [inference fusion]) with `wrap` applied to its layers.
std::shared_ptr<Module> fuse_with(const Module& module, const LayerWrap& wrap);

}  // namespace sinter::nn
