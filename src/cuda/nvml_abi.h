// The few NVML types Note [gpu telemetry] uses, as NVML's public API (nvml.h) defines them, at
// global scope under NVML's names: src/cuda/telemetry.cpp calls through pointers of these types,
// and tests/fake_nvml defines the functions with them (UBSan checks that the two agree).
#pragma once

extern "C" {
struct nvmlDevice_st;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;
}
