// JSON text for the files Sinter writes by hand (the profiler's Chrome trace, the benchmarks'
// result files), where the library may be built without nlohmann_json.
#pragma once

#include <cstdio>
#include <string>

namespace sinter::detail {

// `s` as a quoted JSON string: quotes and backslashes escaped, control characters as \u00XX.
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace sinter::detail
