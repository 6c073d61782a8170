// Writing a file whole or not at all (Note [atomic writes]): checkpoints, traces and exported
// models all go through here.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sinter::detail {

// Note [atomic writes]
// A file is built at "<path>.tmp.<pid>", flushed to disk (fsync), renamed over `path`, and the
// folder is synced so that the rename lasts too. A run that dies midway, a full disk or a write
// error leaves any previous file at `path` as it was and removes the temporary file: readers see
// the old file or the new one, never a part.

// A run of bytes to write.
struct ByteRange {
  const void* data;
  size_t size;
};

// Writes `parts` one after another to `path` as the Note says. A failure throws a sinter::Error
// "<op>: cannot create|write|flush|close|rename ..." naming the temporary file, `path` and the
// system's reason.
void write_file_atomically(const std::string& path, const std::vector<ByteRange>& parts,
                           const char* op);

// `data` as a gzip file's bytes (zlib, best speed); a build without zlib throws an Error naming
// `op`.
std::string gzip(const std::string& data, const char* op);

}  // namespace sinter::detail
