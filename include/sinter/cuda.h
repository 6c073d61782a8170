// The CUDA runtime as users see it: devices, streams, events, memory statistics. No CUDA header
// here; without CUDA the queries report no device and the rest throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sinter/core/noncopyable.h"

struct CUstream_st;

namespace sinter::cuda {

// False (never an exception) when there is no driver or no device, and in a build without CUDA.
bool is_available();
int device_count();
int current_device();
void set_device(int device);

struct DeviceProperties {
  std::string name;
  int major = 0;
  int minor = 0;
  int multiprocessor_count = 0;
  size_t total_memory = 0;
  std::string pci_bus_id;  // "dddd:bb:dd.f", as NVML names the device
};

// Everywhere in this header, device -1 means the current device.
DeviceProperties get_device_properties(int device = -1);
// Waits for all work queued on the device, on every stream.
void synchronize(int device = -1);

class Event;

// Note [current stream]
// Each host thread has one current stream per device. It starts as the device's legacy default
// stream (handle nullptr), which is ordered against all other blocking streams of the device, so
// code that never touches streams is correct without thinking about them. Kernels take
// current_stream() of their device explicitly; copies run on it (src/internal/cuda_runtime.h); and
// the caching allocator keys its pools by it (Note [caching allocator] in
// src/cuda/caching_allocator.h). Memory allocated on one stream and used on another must be
// ordered by the user (Event + Stream::wait) before it is freed.
class Stream {
 public:
  // The legacy default stream of device 0.
  Stream() = default;
  // Wraps a handle; `owner`, when set, keeps the stream alive for as long as a copy of this exists.
  Stream(CUstream_st* handle, int device, std::shared_ptr<CUstream_st> owner = nullptr)
      : handle_(handle), device_(device), owner_(std::move(owner)) {}

  static Stream default_stream(int device = -1);
  // A new stream that does not synchronize with the legacy default stream; it is destroyed, after
  // its queued work finishes, when the last copy of the returned Stream goes away.
  static Stream create(int device = -1);

  CUstream_st* handle() const { return handle_; }
  int device() const { return device_; }
  bool is_default() const { return handle_ == nullptr; }

  void synchronize() const;
  // True when all work queued so far has finished.
  bool query() const;
  // Work queued on this stream after the call waits until `event` has completed (a no-op when the
  // event was never recorded). The host does not wait.
  void wait(const Event& event) const;

  friend bool operator==(const Stream& a, const Stream& b) {
    return a.handle_ == b.handle_ && a.device_ == b.device_;
  }

 private:
  CUstream_st* handle_ = nullptr;
  int device_ = 0;
  std::shared_ptr<CUstream_st> owner_;
};

Stream current_stream(int device = -1);
// Makes `stream` the current stream of stream.device() in the calling thread.
void set_current_stream(const Stream& stream);

// Makes a stream current for its device until the end of the scope, then restores the previous one.
class StreamGuard : NonCopyable {
 public:
  explicit StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
    set_current_stream(stream);
  }
  ~StreamGuard() { set_current_stream(previous_); }

 private:
  Stream previous_;
};

// A marker in a stream's work. Copies share one underlying CUDA event, which is created on the
// first record() on the device of that stream, so constructing an Event costs nothing and needs no
// device.
class Event {
 public:
  explicit Event(bool enable_timing = true);

  void record(const Stream& stream);
  // Blocks the host until the recorded work has finished; a no-op when never recorded.
  void synchronize() const;
  // True when the recorded work has finished, or when never recorded.
  bool query() const;
  // Milliseconds from this event to `end`; both recorded, with timing enabled, and completed.
  float elapsed_ms(const Event& end) const;

 private:
  friend class Stream;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// The caching allocator's counters for one device. Byte counts are of blocks as handed out (request
// rounded up, see Note [caching allocator]); reserved counts the segments obtained from cudaMalloc.
struct MemoryStats {
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
  int64_t num_cache_hits = 0;     // allocations served without a new segment
  int64_t num_device_allocs = 0;  // segments obtained from the device (cudaMalloc)
  int64_t num_device_frees = 0;   // segments given back (cudaFree)
  int64_t num_ooms = 0;           // out-of-memory errors thrown
};

// Note [no host synchronization]
// While a NoSyncGuard is alive in a thread, every call there that would make the host wait for a
// device throws sinter::Error naming the call: item() and other copies to the host, copies from
// pageable host memory, and synchronize() of a device, stream or event. Graph::capture runs under
// one; tests wrap a training step in one to show that it never waits. Guards nest.
class NoSyncGuard : NonCopyable {
 public:
  NoSyncGuard();
  ~NoSyncGuard();

 private:
  bool previous_;
};

// False inside a NoSyncGuard of the calling thread.
bool host_sync_allowed();
// Throws the error of Note [no host synchronization], naming `what`, inside a NoSyncGuard.
void check_host_sync(const char* what);

// Note [cuda graphs]
// A Graph records the kernels and copies that a piece of host code queues on one device, once, and
// replays them with one launch, so that a training step's hundreds of kernel launches cost the
// host one. capture(fn) runs fn on a fresh stream made current (after the work already queued on
// the current stream), under a NoSyncGuard, with every allocation on that device coming from the
// graph's private memory pool (Note [private pools] in src/cuda/caching_allocator.h): the
// tensors fn creates keep their memory for as long as the graph lives, and each replay() rewrites
// them in place. The work is recorded, not run: replay() runs it. What fn reads must live in
// tensors that outlive the graph (static inputs: copy each batch into them before replay()), and
// host values fn computes (a learning rate, a step count passed to a kernel) are baked in as they
// were at capture: SGD, Adam and AdamW need capturable = true (the learning rate, and Adam's step
// count, then live on the device), an optimizer refuses to make a parameter's state inside a
// capture (a momentum buffer or Adam's moments made there would start afresh at every replay: an
// eager step first makes them), and random numbers (dropout) are refused, since their seed would
// repeat at every replay. A failed capture leaves the Graph as new.
class Graph : NonCopyable {
 public:
  Graph();
  // Waits for the device, then frees the graph and closes its memory pool.
  ~Graph();

  void capture(const std::function<void()>& fn, int device = -1);
  // Queues the captured work on the current stream of the graph's device.
  void replay();
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True while the calling thread runs inside Graph::capture.
bool is_capturing();

// A training step as a CUDA graph: `step` (zero grads, forward, loss, backward, optimizer step on
// the model, optimizer and static input tensors it closes over) runs eagerly for the first
// `warmup` calls of run(), so that what is made lazily exists (gradients, optimizer state, library
// workspaces); the next call captures it and replays it, and every later call replays it. Copy each
// batch into the static inputs before run(). What Note [cuda graphs] says of optimizers and random
// numbers holds here too.
class GraphedStep {
 public:
  explicit GraphedStep(std::function<void()> step, int warmup = 3, int device = -1);
  void run();
  bool graphed() const { return graph_.captured(); }

 private:
  std::function<void()> step_;
  int warmup_;
  int device_;
  int runs_ = 0;
  Graph graph_;
};

// All zeros when no device is available.
MemoryStats memory_stats(int device = -1);
// Sets the peaks to the current values.
void reset_peak_memory_stats(int device = -1);
// Gives every wholly unused cached segment of every device back to the driver, and drops the cache
// of unused pinned host blocks. Memory still in use stays where it is.
void empty_cache();

// The caching allocator's counters of every device as a table (a line saying so when there is no
// device).
std::string memory_summary();

// Note [gpu telemetry]
// What the driver reports of each GPU, read from NVML (libnvidia-ml.so.1), which is loaded at run
// time on first use and never linked: where it is missing (no driver, a container without it, a
// machine without a GPU) every field is absent and costs nothing after the first call. The
// environment variable SINTER_NVML_LIBRARY names another library to load instead. Devices are
// those of the CUDA runtime, matched to NVML's by PCI bus id once, at the first call (later calls
// only read); where the CUDA runtime sees none, NVML's own order.
struct DeviceStats {
  int device = 0;
  std::string name;
  std::optional<double> utilization_percent;  // of time a kernel ran, over NVML's last sample
  std::optional<int64_t> memory_used_bytes;   // by every process on the device
  std::optional<int64_t> memory_total_bytes;
  std::optional<double> power_watts;
  std::optional<double> temperature_celsius;
  std::optional<double> sm_clock_mhz;
};

// One entry per device; empty where NVML is missing or sees no device.
std::vector<DeviceStats> device_stats();
// Whether NVML was found and initialized.
bool telemetry_available();
// "GPU 87% 12.3/80.0 GiB 310 W 61 C 1980 MHz", "n/a" for each absent field.
std::string format_device_stats(const DeviceStats& stats);

}  // namespace sinter::cuda
