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

// --- BasicBlock ---

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride)
    : in_planes(in_planes), planes(planes), stride(stride) {
  SINTER_CHECK(in_planes > 0 && planes > 0,
               "BasicBlock: in_planes and planes must be positive, got ", in_planes, " and ",
               planes);
  SINTER_CHECK(stride > 0, "BasicBlock: stride must be positive, got ", stride);
  conv1 = register_module(
      "conv1", Conv2d(in_planes, planes, 3, {.stride = stride, .padding = 1, .bias = false}));
  bn1 = register_module("bn1", BatchNorm2d(planes));
  conv2 = register_module("conv2", Conv2d(planes, planes, 3, {.padding = 1, .bias = false}));
  bn2 = register_module("bn2", BatchNorm2d(planes));
  if (stride != 1 || in_planes != planes) {
    shortcut = register_module(
        "shortcut", Sequential(Conv2d(in_planes, planes, 1, {.stride = stride, .bias = false}),
                               BatchNorm2d(planes)));
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "BasicBlock: undefined input");
  SINTER_CHECK(x.dim() == 4 && x.size(1) == in_planes, "BasicBlock: expected input of shape (N, ",
               in_planes, ", H, W), got shape ", shape_str(x.shape()));
  Tensor y = relu(bn1->forward(conv1->forward(x)));
  y = bn2->forward(conv2->forward(y));
  return relu(y + (shortcut ? shortcut->forward(x) : x));
}

// --- ResNet-20 ---

Sequential resnet20() {
  Sequential model(Conv2d(3, 16, 3, {.padding = 1, .bias = false}), BatchNorm2d(16), ReLU());
  int64_t in_planes = 16;
  for (const int64_t planes : {16, 32, 64}) {
    for (int block = 0; block < 3; ++block) {
      // Stages 2 and 3 halve the feature map in their first block.
      const int64_t stride = (block == 0 && planes != 16) ? 2 : 1;
      model.push_back(BasicBlock(in_planes, planes, stride));
      in_planes = planes;
    }
  }
  model.push_back(AdaptiveAvgPool2d(1));
  model.push_back(Flatten());
  model.push_back(Linear(64, 10));
  return model;
}

}  // namespace sinter::nn::models
