// The op profiler (Note [profiler] in src/profiler/profiler.cpp): while a Guard lives, every op
// records its name, input shapes, host time, device time (CUDA events) and the bytes it allocated;
// the Guard prints them as a table and writes a Chrome trace (Perfetto, chrome://tracing).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sinter/core/noncopyable.h"

namespace sinter::profiler {

namespace detail {
class OpScope;
}  // namespace detail

struct Event {
  std::string name;
  std::string shapes;    // the tensor inputs' shapes, "[2, 3], [3]"
  int64_t start_ns = 0;  // host clock, from the Guard's start
  int64_t end_ns = 0;
  double device_ms = -1;        // from CUDA events around the op; -1 for an op on the CPU
  int64_t bytes_allocated = 0;  // by the op and the ops it called
  int depth = 0;                // 0 for an op called by the program, 1 for one called by an op, ...
  uint64_t thread = 0;          // a small number per thread
};

// Records while alive; one at a time per process (a second throws). Ops on every thread are
// recorded; each is also an NVTX range for Nsight Systems.
class Guard : NonCopyable {
 public:
  Guard();
  ~Guard();

  // The events so far, in the order they ended; reading CUDA timings waits for the device.
  std::vector<Event> events() const;
  // One row per name: calls, total and mean host ms, total device ms, bytes allocated, sorted by
  // total host time (of calls at depth 0 and below: nested ops also count in their caller's time).
  std::string table() const;
  // The events as complete ("X") events of the Chrome trace format, written atomically.
  void write_chrome_trace(const std::string& path) const;

  // Bytes saved for backward (Note [saved bytes] in src/profiler/profiler.cpp): the storage of the
  // tensors autograd holds for backward, made while this Guard lives, each storage once,
  // parameters (leaves that require grad) not counted. saved_bytes() is what is held now;
  // peak_saved_bytes() the most held at once since the Guard started or reset_peak_saved_bytes().
  // table() ends with both.
  int64_t saved_bytes() const;
  int64_t peak_saved_bytes() const;
  void reset_peak_saved_bytes();
};

// A named span of a program (a training phase, "forward", "epoch 3"): recorded like an op while a
// Guard lives, and an NVTX range.
class Range : NonCopyable {
 public:
  explicit Range(const char* name);
  ~Range();

 private:
  std::unique_ptr<detail::OpScope> scope_;
};

}  // namespace sinter::profiler
