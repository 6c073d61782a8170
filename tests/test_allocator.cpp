// Tests of the caching allocator: its pool logic over a fake heap (any machine), and the real
// device allocator, pinned memory and copies (suite CudaAllocator, skipped without a device).
#include <gtest/gtest.h>

#ifdef SINTER_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cuda/caching_allocator.h"
#include "internal/cuda_runtime.h"
#include "sinter/core/error.h"
#include "sinter/cuda.h"
#include "sinter/ops.h"
#include "sinter/tensor.h"

namespace {

using sinter::cuda::MemoryStats;
using Allocator = sinter::cuda::detail::CachingAllocator;
using sinter::cuda::detail::RawBackend;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

// Hands out address ranges without memory behind them (the allocator never touches the bytes),
// back to back so that separate segments are neighbours in address space; with a limit, fails an
// allocation that would take the live bytes past it.
class FakeHeap final : public RawBackend {
 public:
  void set_limit(size_t limit) { limit_ = limit; }

  void* raw_alloc(size_t nbytes) override {
    if (nbytes > limit_ - live_bytes_) {
      ++failed_allocs;
      return nullptr;
    }
    const uintptr_t p = next_;
    next_ += nbytes;
    live_[p] = nbytes;
    live_bytes_ += nbytes;
    ++allocs;
    return reinterpret_cast<void*>(p);
  }

  void raw_free(void* ptr) override {
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    ASSERT_NE(it, live_.end()) << "raw_free of a pointer the heap did not hand out";
    live_bytes_ -= it->second;
    live_.erase(it);
    ++frees;
  }

  // Events are numbers that complete when the test says so, or when waited for.
  void* record_event(const void*) override {
    events_[++last_event_] = false;
    return reinterpret_cast<void*>(last_event_);
  }
  bool event_done(void* event) override { return events_.at(reinterpret_cast<uintptr_t>(event)); }
  void synchronize_event(void* event) override {
    ++synchronized_events;
    events_.at(reinterpret_cast<uintptr_t>(event)) = true;
  }
  void destroy_event(void* event) override {
    EXPECT_EQ(events_.erase(reinterpret_cast<uintptr_t>(event)), 1u) << "unknown event";
  }
  void finish_events() {
    for (auto& [id, done] : events_) done = true;
  }

  size_t live_segments() const { return live_.size(); }
  size_t live_bytes() const { return live_bytes_; }
  size_t live_events() const { return events_.size(); }

  int allocs = 0;
  int frees = 0;
  int failed_allocs = 0;
  int synchronized_events = 0;

 private:
  size_t limit_ = SIZE_MAX;
  size_t live_bytes_ = 0;
  uintptr_t next_ = uintptr_t{1} << 40;
  std::map<uintptr_t, size_t> live_;
  uintptr_t last_event_ = 0;
  std::map<uintptr_t, bool> events_;  // by id: completed
};

char* as_bytes(void* p) { return static_cast<char*>(p); }

// Opaque stream keys.
int stream_a_tag, stream_b_tag, stream_c_tag;
const void* const kStreamA = &stream_a_tag;
const void* const kStreamB = &stream_b_tag;
const void* const kStreamC = &stream_c_tag;

// The pool logic over a fake heap: each test starts with an empty caching allocator for device 0.
class CachingAllocator : public ::testing::Test {
 protected:
  // A block of `bytes` allocated on stream A, used on stream B as well, then freed: its memory
  // waits for stream B's work.
  void* free_in_use_on_b(size_t bytes) {
    void* p = alloc.allocate(bytes, kStreamA);
    EXPECT_TRUE(alloc.record_stream(p, kStreamB));
    alloc.free(p);
    return p;
  }

  FakeHeap heap;
  Allocator alloc{heap, 0};
};

TEST_F(CachingAllocator, ReusesFreedBlockWithoutNewSegment) {
  void* p = alloc.allocate(1000, kStreamA);
  alloc.free(p);
  void* q = alloc.allocate(1000, kStreamA);
  EXPECT_EQ(q, p);
  EXPECT_EQ(heap.allocs, 1);
  const MemoryStats s = alloc.stats();
  EXPECT_EQ(s.num_cache_hits, 1);
  EXPECT_EQ(s.num_device_allocs, 1);
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.num_frees, 1);
  alloc.free(q);
}

TEST_F(CachingAllocator, ZeroBytesGiveNullAndFreeingNullIsNoOp) {
  EXPECT_EQ(alloc.allocate(0, kStreamA), nullptr);
  EXPECT_NO_THROW(alloc.free(nullptr));
  EXPECT_EQ(heap.allocs, 0);
  EXPECT_EQ(alloc.stats().num_allocs, 0);
}

TEST_F(CachingAllocator, SmallRequestsRoundTo512AndShareASegment) {
  void* a = alloc.allocate(1, kStreamA);
  void* b = alloc.allocate(513, kStreamA);
  void* c = alloc.allocate(512, kStreamA);
  EXPECT_EQ(as_bytes(b), as_bytes(a) + 512);
  EXPECT_EQ(as_bytes(c), as_bytes(a) + 512 + 1024);
  EXPECT_EQ(heap.allocs, 1);
  const MemoryStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, int64_t(512 + 1024 + 512));
  EXPECT_EQ(s.reserved_bytes, int64_t(Allocator::kSmallSegment));
  EXPECT_EQ(s.num_cache_hits, 2);
  for (void* p : {a, b, c}) alloc.free(p);
}

TEST_F(CachingAllocator, SplitsCachedLargeBlockAndCoalescesOnFree) {
  void* whole = alloc.allocate(6 * MiB, kStreamA);
  alloc.free(whole);

  void* a = alloc.allocate(2 * MiB, kStreamA);
  void* b = alloc.allocate(2 * MiB, kStreamA);
  void* c = alloc.allocate(2 * MiB, kStreamA);
  EXPECT_EQ(a, whole);
  EXPECT_EQ(as_bytes(b), as_bytes(whole) + 2 * MiB);
  EXPECT_EQ(as_bytes(c), as_bytes(whole) + 4 * MiB);
  EXPECT_EQ(heap.allocs, 1);

  // The middle block goes last, so it merges with a free neighbour on each side.
  alloc.free(a);
  alloc.free(c);
  alloc.free(b);
  void* again = alloc.allocate(6 * MiB, kStreamA);
  EXPECT_EQ(again, whole);
  EXPECT_EQ(heap.allocs, 1);
  alloc.free(again);
  alloc.empty_cache();
  EXPECT_EQ(heap.frees, 1);
  EXPECT_EQ(heap.live_segments(), 0u);
}

TEST_F(CachingAllocator, KeepsSmallLargeRemainderWithTheBlock) {
  // A 3 MiB request gets a 4 MiB segment; the 1 MiB rest is not worth a separate large block.
  void* p = alloc.allocate(3 * MiB, kStreamA);
  EXPECT_EQ(alloc.stats().allocated_bytes, int64_t(4 * MiB));
  EXPECT_EQ(alloc.stats().reserved_bytes, int64_t(4 * MiB));
  alloc.free(p);
  // A 1.5 MiB request splits the cached 4 MiB block: the 2.5 MiB rest is kept.
  void* q = alloc.allocate(3 * MiB / 2, kStreamA);
  EXPECT_EQ(q, p);
  EXPECT_EQ(alloc.stats().allocated_bytes, int64_t(3 * MiB / 2));
  void* r = alloc.allocate(2 * MiB, kStreamA);
  EXPECT_EQ(as_bytes(r), as_bytes(p) + 3 * MiB / 2);
  EXPECT_EQ(heap.allocs, 1);
  alloc.free(q);
  alloc.free(r);
}

TEST_F(CachingAllocator, NeverMergesAcrossSegments) {
  void* a = alloc.allocate(2 * MiB, kStreamA);
  void* b = alloc.allocate(2 * MiB, kStreamA);
  ASSERT_EQ(as_bytes(b), as_bytes(a) + 2 * MiB);  // the fake heap places segments back to back
  alloc.free(a);
  alloc.free(b);
  void* c = alloc.allocate(4 * MiB, kStreamA);
  EXPECT_EQ(heap.allocs, 3);
  EXPECT_EQ(alloc.stats().num_cache_hits, 0);
  alloc.free(c);
  alloc.empty_cache();
  EXPECT_EQ(heap.frees, 3);
}

TEST_F(CachingAllocator, KeepsSeparatePoolsPerStream) {
  void* a = alloc.allocate(4 * KiB, kStreamA);
  alloc.free(a);
  void* b = alloc.allocate(4 * KiB, kStreamB);
  EXPECT_NE(b, a);
  EXPECT_EQ(heap.allocs, 2);
  EXPECT_EQ(alloc.stats().num_cache_hits, 0);
  void* a2 = alloc.allocate(4 * KiB, kStreamA);
  EXPECT_EQ(a2, a);
  EXPECT_EQ(alloc.stats().num_cache_hits, 1);
  alloc.free(b);
  alloc.free(a2);
}

TEST_F(CachingAllocator, KeepsSmallAndLargePoolsApart) {
  alloc.free(alloc.allocate(4 * MiB, kStreamA));
  void* small = alloc.allocate(KiB, kStreamA);
  EXPECT_EQ(heap.allocs, 2);
  alloc.free(alloc.allocate(4 * KiB, kStreamA));  // fits in the small segment, not the large one
  alloc.free(small);
  EXPECT_EQ(heap.allocs, 2);
  void* large = alloc.allocate(4 * MiB, kStreamA);
  EXPECT_EQ(heap.allocs, 2);
  EXPECT_EQ(alloc.stats().num_cache_hits, 2);
  alloc.free(large);
}

TEST_F(CachingAllocator, TracksAllocatedReservedAndPeaks) {
  void* small = alloc.allocate(MiB, kStreamA);
  void* large = alloc.allocate(10 * MiB, kStreamA);
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, int64_t(11 * MiB));
  EXPECT_EQ(s.reserved_bytes, int64_t(12 * MiB));
  EXPECT_EQ(s.peak_allocated_bytes, int64_t(11 * MiB));
  EXPECT_EQ(s.peak_reserved_bytes, int64_t(12 * MiB));

  alloc.free(large);
  s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, int64_t(MiB));
  EXPECT_EQ(s.reserved_bytes, int64_t(12 * MiB));
  EXPECT_EQ(s.peak_allocated_bytes, int64_t(11 * MiB));

  alloc.reset_peak_stats();
  s = alloc.stats();
  EXPECT_EQ(s.peak_allocated_bytes, int64_t(MiB));
  EXPECT_EQ(s.peak_reserved_bytes, int64_t(12 * MiB));

  alloc.empty_cache();
  s = alloc.stats();
  EXPECT_EQ(s.reserved_bytes, int64_t(2 * MiB));
  EXPECT_EQ(s.peak_reserved_bytes, int64_t(12 * MiB));
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.num_frees, 1);
  EXPECT_EQ(s.num_device_allocs, 2);
  EXPECT_EQ(s.num_device_frees, 1);
  EXPECT_EQ(heap.live_bytes(), 2 * MiB);
  alloc.free(small);
}

TEST_F(CachingAllocator, EmptyCacheReleasesOnlyWhollyFreeSegments) {
  void* a = alloc.allocate(MiB, kStreamA);  // a and b fill the first small segment
  void* b = alloc.allocate(MiB, kStreamA);
  void* c = alloc.allocate(MiB, kStreamA);  // c starts a second one
  EXPECT_EQ(heap.allocs, 2);
  alloc.free(a);
  alloc.free(c);
  alloc.empty_cache();
  EXPECT_EQ(heap.frees, 1);
  EXPECT_EQ(heap.live_segments(), 1u);
  EXPECT_EQ(alloc.stats().reserved_bytes, int64_t(2 * MiB));
  EXPECT_EQ(alloc.allocate(MiB, kStreamA), a);  // the half-used segment still caches a's block
  alloc.free(a);
  alloc.free(b);
  alloc.empty_cache();
  EXPECT_EQ(heap.live_segments(), 0u);
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
}

TEST_F(CachingAllocator, RetriesAfterReleasingCacheOnOutOfMemory) {
  heap.set_limit(8 * MiB);
  alloc.free(alloc.allocate(6 * MiB, kStreamA));
  // Stream B cannot use A's cached 6 MiB, and 6 + 4 MiB exceed the heap: the cache must go first.
  void* p = alloc.allocate(4 * MiB, kStreamB);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(heap.failed_allocs, 1);
  const MemoryStats s = alloc.stats();
  EXPECT_EQ(s.num_device_frees, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.reserved_bytes, int64_t(4 * MiB));
  alloc.free(p);
}

TEST_F(CachingAllocator, OutOfMemoryErrorNamesRequestAndStats) {
  heap.set_limit(8 * MiB);
  Allocator on_device3(heap, 3);
  void* held = on_device3.allocate(6 * MiB, kStreamA);
  std::string msg;
  try {
    on_device3.allocate(4 * MiB, kStreamA);
  } catch (const sinter::Error& e) {
    msg = e.what();
  }
  ASSERT_FALSE(msg.empty()) << "expected an out-of-memory error";
  EXPECT_NE(msg.find("CUDA out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tried to allocate 4.00 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("device 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allocated 6.00 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reserved 6.00 MiB"), std::string::npos) << msg;
  EXPECT_EQ(heap.failed_allocs, 2);  // the first try and the retry
  EXPECT_EQ(on_device3.stats().num_ooms, 1);

  // The allocator is still consistent and usable.
  on_device3.free(held);
  void* p = on_device3.allocate(4 * MiB, kStreamA);
  EXPECT_EQ(p, held);
  on_device3.free(p);
}

TEST_F(CachingAllocator, AbsurdRequestIsOutOfMemory) {
  EXPECT_THROW(alloc.allocate(SIZE_MAX, kStreamA), sinter::Error);
  EXPECT_EQ(alloc.stats().num_ooms, 1);
  EXPECT_EQ(heap.allocs, 0);
}

TEST_F(CachingAllocator, FreeingUnknownPointerThrows) {
  int x = 0;
  EXPECT_THROW(alloc.free(&x), sinter::Error);
  EXPECT_FALSE(alloc.try_free(&x));
  void* p = alloc.allocate(100, kStreamA);
  alloc.free(p);
  try {
    alloc.free(p);
    ADD_FAILURE() << "a double free did not throw";
  } catch (const sinter::Error& e) {
    EXPECT_NE(std::string(e.what()).find("freed twice"), std::string::npos) << e.what();
  }
  EXPECT_EQ(alloc.stats().num_frees, 1);
}

TEST_F(CachingAllocator, DestructorReleasesFreeSegments) {
  {
    Allocator scoped(heap, 0);
    scoped.free(scoped.allocate(KiB, kStreamA));
    scoped.free(scoped.allocate(8 * MiB, kStreamB));
  }
  EXPECT_EQ(heap.live_segments(), 0u);
}

TEST_F(CachingAllocator, BlockUsedOnOtherStreamsWaitsForThemAfterFree) {
  void* p = alloc.allocate(4 * KiB, kStreamA);
  EXPECT_TRUE(alloc.record_stream(p, kStreamB));
  EXPECT_TRUE(alloc.record_stream(p, kStreamB));
  EXPECT_TRUE(alloc.record_stream(p, kStreamC));
  EXPECT_EQ(heap.live_events(), 0u);
  alloc.free(p);
  EXPECT_EQ(heap.live_events(), 2u);  // one per other stream, recorded at the free
  EXPECT_EQ(alloc.stats().allocated_bytes, 0);
  EXPECT_EQ(alloc.stats().num_frees, 1);
  // B and C may still be using p: stream A gets other memory, and the neighbour freed after p does
  // not merge with it.
  void* q = alloc.allocate(4 * KiB, kStreamA);
  EXPECT_NE(q, p);
  alloc.free(q);
  q = alloc.allocate(4 * KiB, kStreamA);
  EXPECT_NE(q, p);
  EXPECT_EQ(heap.live_events(), 2u);
  heap.finish_events();
  void* r = alloc.allocate(4 * KiB, kStreamA);
  EXPECT_EQ(r, p);
  EXPECT_EQ(heap.live_events(), 0u);
  EXPECT_EQ(heap.synchronized_events, 0);
  alloc.free(r);
  alloc.free(q);
}

TEST_F(CachingAllocator, RecordStreamOfItsOwnStreamOrAForeignPointer) {
  void* p = alloc.allocate(4 * KiB, kStreamA);
  EXPECT_TRUE(alloc.record_stream(p, kStreamA));  // the pool's stream already orders the reuse
  alloc.free(p);
  EXPECT_EQ(heap.live_events(), 0u);
  EXPECT_EQ(alloc.allocate(4 * KiB, kStreamA), p);
  int x = 0;
  EXPECT_FALSE(alloc.record_stream(&x, kStreamB));
  alloc.free(p);
  EXPECT_FALSE(alloc.record_stream(p, kStreamB));  // freed: no longer handed out
}

TEST_F(CachingAllocator, EmptyCacheWaitsForStreamUses) {
  free_in_use_on_b(4 * MiB);
  alloc.empty_cache();
  EXPECT_EQ(heap.synchronized_events, 1);
  EXPECT_EQ(heap.live_events(), 0u);
  EXPECT_EQ(heap.live_segments(), 0u);
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
}

TEST_F(CachingAllocator, OutOfMemoryRetryWaitsForStreamUses) {
  heap.set_limit(8 * MiB);
  free_in_use_on_b(6 * MiB);
  // The block's segment, too small for the request, is released only once stream B is done with it.
  void* q = alloc.allocate(7 * MiB, kStreamA);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(heap.failed_allocs, 1);
  EXPECT_EQ(heap.synchronized_events, 1);
  EXPECT_EQ(alloc.stats().num_device_frees, 1);
  EXPECT_EQ(alloc.stats().num_ooms, 0);
  alloc.free(q);
}

TEST_F(CachingAllocator, DestructorDropsPendingStreamUses) {
  {
    Allocator scoped(heap, 0);
    void* p = scoped.allocate(KiB, kStreamA);
    scoped.record_stream(p, kStreamB);
    scoped.free(p);
    EXPECT_EQ(heap.live_events(), 1u);
  }
  EXPECT_EQ(heap.live_events(), 0u);
}

TEST_F(CachingAllocator, OutOfMemoryRetryReusesABlockOtherStreamsHaveFinishedWith) {
  // Room for two 2 MiB segments. Once stream B is done with p, p's block fits the request: the
  // retry takes it from the cache rather than giving its segment back and asking for a new one.
  heap.set_limit(4 * MiB);
  void* keep = alloc.allocate(2 * MiB, kStreamA);
  void* p = free_in_use_on_b(2 * MiB);
  void* q = alloc.allocate(2 * MiB, kStreamA);
  EXPECT_EQ(q, p);
  EXPECT_EQ(heap.synchronized_events, 1);
  EXPECT_EQ(heap.allocs, 2);
  const MemoryStats s = alloc.stats();
  EXPECT_EQ(s.num_device_frees, 0);
  EXPECT_EQ(s.num_cache_hits, 1);
  EXPECT_EQ(s.num_ooms, 0);
  alloc.free(q);
  alloc.free(keep);
}

TEST_F(CachingAllocator, ForgottenStreamIsNoLongerWaitedFor) {
  void* p = alloc.allocate(4 * KiB, kStreamA);
  EXPECT_TRUE(alloc.record_stream(p, kStreamB));
  EXPECT_TRUE(alloc.record_stream(p, kStreamC));
  alloc.forget_stream(kStreamB);
  alloc.free(p);
  EXPECT_EQ(heap.live_events(), 1u);  // for stream C only
  heap.finish_events();
  alloc.forget_stream(kStreamC);  // no live block names it any more: nothing to do
  void* q = alloc.allocate(4 * KiB, kStreamA);
  EXPECT_EQ(q, p);
  alloc.free(q);
}

TEST_F(CachingAllocator, WithoutCachingEachRequestIsItsOwnExactSegment) {
  Allocator uncached(heap, 0, /*caching=*/false);
  void* p = uncached.allocate(1000, kStreamA);
  void* q = uncached.allocate(1000, kStreamA);
  EXPECT_EQ(heap.allocs, 2);
  EXPECT_EQ(heap.live_bytes(), 2000u);  // not rounded: a sanitizer sees a read past byte 1000
  EXPECT_EQ(uncached.stats().allocated_bytes, 2000);
  uncached.free(p);
  EXPECT_EQ(heap.frees, 1);  // given back at once, not cached
  EXPECT_EQ(uncached.stats().reserved_bytes, 1000);
  void* r = uncached.allocate(1000, kStreamA);
  EXPECT_EQ(uncached.stats().num_cache_hits, 0);
  EXPECT_EQ(heap.allocs, 3);
  uncached.free(q);
  uncached.free(r);
  EXPECT_EQ(heap.live_segments(), 0u);
  EXPECT_EQ(uncached.stats().reserved_bytes, 0);
}

TEST_F(CachingAllocator, WithoutCachingStreamUsesStillDelayTheRelease) {
  Allocator uncached(heap, 0, /*caching=*/false);
  void* p = uncached.allocate(4 * KiB, kStreamA);
  EXPECT_TRUE(uncached.record_stream(p, kStreamB));
  uncached.free(p);
  EXPECT_EQ(heap.frees, 0);  // stream B may still be using it
  heap.finish_events();
  uncached.free(uncached.allocate(4 * KiB, kStreamA));  // polls the pending uses
  EXPECT_EQ(heap.live_segments(), 0u);
  EXPECT_EQ(heap.live_events(), 0u);
}

TEST_F(CachingAllocator, StaysConsistentUnderConcurrentUse) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      const void* stream = (t % 2) ? kStreamA : kStreamB;
      std::vector<void*> held;
      for (int i = 0; i < kRounds; ++i) {
        held.push_back(
            alloc.allocate(size_t(1 + (i * 7919 + t) % 3) * ((i % 5 == 0) ? MiB : KiB), stream));
        if (held.size() > 8) {
          alloc.free(held.front());
          held.erase(held.begin());
        }
      }
      for (void* p : held) alloc.free(p);
    });
  }
  for (auto& th : threads) th.join();
  const MemoryStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.num_allocs, int64_t(kThreads) * kRounds);
  EXPECT_EQ(s.num_frees, int64_t(kThreads) * kRounds);
  alloc.empty_cache();
  EXPECT_EQ(heap.live_segments(), 0u);
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
}

// Per Note [private pools], a graph's blocks are reused only within its pool, its segments survive
// empty_cache while the pool is open, and closing it gives them back, the last ones as their
// tensors go.
TEST_F(CachingAllocator, PrivatePoolsKeepTheirMemoryUntilClosed) {
  int graph_tag = 0;
  const void* const graph = &graph_tag;
  alloc.open_private_pool(graph);
  void* a = alloc.allocate(1000, graph);     // small: a 2 MiB segment of the pool
  void* b = alloc.allocate(3 * MiB, graph);  // large: a segment of its own
  void* kept = alloc.allocate(2000, graph);  // outlives the graph, like a captured step's output
  alloc.free(a);
  alloc.free(b);
  // Another stream never gets the pool's cached blocks.
  void* other = alloc.allocate(1000, kStreamA);
  EXPECT_NE(other, a);
  alloc.free(other);
  // Within the pool a freed block is reused.
  void* again = alloc.allocate(1000, graph);
  EXPECT_EQ(again, a);
  alloc.free(again);
  // empty_cache spares the open pool: only stream A's segment goes.
  const int frees_before = heap.frees;
  alloc.empty_cache();
  EXPECT_EQ(heap.frees, frees_before + 1);
  EXPECT_EQ(heap.live_segments(), 2u);  // the pool's small and large segments
  // Closing: the wholly free large segment goes at once; the small one waits for `kept`.
  alloc.close_private_pool(graph);
  EXPECT_EQ(heap.live_segments(), 1u);
  alloc.free(kept);
  EXPECT_EQ(heap.live_segments(), 0u);
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
  EXPECT_EQ(alloc.stats().allocated_bytes, 0);
  // A pool opened again under the same key starts afresh.
  alloc.open_private_pool(graph);
  void* c = alloc.allocate(1000, graph);
  alloc.free(c);
  alloc.close_private_pool(graph);
  EXPECT_EQ(heap.live_segments(), 0u);
}

TEST_F(CachingAllocator, OutOfMemoryRetrySparesOpenPrivatePools) {
  int graph_tag = 0;
  const void* const graph = &graph_tag;
  heap.set_limit(8 * MiB);
  alloc.open_private_pool(graph);
  alloc.free(alloc.allocate(4 * MiB, graph));  // cached in the pool
  // The retry may not take the pool's free segment: this request fails.
  EXPECT_THROW(alloc.allocate(6 * MiB, kStreamA), sinter::Error);
  EXPECT_EQ(heap.live_segments(), 1u);
  alloc.close_private_pool(graph);
  EXPECT_EQ(heap.live_segments(), 0u);
  void* p = alloc.allocate(6 * MiB, kStreamA);
  alloc.free(p);
}

// While a capture runs no segment goes back (that would synchronize the device); capture_end gives
// back what was held.
TEST_F(CachingAllocator, NothingIsReleasedDuringACapture) {
  heap.set_limit(6 * MiB);
  alloc.free(alloc.allocate(4 * MiB, kStreamA));
  alloc.capture_begin();
  alloc.empty_cache();
  EXPECT_EQ(heap.live_segments(), 1u);
  // Out of memory: no release to retry with, so the request fails at once.
  EXPECT_THROW(alloc.allocate(4 * MiB, kStreamB), sinter::Error);
  EXPECT_EQ(heap.live_segments(), 1u);
  alloc.capture_end();
  alloc.empty_cache();
  EXPECT_EQ(heap.live_segments(), 0u);
}

TEST(CachingAllocatorUncached, CaptureEndReleasesWhatWasHeldBack) {
  FakeHeap heap;
  Allocator alloc(heap, 0, false);
  void* p = alloc.allocate(1000, kStreamA);
  alloc.capture_begin();
  alloc.free(p);  // the uncached mode would give the segment back at once
  EXPECT_EQ(heap.live_segments(), 1u);
  alloc.capture_end();
  EXPECT_EQ(heap.live_segments(), 0u);
}

// ---- On a device: the real allocator, pinned memory and copies ----

namespace cuda = sinter::cuda;
namespace cd = sinter::cuda::detail;

TEST(CudaAllocator, AllocateAndFreeUpdateMemoryStats) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const MemoryStats before = cuda::memory_stats();
  void* p = cd::allocate_device(3000, cuda::current_device());
  ASSERT_NE(p, nullptr);
  MemoryStats s = cuda::memory_stats();
  EXPECT_EQ(s.allocated_bytes, before.allocated_bytes + 3072);
  EXPECT_GE(s.reserved_bytes, s.allocated_bytes);
  EXPECT_EQ(s.num_allocs, before.num_allocs + 1);
  cd::free_device(p);
  s = cuda::memory_stats();
  EXPECT_EQ(s.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(s.num_frees, before.num_frees + 1);
  cuda::empty_cache();
  EXPECT_LE(cuda::memory_stats().reserved_bytes, s.reserved_bytes);
}

TEST(CudaAllocator, ReusesCachedBlock) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int dev = cuda::current_device();
  void* p = cd::allocate_device(5 * MiB, dev);
  cd::free_device(p);
  const MemoryStats before = cuda::memory_stats(dev);
  void* q = cd::allocate_device(5 * MiB, dev);
  EXPECT_EQ(q, p);
  const MemoryStats after = cuda::memory_stats(dev);
  EXPECT_EQ(after.num_cache_hits, before.num_cache_hits + 1);
  EXPECT_EQ(after.num_device_allocs, before.num_device_allocs);
  cd::free_device(q);
}

TEST(CudaAllocator, StreamsHaveSeparatePools) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int dev = cuda::current_device();
  void* p = cd::allocate_device(64 * KiB, dev);
  cd::free_device(p);
  cuda::Stream side = cuda::Stream::create(dev);
  {
    cuda::StreamGuard guard(side);
    EXPECT_EQ(cuda::current_stream(dev), side);
    EXPECT_EQ(cd::current_stream_handle(dev), side.handle());
    void* q = cd::allocate_device(64 * KiB, dev);
    EXPECT_NE(q, p);
    cd::free_device(q);
  }
  EXPECT_TRUE(cuda::current_stream(dev).is_default());
  cuda::empty_cache();
}

TEST(CudaAllocator, OutOfMemoryThrowsAndAllocatorRecovers) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int dev = cuda::current_device();
  const int64_t ooms = cuda::memory_stats(dev).num_ooms;
  try {
    cd::allocate_device(size_t{1} << 50, dev);  // 1 PiB
    ADD_FAILURE() << "a 1 PiB allocation succeeded";
  } catch (const sinter::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA out of memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cuda::memory_stats(dev).num_ooms, ooms + 1);
  void* p = cd::allocate_device(MiB, dev);
  EXPECT_NE(p, nullptr);
  cd::free_device(p);
}

TEST(CudaAllocator, FreeingUnknownPointerThrows) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  int x = 0;
  EXPECT_THROW(cd::free_device(&x), sinter::Error);
}

TEST(CudaAllocator, CopiesRoundTripThroughDevice) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int dev = cuda::current_device();
  const sinter::Device host = sinter::Device::cpu(), gpu = sinter::Device::cuda(dev);
  constexpr size_t n = 3 * MiB + 12345;
  std::vector<uint8_t> src(n), back(n, 0);
  for (size_t i = 0; i < n; ++i) src[i] = uint8_t(i * 131 + 7);

  void* d1 = cd::allocate_device(n, dev);
  void* d2 = cd::allocate_device(n, dev);
  cd::copy_bytes(d1, gpu, src.data(), host, n);  // pageable: synchronous
  cd::copy_bytes(d2, gpu, d1, gpu, n);
  cd::copy_bytes(back.data(), host, d2, gpu, n);
  EXPECT_EQ(back, src);

  // Pinned: the upload is asynchronous; the download on the same stream is ordered after it.
  auto* pinned = static_cast<uint8_t*>(cd::allocate_pinned(n));
  std::memcpy(pinned, src.data(), n);
  std::vector<uint8_t> back2(n, 0);
  cd::copy_bytes(d1, gpu, pinned, host, n);
  cd::free_pinned(pinned);
  // Reallocating at once must not hand back the block the upload may still be reading.
  auto* pinned2 = static_cast<uint8_t*>(cd::allocate_pinned(n));
  std::memset(pinned2, 0xAB, n);
  cd::copy_bytes(back2.data(), host, d1, gpu, n);
  EXPECT_EQ(back2, src);
  cd::free_pinned(pinned2);

  cd::free_device(d1);
  cd::free_device(d2);
}

#ifdef SINTER_WITH_CUDA
// Regression: host memory page-locked by its owner (cudaHostAlloc, then Tensor from_blob) was
// copied asynchronously with nothing to tell when the copy ended, so Tensor::to returned early
// and the owner's next write raced the copy. It now completes before the call returns.
TEST(CudaAllocator, CopiesFromForeignPageLockedMemoryComplete) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t n = 64 * int64_t{MiB};  // floats: 256 MiB, a copy of some milliseconds
  float* host = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&host), n * sizeof(float), 0), cudaSuccess);
  std::fill(host, host + n, 1.0f);
  const sinter::Tensor t = sinter::from_blob(host, {n}, {1}, {});
  const sinter::Tensor d = t.to(sinter::Device::cuda(cuda::current_device()));
  std::fill(host, host + n, 2.0f);  // the caller reuses its buffer at once
  EXPECT_EQ(sinter::sum(d).item<float>(), static_cast<float>(n));
  EXPECT_EQ(sinter::max(d).item<float>(), 1.0f);
  ASSERT_EQ(cudaFreeHost(host), cudaSuccess);
}
#endif

TEST(CudaAllocator, EventsTimeWorkOnAStream) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int dev = cuda::current_device();
  cuda::Stream s = cuda::Stream::create(dev);
  cuda::Event start, end;
  EXPECT_TRUE(start.query());  // never recorded
  void* p = cd::allocate_device(64 * MiB, dev);
  start.record(s);
  {
    cuda::StreamGuard guard(s);
    cd::copy_bytes(p, sinter::Device::cuda(dev), static_cast<char*>(p) + 32 * MiB,
                   sinter::Device::cuda(dev), 32 * MiB);
  }
  end.record(s);
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GE(start.elapsed_ms(end), 0.0f);
  cuda::Stream::default_stream(dev).wait(end);
  EXPECT_TRUE(s.query());
  cd::free_device(p);
}

#ifdef SINTER_WITH_CUDA
// Regression: a block that another stream still used (an NCCL collective's) went back to its
// allocation stream's pool when freed, and was handed out again while that stream ran.
TEST(CudaAllocator, BlockRecordedOnBusyStreamIsNotReusedBeforeItDrains) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int dev = cuda::current_device();
  // Declared before the streams, whose destructors wait for the host function that reads it.
  std::atomic<bool> release{false};
  cuda::Stream compute = cuda::Stream::create(dev);
  cuda::Stream side = cuda::Stream::create(dev);
  cuda::StreamGuard guard(compute);
  // Holds the side stream until `release` is set, for at most 30 s.
  const cudaHostFn_t hold = [](void* flag) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!static_cast<std::atomic<bool>*>(flag)->load() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  ASSERT_EQ(cudaLaunchHostFunc(side.handle(), hold, &release), cudaSuccess);

  void* p = cd::allocate_device(8 * MiB, dev);
  cd::record_stream(p, side.handle());
  cd::free_device(p);
  void* q = cd::allocate_device(8 * MiB, dev);
  EXPECT_NE(q, p) << "handed out again while the side stream may still use it";
  release = true;
  side.synchronize();
  void* r = cd::allocate_device(8 * MiB, dev);
  EXPECT_EQ(r, p) << "not reused once the side stream drained";
  cd::free_device(q);
  cd::free_device(r);
}
#endif

TEST(CudaAllocator, DevicePropertiesAreSensible) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const cuda::DeviceProperties p = cuda::get_device_properties();
  EXPECT_FALSE(p.name.empty());
  EXPECT_GE(p.major, 3);
  EXPECT_GT(p.multiprocessor_count, 0);
  EXPECT_GT(p.total_memory, size_t{0});
  EXPECT_THROW(cuda::get_device_properties(cuda::device_count()), sinter::Error);
}

}  // namespace
