// NonCopyable: the private base of scope guards and of objects that own one resource (a stream, a
// graph, an allocator's pools): neither copyable nor movable, so that exactly one object undoes
// what its constructor did.
#pragma once

namespace sinter {

class NonCopyable {
 public:
  NonCopyable(const NonCopyable&) = delete;
  NonCopyable& operator=(const NonCopyable&) = delete;

 protected:
  NonCopyable() = default;
  ~NonCopyable() = default;
};

}  // namespace sinter
