// Check macros for CUDA runtime return codes and kernel launches; they throw sinter::Error.
// For CUDA translation units only (it includes <cuda_runtime.h>).
#pragma once

#include <cuda_runtime.h>

#include "sinter/core/error.h"

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
