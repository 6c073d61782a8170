// Note [profiler]
// Every public op starts with SINTER_PROFILE_OP(name, inputs...) (internal/profile_op.h). While a
// profiler::Guard lives, that scope records the op: its name and its tensor inputs' shapes, host
// clock at entry and exit, the bytes Storage::allocate handed out on its thread in between, and
// for an op with a CUDA input a pair of timing events on the current stream (read when the events
// are asked for, which waits for the device). Ops an op calls are recorded too, one level deeper,
// so the table's times are inclusive and the trace nests. Each op is also an NVTX range (in a CUDA
// build), which Nsight Systems shows on its timeline; nothing is paid for NVTX without a tool
// attached. While no Guard lives, the cost per op is one relaxed atomic load.
#include "sinter/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "internal/atomic_file.h"
#include "internal/json_text.h"
#include "internal/profile_op.h"
#include "sinter/core/error.h"
#include "sinter/cuda.h"

#ifdef SINTER_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace sinter::profiler {
namespace detail {

std::atomic<bool> g_recording{false};

namespace {

using Clock = std::chrono::steady_clock;

struct Record {
  Event event;
  std::optional<cuda::Event> start, stop;
  bool ended = false;
};

struct State {
  std::mutex mu;
  Clock::time_point origin;
  uint64_t generation = 0;      // one per Guard: an op that outlives its Guard is not recorded
  std::vector<Record> records;  // in the order the ops began; filled in as they end
  std::atomic<uint64_t> next_thread{0};
};

State& state() {
  static State* s = new State;  // used by ops until the end of the process
  return *s;
}

struct ThreadInfo {
  int depth = 0;
  int64_t allocated = 0;
  uint64_t id = state().next_thread.fetch_add(1);
};
thread_local ThreadInfo t_info;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - state().origin)
      .count();
}

void nvtx_push(const char* name) {
#ifdef SINTER_WITH_CUDA
  nvtxRangePushA(name);
#else
  (void)name;
#endif
}

void nvtx_pop() {
#ifdef SINTER_WITH_CUDA
  nvtxRangePop();
#endif
}

}  // namespace

void note_allocation(size_t nbytes) {
  if (g_recording.load(std::memory_order_relaxed)) t_info.allocated += static_cast<int64_t>(nbytes);
}

void OpScope::begin(const char* name, std::string shapes, bool cuda) {
  State& s = state();
  Record r;
  r.event.name = name;
  r.event.shapes = std::move(shapes);
  r.event.depth = t_info.depth++;
  r.event.thread = t_info.id;
  r.event.bytes_allocated = t_info.allocated;  // until end(): the count at entry
  if (cuda && !cuda::is_capturing()) {         // a graph being captured cannot be timed op by op
    r.start.emplace();
    r.start->record(cuda::current_stream());
  }
  nvtx_push(name);
  const std::lock_guard<std::mutex> lock(s.mu);
  r.event.start_ns = now_ns();
  slot_ = s.records.size();
  generation_ = s.generation;
  s.records.push_back(std::move(r));
  active_ = true;
}

void OpScope::end() {
  nvtx_pop();
  --t_info.depth;
  State& s = state();
  std::optional<cuda::Event> stop;
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    if (generation_ != s.generation) return;  // the Guard ended while the op ran
    if (s.records[slot_].start) stop.emplace();
  }
  if (stop) stop->record(cuda::current_stream());
  const std::lock_guard<std::mutex> lock(s.mu);
  if (generation_ != s.generation) return;
  Record& r = s.records[slot_];
  r.event.end_ns = now_ns();
  r.event.bytes_allocated = t_info.allocated - r.event.bytes_allocated;
  r.stop = std::move(stop);
  r.ended = true;
}

// Note [saved bytes]
// What autograd keeps for backward is the memory activation checkpointing trades for compute, so
// the profiler counts it: every SavedTensor made while a Guard lives registers its storage here
// (parameters excepted), counted once however many saved tensors share it, until the last of them
// is gone (backward releases them, or the graph is dropped). The Guard reports the bytes held now
// and the most held at once since it started: for a training step, the peak is at the end of
// forward.
namespace {

struct SavedRegistry {
  std::mutex mu;
  std::unordered_map<const void*, std::pair<size_t, int64_t>> storages;  // bytes, references
  int64_t current = 0, peak = 0;
};

SavedRegistry& saved_registry() {
  static SavedRegistry r;
  return r;
}

}  // namespace

bool saved_add(const void* storage, size_t nbytes) {
  SavedRegistry& r = saved_registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  auto [it, fresh] = r.storages.try_emplace(storage, nbytes, 0);
  if (++it->second.second == 1) {
    r.current += static_cast<int64_t>(it->second.first);
    r.peak = std::max(r.peak, r.current);
  }
  (void)fresh;
  return true;
}

void saved_remove(const void* storage) {
  SavedRegistry& r = saved_registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.storages.find(storage);
  if (it == r.storages.end()) return;
  if (--it->second.second == 0) {
    r.current -= static_cast<int64_t>(it->second.first);
    r.storages.erase(it);
  }
}

}  // namespace detail

using detail::state;

int64_t Guard::saved_bytes() const {
  detail::SavedRegistry& r = detail::saved_registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  return r.current;
}

int64_t Guard::peak_saved_bytes() const {
  detail::SavedRegistry& r = detail::saved_registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  return r.peak;
}

void Guard::reset_peak_saved_bytes() {
  detail::SavedRegistry& r = detail::saved_registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  r.peak = r.current;
}

Guard::Guard() {
  bool expected = false;
  SINTER_CHECK(detail::g_recording.compare_exchange_strong(expected, true),
               "profiler::Guard: another Guard is recording; one at a time");
  detail::State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.records.clear();
  ++s.generation;
  s.origin = detail::Clock::now();
  reset_peak_saved_bytes();
}

Guard::~Guard() {
  detail::g_recording.store(false);
  detail::State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.records.clear();
  ++s.generation;
}

std::vector<Event> Guard::events() const {
  detail::State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  std::vector<Event> out;
  out.reserve(s.records.size());
  for (detail::Record& r : s.records) {
    if (!r.ended) continue;  // still running
    if (r.start && r.stop && r.event.device_ms < 0) {
      r.stop->synchronize();
      r.event.device_ms = r.start->elapsed_ms(*r.stop);
    }
    out.push_back(r.event);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Event& a, const Event& b) { return a.end_ns < b.end_ns; });
  return out;
}

std::string Guard::table() const {
  struct Row {
    int64_t calls = 0;
    double host_ms = 0, device_ms = 0;
    int64_t bytes = 0;
    bool on_device = false;
  };
  std::map<std::string, Row> rows;
  for (const Event& e : events()) {
    Row& r = rows[e.name];
    ++r.calls;
    r.host_ms += static_cast<double>(e.end_ns - e.start_ns) / 1e6;
    if (e.device_ms >= 0) {
      r.device_ms += e.device_ms;
      r.on_device = true;
    }
    r.bytes += e.bytes_allocated;
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.host_ms > b.second.host_ms;
  });
  std::ostringstream os;
  char line[256];
  std::snprintf(line, sizeof line, "%-28s %8s %12s %10s %12s %12s\n", "op", "calls", "host ms",
                "mean ms", "device ms", "MiB alloc");
  os << line;
  for (const auto& [name, r] : sorted) {
    const std::string device = r.on_device ? std::to_string(r.device_ms) : "-";
    std::snprintf(line, sizeof line, "%-28s %8lld %12.3f %10.4f %12s %12.2f\n", name.c_str(),
                  static_cast<long long>(r.calls), r.host_ms,
                  r.host_ms / static_cast<double>(r.calls), device.substr(0, 12).c_str(),
                  static_cast<double>(r.bytes) / (1024.0 * 1024.0));
    os << line;
  }
  std::snprintf(line, sizeof line, "saved for backward: %.2f MiB now, %.2f MiB at most\n",
                static_cast<double>(saved_bytes()) / (1024.0 * 1024.0),
                static_cast<double>(peak_saved_bytes()) / (1024.0 * 1024.0));
  os << line;
  return os.str();
}

using ::sinter::detail::json_string;

void Guard::write_chrome_trace(const std::string& path) const {
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  char num[64];
  for (const Event& e : events()) {
    os << (first ? "\n" : ",\n");
    first = false;
    os << "{\"name\":" << json_string(e.name)
       << ",\"cat\":\"op\",\"ph\":\"X\",\"pid\":0,\"tid\":" << e.thread;
    std::snprintf(num, sizeof num, ",\"ts\":%.3f,\"dur\":%.3f",
                  static_cast<double>(e.start_ns) / 1e3,
                  static_cast<double>(e.end_ns - e.start_ns) / 1e3);
    os << num << ",\"args\":{\"shapes\":" << json_string(e.shapes)
       << ",\"bytes_allocated\":" << e.bytes_allocated;
    if (e.device_ms >= 0) {
      std::snprintf(num, sizeof num, ",\"device_ms\":%.6f", e.device_ms);
      os << num;
    }
    os << "}}";
  }
  os << "\n]}\n";
  const std::string text = os.str();
  ::sinter::detail::write_file_atomically(path, {{text.data(), text.size()}}, "profiler");
}

Range::Range(const char* name) {
  if (detail::g_recording.load(std::memory_order_relaxed)) {
    scope_ = std::make_unique<detail::OpScope>(name);  // an NVTX range too
  } else {
    detail::nvtx_push(name);
  }
}

Range::~Range() {
  if (scope_) {
    scope_.reset();
  } else {
    detail::nvtx_pop();
  }
}

}  // namespace sinter::profiler
