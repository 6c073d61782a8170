// A stand-in for libnvidia-ml.so.1 with the calls Note [gpu telemetry] makes, for the Telemetry
// tests on machines without a driver: two devices with fixed readings; device 1 reports no power
// reading (NVML_ERROR_NOT_SUPPORTED), as some boards do. Any PCI bus id finds device 0.
#include <cstring>

#include "cuda/nvml_abi.h"

struct nvmlDevice_st {
  int index;
};

namespace {
nvmlDevice_st devices[2] = {{0}, {1}};
constexpr int kSuccess = 0, kInvalid = 2, kNotSupported = 3;
constexpr unsigned long long kGiB = 1ull << 30;
}  // namespace

extern "C" {
int nvmlInit_v2() { return kSuccess; }
int nvmlShutdown() { return kSuccess; }
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = 2;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* h) {
  if (i >= 2) return kInvalid;
  *h = &devices[i];
  return kSuccess;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char*, nvmlDevice_t* h) {
  *h = &devices[0];
  return kSuccess;
}
int nvmlDeviceGetName(nvmlDevice_t h, char* name, unsigned int length) {
  std::strncpy(name, h->index == 0 ? "Fake GPU A" : "Fake GPU B", length);
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t* u) {
  *u = {h->index == 0 ? 87u : 12u, 40u};
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t* m) {
  const unsigned long long used = h->index == 0 ? 12 * kGiB + kGiB / 2 : kGiB;
  *m = {80 * kGiB, 80 * kGiB - used, used};
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(nvmlDevice_t h, unsigned int* mw) {
  if (h->index == 1) return kNotSupported;
  *mw = 310500;
  return kSuccess;
}
int nvmlDeviceGetTemperature(nvmlDevice_t, int sensor, unsigned int* c) {
  if (sensor != 0) return kInvalid;
  *c = 61;
  return kSuccess;
}
int nvmlDeviceGetClockInfo(nvmlDevice_t, int type, unsigned int* mhz) {
  if (type != 1) return kInvalid;  // only the SM clock is asked for
  *mhz = 1980;
  return kSuccess;
}
}
