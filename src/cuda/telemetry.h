// Test access to the NVML loader of src/cuda/telemetry.cpp (Note [gpu telemetry]).
#pragma once

#include <string>

namespace sinter::cuda::detail {

// Drops the loaded NVML (if any) and loads `library` instead (empty: the default,
// SINTER_NVML_LIBRARY or libnvidia-ml.so.1), as the first use would.
void reload_telemetry(const std::string& library);

}  // namespace sinter::cuda::detail
