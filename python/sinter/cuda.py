"""sinter.cuda: CUDA devices and the caching allocator's memory statistics, as torch.cuda's."""

from ._C.cuda import (  # noqa: F401  (re-exported)
    device_count,
    is_available,
    max_memory_allocated,
    memory_allocated,
    memory_reserved,
    reset_peak_memory_stats,
    synchronize,
)
