// The named kernel-launch check for kernels/*.cu. SINTER_CUDA_CHECK and DeviceGuard come from
// internal/cuda_check.h, so all CUDA sources share one definition.
#pragma once

#include <cuda_runtime.h>

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

using cuda::DeviceGuard;  // internal/cuda_check.h

}  // namespace sinter::cudak
