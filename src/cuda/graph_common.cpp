// What the CUDA graph support shares between builds with and without CUDA: the no-sync guard
// (Note [no host synchronization]), the capture flag and GraphedStep.
#include "sinter/core/error.h"
#include "sinter/cuda.h"

namespace sinter::cuda {
namespace {

thread_local bool t_no_sync = false;

}  // namespace

namespace detail {
// Set by Graph::capture (src/cuda/runtime_cuda.cpp) for its thread.
thread_local bool t_capturing = false;
}  // namespace detail

NoSyncGuard::NoSyncGuard() : previous_(t_no_sync) { t_no_sync = true; }
NoSyncGuard::~NoSyncGuard() { t_no_sync = previous_; }

bool host_sync_allowed() { return !t_no_sync; }

void check_host_sync(const char* what) {
  SINTER_CHECK(!t_no_sync, what,
               ": the host would wait for the device inside a NoSyncGuard (a CUDA graph capture, "
               "or a step that must not synchronize); keep the value on the device, or read it "
               "after the step");
}

bool is_capturing() { return detail::t_capturing; }

GraphedStep::GraphedStep(std::function<void()> step, int warmup, int device)
    : step_(std::move(step)), warmup_(warmup), device_(device) {
  SINTER_CHECK(step_ != nullptr, "GraphedStep: empty step");
  SINTER_CHECK(warmup >= 1,
               "GraphedStep: warmup must be >= 1 (the eager runs make the state the "
               "graph uses), got ",
               warmup);
}

void GraphedStep::run() {
  if (runs_ < warmup_) {
    ++runs_;
    step_();
    return;
  }
  if (!graph_.captured()) graph_.capture(step_, device_);
  graph_.replay();
}

}  // namespace sinter::cuda
