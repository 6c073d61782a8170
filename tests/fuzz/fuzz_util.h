// Shared by the libFuzzer targets here (Note [fuzz targets] in tests/fuzz/README.md): a private
// folder for the files an input becomes, and the one outcome a reader may have besides success.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "sinter/core/error.h"

namespace sinter::fuzz {

// A folder of this process's own, made on first use (the fuzzer's workers run in parallel).
inline const std::string& work_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/sinter-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("sinter fuzz: mkdtemp");
      std::abort();
    }
    return pattern;
  }();
  return dir;
}

inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = work_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "sinter fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "sinter fuzz: %s\n", what.c_str());
  std::abort();
}

// Runs read(): it may succeed or throw a sinter::Error whose text names `path`. Any other
// exception, or an error that does not say which file it is about, is a finding (abort, so that
// libFuzzer keeps the input). Returns whether read() succeeded.
template <class F>
bool reads_or_names_the_file(const std::string& path, F&& read) {
  try {
    read();
    return true;
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find(path) == std::string::npos) fail("the error does not name " + path + ": " + msg);
  } catch (const std::exception& e) {
    fail(std::string("an exception other than sinter::Error: ") + e.what());
  }
  return false;
}

}  // namespace sinter::fuzz
