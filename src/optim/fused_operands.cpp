// The tensors of one fused optimizer kernel call (optim/fused_operands.h).
#include "optim/fused_operands.h"

namespace sinter::optim::detail {

std::pair<Tensor, Tensor> FusedOperands::add(const Tensor& p) {
  Tensor pw = p.contiguous();
  Tensor grad = p.grad().contiguous();
  params_.emplace_back(p, pw);
  grads_.push_back(grad);
  written_.push_back(p);
  return {pw, grad};
}

void FusedOperands::finish() {
  for (auto& [p, pw] : params_) {
    if (!pw.is_same(p)) p.copy_(pw);
  }
  for (const Tensor& t : written_) t.bump_version();
}

}  // namespace sinter::optim::detail
