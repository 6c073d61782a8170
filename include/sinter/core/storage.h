// Storage: a ref-counted block of bytes on one device; tensors view it through offset, shape and
// strides.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "sinter/core/device.h"

namespace sinter {

// 64-byte-aligned host memory, so vector loads never straddle a cache line at a tensor's start.
void* cpu_allocate(size_t nbytes);
void cpu_free(void* ptr);
// Frees the large CPU blocks Storage keeps for reuse (Note [cpu block cache] in
// src/core/storage.cpp): at most 1 GiB waits there between steps.
void empty_cpu_cache();

class Storage {
 public:
  Storage() = default;
  // Fresh memory: the 64-byte-aligned CPU allocator, the CUDA caching allocator, or page-locked
  // host memory when `pinned` (host only; makes host-to-device copies asynchronous).
  static Storage allocate(size_t nbytes, Device device, bool pinned = false);
  // Wraps memory the caller owns; `deleter` (may be empty) runs when the last tensor lets go.
  static Storage from_blob(void* data, size_t nbytes, Device device,
                           std::function<void(void*)> deleter = {});

  bool defined() const { return impl_ != nullptr; }
  void* data() const;
  size_t nbytes() const;
  Device device() const;
  bool is_pinned() const;
  bool is_same(const Storage& other) const { return impl_ == other.impl_; }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace sinter
