// Storage and the aligned CPU allocator; CUDA and pinned memory come from the CUDA runtime layer.
#include "sinter/core/storage.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "internal/cgroup_memory.h"
#include "internal/cuda_runtime.h"
#include "internal/profile_op.h"
#include "internal/sanitizers.h"
#include "sinter/core/error.h"

namespace sinter {

namespace {
constexpr size_t kCpuAlignment = 64;

// Note [cpu block cache]
// A training step allocates the same large activations and gradients every step. Fresh large
// blocks come from the kernel as zeroed pages (glibc maps every block above its mmap threshold, at
// most 32 MiB, anew), and zeroing and faulting them in took a tenth of a CPU gpt-mini step. So
// Storage keeps freed CPU blocks of at least kCacheMin bytes, by size class (the size rounded up to
// a quarter of its power of two: at most 25% more than asked), and hands one of the same class to
// the next request. At most cpu_cache_limit() bytes wait in the cache: an eighth of the memory
// (the machine's, or its cgroups' limit where that is less), at least kCacheFloor or half the
// memory where that is less; a block that would go past it is freed. gpt-mini's step frees 1.2 GiB
// of activations in its backward pass that the next forward asks for again: with a cache of 1 GiB,
// 75k page faults a step took a twentieth of its time. empty_cpu_cache() frees them all. Builds
// under AddressSanitizer cache nothing, so that it still sees every use after free. fork() waits
// for the cache's lock, so a child never inherits it held.
constexpr size_t kCacheMin = size_t{1} << 20;
constexpr size_t kCacheFloor = size_t{1} << 30;

constexpr bool kCacheBlocks = !detail::kAddressSanitizer;

// Whether a comma-separated list of cgroup v1 controllers has the memory controller.
bool lists_memory(std::string_view controllers) {
  for (size_t at = 0;;) {
    const size_t comma = controllers.find(',', at);
    if (controllers.substr(at, comma - at) == "memory") return true;
    if (comma == std::string_view::npos) return false;
    at = comma + 1;
  }
}

// The lower of two sizes, 0 standing for an unknown one.
size_t lower_known(size_t a, size_t b) { return a == 0 || (b != 0 && b < a) ? b : a; }

// No host block can hold more than PTRDIFF_MAX bytes; larger requests would also wrap the rounding
// below.
void check_host_size(size_t nbytes) {
  SINTER_CHECK(nbytes <= static_cast<size_t>(PTRDIFF_MAX),
               "cpu_allocate: out of host memory allocating ", nbytes, " bytes");
}

// The machine's memory in bytes, or the cgroups' limit where that is less; 0 where neither is
// known.
size_t machine_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const size_t bytes =
      pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
  std::ifstream in("/proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  return lower_known(bytes, detail::cgroup_memory_limit(text.str(), "/sys/fs/cgroup"));
}

// The most bytes the cache keeps (Note [cpu block cache]).
size_t cache_limit() {
  const size_t memory = machine_memory();
  if (memory == 0) return kCacheFloor;
  return std::max(std::min(kCacheFloor, memory / 2), memory / 8);
}

// nbytes rounded up to its size class (a multiple of a quarter of its power of two).
size_t size_class(size_t nbytes) {
  size_t top = size_t{1} << (63 - __builtin_clzll(static_cast<unsigned long long>(nbytes)));
  const size_t step = top / 4;
  return (nbytes + step - 1) / step * step;
}

class BlockCache {
 public:
  static BlockCache& get() {
    static BlockCache* cache = new BlockCache();  // outlives every static tensor
    return *cache;
  }

  // A cached block of class `size`, or null.
  void* take(size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return p;
  }

  // Keeps p (of class `size`) for a later take(), or frees it when the cache is full.
  void give(void* p, size_t size) {
    if (p == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + size <= limit_) {
        free_[size].push_back(p);
        cached_ += size;
        return;
      }
    }
    std::free(p);
  }

  size_t limit() const { return limit_; }
  size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

  void clear() {
    std::map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks.swap(free_);
      cached_ = 0;
    }
    for (auto& [size, list] : blocks) {
      for (void* p : list) std::free(p);
    }
  }

 private:
  BlockCache() {
    pthread_atfork([] { BlockCache::get().mutex_.lock(); },
                   [] { BlockCache::get().mutex_.unlock(); },
                   [] { BlockCache::get().mutex_.unlock(); });
  }

  const size_t limit_ = cache_limit();
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

// Host memory of at least nbytes for a Storage, and the deleter that returns it.
void* storage_allocate(size_t nbytes, std::function<void(void*)>& deleter) {
  if (!kCacheBlocks || nbytes < kCacheMin) {
    void* p = cpu_allocate(nbytes);
    deleter = cpu_free;
    return p;
  }
  check_host_size(nbytes);
  const size_t size = size_class(nbytes);
  void* p = BlockCache::get().take(size);
  if (p == nullptr) p = std::aligned_alloc(kCpuAlignment, size);
  if (p == nullptr) {  // the cache may hold what the system lacks
    BlockCache::get().clear();
    p = std::aligned_alloc(kCpuAlignment, size);
  }
  SINTER_CHECK(p != nullptr, "cpu_allocate: out of host memory allocating ", nbytes, " bytes");
  deleter = [size](void* block) { BlockCache::get().give(block, size); };
  return p;
}

}  // namespace

void empty_cpu_cache() { BlockCache::get().clear(); }

size_t cpu_cache_limit() { return BlockCache::get().limit(); }

size_t cpu_cache_bytes() { return BlockCache::get().cached(); }

void* cpu_allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  check_host_size(nbytes);
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
  bool owned = false;  // from allocate()
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
  s.impl_->owned = true;
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
    s.impl_->data = nbytes ? storage_allocate(nbytes, s.impl_->deleter) : nullptr;
    if (!s.impl_->deleter) s.impl_->deleter = cpu_free;
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

void Storage::swap_memory(Storage& other) {
  SINTER_CHECK(impl_ && other.impl_, "Storage::swap_memory: a storage is undefined");
  SINTER_CHECK(impl_->device == other.impl_->device, "Storage::swap_memory: storages on ",
               impl_->device, " and ", other.impl_->device);
  std::swap(impl_->data, other.impl_->data);
  std::swap(impl_->nbytes, other.impl_->nbytes);
  std::swap(impl_->pinned, other.impl_->pinned);
  std::swap(impl_->owned, other.impl_->owned);
  std::swap(impl_->deleter, other.impl_->deleter);
}

void* Storage::data() const { return impl_ ? impl_->data : nullptr; }
size_t Storage::nbytes() const { return impl_ ? impl_->nbytes : 0; }
Device Storage::device() const { return impl_ ? impl_->device : Device::cpu(); }
bool Storage::is_pinned() const { return impl_ && impl_->pinned; }
bool Storage::owns_memory() const { return impl_ && impl_->owned; }

namespace detail {

size_t cgroup_memory_limit(const std::string& self_cgroup, const std::string& root) {
  size_t lowest = 0;
  std::istringstream in(self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    // "id:controllers:path": v2's controllers are empty, v1's a comma-separated list.
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string_view controllers = std::string_view(line).substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1), dir, file;
    if (controllers.empty()) {
      dir = root, file = "/memory.max";
    } else if (lists_memory(controllers)) {
      dir = root + "/memory", file = "/memory.limit_in_bytes";
    } else {
      continue;
    }
    while (!path.empty() && path.back() == '/') path.pop_back();
    for (;;) {  // the cgroup, then each ancestor up to the root
      std::ifstream f(dir + path + file);
      unsigned long long limit = 0;  // "max" (no limit) reads as no number
      if (f >> limit) lowest = lower_known(lowest, limit);
      if (path.empty()) break;
      const size_t up = path.rfind('/');
      path.resize(up == std::string::npos ? 0 : up);
    }
  }
  return lowest;
}

}  // namespace detail

}  // namespace sinter
