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
// src/core/storage.cpp) between steps.
void empty_cpu_cache();
// The most bytes of freed blocks the cache keeps: an eighth of the memory (the machine's, or its
// cgroups' limit where that is less), at least 1 GiB or half the memory where that is less.
size_t cpu_cache_limit();
// The bytes of freed blocks the cache keeps now.
size_t cpu_cache_bytes();

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
  // The identity of this block (the same for every copy of the handle), whatever memory it holds.
  const void* id() const { return impl_.get(); }
  // How many handles share this block (each tensor's storage, and each copy of a Storage): 1 when
  // this one is alone. It cannot see an owner outside the library: see owns_memory().
  int64_t use_count() const { return impl_.use_count(); }
  // Whether the memory came from allocate() (the library's own), not from_blob() (the caller's).
  bool owns_memory() const;

  // Exchanges the memory (and its size and owner) of two storages of one device, so that every
  // tensor viewing either now views the other's bytes. dist::FullyShardedDataParallel frees a
  // parameter's memory between uses by swapping in an empty storage, and brings it back by
  // swapping in the gathered values: the tensors saved for backward follow, as they share the
  // storage. A tensor whose storage holds fewer bytes than its view needs (here: none) is an error
  // where its data is used.
  void swap_memory(Storage& other);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace sinter
