// GPU telemetry from NVML, loaded at run time (Note [gpu telemetry] in include/sinter/cuda.h), and
// the caching allocator's table. Built with and without CUDA: NVML needs no CUDA header or library.
#include "cuda/telemetry.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "cuda/nvml_abi.h"
#include "sinter/cuda.h"

namespace sinter::cuda {
namespace detail {
namespace {

// NVML's calls return an nvmlReturn_t, 0 on success (cuda/nvml_abi.h has the types).
using NvmlHandle = nvmlDevice_t;
using NvmlUtilization = nvmlUtilization_t;
using NvmlMemory = nvmlMemory_t;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlTemperatureGpu = 0;  // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
constexpr int kNvmlClockSm = 1;         // nvmlClockType_t NVML_CLOCK_SM

struct NvmlApi {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned int*) = nullptr;
  int (*by_index)(unsigned int, NvmlHandle*) = nullptr;
  int (*by_pci)(const char*, NvmlHandle*) = nullptr;
  int (*name)(NvmlHandle, char*, unsigned int) = nullptr;
  int (*utilization)(NvmlHandle, NvmlUtilization*) = nullptr;
  int (*memory)(NvmlHandle, NvmlMemory*) = nullptr;
  int (*power)(NvmlHandle, unsigned int*) = nullptr;
  int (*temperature)(NvmlHandle, int, unsigned int*) = nullptr;
  int (*clock)(NvmlHandle, int, unsigned int*) = nullptr;
  bool ready = false;
  // The devices to read, (device number, handle), found once: CUDA's devices by PCI bus id, or
  // NVML's own when the CUDA runtime sees none.
  std::optional<std::vector<std::pair<int, NvmlHandle>>> devices;
};

template <class F>
bool bind(void* lib, const char* symbol, F*& out) {
  out = reinterpret_cast<F*>(dlsym(lib, symbol));
  return out != nullptr;
}

// Loads and initializes NVML from `path`; an API with ready == false where that fails.
NvmlApi load(const std::string& path) {
  NvmlApi api;
  api.lib = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!api.lib) return api;
  const bool bound = bind(api.lib, "nvmlInit_v2", api.init) &&
                     bind(api.lib, "nvmlShutdown", api.shutdown) &&
                     bind(api.lib, "nvmlDeviceGetCount_v2", api.count) &&
                     bind(api.lib, "nvmlDeviceGetHandleByIndex_v2", api.by_index) &&
                     bind(api.lib, "nvmlDeviceGetHandleByPciBusId_v2", api.by_pci) &&
                     bind(api.lib, "nvmlDeviceGetName", api.name) &&
                     bind(api.lib, "nvmlDeviceGetUtilizationRates", api.utilization) &&
                     bind(api.lib, "nvmlDeviceGetMemoryInfo", api.memory) &&
                     bind(api.lib, "nvmlDeviceGetPowerUsage", api.power) &&
                     bind(api.lib, "nvmlDeviceGetTemperature", api.temperature) &&
                     bind(api.lib, "nvmlDeviceGetClockInfo", api.clock);
  if (!bound || api.init() != kNvmlSuccess) {
    dlclose(api.lib);
    return NvmlApi{};
  }
  api.ready = true;
  return api;
}

std::mutex g_mutex;
NvmlApi* g_api = nullptr;  // loaded on first use; replaced only by reload_telemetry

std::string default_library() {
  const char* env = std::getenv("SINTER_NVML_LIBRARY");
  return env && *env ? env : "libnvidia-ml.so.1";
}

NvmlApi& api_locked() {
  if (!g_api) g_api = new NvmlApi(load(default_library()));  // kept to the end of the process
  return *g_api;
}

DeviceStats read(const NvmlApi& api, NvmlHandle h, int device) {
  DeviceStats s;
  s.device = device;
  char name[96] = {};
  if (api.name(h, name, sizeof name) == kNvmlSuccess) s.name = name;
  NvmlUtilization u{};
  if (api.utilization(h, &u) == kNvmlSuccess) s.utilization_percent = u.gpu;
  NvmlMemory m{};
  if (api.memory(h, &m) == kNvmlSuccess) {
    s.memory_used_bytes = static_cast<int64_t>(m.used);
    s.memory_total_bytes = static_cast<int64_t>(m.total);
  }
  unsigned int v = 0;
  if (api.power(h, &v) == kNvmlSuccess) s.power_watts = v / 1000.0;
  if (api.temperature(h, kNvmlTemperatureGpu, &v) == kNvmlSuccess) s.temperature_celsius = v;
  if (api.clock(h, kNvmlClockSm, &v) == kNvmlSuccess) s.sm_clock_mhz = v;
  return s;
}

}  // namespace

void reload_telemetry(const std::string& library) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (g_api && g_api->ready) {
    g_api->shutdown();
    dlclose(g_api->lib);
  }
  delete g_api;
  g_api = new NvmlApi(load(library.empty() ? default_library() : library));
}

}  // namespace detail

bool telemetry_available() {
  const std::lock_guard<std::mutex> lock(detail::g_mutex);
  return detail::api_locked().ready;
}

std::vector<DeviceStats> device_stats() {
  const std::lock_guard<std::mutex> lock(detail::g_mutex);
  detail::NvmlApi& api = detail::api_locked();
  std::vector<DeviceStats> out;
  if (!api.ready) return out;
  if (!api.devices) {
    std::vector<std::pair<int, detail::NvmlHandle>> found;
    const int cuda_devices = device_count();
    for (int d = 0; d < cuda_devices; ++d) {
      detail::NvmlHandle h = nullptr;
      if (api.by_pci(get_device_properties(d).pci_bus_id.c_str(), &h) == detail::kNvmlSuccess) {
        found.emplace_back(d, h);
      }
    }
    unsigned int n = 0;
    if (cuda_devices == 0 && api.count(&n) == detail::kNvmlSuccess) {
      for (unsigned int i = 0; i < n; ++i) {
        detail::NvmlHandle h = nullptr;
        if (api.by_index(i, &h) == detail::kNvmlSuccess) found.emplace_back(static_cast<int>(i), h);
      }
    }
    api.devices = std::move(found);
  }
  for (const auto& [device, handle] : *api.devices)
    out.push_back(detail::read(api, handle, device));
  return out;
}

std::string format_device_stats(const DeviceStats& s) {
  const auto field = [](const std::optional<double>& v, const char* fmt) {
    if (!v) return std::string("n/a");
    char buf[32];
    std::snprintf(buf, sizeof buf, fmt, *v);
    return std::string(buf);
  };
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::string memory = "n/a";
  if (s.memory_used_bytes && s.memory_total_bytes) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.1f/%.1f GiB",
                  static_cast<double>(*s.memory_used_bytes) / kGiB,
                  static_cast<double>(*s.memory_total_bytes) / kGiB);
    memory = buf;
  }
  return "GPU " + field(s.utilization_percent, "%.0f%%") + " " + memory + " " +
         field(s.power_watts, "%.0f W") + " " + field(s.temperature_celsius, "%.0f C") + " " +
         field(s.sm_clock_mhz, "%.0f MHz");
}

std::string memory_summary() {
  const int n = device_count();
  if (n == 0) return "caching allocator: no CUDA device\n";
  constexpr double kMiB = 1024.0 * 1024.0;
  std::vector<MemoryStats> stats;
  for (int d = 0; d < n; ++d) stats.push_back(memory_stats(d));
  std::ostringstream os;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%-24s", "caching allocator");
  os << buf;
  for (int d = 0; d < n; ++d) {
    std::snprintf(buf, sizeof buf, " %14s", ("cuda:" + std::to_string(d)).c_str());
    os << buf;
  }
  os << "\n";
  const auto row = [&](const char* label, auto get, bool bytes) {
    std::snprintf(buf, sizeof buf, "%-24s", label);
    os << buf;
    for (const MemoryStats& m : stats) {
      const int64_t v = get(m);
      if (bytes) {
        std::snprintf(buf, sizeof buf, " %10.1f MiB", static_cast<double>(v) / kMiB);
      } else {
        std::snprintf(buf, sizeof buf, " %14lld", static_cast<long long>(v));
      }
      os << buf;
    }
    os << "\n";
  };
  row(
      "allocated", [](const MemoryStats& m) { return m.allocated_bytes; }, true);
  row(
      "reserved", [](const MemoryStats& m) { return m.reserved_bytes; }, true);
  row(
      "peak allocated", [](const MemoryStats& m) { return m.peak_allocated_bytes; }, true);
  row(
      "peak reserved", [](const MemoryStats& m) { return m.peak_reserved_bytes; }, true);
  row(
      "allocations", [](const MemoryStats& m) { return m.num_allocs; }, false);
  row(
      "frees", [](const MemoryStats& m) { return m.num_frees; }, false);
  row(
      "cache hits", [](const MemoryStats& m) { return m.num_cache_hits; }, false);
  row(
      "segments allocated", [](const MemoryStats& m) { return m.num_device_allocs; }, false);
  row(
      "segments freed", [](const MemoryStats& m) { return m.num_device_frees; }, false);
  row(
      "out-of-memory errors", [](const MemoryStats& m) { return m.num_ooms; }, false);
  return os.str();
}

}  // namespace sinter::cuda
