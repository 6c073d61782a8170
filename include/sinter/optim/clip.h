// Gradient clipping: by the total norm over a set of parameters, or elementwise by value.
#pragma once

#include <vector>

#include "sinter/tensor.h"

namespace sinter::optim {

// The norm of all the gradients together, as if concatenated into one vector: (sum |g|^p)^(1/p),
// or max |g| for norm_type = infinity. When it exceeds max_norm, every gradient is scaled in place
// by max_norm / (total + 1e-6). Returns the total norm (before scaling); parameters without a
// gradient are skipped. One device synchronization. f16/bf16 gradients are summed in f32. As in
// PyTorch, an infinite total scales every gradient by 0 and a NaN total makes every gradient NaN.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);
// The same without a synchronization: returns the total norm as a 0-dim tensor on the first
// gradient's device (f64 when every gradient is f64, else f32), and scales the gradients by a
// factor computed there. For steps captured in a CUDA graph or kept free of host waits.
Tensor clip_grad_norm_on_device_(const std::vector<Tensor>& params, double max_norm,
                                 double norm_type = 2.0);

// Clamps every gradient element into [-clip_value, clip_value] in place.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace sinter::optim
