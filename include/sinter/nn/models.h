// The reference models of the benchmark workloads (shared/reference/workloads.md), built from nn
// layers, so examples, tests and benchmarks train exactly the same networks.
#pragma once

#include "sinter/nn/modules.h"

namespace sinter::nn::models {

// Linear 784-1024, ReLU, Linear 1024-1024, ReLU, Linear 1024-10 on flattened 28x28 images.
// Input (N, 1, 28, 28) or (N, 784) -> logits (N, 10).
Sequential mlp();

// Conv 1-32 3x3 pad 1, ReLU, MaxPool 2; Conv 32-64 3x3 pad 1, ReLU, MaxPool 2; Flatten;
// Linear 3136-128, ReLU, Linear 128-10. Input (N, 1, 28, 28) -> logits (N, 10).
Sequential cnn();

}  // namespace sinter::nn::models
