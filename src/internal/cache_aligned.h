// Memory that starts on a cache line (64 bytes), for the CPU kernels' scratch buffers that vector
// loops write: malloc aligns a block to 16 bytes, and then every 64-byte (512-bit) store into it
// straddles two cache lines, and a 32-byte one half the time (in a profile of layer norm's
// gradient, its column sums' straddling stores took about half the samples).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace sinter::detail {

inline constexpr std::align_val_t kCacheLine{64};

// n rounded up to a whole number of cache lines of T: the pitch that keeps each of several rows of
// a cache-aligned buffer on a cache line of its own.
template <class T>
constexpr std::int64_t cache_line_pitch(std::int64_t n) {
  constexpr auto per_line =
      static_cast<std::int64_t>(static_cast<std::size_t>(kCacheLine) / sizeof(T));
  return (n + per_line - 1) / per_line * per_line;
}

template <class T>
struct CacheAligned {
  using value_type = T;
  CacheAligned() = default;
  // Implicit, as the standard library's rebinding copies of an allocator expect.
  template <class U>
  CacheAligned(const CacheAligned<U>&) {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(::operator new(n * sizeof(T), kCacheLine));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, kCacheLine); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const {
    return true;
  }
};

// A std::vector whose data start on a cache line.
template <class T>
using AlignedVector = std::vector<T, CacheAligned<T>>;

struct CacheAlignedDelete {
  void operator()(void* p) const { ::operator delete(p, kCacheLine); }
};

// n elements from a cache line on, left uninitialized (as std::make_unique_for_overwrite).
template <class T>
std::unique_ptr<T[], CacheAlignedDelete> aligned_array_for_overwrite(std::size_t n) {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "left uninitialized, and freed without destructors");
  return std::unique_ptr<T[], CacheAlignedDelete>(CacheAligned<T>().allocate(n));
}

}  // namespace sinter::detail
