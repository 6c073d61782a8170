// Check macros for CUDA runtime return codes and kernel launches; they throw sinter::Error.
// For CUDA translation units only (it includes <cuda_runtime.h>).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>

#include "sinter/core/error.h"
#include "sinter/core/noncopyable.h"

// Throws with the error's name, its description and the failing expression. The runtime's
// last-error state is cleared first, so that a later launch check does not report the same failure
// again.
#define SINTER_CUDA_CHECK(expr)                                             \
  do {                                                                      \
    const cudaError_t sinter_cuda_err_ = (expr);                            \
    if (sinter_cuda_err_ != cudaSuccess) [[unlikely]] {                     \
      (void)cudaGetLastError();                                             \
      SINTER_THROW("CUDA error ", cudaGetErrorName(sinter_cuda_err_), " (", \
                   cudaGetErrorString(sinter_cuda_err_), ") from ", #expr); \
    }                                                                       \
  } while (0)

// After every kernel launch: reports a bad launch configuration (and earlier asynchronous errors).
#define SINTER_CUDA_LAUNCH_CHECK() SINTER_CUDA_CHECK(cudaGetLastError())

namespace sinter::cuda {

// Makes `device` current for the scope, and the previous one again at its end (the legacy default
// stream, cudaMalloc, event creation and kernel launches all act on the current device). A failure
// to switch back is logged, not thrown, and is silent while the runtime is being unloaded.
class DeviceGuard : NonCopyable {
 public:
  explicit DeviceGuard(int device) {
    SINTER_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) {
      SINTER_CUDA_CHECK(cudaSetDevice(device));
      changed_ = true;
    }
  }
  ~DeviceGuard() {
    if (!changed_) return;
    const cudaError_t err = cudaSetDevice(previous_);
    if (err == cudaSuccess) return;
    (void)cudaGetLastError();
    if (err == cudaErrorCudartUnloading || err == cudaErrorContextIsDestroyed) return;
    std::fprintf(stderr, "sinter: DeviceGuard could not restore device %d: %s\n", previous_,
                 cudaGetErrorString(err));
  }

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace sinter::cuda
