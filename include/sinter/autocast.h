// Automatic mixed precision: inside an autocast::Guard, the ops of the policy table run in a chosen
// precision without the model being cast. Matrix products (matmul, linear, the convolutions,
// attention, the recurrent cells) run in the guard's dtype, bf16 or f16, on tensor cores; the
// losses run in f32, and softmax, the norms and the reductions in f32 on CUDA and in their inputs'
// dtype on the CPU (PyTorch's policy for each device type, the table below); every other op
// follows dtype promotion (result_type). f64 tensors are left in f64. Parameters,
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
  Inputs,        // nothing cast: the op runs in its inputs' dtypes (promotion)
};

// The policy table, X(op, policy on CUDA, policy on the CPU): every op autocast changes, by the
// name of its function, with PyTorch's policy for each device type. On CUDA the norms, softmax,
// reductions and losses run in f32. On the CPU, as PyTorch's CPU autocast, the norms, softmax and
// reductions run in their inputs' dtype (bf16 after a bf16 convolution or matmul; the norms keep
// their statistics in f32 and take f32 weights, Note [norm statistics]), and the losses in f32.
// Ops not in the table follow promotion (cat and stack promote to the widest dtype). An op names
// its row by the token (SINTER_AUTOCAST(softmax, ...) in src/internal/autocast_impl.h), so a row
// and its op cannot drift apart by a typo: it would not compile.
#define SINTER_AUTOCAST_POLICY(X)                             \
  X(matmul, LowPrecision, LowPrecision)                       \
  X(linear, LowPrecision, LowPrecision)                       \
  X(conv2d, LowPrecision, LowPrecision)                       \
  X(conv1d, LowPrecision, LowPrecision)                       \
  X(conv3d, LowPrecision, LowPrecision)                       \
  X(conv_transpose1d, LowPrecision, LowPrecision)             \
  X(conv_transpose2d, LowPrecision, LowPrecision)             \
  X(conv_transpose3d, LowPrecision, LowPrecision)             \
  X(lstm_cell, LowPrecision, LowPrecision)                    \
  X(gru_cell, LowPrecision, LowPrecision)                     \
  X(rnn_tanh_cell, LowPrecision, LowPrecision)                \
  X(rnn_relu_cell, LowPrecision, LowPrecision)                \
  X(lstm_cell_step, LowPrecision, LowPrecision)               \
  X(gru_cell_step, LowPrecision, LowPrecision)                \
  X(scaled_dot_product_attention, LowPrecision, LowPrecision) \
  X(einsum, LowPrecision, LowPrecision)                       \
  X(bmm, LowPrecision, LowPrecision)                          \
  X(baddbmm, LowPrecision, LowPrecision)                      \
  X(softmax, Float32, Inputs)                                 \
  X(log_softmax, Float32, Inputs)                             \
  X(layer_norm, Float32, Inputs)                              \
  X(rms_norm, Float32, Inputs)                                \
  X(batch_norm, Float32, Inputs)                              \
  X(group_norm, Float32, Inputs)                              \
  X(instance_norm, Float32, Inputs)                           \
  X(interpolate, Float32, Inputs)                             \
  X(cross_entropy, Float32, Float32)                          \
  X(nll_loss, Float32, Float32)                               \
  X(mse_loss, Float32, Float32)                               \
  X(binary_cross_entropy_with_logits, Float32, Float32)       \
  X(binary_cross_entropy, Float32, Float32)                   \
  X(kl_div, Float32, Float32)                                 \
  X(l1_loss, Float32, Float32)                                \
  X(smooth_l1_loss, Float32, Float32)                         \
  X(huber_loss, Float32, Float32)                             \
  X(cosine_embedding_loss, Float32, Float32)                  \
  X(margin_ranking_loss, Float32, Float32)                    \
  X(ctc_loss, Float32, Float32)                               \
  X(max_pool3d, Float32, Float32)                             \
  X(avg_pool3d, Float32, Float32)                             \
  X(adaptive_avg_pool3d, Inputs, Float32)                     \
  X(sum, Float32, Inputs)                                     \
  X(mean, Float32, Inputs)                                    \
  X(var, Float32, Inputs)                                     \
  X(logsumexp, Float32, Inputs)                               \
  X(cumsum, Float32, Inputs)                                  \
  X(cumprod, Float32, Inputs)                                 \
  X(prod, Float32, Float32)                                   \
  X(expm1, Float32, Inputs)                                   \
  X(log1p, Float32, Inputs)                                   \
  X(erfinv, Float32, Inputs)                                  \
  X(tan, Float32, Inputs)                                     \
  X(asin, Float32, Inputs)                                    \
  X(acos, Float32, Inputs)                                    \
  X(sinh, Float32, Inputs)                                    \
  X(cosh, Float32, Inputs)                                    \
  X(log2, Float32, Inputs)                                    \
  X(log10, Float32, Inputs)                                   \
  X(reciprocal, Float32, Inputs)

#define SINTER_AUTOCAST_OP_(op, cuda, cpu) op,
enum class Op { SINTER_AUTOCAST_POLICY(SINTER_AUTOCAST_OP_) };
#undef SINTER_AUTOCAST_OP_
Policy policy(Op op, DeviceType device);

// The table by name.
struct PolicyRow {
  std::string_view op;
  Policy cuda, cpu;
};
const std::vector<PolicyRow>& policy_table();
std::optional<Policy> policy(std::string_view op, DeviceType device);

}  // namespace sinter::autocast
