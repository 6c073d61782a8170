// The named kernel-launch check and DeviceGuard for kernels/*.cu. SINTER_CUDA_CHECK comes from
// internal/cuda_check.h, so all CUDA sources share one definition.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>

#include "internal/cuda_check.h"  // SINTER_CUDA_CHECK
#include "sinter/core/error.h"

// After every <<<...>>>: a bad launch configuration, or an earlier asynchronous fault, surfaces
// here with the launcher's name.
#define SINTER_LAUNCH_CHECK(name)                                                           \
  do {                                                                                      \
    const cudaError_t sinter_cuda_err_ = cudaGetLastError();                                \
    if (sinter_cuda_err_ != cudaSuccess) [[unlikely]] {                                     \
      SINTER_THROW(name, ": kernel launch failed: ", cudaGetErrorString(sinter_cuda_err_)); \
    }                                                                                       \
  } while (0)

namespace sinter::cudak {

// Sets the current device to `device` if it is not already, and restores the previous one on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    SINTER_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) {
      SINTER_CUDA_CHECK(cudaSetDevice(device));
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (!switched_) return;
    const cudaError_t err = cudaSetDevice(prev_);
    if (err != cudaSuccess) {
      std::fprintf(stderr, "sinter: DeviceGuard could not restore device %d: %s\n", prev_,
                   cudaGetErrorString(err));
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool switched_ = false;
};

}  // namespace sinter::cudak
