"""sinter.amp: autocast, as torch.amp.autocast(device_type, dtype): matmuls and convolutions in
the low precision, losses in float32, softmax, norms and reductions in float32 on CUDA and in their
input's dtype on the CPU (sinter's policy table, PyTorch's for each device type)."""

from . import _C
from ._C.optim import GradScaler  # noqa: F401  (torch.amp.GradScaler)
from ._guards import GuardContext


class autocast(GuardContext):
    def __init__(self, device_type, dtype=None, enabled=True):
        self._guard = _C._AutocastGuard(device_type, dtype, enabled)
        self._args = (device_type, dtype, enabled)

    def _fresh(self):
        return autocast(*self._args)
