// The stand-in for src/cpu/infer_plan_dnnl.cpp in a build without oneDNN: no plan compiles, and a
// fused model's forward runs op by op.
#include "cpu/infer_plan.h"

namespace sinter::cpu::plan {

class Compiled {};

std::shared_ptr<const Compiled> compile(const Program& p, int64_t) {
  (void)value_shapes(p);  // the same errors as with oneDNN
  return nullptr;
}

void run(const Compiled&, const float*, float*) {}

}  // namespace sinter::cpu::plan
