// Storage and the aligned CPU allocator; CUDA and pinned memory come from the CUDA runtime layer.
#include "sinter/core/storage.h"

#include <cstdlib>
#include <new>

#include "internal/cuda_runtime.h"
#include "internal/profile_op.h"
#include "sinter/core/error.h"

namespace sinter {

namespace {
constexpr size_t kCpuAlignment = 64;
}

void* cpu_allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  void* p = std::aligned_alloc(kCpuAlignment, rounded);
  SINTER_CHECK(p != nullptr, "cpu_allocate: out of host memory allocating ", nbytes, " bytes");
  return p;
}

void cpu_free(void* ptr) { std::free(ptr); }

struct Storage::Impl {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  bool pinned = false;
  std::function<void(void*)> deleter;
  ~Impl() {
    if (deleter) deleter(data);
  }
};

Storage Storage::allocate(size_t nbytes, Device device, bool pinned) {
  Storage s;
  s.impl_ = std::make_shared<Impl>();
  s.impl_->nbytes = nbytes;
  s.impl_->device = device;
  profiler::detail::note_allocation(nbytes);
  if (device.is_cuda()) {
    SINTER_CHECK(!pinned, "Storage::allocate: pinned memory is host memory, got device ", device);
    s.impl_->data = cuda::detail::allocate_device(nbytes, device.index);
    s.impl_->deleter = [](void* p) {
      if (p) cuda::detail::free_device(p);
    };
  } else if (pinned) {
    s.impl_->pinned = true;
    s.impl_->data = nbytes ? cuda::detail::allocate_pinned(nbytes) : nullptr;
    s.impl_->deleter = [](void* p) {
      if (p) cuda::detail::free_pinned(p);
    };
  } else {
    s.impl_->data = cpu_allocate(nbytes);
    s.impl_->deleter = cpu_free;
  }
  return s;
}

Storage Storage::from_blob(void* data, size_t nbytes, Device device,
                           std::function<void(void*)> deleter) {
  Storage s;
  s.impl_ = std::make_shared<Impl>();
  s.impl_->data = data;
  s.impl_->nbytes = nbytes;
  s.impl_->device = device;
  s.impl_->deleter = std::move(deleter);
  return s;
}

void* Storage::data() const { return impl_ ? impl_->data : nullptr; }
size_t Storage::nbytes() const { return impl_ ? impl_->nbytes : 0; }
Device Storage::device() const { return impl_ ? impl_->device : Device::cpu(); }
bool Storage::is_pinned() const { return impl_ && impl_->pinned; }

}  // namespace sinter
