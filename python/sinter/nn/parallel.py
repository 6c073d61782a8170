"""sinter.nn.parallel: DistributedDataParallel, as torch's: wraps a module (written in Python or
C++) so that each backward averages the gradients over the ranks, in buckets that start while
backward still runs (the C++ DistributedDataParallel, Note [python modules in C++])."""

import contextlib

from .. import _C
from .. import distributed as _dist
from . import CModule, Module


class DistributedDataParallel(Module):
    """On construction every rank gets rank 0's parameters and buffers; each call broadcasts rank
    0's buffers (broadcast_buffers) and runs the module; backward leaves the average gradient in
    every parameter's .grad. Move the module to its device before wrapping it. state_dict keys
    start with "module.", as torch's."""

    def __init__(self, module, device_ids=None, output_device=None, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False, **kwargs):
        del device_ids, output_device, kwargs
        super().__init__()
        self.module = module
        pg = process_group if process_group is not None else _dist.group()
        object.__setattr__(self, "_pg", pg)
        object.__setattr__(self, "broadcast_buffers", broadcast_buffers)
        cpp = module if isinstance(module, CModule) else _C._as_cpp_module(module)
        object.__setattr__(self, "_ddp", _C.distributed._DDP(cpp, pg, float(bucket_cap_mb),
                                                            find_unused_parameters))

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers:
            for _, b in self.module.named_buffers():
                self._pg.broadcast(b, 0)
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward inside accumulates gradients locally; the first backward after it averages
        the sum."""
        guard = _C.distributed._NoSync(self._ddp)
        try:
            yield
        finally:
            del guard
