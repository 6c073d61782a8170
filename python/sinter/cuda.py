"""sinter.cuda: CUDA devices, the caching allocator's memory statistics and CUDA graphs, as
torch.cuda's. A CUDAGraph captures a function's device work and replays it with one launch;
GraphedStep runs a training step eagerly a few times, then captures and replays it (Note [cuda
graphs]: static input tensors, capturable optimizers)."""

from ._C.cuda import (  # noqa: F401  (re-exported)
    CUDAGraph,
    GraphedStep,
    current_device,
    device_count,
    empty_cache,
    get_device_properties,
    is_available,
    is_current_stream_capturing,
    max_memory_allocated,
    memory_allocated,
    memory_reserved,
    memory_summary,
    reset_peak_memory_stats,
    set_device,
    synchronize,
)


def get_device_name(device=None):
    return get_device_properties(-1 if device is None else device)["name"]
