// sinter::cuda in a build without CUDA: no device is available, the statistics are zeros,
// host-to-host copies work, and everything that would need a device throws.
#include <cstring>

#include "internal/cuda_runtime.h"
#include "sinter/core/error.h"
#include "sinter/cuda.h"

namespace sinter::cuda {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  SINTER_THROW(what, ": Sinter was built without CUDA");
}

}  // namespace

bool is_available() { return false; }
int device_count() { return 0; }
int current_device() { no_cuda("cuda::current_device"); }
void set_device(int) { no_cuda("cuda::set_device"); }
DeviceProperties get_device_properties(int) { no_cuda("cuda::get_device_properties"); }
void synchronize(int) { no_cuda("cuda::synchronize"); }

Stream Stream::default_stream(int) { no_cuda("Stream::default_stream"); }
Stream Stream::create(int) { no_cuda("Stream::create"); }
void Stream::synchronize() const { no_cuda("Stream::synchronize"); }
bool Stream::query() const { no_cuda("Stream::query"); }
// An event can never be recorded here, so there is never anything to wait for.
void Stream::wait(const Event&) const {}

Event::Event(bool) {}
void Event::record(const Stream&) { no_cuda("Event::record"); }
void Event::synchronize() const {}
bool Event::query() const { return true; }
float Event::elapsed_ms(const Event&) const { no_cuda("Event::elapsed_ms"); }

Stream current_stream(int) { no_cuda("cuda::current_stream"); }
void set_current_stream(const Stream&) { no_cuda("cuda::set_current_stream"); }

struct Graph::Impl {};
Graph::Graph() : impl_(std::make_unique<Impl>()) {}
Graph::~Graph() = default;
void Graph::capture(const std::function<void()>&, int) { no_cuda("Graph::capture"); }
void Graph::replay() { no_cuda("Graph::replay"); }
bool Graph::captured() const { return false; }

MemoryStats memory_stats(int) { return {}; }
void reset_peak_memory_stats(int) {}
void empty_cache() {}

namespace detail {

void* allocate_device(size_t, int) { no_cuda("allocate_device"); }
void* allocate_device(size_t, int, CUstream_st*) { no_cuda("allocate_device"); }
void free_device(void* ptr) {
  if (ptr) no_cuda("free_device");
}
void record_stream(void*, CUstream_st*) {}
void forget_stream(CUstream_st*) {}
void* allocate_pinned(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  no_cuda("allocate_pinned");
}
void free_pinned(void* ptr) {
  if (ptr) no_cuda("free_pinned");
}
CUstream_st* current_stream_handle(int) { no_cuda("current_stream_handle"); }
kern::DeviceCheckRecord* device_check_record(int) { no_cuda("device_check_record"); }

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (dst_device.is_cuda() || src_device.is_cuda()) no_cuda("copy_bytes to or from a CUDA device");
  if (nbytes) std::memcpy(dst, src, nbytes);
}

}  // namespace detail
}  // namespace sinter::cuda
