// What the tensor-parallel layers (src/dist/tensor_parallel.cpp) and the parallel GPT
// (src/dist/tensor_parallel_gpt.cpp) share.
#pragma once

#include <cstdint>
#include <memory>

#include "sinter/autograd.h"
#include "sinter/dist.h"
#include "sinter/ops.h"
#include "sinter/tensor.h"

namespace sinter::dist::tp::detail {

// Per Note [tensor parallel init], `shard` is made this rank's part along `dim` of a tensor of the
// whole shape that `init` fills.
template <typename Init>
void init_part(Tensor& shard, int64_t dim, const ProcessGroup& group, Init init) {
  NoGradGuard no_grad;
  Shape whole = shard.shape();
  whole[dim] *= group.size();
  Tensor all = empty(whole, {.dtype = shard.dtype(), .device = shard.device()});
  init(all);
  shard.copy_(all.narrow(dim, group.rank() * shard.size(dim), shard.size(dim)));
}

// The whole tensor whose part along `dim` each rank holds (an all-gather; collective).
Tensor whole_of(const Tensor& shard, ProcessGroup& group, int64_t dim);
// `to` (a parameter) = `from`, converted to its dtype and device, without recording.
void assign(Tensor& to, const Tensor& from);

// vocab_parallel_cross_entropy of a model's logit slices (B, T, V / N) against targets (B, T),
// checked to have the ids' shape; `model` names the model in the message.
Tensor language_model_loss(const char* model, const Tensor& logits, const Tensor& idx,
                           const Tensor& targets, const std::shared_ptr<ProcessGroup>& group,
                           const CrossEntropyOptions& options);

// dropout between the tensor-parallel regions (Note [tensor parallel dropout]): x whole on every
// rank (the same mask everywhere), or under sequence parallelism this rank's slice of the
// sequence (dim 1), which takes its part of the whole sequence's mask.
inline Tensor region_dropout(const Tensor& x, double p, bool training, bool sequence_parallel,
                             const ProcessGroup& group) {
  if (!sequence_parallel) return dropout(x, p, training);
  const int64_t t = x.size(1);
  return dropout_block(x, p, training, 1, group.rank() * t, t * group.size());
}

}  // namespace sinter::dist::tp::detail
