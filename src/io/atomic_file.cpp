// write_file_atomically (Note [atomic writes] in src/internal/atomic_file.h), and gzip for the
// files written compressed.
#include "internal/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "sinter/core/error.h"

#ifdef SINTER_WITH_ZLIB
#include <zlib.h>
#endif

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

std::string gzip(const std::string& data, const char* op) {
#ifdef SINTER_WITH_ZLIB
  SINTER_CHECK(data.size() < (size_t{1} << 31), op, ": ", data.size(),
               " bytes are too many to compress in one piece");
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
  SINTER_CHECK(deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK,
               op, ": zlib cannot start compressing");
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  SINTER_CHECK(rc == Z_STREAM_END, op, ": zlib could not compress ", data.size(), " bytes (", rc,
               ")");
  return out;
#else
  (void)data;
  SINTER_THROW(op, ": this Sinter was built without zlib, so it cannot write .gz files");
#endif
}

}  // namespace sinter::detail
