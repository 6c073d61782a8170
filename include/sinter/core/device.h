// Device: where a tensor's storage lives (the host, or one CUDA device).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace sinter {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  // Parses "cpu", "cuda" or "cuda:N".
  static Device parse(const std::string& s);

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && (a.type == DeviceType::cpu || a.index == b.index);
  }
};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace sinter
