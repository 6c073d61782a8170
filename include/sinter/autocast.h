// Automatic mixed precision: inside an autocast::Guard, the ops of the policy table run in a chosen
// precision without the model being cast. Matrix products (matmul, linear, the convolutions,
// attention, the recurrent cells) run in the guard's dtype, bf16 or f16, on tensor cores; the ops
// that need range or accumulate (softmax and log-softmax, norms, losses, reductions) run in f32;
// every other op follows dtype promotion (result_type). f64 tensors are left in f64. Parameters,
// their gradients and the optimizer state stay f32: each parameter is cast once per outermost guard
// and the cast is reused, and its gradient comes back in f32 through the cast. Backward passes run
// with autocast off (the forward's choices hold).
//
//   sinter::autocast::Guard amp(sinter::DeviceType::cuda, sinter::DType::bf16);
//   Tensor loss = cross_entropy(model.forward(x), y);  // f32 loss, bf16 matmuls
//   // leave the scope, then loss.backward() and the optimizer step
//
// f16 has a narrow range: pair it with a GradScaler (sinter/optim/grad_scaler.h). The state is
// per thread and per device type; guards nest, each restoring what it found.
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sinter/core/device.h"
#include "sinter/core/dtype.h"
#include "sinter/core/noncopyable.h"

namespace sinter::autocast {

class Guard : NonCopyable {
 public:
  // Autocast to `dtype` (bf16 or f16; f16 on CUDA only) for ops whose tensors are on `device`
  // type, as torch.autocast(device_type, dtype): the device type is required (a guard for one
  // device type leaves ops on the other alone), the dtype defaults to PyTorch's, f16 on CUDA and
  // bf16 on the CPU. enabled = false turns autocast off for the scope instead.
  explicit Guard(DeviceType device, std::optional<DType> dtype = std::nullopt, bool enabled = true);
  ~Guard();

 private:
  DeviceType device_;
  std::optional<DType> previous_;
};

// The dtype autocast runs matrix products in for `device` in this thread, if a guard is on.
std::optional<DType> dtype(DeviceType device);

// What an op of the policy table does under autocast.
enum class Policy {
  LowPrecision,  // floating inputs but f64 cast to the guard's dtype
  Float32,       // floating inputs but f64 cast to f32
};

// The policy table, X(op, Policy): every op autocast changes, by the name of its function. Ops not
// in it follow promotion (cat and stack promote to the widest dtype). An op names its row by the
// token (SINTER_AUTOCAST(softmax, ...) in src/internal/autocast_impl.h), so a row and its op
// cannot drift apart by a typo: it would not compile.
#define SINTER_AUTOCAST_POLICY(X)               \
  X(matmul, LowPrecision)                       \
  X(linear, LowPrecision)                       \
  X(conv2d, LowPrecision)                       \
  X(conv1d, LowPrecision)                       \
  X(conv3d, LowPrecision)                       \
  X(conv_transpose1d, LowPrecision)             \
  X(conv_transpose2d, LowPrecision)             \
  X(conv_transpose3d, LowPrecision)             \
  X(lstm_cell, LowPrecision)                    \
  X(gru_cell, LowPrecision)                     \
  X(rnn_tanh_cell, LowPrecision)                \
  X(rnn_relu_cell, LowPrecision)                \
  X(lstm_cell_step, LowPrecision)               \
  X(gru_cell_step, LowPrecision)                \
  X(scaled_dot_product_attention, LowPrecision) \
  X(einsum, LowPrecision)                       \
  X(bmm, LowPrecision)                          \
  X(baddbmm, LowPrecision)                      \
  X(softmax, Float32)                           \
  X(log_softmax, Float32)                       \
  X(layer_norm, Float32)                        \
  X(rms_norm, Float32)                          \
  X(batch_norm, Float32)                        \
  X(group_norm, Float32)                        \
  X(instance_norm, Float32)                     \
  X(interpolate, Float32)                       \
  X(cross_entropy, Float32)                     \
  X(nll_loss, Float32)                          \
  X(mse_loss, Float32)                          \
  X(binary_cross_entropy_with_logits, Float32)  \
  X(binary_cross_entropy, Float32)              \
  X(kl_div, Float32)                            \
  X(l1_loss, Float32)                           \
  X(smooth_l1_loss, Float32)                    \
  X(huber_loss, Float32)                        \
  X(cosine_embedding_loss, Float32)             \
  X(margin_ranking_loss, Float32)               \
  X(ctc_loss, Float32)                          \
  X(max_pool3d, Float32)                        \
  X(avg_pool3d, Float32)                        \
  X(sum, Float32)                               \
  X(mean, Float32)                              \
  X(var, Float32)                               \
  X(logsumexp, Float32)                         \
  X(cumsum, Float32)                            \
  X(cumprod, Float32)                           \
  X(prod, Float32)                              \
  X(expm1, Float32)                             \
  X(log1p, Float32)                             \
  X(erfinv, Float32)

#define SINTER_AUTOCAST_OP_(op, policy) op,
enum class Op { SINTER_AUTOCAST_POLICY(SINTER_AUTOCAST_OP_) };
#undef SINTER_AUTOCAST_OP_
Policy policy(Op op);

// The table by name.
const std::vector<std::pair<std::string_view, Policy>>& policy_table();
std::optional<Policy> policy(std::string_view op);

}  // namespace sinter::autocast
