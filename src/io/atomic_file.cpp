// write_file_atomically (Note [atomic writes] in internal/atomic_file.h).
#include "internal/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "sinter/core/error.h"

namespace sinter::detail {

namespace {

std::string errno_text() { return std::strerror(errno); }

// Writes all of [data, data + n) to fd.
bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::vector<ByteRange>& parts,
                           const char* op) {
  SINTER_CHECK(!path.empty(), op, ": empty path");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SINTER_CHECK(fd >= 0, op, ": cannot create ", tmp, " (for ", path, "): ", errno_text());
  auto fail = [&](const std::string& what) {
    const std::string reason = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    SINTER_THROW(op, ": ", what, " ", tmp, " (for ", path, "): ", reason);
  };
  for (const ByteRange& part : parts) {
    if (part.size > 0 && !write_all(fd, part.data, part.size)) fail("cannot write");
  }
  if (::fsync(fd) != 0) fail("cannot flush");
  if (::close(fd) != 0) {
    const std::string reason = errno_text();
    ::unlink(tmp.c_str());
    SINTER_THROW(op, ": cannot close ", tmp, " (for ", path, "): ", reason);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(tmp.c_str());
    SINTER_THROW(op, ": cannot rename ", tmp, " to ", path, ": ", reason);
  }
  // The rename is durable only once the directory entry is on disk. The file itself is complete,
  // so a failure here is not worth an error.
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace sinter::detail
