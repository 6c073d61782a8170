"""Sinter from Python: tensors, autograd and zero-copy exchange with PyTorch and NumPy.

The C++ library does the work (sinter._C, bound with nanobind); this package is its thin layer,
with PyTorch's names and behaviour where PyTorch has the same thing.
"""

from collections import namedtuple

from . import _C
from ._C import (  # noqa: F401  (re-exported)
    Tensor,
    arange,
    bfloat16,
    bool,
    device,
    double,
    dtype,
    empty,
    empty_like,
    eye,
    float,
    float16,
    float32,
    float64,
    from_dlpack,
    full,
    half,
    int,
    int32,
    int64,
    is_grad_enabled,
    is_inference_mode_enabled,
    linspace,
    long,
    manual_seed,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    uint8,
    zeros,
    zeros_like,
)
from . import amp, autograd, cuda, datasets, models, nn, onnx, optim, safetensors  # noqa: F401
from . import utils  # noqa: F401
from .amp import autocast  # noqa: F401
from ._formatting import tensor_repr as _tensor_repr
from ._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: F401
from ._tensor_data import tensor  # noqa: F401

__version__ = "0.1.0"

Tensor.__repr__ = _tensor_repr
Tensor.__str__ = _tensor_repr


def _iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))


def _array(self, dtype=None, copy=None):
    # As torch's: the tensor's memory (a tensor that requires grad, or on CUDA, is refused), or a
    # new array when NumPy asks for a copy (np.array(t) does) or for another dtype.
    a = self.numpy()
    if dtype is not None and a.dtype != dtype:
        return a.astype(dtype)
    return a.copy() if copy else a


# max(dim) and min(dim) give (values, indices) with those names, as torch.return_types do; to()
# takes dtype= and device= as keywords too.
_values_indices = {name: namedtuple(name, ["values", "indices"]) for name in ("max", "min")}


def _with_names(name):
    plain = getattr(Tensor, name)

    def method(self, dim=None, keepdim=False):
        out = plain(self, dim, keepdim)
        return out if dim is None else _values_indices[name](*out)

    method.__name__ = name
    method.__doc__ = plain.__doc__
    return method


_plain_to = Tensor.to


def _to(self, *args, dtype=None, device=None, non_blocking=False):
    extra = tuple(a for a in (device, dtype) if a is not None)
    return _plain_to(self, *(args + extra), non_blocking=non_blocking)


Tensor.__iter__ = _iter
Tensor.__array__ = _array
Tensor.max = _with_names("max")
Tensor.min = _with_names("min")
Tensor.to = _to
