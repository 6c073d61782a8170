// sinter::cuda over the CUDA runtime API: devices, streams, events, per-device caching allocators,
// the pinned host cache and copies. Nothing runs before the first call, so loading needs no GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>
#include <vector>

#include "cuda/caching_allocator.h"
#include "internal/cuda_check.h"
#include "internal/cuda_runtime.h"
#include "sinter/core/error.h"
#include "sinter/core/noncopyable.h"
#include "sinter/cuda.h"

namespace sinter::cuda {
namespace {

constexpr int kMaxDevices = 64;

// For destructors and deleters, which log instead of throwing. At process exit the runtime may
// already be unloading; calls then fail harmlessly and are not worth a message.
void log_if_failed(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  if (err == cudaErrorCudartUnloading || err == cudaErrorContextIsDestroyed) return;
  std::fprintf(stderr, "sinter: %s failed: %s\n", what, cudaGetErrorString(err));
}

// Resolves -1 to the current device and checks that the device exists.
int checked_device(int device) {
  SINTER_CHECK(is_available(), "cuda: no CUDA device is available");
  if (device == -1) device = current_device();
  const int n = device_count();
  SINTER_CHECK(device >= 0 && device < n, "cuda: device ", device, " does not exist (", n,
               " CUDA devices)");
  return device;
}

// An event for ordering only, destroyed with the scope (the driver frees it once it has completed).
class ScopedEvent : NonCopyable {
 public:
  explicit ScopedEvent(int device) {
    DeviceGuard guard(device);
    SINTER_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~ScopedEvent() { log_if_failed(cudaEventDestroy(event_), "cudaEventDestroy"); }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// The slots of Note [current stream]: one per device, filled lazily with the legacy default stream.
thread_local std::vector<Stream> t_current_streams;

Stream& current_slot(int device) {
  while (static_cast<int>(t_current_streams.size()) <= device) {
    t_current_streams.emplace_back(nullptr, static_cast<int>(t_current_streams.size()));
  }
  return t_current_streams[device];
}

// A new event for ordering only, recorded on `stream` of `device`; the caller destroys it.
cudaEvent_t record_new_event(cudaStream_t stream, int device) {
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  SINTER_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const cudaError_t err = cudaEventRecord(event, stream);
  if (err != cudaSuccess) log_if_failed(cudaEventDestroy(event), "cudaEventDestroy");
  SINTER_CUDA_CHECK(err);
  return event;
}

// The answer of cudaEventQuery or cudaStreamQuery: false while the work is still running, true
// once it has finished; any other error throws.
bool query_done(cudaError_t err) {
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  SINTER_CUDA_CHECK(err);
  return true;
}

// Segments from cudaMalloc on one device, and the events of Note [stream uses].
// Switches the calling thread to relaxed stream-capture mode for its lifetime.
class RelaxedCapture : NonCopyable {
 public:
  RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

class DeviceBackend final : public detail::RawBackend {
 public:
  explicit DeviceBackend(int device) : device_(device) {}

  // cudaMalloc during a capture (a graph's private pool growing) is allowed in relaxed mode.
  void* raw_alloc(size_t nbytes) override {
    DeviceGuard guard(device_);
    RelaxedCapture relaxed;
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    SINTER_CUDA_CHECK(err);
    return ptr;
  }

  // A cached segment may still be read or written by kernels queued on any stream before its blocks
  // were freed, so the device drains first.
  void raw_free(void* ptr) override {
    DeviceGuard guard(device_);
    SINTER_CUDA_CHECK(cudaDeviceSynchronize());
    SINTER_CUDA_CHECK(cudaFree(ptr));
  }

  void* record_event(const void* stream) override {
    return record_new_event(static_cast<cudaStream_t>(const_cast<void*>(stream)), device_);
  }

  // The allocator polls its pending stream uses on every allocation, also while some stream (of any
  // thread) is being captured, where a global-mode capture forbids event queries: relaxed mode for
  // this thread allows them. An event that cannot be queried (one recorded into a capture) counts
  // as not done: its block waits.
  bool event_done(void* event) override {
    RelaxedCapture relaxed;
    const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (err == cudaSuccess) return true;
    (void)cudaGetLastError();
    return false;
  }

  void synchronize_event(void* event) override {
    RelaxedCapture relaxed;
    SINTER_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  }

  void destroy_event(void* event) override {
    log_if_failed(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy");
  }

 private:
  int device_;
};

// The private pool (a Graph's key) and device of the capture running in this thread, if any.
thread_local const void* t_capture_pool = nullptr;
thread_local int t_capture_device = -1;

// SINTER_CUDA_NO_CACHING=1: no cache, one cudaMalloc per tensor (for compute-sanitizer's memcheck).
bool caching_enabled() {
  const char* v = std::getenv("SINTER_CUDA_NO_CACHING");
  return !(v && *v && std::string_view(v) != "0");
}

struct DeviceAllocator {
  explicit DeviceAllocator(int device)
      : backend(device), allocator(backend, device, caching_enabled()) {}
  DeviceBackend backend;
  detail::CachingAllocator allocator;
};

// Created on first use and never destroyed: a static destructor calling cudaFree could run after
// the CUDA runtime has shut down.
std::array<std::atomic<DeviceAllocator*>, kMaxDevices> g_allocators{};
std::mutex g_allocators_mutex;

detail::CachingAllocator& allocator_for(int device) {
  SINTER_CHECK(device < kMaxDevices, "cuda: device ", device, " is beyond the ", kMaxDevices,
               " devices the allocator supports");
  DeviceAllocator* a = g_allocators[device].load(std::memory_order_acquire);
  if (!a) {
    std::lock_guard<std::mutex> lock(g_allocators_mutex);
    a = g_allocators[device].load(std::memory_order_relaxed);
    if (!a) {
      a = new DeviceAllocator(device);
      g_allocators[device].store(a, std::memory_order_release);
    }
  }
  return a->allocator;
}

// Note [pinned cache]
// Page-locked blocks rounded up to powers of two (at least 4 KiB), reused by size. An asynchronous
// host-to-device copy from a block records an event; a block freed while such events are pending is
// parked until they complete, so the next user cannot overwrite bytes a copy has yet to read.
class PinnedCache {
 public:
  void* allocate(size_t nbytes) {
    SINTER_CHECK(nbytes <= (size_t{1} << 62), "allocate_pinned: ", nbytes, " bytes is too large");
    const size_t size = std::bit_ceil(std::max<size_t>(nbytes, 4096));
    std::lock_guard<std::mutex> lock(mutex_);
    reclaim_finished();
    if (auto it = free_.find(size); it != free_.end()) {
      const uintptr_t p = it->second;
      free_.erase(it);
      blocks_.at(p).in_use = true;
      return reinterpret_cast<void*>(p);
    }
    void* ptr = nullptr;
    cudaError_t err = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_free();
      err = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      SINTER_THROW("allocate_pinned: out of page-locked host memory: tried to allocate ", nbytes,
                   " bytes (a block of ", size, ")");
    }
    SINTER_CUDA_CHECK(err);
    blocks_[reinterpret_cast<uintptr_t>(ptr)] = Block{size, true, {}};
    return ptr;
  }

  void free(void* ptr) {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.find(p);
    SINTER_CHECK(it != blocks_.end() && it->second.in_use, "free_pinned: pointer ", ptr,
                 " was not returned by allocate_pinned, or was freed twice");
    Block& b = it->second;
    b.in_use = false;
    drop_finished(b);
    if (b.uses.empty()) {
      free_.emplace(b.size, p);
    } else {
      parked_.push_back(p);
    }
  }

  // Called after queuing a copy that reads `ptr` on `stream` of `device`; ignores foreign pointers.
  // Whether `ptr` lies in a block of this cache that is in use.
  bool owns(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    return in_use_block(ptr) != nullptr;
  }

  void record_use(const void* ptr, cudaStream_t stream, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    Block* found = in_use_block(ptr);
    if (!found) return;
    Block& b = *found;
    drop_finished(b);  // keeps the list short for a buffer that is reused without being freed
    b.uses.push_back(record_new_event(stream, device));
  }

  void empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    reclaim_finished();
    release_free();
  }

 private:
  struct Block {
    size_t size = 0;
    bool in_use = false;
    std::vector<cudaEvent_t> uses;  // copies queued from this block that may not have finished
  };

  // The block in use that `ptr` lies in, or null; with mutex_ held.
  Block* in_use_block(const void* ptr) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return nullptr;
    --it;
    return p < it->first + it->second.size && it->second.in_use ? &it->second : nullptr;
  }

  static void drop_finished(Block& b) {
    std::erase_if(b.uses, [](cudaEvent_t e) {
      if (!query_done(cudaEventQuery(e))) return false;
      log_if_failed(cudaEventDestroy(e), "cudaEventDestroy");
      return true;
    });
  }

  void reclaim_finished() {
    std::erase_if(parked_, [this](uintptr_t p) {
      Block& b = blocks_.at(p);
      drop_finished(b);
      if (!b.uses.empty()) return false;
      free_.emplace(b.size, p);
      return true;
    });
  }

  void release_free() {
    for (auto it = free_.begin(); it != free_.end();) {
      SINTER_CUDA_CHECK(cudaFreeHost(reinterpret_cast<void*>(it->second)));
      blocks_.erase(it->second);
      it = free_.erase(it);
    }
  }

  std::mutex mutex_;
  std::map<uintptr_t, Block> blocks_;      // every block, by address
  std::multimap<size_t, uintptr_t> free_;  // unused blocks, by size
  std::vector<uintptr_t> parked_;          // freed, with copies from them still in flight
};

// Never destroyed, for the same reason as the device allocators.
PinnedCache& pinned_cache() {
  static auto* cache = new PinnedCache;
  return *cache;
}

// The records of Note [deferred device checks]: one per device, in mapped pinned memory, made on
// first use and never freed (kernels of any later moment may write it).
std::array<std::atomic<kern::DeviceCheckRecord*>, kMaxDevices> g_check_records{};
std::mutex g_check_records_mutex;

kern::DeviceCheckRecord* host_check_record(int device) {
  kern::DeviceCheckRecord* r = g_check_records[device].load(std::memory_order_acquire);
  if (r) return r;
  std::lock_guard<std::mutex> lock(g_check_records_mutex);
  r = g_check_records[device].load(std::memory_order_relaxed);
  if (!r) {
    void* p = nullptr;
    DeviceGuard guard(device);
    RelaxedCapture relaxed;  // also allowed while another stream is being captured
    SINTER_CUDA_CHECK(cudaHostAlloc(&p, sizeof(kern::DeviceCheckRecord), cudaHostAllocMapped));
    r = new (p) kern::DeviceCheckRecord();
    g_check_records[device].store(r, std::memory_order_release);
  }
  return r;
}

// After the host has waited for work on `device`: throws the error a deferred check recorded.
void report_device_checks(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  kern::DeviceCheckRecord* r = g_check_records[device].load(std::memory_order_acquire);
  if (!r) return;
  volatile kern::DeviceCheckRecord* v = r;
  if (v->flag == 0) return;
  std::lock_guard<std::mutex> lock(g_check_records_mutex);  // one thread reports it
  if (v->flag == 0) return;
  std::atomic_thread_fence(std::memory_order_acquire);
  const kern::DeviceCheckRecord seen{v->flag, v->what, v->value, v->lo, v->hi, v->skip, 1};
  v->flag = 0;
  v->claim = 0;
  throw Error(kern::device_check_message(seen) +
              " (found on the device by a deferred check, reported at this synchronization)");
}

bool is_pinned_host(const void* ptr) {
  cudaPointerAttributes attr{};
  SINTER_CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
  return attr.type == cudaMemoryTypeHost;
}

}  // namespace

bool is_available() { return device_count() > 0; }

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {  // no driver, or no device
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

int current_device() {
  SINTER_CHECK(is_available(), "cuda: no CUDA device is available");
  int device = 0;
  SINTER_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

void set_device(int device) {
  SINTER_CHECK(device >= 0, "cuda::set_device: device ", device, " is negative");
  SINTER_CUDA_CHECK(cudaSetDevice(checked_device(device)));
}

DeviceProperties get_device_properties(int device) {
  device = checked_device(device);
  cudaDeviceProp p{};
  SINTER_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", static_cast<unsigned>(p.pciDomainID),
                static_cast<unsigned>(p.pciBusID), static_cast<unsigned>(p.pciDeviceID));
  return {p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem, bus};
}

void synchronize(int device) {
  check_host_sync("cuda::synchronize");
  device = checked_device(device);
  DeviceGuard guard(device);
  SINTER_CUDA_CHECK(cudaDeviceSynchronize());
  report_device_checks(device);
}

Stream Stream::default_stream(int device) { return Stream(nullptr, checked_device(device)); }

Stream Stream::create(int device) {
  device = checked_device(device);
  cudaStream_t handle = nullptr;
  {
    DeviceGuard guard(device);
    SINTER_CUDA_CHECK(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking));
  }
  // Draining before destruction matters beyond tidiness: the allocator keys pools by the handle,
  // and a later stream may be given the same address while this one's work still uses blocks it
  // cached.
  auto destroy = [](CUstream_st* s) {
    log_if_failed(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    log_if_failed(cudaStreamDestroy(s), "cudaStreamDestroy");
  };
  return Stream(handle, device, std::shared_ptr<CUstream_st>(handle, destroy));
}

void Stream::synchronize() const {
  check_host_sync("Stream::synchronize");
  checked_device(device_);
  DeviceGuard guard(device_);
  SINTER_CUDA_CHECK(cudaStreamSynchronize(handle_));
  report_device_checks(device_);
}

bool Stream::query() const {
  checked_device(device_);
  DeviceGuard guard(device_);
  return query_done(cudaStreamQuery(handle_));
}

struct Event::Impl {
  cudaEvent_t event = nullptr;
  int device = -1;
  bool timing = true;
  ~Impl() {
    if (event) log_if_failed(cudaEventDestroy(event), "cudaEventDestroy");
  }
};

void Stream::wait(const Event& event) const {
  if (!event.impl_->event) return;
  DeviceGuard guard(device_);
  SINTER_CUDA_CHECK(cudaStreamWaitEvent(handle_, event.impl_->event, 0));
}

Event::Event(bool enable_timing) : impl_(std::make_shared<Impl>()) {
  impl_->timing = enable_timing;
}

void Event::record(const Stream& stream) {
  checked_device(stream.device());
  DeviceGuard guard(stream.device());
  if (!impl_->event) {
    SINTER_CUDA_CHECK(cudaEventCreateWithFlags(
        &impl_->event, impl_->timing ? cudaEventDefault : cudaEventDisableTiming));
    impl_->device = stream.device();
  }
  SINTER_CHECK(impl_->device == stream.device(), "Event::record: the event belongs to device ",
               impl_->device, ", the stream to device ", stream.device());
  SINTER_CUDA_CHECK(cudaEventRecord(impl_->event, stream.handle()));
}

void Event::synchronize() const {
  if (!impl_->event) return;
  check_host_sync("Event::synchronize");
  SINTER_CUDA_CHECK(cudaEventSynchronize(impl_->event));
  report_device_checks(impl_->device);
}

bool Event::query() const { return !impl_->event || query_done(cudaEventQuery(impl_->event)); }

float Event::elapsed_ms(const Event& end) const {
  SINTER_CHECK(impl_->event && end.impl_->event, "Event::elapsed_ms: both events must be recorded");
  SINTER_CHECK(impl_->timing && end.impl_->timing,
               "Event::elapsed_ms: both events need enable_timing = true");
  float ms = 0.0f;
  SINTER_CUDA_CHECK(cudaEventElapsedTime(&ms, impl_->event, end.impl_->event));
  return ms;
}

Stream current_stream(int device) { return current_slot(checked_device(device)); }

void set_current_stream(const Stream& stream) {
  current_slot(checked_device(stream.device())) = stream;
}

MemoryStats memory_stats(int device) {
  if (!is_available()) return {};
  device = checked_device(device);
  if (device >= kMaxDevices) return {};
  DeviceAllocator* a = g_allocators[device].load(std::memory_order_acquire);
  return a ? a->allocator.stats() : MemoryStats{};
}

void reset_peak_memory_stats(int device) {
  if (!is_available()) return;
  device = checked_device(device);
  if (device >= kMaxDevices) return;
  if (DeviceAllocator* a = g_allocators[device].load(std::memory_order_acquire)) {
    a->allocator.reset_peak_stats();
  }
}

void empty_cache() {
  for (auto& slot : g_allocators) {
    if (DeviceAllocator* a = slot.load(std::memory_order_acquire)) a->allocator.empty_cache();
  }
  if (is_available()) pinned_cache().empty();
}

namespace detail {
extern thread_local bool t_capturing;  // src/cuda/graph_common.cpp
}  // namespace detail

// Private pool keys (Note [private pools]): small integers, which no stream handle or heap
// address equals, and never reused.
std::atomic<uintptr_t> g_next_pool_key{1};

struct Graph::Impl {
  int device = -1;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  const void* pool = reinterpret_cast<const void*>(g_next_pool_key.fetch_add(1));
  bool pool_open = false;

  // Frees what exists; never throws (runs in a destructor, and after a failed capture).
  void release() noexcept {
    if (device < 0) return;
    int previous = -1;
    log_if_failed(cudaGetDevice(&previous), "cudaGetDevice");
    log_if_failed(cudaSetDevice(device), "cudaSetDevice");
    // A replay may still run: it must finish before the pool's memory is given back.
    log_if_failed(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (exec) log_if_failed(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    if (graph) log_if_failed(cudaGraphDestroy(graph), "cudaGraphDestroy");
    exec = nullptr;
    graph = nullptr;
    if (pool_open) {
      try {
        allocator_for(device).close_private_pool(pool);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sinter: closing a CUDA graph's memory pool failed: %s\n", e.what());
      }
      pool_open = false;
      pool = reinterpret_cast<const void*>(g_next_pool_key.fetch_add(1));
    }
    if (previous >= 0) log_if_failed(cudaSetDevice(previous), "cudaSetDevice");
    device = -1;
  }
  ~Impl() { release(); }
};

Graph::Graph() : impl_(std::make_unique<Impl>()) {}
Graph::~Graph() = default;

bool Graph::captured() const { return impl_->exec != nullptr; }

void Graph::capture(const std::function<void()>& fn, int device) {
  SINTER_CHECK(fn != nullptr, "Graph::capture: empty function");
  SINTER_CHECK(!impl_->exec, "Graph::capture: this graph was captured already; make a new Graph");
  SINTER_CHECK(!detail::t_capturing,
               "Graph::capture: a capture is already running in this "
               "thread");
  const int dev = checked_device(device);
  DeviceGuard guard(dev);
  (void)host_check_record(dev);  // made now: cudaHostAlloc has no place in a capture
  detail::CachingAllocator& allocator = allocator_for(dev);
  const Stream side = Stream::create(dev);
  allocator.open_private_pool(impl_->pool);
  impl_->pool_open = true;
  impl_->device = dev;

  struct CaptureState {
    CaptureState(const void* pool, int device, detail::CachingAllocator& a) : allocator(a) {
      t_capture_pool = pool;
      t_capture_device = device;
      detail::t_capturing = true;
      allocator.capture_begin();
    }
    ~CaptureState() {
      t_capture_pool = nullptr;
      t_capture_device = -1;
      detail::t_capturing = false;
      allocator.capture_end();
    }
    detail::CachingAllocator& allocator;
  };
  cudaGraph_t graph = nullptr;
  try {
    const StreamGuard on_side(side);
    const CaptureState state(impl_->pool, dev, allocator);
    const NoSyncGuard no_sync;
    SINTER_CUDA_CHECK(cudaStreamBeginCapture(side.handle(), cudaStreamCaptureModeThreadLocal));
    try {
      fn();
    } catch (...) {
      // End the capture so that the stream is usable again; the partial graph is dropped.
      if (cudaStreamEndCapture(side.handle(), &graph) == cudaSuccess && graph) {
        log_if_failed(cudaGraphDestroy(graph), "cudaGraphDestroy");
      }
      (void)cudaGetLastError();
      throw;
    }
    const cudaError_t err = cudaStreamEndCapture(side.handle(), &graph);
    SINTER_CHECK(err == cudaSuccess, "Graph::capture: the capture failed (",
                 cudaGetErrorString(err),
                 "): the captured code used a call a capture cannot "
                 "record, such as a synchronization or work on another stream that was not "
                 "joined back");
    impl_->graph = graph;
    SINTER_CUDA_CHECK(cudaGraphInstantiate(&impl_->exec, impl_->graph, 0));
  } catch (...) {
    impl_->release();  // a failed capture leaves the Graph as new: capture may be tried again
    throw;
  }
}

void Graph::replay() {
  SINTER_CHECK(impl_->exec, "Graph::replay: nothing was captured");
  DeviceGuard guard(impl_->device);
  SINTER_CUDA_CHECK(cudaGraphLaunch(impl_->exec, current_slot(impl_->device).handle()));
}

namespace detail {

void* allocate_device(size_t nbytes, int device) {
  // A tensor names its device exactly: -1 ("current") is not a place memory can live.
  SINTER_CHECK(device >= 0, "allocate_device: invalid device index ", device);
  device = checked_device(device);
  return allocate_device(nbytes, device, current_slot(device).handle());
}

void* allocate_device(size_t nbytes, int device, CUstream_st* stream) {
  SINTER_CHECK(device >= 0, "allocate_device: invalid device index ", device);
  device = checked_device(device);
  if (nbytes == 0) return nullptr;
  // Inside Graph::capture: from the graph's private pool (Note [private pools]).
  const void* key = t_capture_pool && device == t_capture_device ? t_capture_pool : stream;
  return allocator_for(device).allocate(nbytes, key);
}

void free_device(void* ptr) {
  if (!ptr) return;
  for (auto& slot : g_allocators) {
    DeviceAllocator* a = slot.load(std::memory_order_acquire);
    if (a && a->allocator.try_free(ptr)) return;
  }
  SINTER_THROW("free_device: pointer ", ptr,
               " was not allocated by the CUDA caching allocator, or was freed twice");
}

void record_stream(void* ptr, CUstream_st* stream) {
  if (!ptr) return;
  for (auto& slot : g_allocators) {
    DeviceAllocator* a = slot.load(std::memory_order_acquire);
    if (a && a->allocator.record_stream(ptr, stream)) return;
  }
}

void forget_stream(CUstream_st* stream) {
  for (auto& slot : g_allocators) {
    if (DeviceAllocator* a = slot.load(std::memory_order_acquire))
      a->allocator.forget_stream(stream);
  }
}

void* allocate_pinned(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  SINTER_CHECK(is_available(), "allocate_pinned: no CUDA device is available");
  return pinned_cache().allocate(nbytes);
}

void free_pinned(void* ptr) {
  if (ptr) pinned_cache().free(ptr);
}

CUstream_st* current_stream_handle(int device) {
  return current_slot(checked_device(device)).handle();
}

kern::DeviceCheckRecord* device_check_record(int device) {
  kern::DeviceCheckRecord* host = host_check_record(checked_device(device));
  void* dev = nullptr;
  SINTER_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
  return static_cast<kern::DeviceCheckRecord*>(dev);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  if (dst_device.is_cuda() && src_device.is_cuda()) {
    const int dd = checked_device(dst_device.index);
    const int sd = checked_device(src_device.index);
    const cudaStream_t ds = current_slot(dd).handle();
    if (dd == sd) {
      DeviceGuard guard(dd);
      SINTER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, ds));
      return;
    }
    // The copy runs on the source's stream once the destination's stream has caught up (dst may be
    // in use there); the destination's stream then waits for the copy.
    const cudaStream_t ss = current_slot(sd).handle();
    ScopedEvent dst_ready(dd);
    ScopedEvent copied(sd);
    {
      DeviceGuard guard(dd);
      SINTER_CUDA_CHECK(cudaEventRecord(dst_ready.get(), ds));
    }
    {
      DeviceGuard guard(sd);
      SINTER_CUDA_CHECK(cudaStreamWaitEvent(ss, dst_ready.get(), 0));
      SINTER_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dd, src, sd, nbytes, ss));
      SINTER_CUDA_CHECK(cudaEventRecord(copied.get(), ss));
    }
    DeviceGuard guard(dd);
    SINTER_CUDA_CHECK(cudaStreamWaitEvent(ds, copied.get(), 0));
    return;
  }
  if (dst_device.is_cuda()) {
    // Checked before anything is queued: a pinned copy's event would be recorded into a capture.
    // Only the library's own pinned blocks know when a copy from them ends (their next user
    // waits for it): from any other host memory, page-locked by its owner too, the copy completes
    // before the call returns, since the caller may reuse the memory at once.
    const bool pinned = is_pinned_host(src);
    const bool cached = pinned && pinned_cache().owns(src);
    if (pinned) {
      SINTER_CHECK(!detail::t_capturing,
                   "copy_bytes: a copy from host memory inside a CUDA graph "
                   "capture would replay the bytes the host held at capture; copy the batch into "
                   "a static input before replay() instead");
    }
    if (!cached) check_host_sync("a copy from host memory the library did not pin to the device");
    const int d = checked_device(dst_device.index);
    const cudaStream_t s = current_slot(d).handle();
    DeviceGuard guard(d);
    SINTER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s));
    if (cached) {
      pinned_cache().record_use(src, s, d);
    } else {
      SINTER_CUDA_CHECK(cudaStreamSynchronize(s));
      report_device_checks(d);
    }
    return;
  }
  check_host_sync("a copy from the device to the host (item(), to(cpu), ...)");
  const int d = checked_device(src_device.index);
  const cudaStream_t s = current_slot(d).handle();
  DeviceGuard guard(d);
  SINTER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s));
  SINTER_CUDA_CHECK(cudaStreamSynchronize(s));
  report_device_checks(d);
}

}  // namespace detail
}  // namespace sinter::cuda
