// The layers of nn/fold.h: their sizes checked when built, then the op from ops.h.
#include "sinter/nn/fold.h"

#include "internal/ops_impl.h"

namespace sinter::nn {

Unfold::Unfold(Size2 kernel_size, const FoldOptions& options)
    : kernel_size(kernel_size), options(options) {
  check_fold_options("Unfold", kernel_size, options);
}

Tensor Unfold::forward(const Tensor& x) { return unfold(x, kernel_size, options); }

Fold::Fold(Size2 output_size, Size2 kernel_size, const FoldOptions& options)
    : output_size(output_size), kernel_size(kernel_size), options(options) {
  SINTER_CHECK(output_size.h >= 1 && output_size.w >= 1, "Fold: output_size must be positive, got ",
               output_size);
  check_fold_options("Fold", kernel_size, options);
}

Tensor Fold::forward(const Tensor& x) { return fold(x, output_size, kernel_size, options); }

}  // namespace sinter::nn
