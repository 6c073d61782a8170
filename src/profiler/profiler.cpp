// Note [profiler]
// Every public op starts with SINTER_PROFILE_OP(name, inputs...) (internal/profile_op.h). While a
// profiler::Guard lives, that scope records the op: its name and its tensor inputs' shapes, host
// clock at entry and exit, the bytes Storage::allocate handed out on its thread in between, and
// for an op with a CUDA input a pair of timing events on the current stream (read when the events
// are asked for, which waits for the device). Ops an op calls are recorded too, one level deeper,
// so the trace nests; each event's self time is its own less its children's, so the self times add
// up to the recorded time once. The autograd engine records each node's backward the same way
// ("<op> backward", Event::backward), with the ops it calls nested in it. An op of autocast's
// policy calls itself once more on cast operands: that re-entry is not recorded again, so an op
// counts once per call. Each op is also an NVTX range (in a CUDA build), which Nsight Systems shows
// on its timeline; nothing is paid for NVTX without a tool attached. While no Guard records, the
// cost per op is one relaxed atomic load. The factories of src/ops (rand, randn, randint,
// multinomial, arange, linspace) are ops and recorded; the tensor constructors of src/tensor
// (empty, full, zeros, ones, eye, from_vector, from_blob and their _like forms) are not: every op
// allocates its output through them, so their time and bytes count in the op that calls them.
#include "sinter/profiler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
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
  std::map<uint64_t, std::string> thread_names;  // by ThreadInfo::id, for the process's life
};

State& state() {
  static State* s = new State;  // used by ops until the end of the process
  return *s;
}

// Note [trace thread names]
// Each thread that records an op gets a small number (Event::thread, the trace's "tid") and a name
// (Event::thread_name), which the Chrome trace states in "thread_name" metadata events, so that
// Perfetto and chrome://tracing label its track: "main thread" for the process's first thread,
// "pool worker <k>" for the CPU thread pool's k-th worker (src/core/parallel.cpp), "data loader"
// for a DataLoader's producer (src/data/dataloader.cpp), which name themselves with name_thread
// when they start; any other thread is "thread <number>".
bool is_main_thread() {
#ifdef SYS_gettid
  return syscall(SYS_gettid) == getpid();
#else
  return false;
#endif
}

void set_thread_name(uint64_t id, std::string name) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.thread_names[id] = std::move(name);
}

struct ThreadInfo {
  int depth = 0;
  int64_t allocated = 0;
  uint64_t id = state().next_thread.fetch_add(1);
  const char* current = nullptr;  // the innermost recorded op's name

  ThreadInfo() {
    set_thread_name(id, is_main_thread() ? "main thread" : "thread " + std::to_string(id));
  }
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

void name_thread(std::string name) { set_thread_name(t_info.id, std::move(name)); }

void note_allocation(size_t nbytes) {
  if (g_recording.load(std::memory_order_relaxed)) t_info.allocated += static_cast<int64_t>(nbytes);
}

bool reentered(const char* name) {
  return t_info.current != nullptr && std::strcmp(t_info.current, name) == 0;
}

void OpScope::begin(const char* name, std::string shapes, bool cuda, bool backward) {
  State& s = state();
  Record r;
  r.event.name = name;
  r.event.shapes = std::move(shapes);
  r.event.backward = backward;
  outer_ = t_info.current;
  t_info.current = name;
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
  t_info.current = outer_;
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

namespace {

std::atomic<bool> g_guard_alive{false};

void claim_guard() {
  bool expected = false;
  SINTER_CHECK(g_guard_alive.compare_exchange_strong(expected, true),
               "profiler::Guard: another Guard is recording; one at a time");
}

// Drops the records so far; an op running now is not recorded (its generation is gone).
void drop_records() {
  detail::State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.records.clear();
  ++s.generation;
}

enum class Phase { Off, Warmup, Active };

// Step `k`'s phase under `sc`, and whether it is the last active step of its cycle.
std::pair<Phase, bool> phase_of(const Schedule& sc, int64_t k) {
  if (k < sc.skip_first) return {Phase::Off, false};
  const int64_t cycle = sc.wait + sc.warmup + sc.active, j = k - sc.skip_first;
  if (sc.repeat > 0 && j >= sc.repeat * cycle) return {Phase::Off, false};
  const int64_t r = j % cycle;
  if (r < sc.wait) return {Phase::Off, false};
  if (r < sc.wait + sc.warmup) return {Phase::Warmup, false};
  return {Phase::Active, r == cycle - 1};
}

}  // namespace

Guard::Guard() {
  claim_guard();
  {
    detail::State& s = state();
    const std::lock_guard<std::mutex> lock(s.mu);
    s.origin = detail::Clock::now();
  }
  drop_records();
  reset_peak_saved_bytes();
  detail::g_recording.store(true);
}

Guard::Guard(const Schedule& schedule, std::function<void(const Guard&)> on_trace_ready) {
  SINTER_CHECK(schedule.skip_first >= 0 && schedule.wait >= 0 && schedule.warmup >= 0 &&
                   schedule.active >= 1 && schedule.repeat >= 0,
               "profiler::Schedule: skip_first ", schedule.skip_first, ", wait ", schedule.wait,
               ", warmup ", schedule.warmup, ", active ", schedule.active, ", repeat ",
               schedule.repeat, " (active >= 1, the others >= 0)");
  claim_guard();
  schedule_ = schedule;
  on_trace_ready_ = std::move(on_trace_ready);
  {
    detail::State& s = state();
    const std::lock_guard<std::mutex> lock(s.mu);
    s.origin = detail::Clock::now();
  }
  drop_records();
  reset_peak_saved_bytes();
  set_phase_for(0);
}

Guard::~Guard() {
  detail::g_recording.store(false);
  drop_records();
  g_guard_alive.store(false);
}

bool Guard::recording() const { return detail::g_recording.load(); }

void Guard::set_phase_for(int64_t step) {
  const Phase now = phase_of(*schedule_, step).first;
  const Phase before = step > 0 ? phase_of(*schedule_, step - 1).first : Phase::Off;
  if (now == Phase::Active && before != Phase::Active) drop_records();  // the warm-up's
  detail::g_recording.store(now != Phase::Off);
}

void Guard::step() {
  if (!schedule_) {
    ++step_;
    return;
  }
  const auto [phase, last] = phase_of(*schedule_, step_);
  if (phase == Phase::Active && last) {
    detail::g_recording.store(false);
    if (on_trace_ready_) on_trace_ready_(*this);
    drop_records();
  }
  ++step_;
  set_phase_for(step_);
}

// Each event's self time: its time less that of the events one level deeper inside it on its
// thread (`out` is sorted by end; a parent ends after its children).
void fill_self_times(std::vector<Event>& out) {
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (out[a].thread != out[b].thread) return out[a].thread < out[b].thread;
    if (out[a].start_ns != out[b].start_ns) return out[a].start_ns < out[b].start_ns;
    return out[a].depth < out[b].depth;
  });
  std::vector<size_t> open;  // the events containing the current one, outermost first
  for (const size_t i : order) {
    Event& e = out[i];
    e.self_ns = e.end_ns - e.start_ns;
    while (!open.empty() &&
           (out[open.back()].thread != e.thread || out[open.back()].depth >= e.depth ||
            out[open.back()].end_ns < e.end_ns)) {
      open.pop_back();
    }
    if (!open.empty() && out[open.back()].depth == e.depth - 1) {
      out[open.back()].self_ns -= e.end_ns - e.start_ns;
    }
    open.push_back(i);
  }
}

std::vector<Event> Guard::events() const {
  detail::State& s = state();
  std::vector<Event> out;
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    out.reserve(s.records.size());
    for (detail::Record& r : s.records) {
      if (!r.ended) continue;  // still running
      if (r.start && r.stop && r.event.device_ms < 0) {
        r.stop->synchronize();
        r.event.device_ms = r.start->elapsed_ms(*r.stop);
      }
      out.push_back(r.event);
      out.back().thread_name = s.thread_names[r.event.thread];
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Event& a, const Event& b) { return a.end_ns < b.end_ns; });
  fill_self_times(out);
  return out;
}

std::string Guard::table() const {
  struct Row {
    int64_t calls = 0;
    double host_ms = 0, self_ms = 0, device_ms = 0;
    int64_t bytes = 0;
    bool on_device = false;
  };
  std::map<std::string, Row> rows;
  for (const Event& e : events()) {
    Row& r = rows[e.name];
    ++r.calls;
    r.host_ms += static_cast<double>(e.end_ns - e.start_ns) / 1e6;
    r.self_ms += static_cast<double>(e.self_ns) / 1e6;
    if (e.device_ms >= 0) {
      r.device_ms += e.device_ms;
      r.on_device = true;
    }
    r.bytes += e.bytes_allocated;
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.self_ms > b.second.self_ms;
  });
  // The names' column: 32 wide, or as wide as the longest name, so that the columns line up.
  int width = 32;
  for (const auto& [name, r] : sorted) width = std::max(width, static_cast<int>(name.size()));
  std::ostringstream os;
  std::vector<char> line(static_cast<size_t>(width) + 128);
  std::snprintf(line.data(), line.size(), "%-*s %8s %12s %12s %10s %12s %12s\n", width, "op",
                "calls", "total ms", "self ms", "mean ms", "device ms", "MiB alloc");
  os << line.data();
  for (const auto& [name, r] : sorted) {
    const std::string device = r.on_device ? std::to_string(r.device_ms) : "-";
    std::snprintf(line.data(), line.size(), "%-*s %8lld %12.3f %12.3f %10.4f %12s %12.2f\n", width,
                  name.c_str(), static_cast<long long>(r.calls), r.host_ms, r.self_ms,
                  r.host_ms / static_cast<double>(r.calls), device.substr(0, 12).c_str(),
                  static_cast<double>(r.bytes) / (1024.0 * 1024.0));
    os << line.data();
  }
  std::snprintf(line.data(), line.size(), "saved for backward: %.2f MiB now, %.2f MiB at most\n",
                static_cast<double>(saved_bytes()) / (1024.0 * 1024.0),
                static_cast<double>(peak_saved_bytes()) / (1024.0 * 1024.0));
  os << line.data();
  return os.str();
}

using ::sinter::detail::json_string;

void Guard::write_chrome_trace(const std::string& path) const {
  const std::vector<Event> all = events();
  const long long pid = getpid();
  std::ostringstream os;
  // Per Note [trace thread names], metadata events name the process and each thread's track.
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
     << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid
     << ",\"tid\":0,\"args\":{\"name\":\"sinter\"}}";
  std::map<uint64_t, std::string> threads;
  for (const Event& e : all) threads.emplace(e.thread, e.thread_name);
  for (const auto& [tid, name] : threads) {
    os << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << tid
       << ",\"args\":{\"name\":" << json_string(name) << "}}";
    os << ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << tid
       << ",\"args\":{\"sort_index\":" << tid << "}}";
  }
  char num[96];
  for (const Event& e : all) {
    os << ",\n{\"name\":" << json_string(e.name) << ",\"cat\":\""
       << (e.backward ? "backward" : "op") << "\",\"ph\":\"X\",\"pid\":" << pid
       << ",\"tid\":" << e.thread;
    std::snprintf(num, sizeof num, ",\"ts\":%.3f,\"dur\":%.3f",
                  static_cast<double>(e.start_ns) / 1e3,
                  static_cast<double>(e.end_ns - e.start_ns) / 1e3);
    os << num << ",\"args\":{\"shapes\":" << json_string(e.shapes) << ",\"depth\":" << e.depth;
    std::snprintf(num, sizeof num, ",\"self_us\":%.3f", static_cast<double>(e.self_ns) / 1e3);
    os << num << ",\"bytes_allocated\":" << e.bytes_allocated;
    if (e.device_ms >= 0) {
      std::snprintf(num, sizeof num, ",\"device_ms\":%.6f", e.device_ms);
      os << num;
    }
    os << "}}";
  }
  os << "\n]}\n";
  std::string text = os.str();
  const std::string gz = ".gz";
  if (path.size() > gz.size() && path.compare(path.size() - gz.size(), gz.size(), gz) == 0) {
    text = ::sinter::detail::gzip(text, "profiler");
  }
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
