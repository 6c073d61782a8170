// The initialization the weighted layers share (src/nn/modules.cpp, src/nn/conv.cpp).
#pragma once

#include "sinter/tensor.h"

namespace sinter::nn {

// PyTorch's initialization of Linear and the convolutions: weight ~ kaiming_uniform_(a =
// sqrt(5)), and bias (if defined) ~ uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in being the
// weight's (the same bound the weight gets).
void init_weight_and_bias(Tensor& weight, Tensor& bias);

}  // namespace sinter::nn
