// Builds the text of a sinter::Error: the message, then where it was raised.
#include "sinter/core/error.h"

#include <cstring>

namespace sinter::detail {

void throw_error(const char* file, int line, const std::string& msg) {
  const char* base = std::strrchr(file, '/');
  throw Error(str_cat(msg, " (", base ? base + 1 : file, ":", line, ")"));
}

}  // namespace sinter::detail
