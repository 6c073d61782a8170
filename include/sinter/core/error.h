// sinter::Error and the check macros every layer uses to report bad input.
// SINTER_CHECK(cond, "op: what", value, ...) streams its arguments into the message and adds
// file:line.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace sinter {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

template <typename T>
void stream_one(std::ostringstream& os, const T& v) {
  os << v;
}

template <typename T>
void stream_one(std::ostringstream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
}

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (stream_one(os, args), ...);
  return os.str();
}

[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);

}  // namespace detail
}  // namespace sinter

#define SINTER_CHECK(cond, ...)                                                                  \
  do {                                                                                           \
    if (!(cond)) [[unlikely]] {                                                                  \
      ::sinter::detail::throw_error(__FILE__, __LINE__, ::sinter::detail::str_cat(__VA_ARGS__)); \
    }                                                                                            \
  } while (0)

#define SINTER_THROW(...) \
  ::sinter::detail::throw_error(__FILE__, __LINE__, ::sinter::detail::str_cat(__VA_ARGS__))
