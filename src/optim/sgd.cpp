// SGD: the update of sgd.h as one fused kernel call per device and dtype of a group's parameters
// (Note [fused optimizer step]).
#include "sinter/optim/sgd.h"

#include "internal/dispatch.h"
#include "internal/fused_operands.h"
#include "kern/optim.h"
#include "sinter/autograd.h"
#include "sinter/cuda.h"

namespace sinter::optim {

SGD::SGD(const std::vector<Tensor>& params, const SGDOptions& options)
    : SGD(std::vector<SGDGroup>{SGDGroup{.params = params}}, options) {}

SGD::SGD(const std::vector<SGDGroup>& groups, const SGDOptions& defaults)
    : OptimizerWithOptions("SGD", defaults) {
  add_param_groups(groups);
}

void SGD::check_options(const SGDOptions& o, size_t group) const {
  SINTER_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
               "SGD: nesterov momentum needs momentum > 0 and dampening = 0, got momentum ",
               o.momentum, " and dampening ", o.dampening, " in group ", group);
}

void SGD::step() {
  NoGradGuard ng;
  for (size_t g = 0; g < params_.size(); ++g) {
    const SGDOptions& o = options_[g];
    kern::SgdHyper h{.lr = o.lr,
                     .momentum = o.momentum,
                     .dampening = o.dampening,
                     .weight_decay = o.weight_decay,
                     .nesterov = o.nesterov,
                     .maximize = o.maximize};
    // The learning rate is a host value otherwise: a graph would replay the one it was captured
    // with.
    SINTER_CHECK(o.capturable || !cuda::is_capturing(), name(),
                 ": a step inside a CUDA graph capture needs capturable = true (the learning rate "
                 "would otherwise be baked into the graph)");
    for (const std::vector<size_t>& bucket : grad_buckets(g)) {
      std::vector<kern::SgdTensor> list;
      detail::FusedOperands ops;
      for (size_t i : bucket) {
        const Tensor& p = params_[g][i];
        if (o.capturable)
          h.lr_device = static_cast<const double*>(device_lr(g, p.device()).data_ptr());
        const auto [pw, grad] = ops.add(p);
        kern::SgdTensor t{.param = pw.data_ptr(), .grad = grad.data_ptr(), .numel = p.numel()};
        if (o.momentum != 0.0) {
          auto& st = state_[g][i];
          auto it = st.find("momentum_buffer");
          if (it == st.end()) {
            // PyTorch's first step: the buffer starts as the update itself, undampened (a flag a
            // captured graph would replay on every step).
            check_not_capturing(g, i, "momentum_buffer");
            it = st.emplace("momentum_buffer", empty_like(p)).first;
            t.init_buffer = true;
          } else {
            fit_state(it->second, p, "momentum_buffer");
          }
          t.momentum_buffer = it->second.data_ptr();
          ops.written(it->second);
        }
        list.push_back(t);
      }
      const Tensor& first = params_[g][bucket[0]];
      SINTER_DISPATCH(first.device(), sgd_step, first.dtype(), list.data(),
                      static_cast<int64_t>(list.size()), h);
      ops.finish();
    }
  }
}

}  // namespace sinter::optim
