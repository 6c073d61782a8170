// Device scratch for a launcher (the partial results of split reductions), from the caching
// allocator, so that it counts in the memory statistics and takes part in the out-of-memory retry.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "cuda_check.cuh"
#include "internal/cuda_runtime.h"
#include "kern/ctx.h"
#include "sinter/core/noncopyable.h"

namespace sinter::cudak {

// `count` elements of T (none when count <= 0) in the pool of ctx.stream, given back to it at the
// end of the scope. The launcher may let go as soon as it has queued its kernels: the next user of
// the block is queued on the same stream, after them (Note [caching allocator]). A capturing
// stream gets memory of the graph instead (cudaMallocAsync), since a block given back to the pool
// during capture could be handed out while the graph still runs.
template <typename T>
class Scratch : NonCopyable {
 public:
  Scratch(const kern::Ctx& ctx, int64_t count) : stream_(static_cast<cudaStream_t>(ctx.stream)) {
    if (count <= 0) return;
    const size_t nbytes = static_cast<size_t>(count) * sizeof(T);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    SINTER_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
    captured_ = capture != cudaStreamCaptureStatusNone;
    void* p = nullptr;
    if (captured_) {
      SINTER_CUDA_CHECK(cudaMallocAsync(&p, nbytes, stream_));
    } else {
      p = cuda::detail::allocate_device(nbytes, ctx.device, ctx.stream);
    }
    ptr_ = static_cast<T*>(p);
  }
  ~Scratch() {
    if (!ptr_) return;
    try {
      if (captured_) {
        SINTER_CUDA_CHECK(cudaFreeAsync(ptr_, stream_));
      } else {
        cuda::detail::free_device(ptr_);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sinter: freeing kernel scratch failed: %s\n", e.what());
    }
  }

  T* get() const { return ptr_; }

 private:
  cudaStream_t stream_;
  bool captured_ = false;
  T* ptr_ = nullptr;
};

}  // namespace sinter::cudak
