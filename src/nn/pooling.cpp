// The layers of nn/pooling.h: their options checked when built, then the op from ops.h.
#include "sinter/nn/pooling.h"

#include "internal/ops_impl.h"

namespace sinter::nn {

MaxPool3d::MaxPool3d(Size3 kernel_size, const MaxPool3dOptions& options)
    : kernel_size(kernel_size), options(options) {
  check_pool3d_options("MaxPool3d", kernel_size, options.stride, options.padding, options.dilation);
}

Tensor MaxPool3d::forward(const Tensor& x) { return max_pool3d(x, kernel_size, options); }

AvgPool3d::AvgPool3d(Size3 kernel_size, const AvgPool3dOptions& options)
    : kernel_size(kernel_size), options(options) {
  check_pool3d_options("AvgPool3d", kernel_size, options.stride, options.padding, 1);
}

Tensor AvgPool3d::forward(const Tensor& x) { return avg_pool3d(x, kernel_size, options); }

}  // namespace sinter::nn
