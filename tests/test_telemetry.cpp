// GPU telemetry (Note [gpu telemetry]): NVML missing is "n/a" and no error; every field read from a
// stand-in NVML (tests/fake_nvml); the caching allocator's table.
#include <string>
#include <vector>

#include "cuda/telemetry.h"
#include "test_util.h"

namespace sinter {
namespace {

// Loads `library` as NVML for the test's duration, then the default again.
class NvmlFrom {
 public:
  explicit NvmlFrom(const std::string& library) { cuda::detail::reload_telemetry(library); }
  ~NvmlFrom() { cuda::detail::reload_telemetry(""); }
  NvmlFrom(const NvmlFrom&) = delete;
  NvmlFrom& operator=(const NvmlFrom&) = delete;
};

TEST(Telemetry, WithoutNvmlEveryFieldIsNotAvailable) {
  const NvmlFrom missing("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(cuda::telemetry_available());
  EXPECT_TRUE(cuda::device_stats().empty());
  EXPECT_EQ(cuda::format_device_stats({}), "GPU n/a n/a n/a n/a n/a");
}

TEST(Telemetry, ReadsEveryFieldFromNvml) {
  const NvmlFrom fake(SINTER_FAKE_NVML);
  ASSERT_TRUE(cuda::telemetry_available());
  const std::vector<cuda::DeviceStats> stats = cuda::device_stats();
  // CUDA's devices when the runtime sees any (each found by its PCI bus id: the stand-in answers
  // device 0 to all), else NVML's two.
  const int cuda_devices = cuda::device_count();
  ASSERT_EQ(stats.size(), static_cast<size_t>(cuda_devices > 0 ? cuda_devices : 2));
  const cuda::DeviceStats& a = stats[0];
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.name, "Fake GPU A");
  EXPECT_EQ(a.utilization_percent, 87.0);
  EXPECT_EQ(a.memory_used_bytes, (int64_t{25} << 29));
  EXPECT_EQ(a.memory_total_bytes, (int64_t{80} << 30));
  EXPECT_EQ(a.power_watts, 310.5);
  EXPECT_EQ(a.temperature_celsius, 61.0);
  EXPECT_EQ(a.sm_clock_mhz, 1980.0);
  EXPECT_EQ(cuda::format_device_stats(a), "GPU 87% 12.5/80.0 GiB 310 W 61 C 1980 MHz");
  if (cuda_devices == 0) {
    const cuda::DeviceStats& b = stats[1];
    EXPECT_EQ(b.device, 1);
    EXPECT_FALSE(b.power_watts.has_value());  // the board reports none
    EXPECT_EQ(cuda::format_device_stats(b), "GPU 12% 1.0/80.0 GiB n/a 61 C 1980 MHz");
  }
}

TEST(Telemetry, MemorySummaryTabulatesTheAllocator) {
  const std::string table = cuda::memory_summary();
  if (cuda::device_count() == 0) {
    EXPECT_EQ(table, "caching allocator: no CUDA device\n");
    return;
  }
  for (const char* row :
       {"cuda:0", "allocated", "peak reserved", "cache hits", "out-of-memory errors"}) {
    EXPECT_NE(table.find(row), std::string::npos) << row << " missing from:\n" << table;
  }
}

}  // namespace
}  // namespace sinter
