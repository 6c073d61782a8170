// The caching allocator's pools, splitting, merging and statistics (Note [caching allocator]).
// Built in every configuration: it knows nothing of CUDA beyond the RawBackend it is given.
#include "cuda/caching_allocator.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "sinter/core/error.h"

namespace sinter::cuda::detail {

// A run of bytes in a segment. The blocks of one segment form a doubly linked list in address
// order; the segment's first block has prev == nullptr, so a block with neither neighbour is a
// whole segment.
struct CachingAllocator::Block {
  char* ptr = nullptr;
  size_t size = 0;
  const void* stream = nullptr;
  bool small = false;
  // Handed out, or freed with stream uses still pending: not cached, and never merged.
  bool allocated = false;
  std::vector<const void*> stream_uses;  // other streams that used it (Note [stream uses])
  Block* prev = nullptr;
  Block* next = nullptr;
};

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return std::less<const void*>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<const char*>()(a->ptr, b->ptr);
}

namespace {

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

std::string mib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

CachingAllocator::CachingAllocator(RawBackend& backend, int device, bool caching)
    : backend_(backend), device_(device), caching_(caching) {}

CachingAllocator::~CachingAllocator() {
  try {
    release_free_segments();
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "sinter: CUDA caching allocator of device %d: releasing the cache failed: %s\n",
                 device_, e.what());
  }
  // Blocks of segments still in use (or whose release failed) are forgotten, not freed: their
  // memory may still be referenced, and the backend decides what happens to it.
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (Block* b : *pool) delete b;
  }
  for (auto& [ptr, b] : live_) delete b;
  for (Deferred& d : deferred_) {
    for (void* e : d.events) backend_.destroy_event(e);
    delete d.block;
  }
}

void* CachingAllocator::allocate(size_t nbytes, const void* stream) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  process_deferred(false);
  // No device has that much, and rounding up could wrap around.
  if (nbytes > std::numeric_limits<size_t>::max() / 2) {
    release_free_segments();
    ++stats_.num_ooms;
    throw_oom(nbytes, nbytes);
  }
  const size_t size = round_up(nbytes, kRound);
  const bool small = size <= kSmallLimit;
  Pool& pool = small ? small_pool_ : large_pool_;

  // Without the cache, a segment of the exact request, so that a sanitizer sees any overrun.
  const size_t segment_size = !caching_ ? nbytes
                              : small   ? kSmallSegment
                                        : round_up(size, kLargeRound);
  Block* block = caching_ ? take_cached(pool, stream, size) : nullptr;
  if (block) {
    ++stats_.num_cache_hits;
  } else {
    block = new_segment(segment_size, stream, small);
  }
  // Out of memory: the blocks waiting for other streams may fit once those are done; else the
  // wholly free segments of every pool go back to the device, and the request is tried again.
  if (!block && !deferred_.empty()) {
    process_deferred(true);
    if (caching_ && (block = take_cached(pool, stream, size))) ++stats_.num_cache_hits;
  }
  if (!block) {
    release_free_segments();
    block = new_segment(segment_size, stream, small);
  }
  if (!block) {
    ++stats_.num_ooms;
    throw_oom(nbytes, segment_size);
  }
  if (caching_) split(block, size, pool);
  block->allocated = true;
  live_.emplace(block->ptr, block);

  ++stats_.num_allocs;
  stats_.allocated_bytes += static_cast<int64_t>(block->size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return block->ptr;
}

CachingAllocator::Block* CachingAllocator::take_cached(Pool& pool, const void* stream,
                                                       size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(size_t segment_size, const void* stream,
                                                       bool small) {
  auto block = std::make_unique<Block>();
  void* p = backend_.raw_alloc(segment_size);
  if (!p) return nullptr;
  block->ptr = static_cast<char*>(p);
  block->size = segment_size;
  block->stream = stream;
  block->small = small;
  ++stats_.num_device_allocs;
  stats_.reserved_bytes += static_cast<int64_t>(segment_size);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return block.release();
}

void CachingAllocator::split(Block* block, size_t size, Pool& pool) {
  const size_t rest = block->size - size;
  const bool keep_rest = block->small ? rest >= kRound : rest > kSmallLimit;
  if (!keep_rest) return;
  auto* tail = new Block;
  tail->ptr = block->ptr + size;
  tail->size = rest;
  tail->stream = block->stream;
  tail->small = block->small;
  tail->prev = block;
  tail->next = block->next;
  if (block->next) block->next->prev = tail;
  block->next = tail;
  block->size = size;
  pool.insert(tail);
}

void CachingAllocator::free(void* ptr) {
  if (!try_free(ptr)) {
    SINTER_THROW("CUDA caching allocator: free of pointer ", ptr, " that device ", device_,
                 "'s allocator does not hold (freed twice, or not allocated by it)");
  }
}

bool CachingAllocator::try_free(void* ptr) {
  if (!ptr) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return false;
  Block* b = it->second;
  // The events first, so that a failure leaves the block as it was: still in use, never reused.
  // Storage deleters call this, so the failure is logged, not thrown.
  Deferred d{b, {}};
  try {
    for (const void* s : b->stream_uses) d.events.push_back(backend_.record_event(s));
  } catch (const std::exception& e) {
    for (void* ev : d.events) backend_.destroy_event(ev);
    std::fprintf(stderr,
                 "sinter: CUDA caching allocator of device %d: the block at %p stays in use "
                 "(leaked), since when other streams finish with it is unknown: %s\n",
                 device_, ptr, e.what());
    return true;
  }
  live_.erase(it);
  ++stats_.num_frees;
  stats_.allocated_bytes -= static_cast<int64_t>(b->size);
  if (d.events.empty()) {
    free_block(b);
  } else {
    b->stream_uses.clear();
    deferred_.push_back(std::move(d));
  }
  return true;
}

bool CachingAllocator::record_stream(void* ptr, const void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return false;
  Block* b = it->second;
  if (stream != b->stream &&
      std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end()) {
    b->stream_uses.push_back(stream);
  }
  return true;
}

void CachingAllocator::forget_stream(const void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [ptr, b] : live_) std::erase(b->stream_uses, stream);
}

void CachingAllocator::free_block(Block* b) {
  b->allocated = false;
  Pool& pool = b->small ? small_pool_ : large_pool_;
  if (Block* prev = b->prev; prev && !prev->allocated) {
    pool.erase(prev);  // before its size, part of the ordering key, changes
    prev->size += b->size;
    prev->next = b->next;
    if (b->next) b->next->prev = prev;
    delete b;
    b = prev;
  }
  if (Block* next = b->next; next && !next->allocated) {
    pool.erase(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next) next->next->prev = b;
    delete next;
  }
  pool.insert(b);
  if (!b->prev && !b->next && closed_pools_.count(b->stream) > 0) {
    // The last block of a closed private pool's segment (Note [private pools]).
    const void* key = b->stream;
    try {
      release_free_segments(key);
      forget_closed_pool_if_empty(key);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sinter: CUDA allocator of device %d: freeing a segment failed: %s\n",
                   device_, e.what());
    }
    return;
  }
  if (!caching_) {
    // Called from storage deleters: a failure is logged, and the segment stays cached.
    try {
      release_free_segments();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sinter: CUDA allocator of device %d: freeing a segment failed: %s\n",
                   device_, e.what());
    }
  }
}

void CachingAllocator::process_deferred(bool wait) {
  for (size_t i = 0; i < deferred_.size();) {
    std::vector<void*>& events = deferred_[i].events;
    while (!events.empty()) {
      void* e = events.back();
      if (wait) {
        backend_.synchronize_event(e);
      } else if (!backend_.event_done(e)) {
        break;
      }
      backend_.destroy_event(e);
      events.pop_back();
    }
    if (!events.empty()) {
      ++i;
      continue;
    }
    free_block(deferred_[i].block);
    deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  process_deferred(true);
  release_free_segments();
}

void CachingAllocator::open_private_pool(const void* key) {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_pools_.erase(key);
  open_pools_.insert(key);
}

void CachingAllocator::close_private_pool(const void* key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_pools_.erase(key) == 0) return;
  closed_pools_.insert(key);
  release_free_segments(key);
  forget_closed_pool_if_empty(key);
}

void CachingAllocator::forget_closed_pool_if_empty(const void* key) {
  for (const auto& [ptr, b] : live_) {
    if (b->stream == key) return;
  }
  for (const Deferred& d : deferred_) {
    if (d.block->stream == key) return;
  }
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (const Block* b : *pool) {
      if (b->stream == key) return;
    }
  }
  closed_pools_.erase(key);
}

void CachingAllocator::capture_begin() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++captures_;
}

void CachingAllocator::capture_end() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (captures_ > 0) --captures_;
  if (captures_ > 0) return;
  // What was held back: the uncached mode's segments, and closed pools' free segments.
  if (!caching_) release_free_segments();
  const std::set<const void*> closed = closed_pools_;
  for (const void* key : closed) {
    release_free_segments(key);
    forget_closed_pool_if_empty(key);
  }
}

void CachingAllocator::release_free_segments(const void* only) {
  if (captures_ > 0) return;  // capture_end gives them back
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev || b->next || (only && b->stream != only) || open_pools_.count(b->stream) > 0) {
        ++it;
        continue;
      }
      backend_.raw_free(b->ptr);  // first, so that a throw leaves the books as they were
      it = pool->erase(it);
      ++stats_.num_device_frees;
      stats_.reserved_bytes -= static_cast<int64_t>(b->size);
      delete b;
    }
  }
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CachingAllocator::throw_oom(size_t requested, size_t segment_size) {
  const int64_t req = static_cast<int64_t>(std::min<size_t>(requested, INT64_MAX));
  const int64_t seg = static_cast<int64_t>(std::min<size_t>(segment_size, INT64_MAX));
  SINTER_THROW("CUDA out of memory: tried to allocate ", mib(req), " (", requested, " bytes, in a ",
               mib(seg), " segment) on device ", device_, "; allocated ",
               mib(stats_.allocated_bytes), ", reserved ", mib(stats_.reserved_bytes), " (",
               mib(stats_.reserved_bytes - stats_.allocated_bytes),
               " cached in partly used segments), peak allocated ",
               mib(stats_.peak_allocated_bytes), ", peak reserved ",
               mib(stats_.peak_reserved_bytes), "; ", live_.size(),
               " blocks in use. The cache of free segments was released before this error; "
               "freeing tensors, or smaller batches, may help");
}

}  // namespace sinter::cuda::detail
