// The op profiler (Note [profiler] in src/profiler/profiler.cpp): while a Guard records, every op
// and every autograd node's backward records its name, input shapes, host time, self time, device
// time (CUDA events) and the bytes it allocated; the Guard prints them as a table and writes a
// Chrome trace (Perfetto, chrome://tracing, TensorBoard's profile plugin). A Schedule records a
// window of training steps, as torch.profiler.schedule does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sinter/core/noncopyable.h"

namespace sinter::profiler {

namespace detail {
class OpScope;
}  // namespace detail

struct Event {
  std::string name;      // the op's; "<op> backward" for the backward of a node op <op> recorded,
                         // "AccumulateGrad" for a leaf's gradient accumulation
  std::string shapes;    // the tensor inputs' shapes, "[2, 3], [3]" (a backward's: its gradients)
  int64_t start_ns = 0;  // host clock, from the Guard's start
  int64_t end_ns = 0;
  int64_t self_ns = 0;          // end - start less the time of the ops it called (one level deeper)
  double device_ms = -1;        // from CUDA events around the op; -1 for an op on the CPU
  int64_t bytes_allocated = 0;  // by the op and the ops it called
  int depth = 0;                // 0 for an op called by the program, 1 for one called by an op, ...
  uint64_t thread = 0;          // a small number per thread
  std::string thread_name;      // "main thread", "pool worker 1", ... (Note [trace thread names]
                                // in src/profiler/profiler.cpp)
  bool backward = false;        // an autograd node's backward, run by the engine
};

// Which steps a Guard records (Guard::step() ends one), as torch.profiler.schedule: the first
// `skip_first` steps not, then `repeat` cycles (0: no end) of `wait` steps not recorded, `warmup`
// steps recorded and dropped (their first-call costs stay out of the figures) and `active` steps
// recorded. After a cycle's last active step the Guard calls on_trace_ready with those steps'
// events (events(), table(), write_chrome_trace), then drops them.
struct Schedule {
  int64_t skip_first = 0;
  int64_t wait = 0;
  int64_t warmup = 0;
  int64_t active = 1;
  int64_t repeat = 1;
};

// Records while alive (or in its schedule's steps); one at a time per process (a second throws).
// Ops on every thread are recorded; each is also an NVTX range for Nsight Systems. An op that calls
// itself again (an op of autocast's policy, once more on cast operands) is recorded once.
class Guard : NonCopyable {
 public:
  Guard();  // records until destroyed
  Guard(const Schedule& schedule, std::function<void(const Guard&)> on_trace_ready);
  ~Guard();

  // Ends a step of the schedule (without one, only counts).
  void step();
  int64_t step_num() const { return step_; }
  // Whether ops are being recorded now (the schedule's warm-up and active steps).
  bool recording() const;

  // The events so far, in the order they ended; reading CUDA timings waits for the device.
  std::vector<Event> events() const;
  // One row per name: calls, total host ms (with the ops it called), self host ms (without),
  // mean host ms, total device ms, bytes allocated, sorted by self time: the self times add up to
  // the recorded ops' share of the run, each moment counted once.
  std::string table() const;
  // The events as complete ("X") events of the Chrome trace format (args: shapes, depth, self time,
  // bytes, device ms; backward nodes in category "backward"), after metadata ("M") events that name
  // the process "sinter" (pid: the process id) and each thread's track, written atomically;
  // gzip-compressed
  // when `path` ends in ".gz" (TensorBoard's profile plugin reads
  // "<logdir>/plugins/profile/<run>/<host>.trace.json.gz").
  void write_chrome_trace(const std::string& path) const;

  // Bytes saved for backward (Note [saved bytes] in src/profiler/profiler.cpp): the storage of the
  // tensors autograd holds for backward, made while this Guard lives, each storage once,
  // parameters (leaves that require grad) not counted. saved_bytes() is what is held now;
  // peak_saved_bytes() the most held at once since the Guard started or reset_peak_saved_bytes().
  // table() ends with both.
  int64_t saved_bytes() const;
  int64_t peak_saved_bytes() const;
  void reset_peak_saved_bytes();

 private:
  void set_phase_for(int64_t step);
  std::optional<Schedule> schedule_;
  std::function<void(const Guard&)> on_trace_ready_;
  int64_t step_ = 0;
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
