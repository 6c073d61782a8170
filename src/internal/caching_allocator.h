// The CUDA caching allocator's pool logic, free of CUDA so it is tested on any machine;
// src/cuda/runtime_cuda.cpp runs one instance per device over cudaMalloc and cudaFree.
#pragma once

#include <cstddef>
#include <mutex>
#include <set>
#include <unordered_map>

#include "sinter/cuda.h"

namespace sinter::cuda::detail {

// Where segments come from: cudaMalloc/cudaFree for a device, a counting heap in tests.
struct RawBackend {
  virtual ~RawBackend() = default;
  // Returns nullptr when out of memory; throws sinter::Error on any other failure.
  virtual void* raw_alloc(size_t nbytes) = 0;
  // Must not return before work still queued on the device may no longer touch the memory.
  virtual void raw_free(void* ptr) = 0;
};

// Note [caching allocator]
// Device memory is obtained from the backend in segments and handed out as blocks carved from them.
// A freed block goes back to a cache instead of the driver, because cudaMalloc and cudaFree are
// slow and cudaFree synchronizes the device. Sizes and pools:
//   - Every request is rounded up to a multiple of 512 bytes.
//   - Small requests (rounded size <= 1 MiB) are carved from 2 MiB segments; large ones from a
//     segment of their own, rounded up to a multiple of 2 MiB. Small and large blocks live in
//     separate pools so that small, long-lived tensors do not pin pieces of large segments.
//   - Each pool is keyed by stream: a block freed on stream S is reused only by later allocations
//   on S,
//     which S orders after every use queued before the free, so no synchronization is needed.
//   - Lookup is best fit: the smallest cached block of the stream that is large enough. The rest of
//   a
//     block is split off and cached when worth keeping: any remainder for small blocks, a remainder
//     of more than 1 MiB for large ones (smaller ones stay with the block, at most 1 MiB of waste).
//   - A freed block merges with free neighbours of its segment (never across segments, which the
//     backend allocated separately), so a segment whose blocks are all free is one free block
//     again.
//   - empty_cache() gives wholly free segments back to the backend. When the backend is out of
//   memory,
//     the allocator does the same for every stream's cache and retries once; if that fails too it
//     throws sinter::Error naming the request and the statistics.
// One mutex guards everything; cudaMalloc runs under it, which is fine because it is rare once
// warm.
class CachingAllocator {
 public:
  static constexpr size_t kRound = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;
  static constexpr size_t kSmallSegment = size_t{2} << 20;
  static constexpr size_t kLargeRound = size_t{2} << 20;

  // `backend` must outlive the allocator; `device` only labels messages.
  CachingAllocator(RawBackend& backend, int device);
  // Gives the wholly free segments back; segments with blocks still in use are left alone.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // `stream` is an opaque key (a cudaStream_t, or any pointer in tests). nbytes == 0 gives nullptr.
  void* allocate(size_t nbytes, const void* stream);
  // nullptr is a no-op; a pointer this allocator did not hand out (or already took back) throws.
  void free(void* ptr);
  // Like free(), but returns false instead of throwing for a pointer this allocator does not own.
  bool try_free(void* ptr);
  void empty_cache();
  MemoryStats stats() const;
  void reset_peak_stats();

 private:
  struct Block;
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  // Free blocks ordered by (stream, size, address).
  using Pool = std::set<Block*, BlockLess>;

  Block* take_cached(Pool& pool, const void* stream, size_t size);
  Block* new_segment(size_t segment_size, const void* stream, bool small, size_t requested);
  void split(Block* block, size_t size, Pool& pool);
  void release_free_segments();
  [[noreturn]] void throw_oom(size_t requested, size_t segment_size);

  RawBackend& backend_;
  const int device_;
  mutable std::mutex mutex_;
  Pool small_pool_;
  Pool large_pool_;
  std::unordered_map<void*, Block*> live_;  // blocks handed out, by address
  MemoryStats stats_;
};

}  // namespace sinter::cuda::detail
