// Per-device facts the kernels choose launch shapes and kernel families by, read once per device.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "cuda_check.cuh"

namespace sinter::cudak {

// attr of `device`, cached for the first 64 devices (the attributes asked for never change). The
// cache holds value + 1, so that 0 (e.g. a minor version) is cached too.
template <cudaDeviceAttr kAttr>
int device_attribute(int device) {
  constexpr int kCached = 64;
  static std::atomic<int> cache[kCached];
  const bool cacheable = device >= 0 && device < kCached;
  const int cached = cacheable ? cache[device].load(std::memory_order_relaxed) : 0;
  if (cached > 0) return cached - 1;
  int v = 0;
  SINTER_CUDA_CHECK(cudaDeviceGetAttribute(&v, kAttr, device));
  if (cacheable && v >= 0) cache[device].store(v + 1, std::memory_order_relaxed);
  return v;
}

inline int device_sm_count(int device) {
  return device_attribute<cudaDevAttrMultiProcessorCount>(device);
}

// Compute capability as 10 * major + minor (90 for Hopper).
inline int device_compute_capability(int device) {
  return 10 * device_attribute<cudaDevAttrComputeCapabilityMajor>(device) +
         device_attribute<cudaDevAttrComputeCapabilityMinor>(device);
}

}  // namespace sinter::cudak
