// What other layers need from the CUDA runtime beyond cuda.h: device memory from the caching
// allocator, pinned host memory, the current stream's handle, and copies.
#pragma once

#include <cstddef>

#include "kern/index.h"
#include "sinter/core/device.h"
#include "sinter/cuda.h"

namespace sinter::cuda::detail {

// From the caching allocator of `device` (Note [caching allocator]), in the pool of the calling
// thread's current stream of that device (Note [current stream]). nbytes == 0 gives nullptr.
// Throws sinter::Error naming the request and the statistics when the device is out of memory.
void* allocate_device(size_t nbytes, int device);
// The same, in the pool of `stream` of `device`: scratch for kernels queued on that stream.
void* allocate_device(size_t nbytes, int device, CUstream_st* stream);
// Returns the block to the cache of its stream; nullptr is a no-op, any other unknown pointer
// throws. The block may be handed out again at once to work on the same stream, which the stream
// orders after all work queued before the free; work queued on other streams must have been
// ordered by the caller, or named to record_stream().
void free_device(void* ptr);
// Work queued on `stream` (of the block's device) uses the block that allocate_device returned as
// `ptr`: once freed, the block is not handed out again before that stream has finished the work
// queued until the free (Note [stream uses] in src/cuda/caching_allocator.h). Pointers the
// caching allocator did not hand out (from_blob memory) are ignored.
void record_stream(void* ptr, CUstream_st* stream);
// Before `stream` is destroyed, once the work queued on it has finished: blocks named to
// record_stream() with it no longer wait for it (a later event recorded on a destroyed stream
// would fail, or land on an unrelated stream that reuses the handle).
void forget_stream(CUstream_st* stream);

// Page-locked host memory, from a cache of blocks rounded up to powers of two. A block freed while
// a copy_bytes() from it is still in flight is not reused before that copy finishes.
void* allocate_pinned(size_t nbytes);
void free_pinned(void* ptr);

CUstream_st* current_stream_handle(int device);

// The device's record of Note [deferred device checks] in src/kern/index.h, in host-mapped
// memory: the pointer kernels write through. The host reads it at each synchronization with the
// device and throws the recorded error, once.
kern::DeviceCheckRecord* device_check_record(int device);

// Copies nbytes between any two of the host and the CUDA devices:
//   host -> host: memcpy.
//   pinned host -> device, device -> same device: asynchronous on the destination device's current
//     stream; the caller keeps the source alive and unchanged until that stream reaches the copy.
//   device -> other device: asynchronous, ordered after the work queued so far on both devices'
//     current streams and before the work queued on them afterwards.
//   pageable host -> device, device -> host (pinned or not): the host waits for the copy, so the
//   host
//     buffer may be freed, reused or read at once.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace sinter::cuda::detail
