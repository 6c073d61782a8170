// Routes a kernel call to the CPU reference or the CUDA kernel by the device of the tensors.
#pragma once

#include "internal/cuda_runtime.h"
#include "kern/ctx.h"
#include "sinter/core/device.h"
#include "sinter/core/error.h"

namespace sinter {

inline kern::Ctx kernel_ctx(Device d) {
  if (d.is_cuda()) return {d.index, cuda::detail::current_stream_handle(d.index)};
  return {};
}

}  // namespace sinter

// SINTER_DISPATCH(device, fn, args...): calls sinter::cudak::fn or sinter::cpu::fn with a Ctx
// first. Without CUDA the CUDA branch names no kernel (Note [kernel interfaces]): it throws, though
// no CUDA tensor can exist in such a build to reach it.
#ifdef SINTER_WITH_CUDA
#define SINTER_DISPATCH_CUDA_(fn, ctx, ...) ::sinter::cudak::fn(ctx, __VA_ARGS__)
#else
#define SINTER_DISPATCH_CUDA_(fn, ctx, ...) SINTER_THROW(#fn, ": Sinter was built without CUDA")
#endif

#define SINTER_DISPATCH(device, fn, ...)                                         \
  do {                                                                           \
    const ::sinter::Device sinter_dev_ = (device);                               \
    if (sinter_dev_.is_cuda()) {                                                 \
      SINTER_DISPATCH_CUDA_(fn, ::sinter::kernel_ctx(sinter_dev_), __VA_ARGS__); \
    } else {                                                                     \
      ::sinter::cpu::fn(::sinter::kernel_ctx(sinter_dev_), __VA_ARGS__);         \
    }                                                                            \
  } while (0)
