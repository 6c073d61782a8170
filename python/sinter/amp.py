"""sinter.amp: autocast, as torch.amp.autocast(device_type, dtype): matmuls and convolutions in
the low precision, losses in float32, softmax, norms and reductions in float32 on CUDA and in their
input's dtype on the CPU (sinter's policy table, PyTorch's for each device type)."""

import functools

from . import _C
from ._C.optim import GradScaler  # noqa: F401  (torch.amp.GradScaler)


class autocast:
    def __init__(self, device_type, dtype=None, enabled=True):
        self._guard = _C._AutocastGuard(device_type, dtype, enabled)
        self._args = (device_type, dtype, enabled)

    def __enter__(self):
        self._guard.enter()
        return self

    def __exit__(self, *exc):
        self._guard.exit()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(*self._args):
                return fn(*args, **kwargs)

        return wrapped
