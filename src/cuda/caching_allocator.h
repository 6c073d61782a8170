// The CUDA caching allocator's pool logic, free of CUDA so it is tested on any machine;
// src/cuda/runtime_cuda.cpp runs one instance per device over cudaMalloc and cudaFree.
#pragma once

#include <cstddef>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "sinter/core/noncopyable.h"
#include "sinter/cuda.h"

namespace sinter::cuda::detail {

// Where segments come from, and the events that tell when other streams are done with a block
// (Note [stream uses]): the CUDA runtime for a device, a counting heap in tests.
struct RawBackend {
  virtual ~RawBackend() = default;
  // Returns nullptr when out of memory; throws sinter::Error on any other failure.
  virtual void* raw_alloc(size_t nbytes) = 0;
  // Must not return before work still queued on the device may no longer touch the memory.
  virtual void raw_free(void* ptr) = 0;
  // An event recorded on `stream` now: it completes once the work queued there so far has.
  virtual void* record_event(const void* stream) = 0;
  // True once the event has completed (never blocks).
  virtual bool event_done(void* event) = 0;
  // Blocks until the event has completed.
  virtual void synchronize_event(void* event) = 0;
  // Never throws (called while cleaning up).
  virtual void destroy_event(void* event) = 0;
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
//
// Note [stream uses]
// A block used on a stream other than the one it was allocated on (an NCCL collective on the
// communication stream) is named to record_stream(), like PyTorch's recordStream. Its pool's
// stream does not order that stream's work, so on free() the allocator records an event on each
// such stream and keeps the block out of every pool (and from merging) until all of them have
// completed. Pending events are polled on every allocate(); empty_cache() and the out-of-memory
// retry wait for them, so that the blocks they hold can be reused or released. Statistics count
// such a block as freed at free(). A stream about to be destroyed is dropped from every block's
// uses by forget_stream().
//
// Note [private pools]
// A CUDA graph replays its kernels on the addresses they had at capture, so the memory of a
// captured step must stay the graph's for as long as the graph lives. The runtime allocates during
// a capture under the graph's own key instead of the stream's (a private pool): its blocks are
// reused by later allocations of the same capture, never by anyone else, and its free segments
// are not given back (empty_cache, the out-of-memory retry) while the pool is open. Closing the
// pool (the graph destroyed) gives its wholly free segments back at once, and the rest as the
// tensors that still hold blocks of it are freed.
class CachingAllocator : NonCopyable {
 public:
  static constexpr size_t kRound = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;
  static constexpr size_t kSmallSegment = size_t{2} << 20;
  static constexpr size_t kLargeRound = size_t{2} << 20;

  // `backend` must outlive the allocator; `device` only labels messages.
  // caching = false: every request is a segment of its exact size, given back at free (after the
  // stream uses): compute-sanitizer's memcheck then sees an access past any tensor's end.
  CachingAllocator(RawBackend& backend, int device, bool caching = true);
  // Gives the wholly free segments back; segments with blocks still in use are left alone.
  ~CachingAllocator();

  // `stream` is an opaque key (a cudaStream_t, or any pointer in tests). nbytes == 0 gives nullptr.
  void* allocate(size_t nbytes, const void* stream);
  // nullptr is a no-op; a pointer this allocator did not hand out (or already took back) throws.
  void free(void* ptr);
  // Like free(), but returns false instead of throwing for a pointer this allocator does not own.
  bool try_free(void* ptr);
  // Work on `stream` uses the block handed out at `ptr` (Note [stream uses]). Returns false, and
  // does nothing, for a pointer this allocator did not hand out.
  bool record_stream(void* ptr, const void* stream);
  // `stream`, about to be destroyed with nothing left queued on it, leaves every block's stream
  // uses.
  void forget_stream(const void* stream);
  // Waits for pending stream uses, then gives the wholly free segments back.
  void empty_cache();
  // Opens or closes the private pool `key`, an opaque key allocate() is then called with (Note
  // [private pools]). Closing gives its wholly free segments back.
  void open_private_pool(const void* key);
  void close_private_pool(const void* key);
  // Between these two, a stream of the device is being captured: no segment is given back (that
  // would synchronize the device, which a capture forbids); out of memory throws at once. The end
  // gives back what was held back.
  void capture_begin();
  void capture_end();
  MemoryStats stats() const;
  void reset_peak_stats();

 private:
  struct Block;
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  // Free blocks ordered by (stream, size, address).
  using Pool = std::set<Block*, BlockLess>;

  // A block freed while other streams may still use it, and the events that say they are done.
  struct Deferred {
    Block* block;
    std::vector<void*> events;
  };

  Block* take_cached(Pool& pool, const void* stream, size_t size);
  // nullptr when the backend is out of memory.
  Block* new_segment(size_t segment_size, const void* stream, bool small);
  void split(Block* block, size_t size, Pool& pool);
  // Merges a block no stream uses any more with its free neighbours and caches it.
  void free_block(Block* block);
  // Caches the deferred blocks whose events have completed; with `wait`, waits for all of them.
  void process_deferred(bool wait);
  // Gives back the wholly free segments, except those of open private pools; with `only`, only
  // those of that key.
  void release_free_segments(const void* only = nullptr);
  // Forgets a closed private pool once no block of it is left anywhere.
  void forget_closed_pool_if_empty(const void* key);
  [[noreturn]] void throw_oom(size_t requested, size_t segment_size);

  RawBackend& backend_;
  const int device_;
  mutable std::mutex mutex_;
  Pool small_pool_;
  Pool large_pool_;
  std::unordered_map<void*, Block*> live_;  // blocks handed out, by address
  std::vector<Deferred> deferred_;          // freed blocks other streams may still use
  std::set<const void*> open_pools_;        // private pools whose segments stay
  std::set<const void*> closed_pools_;      // private pools whose segments go back when free
  int captures_ = 0;                        // captures running (capture_begin - capture_end)
  const bool caching_;
  MemoryStats stats_;
};

}  // namespace sinter::cuda::detail
