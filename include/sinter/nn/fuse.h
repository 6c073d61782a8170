// Fusion for inference: a trained module rebuilt with its BatchNorms folded into the preceding
// convolutions and its activations in the GEMM and convolution epilogues (Note [inference fusion]).
#pragma once

#include <cstdint>
#include <memory>

#include "sinter/nn/module.h"

namespace sinter::nn {

// Note [inference fusion]
// fuse_for_inference(module) returns a new module, in eval mode, that computes what `module`
// computes in eval mode with fewer passes over memory, as TensorRT's layer fusion does:
//  - a BatchNorm2d with running statistics right after a Conv2d of its channel count (in a
//    Sequential, and bn1, bn2 and the shortcut's in a reference BasicBlock) is folded into the
//    convolution: W' = W s and b' = (b - running_mean) s + beta per output channel, with
//    s = gamma / sqrt(running_var + eps), computed in f64 and rounded once to the weight's dtype;
//    a BatchNorm1d right after a Linear of its feature count likewise into the Linear (its
//    output taken as (N, C), the layout BatchNorm1d normalizes over dim 1);
//  - a ReLU or GELU module right after a Conv2d or Linear (folded or not) becomes that layer's
//    epilogue activation (Conv2d::activation, Linear::activation): the output is written once;
//  - Dropout, the identity in eval mode, is dropped.
// Where `module` is a Sequential, so is the result, and it carries inference plans
// (Sequential::inference_plans): with grad mode off (InferenceMode, NoGradGuard), its forward on a
// contiguous f32 CPU input runs as one plan per input shape, its values channels-last and its
// layers oneDNN primitives made once (Note [cpu inference plan] in src/cpu/infer_plan_dnnl.cpp),
// where every module is one the plans describe (Conv2d and Linear with a ReLU epilogue or none,
// MaxPool2d, AdaptiveAvgPool2d(1), Flatten, ReLU, Identity, the fused BasicBlock, Sequential);
// otherwise, and with grad mode on, module by module.
// A Sequential's modules are renumbered "0", "1", ... over the ones kept, so state_dict keys differ
// from the original's (a folded BatchNorm has none). Every module is copied: the result shares no
// tensor with `module`, which is left as it was (values, mode, and the default generator's
// state). Types copied: Sequential, ModuleList, ModuleDict, Linear, the convolutions, the batch,
// instance, group, layer and RMS norms, the recurrent layers, Embedding, the activation modules,
// the pools, Upsample, the pixel shuffles, Unfold/Fold, Flatten, Identity, Dropout,
// MultiheadAttention, TransformerBlock and the reference models' BasicBlock, GPT and Llama (the
// table in src/nn/fuse.cpp); any other is an error naming it, its path and the types copied. The
// outputs match the original's in eval mode to rounding (1e-5 relative in f32 for the reference
// models, tests/test_inference.cpp).
std::shared_ptr<Module> fuse_for_inference(const Module& module);

// How many inference plans `fused` (a Sequential fuse_for_inference returned) has made so far, one
// for each input shape its forward ran through a plan; 0 for any other module.
int64_t inference_plans_made(const Module& fused);

// A deep copy of `module` (copy.deepcopy from Python): the same tree under the same names, every
// parameter and buffer a new tensor with the same values, dtype and device (parameters keep their
// requires_grad), the same training mode; nothing folded. The types copied are fusion's (above);
// any other is an error naming it and its path. The default generator's state is left as it was.
// (Copying a Module by value is shallow: the copy shares the tensors, Note [module handles].)
std::shared_ptr<Module> clone(const Module& module);

}  // namespace sinter::nn
