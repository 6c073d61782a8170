// The inference plans of a fused Sequential (Note [cpu inference plan] in
// src/cpu/infer_plan_dnnl.cpp): the model described as a cpu::plan::Program, one plan compiled per
// input shape, dropped when a weight the plans read changes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "sinter/nn/modules.h"

namespace sinter::cpu::plan {
class Compiled;
}  // namespace sinter::cpu::plan

namespace sinter::nn::detail {

class InferencePlans {
 public:
  // seq's forward of x through a plan, or nullopt where none runs it: x not a contiguous f32 CPU
  // tensor of 2 or 4 dims, a module the plans do not describe, or oneDNN unable to run a layer.
  std::optional<Tensor> forward(const Sequential& seq, const Tensor& x);

  // How many plans have been compiled (the tests check that a path ran or was kept).
  int64_t compiled() const;

 private:
  // The most input shapes whose plans are kept (more: all are dropped and made again as needed).
  static constexpr size_t kMaxPlans = 16;
  mutable std::mutex mutex_;
  // By input shape: the description's signature (geometry, weight addresses and versions, int8
  // scales) the plan was made for, and the plan (null where none runs that shape).
  std::map<std::vector<int64_t>,
           std::pair<std::vector<int64_t>, std::shared_ptr<const cpu::plan::Compiled>>>
      plans_;
  int64_t compiled_ = 0;
};

}  // namespace sinter::nn::detail
