// The reference models (see sinter/nn/models.h).
#include "sinter/nn/models.h"

namespace sinter::nn::models {

Sequential mlp() {
  return Sequential(Flatten(), Linear(784, 1024), ReLU(), Linear(1024, 1024), ReLU(),
                    Linear(1024, 10));
}

Sequential cnn() {
  return Sequential(Conv2d(1, 32, 3, {.padding = 1}), ReLU(), MaxPool2d(2),
                    Conv2d(32, 64, 3, {.padding = 1}), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(3136, 128), ReLU(), Linear(128, 10));
}

}  // namespace sinter::nn::models
