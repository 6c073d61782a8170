"""sinter.optim: the optimizers, with torch.optim's names and keyword arguments. They update the
parameters' tensors in place, for modules written in C++ or in Python alike."""

from . import _C
from ._C.optim import lr_scheduler  # noqa: F401  (StepLR, CosineAnnealingLR)

Optimizer = _C.optim.Optimizer


def _optimizer(base):
    class Wrapped(base):
        __doc__ = f"torch.optim.{base.__name__}'s options (lr may also be the second argument)."

        def __init__(self, params, lr=None, **kwargs):
            if lr is not None:
                kwargs["lr"] = lr
            super().__init__(list(params), **kwargs)

    Wrapped.__name__ = Wrapped.__qualname__ = base.__name__
    return Wrapped


SGD = _optimizer(_C.optim.SGD)
Adam = _optimizer(_C.optim.Adam)
AdamW = _optimizer(_C.optim.AdamW)
RMSprop = _optimizer(_C.optim.RMSprop)
Adagrad = _optimizer(_C.optim.Adagrad)
