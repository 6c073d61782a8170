"""Sinter from Python: tensors, autograd and zero-copy exchange with PyTorch and NumPy.

The C++ library does the work (sinter._C, bound with nanobind); this package is its thin layer,
with PyTorch's names and behaviour where PyTorch has the same thing.
"""

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
    float8_e4m3fn,
    float8_e5m2,
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
from ._C import (  # noqa: F401  (re-exported: the ops of ops.cpp)
    add,
    addcdiv,
    addcmul,
    allclose,
    argsort,
    atan2,
    baddbmm,
    bmm,
    bucketize,
    cat,
    chunk,
    concat,
    concatenate,
    diag,
    diagonal,
    div,
    einsum,
    eq,
    flip,
    floor_divide,
    gather,
    ge,
    gru_cell,
    gt,
    hypot,
    index_add,
    index_copy,
    index_fill,
    index_reduce,
    index_select,
    isclose,
    kron,
    le,
    lerp,
    logsumexp,
    lstm_cell,
    lt,
    masked_fill,
    matmul,
    maximum,
    meshgrid,
    minimum,
    mm,
    mul,
    multinomial,
    ne,
    nonzero,
    pow,
    remainder,
    repeat_interleave,
    rnn_relu_cell,
    rnn_tanh_cell,
    roll,
    scatter,
    scatter_add,
    scatter_reduce,
    searchsorted,
    split,
    squeeze,
    stack,
    sub,
    tril,
    triu,
    unbind,
    unique,
    where,
)
from ._ops import (  # noqa: F401  (re-exported)
    abs,
    acos,
    acosh,
    addmm,
    all,
    amax,
    amin,
    any,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctanh,
    argmax,
    argmin,
    asin,
    asinh,
    atan,
    atanh,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    broadcast_to,
    ceil,
    clamp,
    clip,
    clone,
    cos,
    cosh,
    count_nonzero,
    cumprod,
    cumsum,
    deg2rad,
    detach,
    diff,
    dot,
    erf,
    erfinv,
    lgamma,
    digamma,
    exp,
    exp2,
    expm1,
    fix,
    flatten,
    floor,
    frac,
    ger,
    isfinite,
    isinf,
    isnan,
    isneginf,
    isposinf,
    kthvalue,
    log,
    log10,
    log1p,
    log2,
    log_softmax,
    logaddexp,
    logaddexp2,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    logit,
    masked_select,
    max,
    mean,
    median,
    min,
    moveaxis,
    movedim,
    mv,
    nan_to_num,
    nanmean,
    nanmedian,
    nanquantile,
    nansum,
    narrow,
    neg,
    numel,
    outer,
    permute,
    prod,
    quantile,
    rad2deg,
    reciprocal,
    relu,
    reshape,
    round,
    rsqrt,
    select,
    sigmoid,
    sign,
    sin,
    sinh,
    softmax,
    sort,
    sqrt,
    square,
    std,
    sum,
    swapaxes,
    swapdims,
    t,
    tan,
    tanh,
    tile,
    topk,
    trace,
    transpose,
    trunc,
    unsqueeze,
    var,
    xlogy,
)
from . import amp, autograd, cuda, datasets, distributed, models, nn, onnx, optim  # noqa: F401
from . import _methods  # noqa: F401  (Tensor methods composed in Python)
from . import fp8, profiler, quantization, safetensors  # noqa: F401
from .serialization import load, save  # noqa: F401
from . import utils  # noqa: F401
from .amp import autocast  # noqa: F401
from ._formatting import tensor_repr as _tensor_repr
from ._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: F401
from ._tensor_data import tensor  # noqa: F401
from ._ops_more import *  # noqa: F401,F403  (more of torch's functions, composed in Python)
from ._methods_more import *  # noqa: F401,F403  (more Tensor methods and their functions)
from ._ops_assign import *  # noqa: F401,F403  (select_scatter, index_put, masked_scatter, ...)
from . import distributions  # noqa: F401

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


_plain_to = Tensor.to


def _to(self, *args, dtype=None, device=None, non_blocking=False):
    extra = tuple(a for a in (device, dtype) if a is not None)
    return _plain_to(self, *(args + extra), non_blocking=non_blocking)


def _deepcopy(self, memo):
    # A new tensor with the same values, dtype, device and requires_grad (a Parameter stays one);
    # copy.deepcopy of a module written in Python copies its parameters through this.
    out = self.detach().clone()
    if type(self) is not Tensor:
        out = type(self)(out, self.requires_grad)
    elif self.requires_grad and self.is_leaf:
        out.requires_grad_(True)
    memo[id(self)] = out
    return out


Tensor.__iter__ = _iter
Tensor.__deepcopy__ = _deepcopy
Tensor.__array__ = _array
Tensor.to = _to


def _as_function(method, name):
    """The Tensor method `method` as torch's function of the package: its tensor argument is
    named input (torch.abs(input=x)), not self."""
    def function(input, *args, **kwargs):
        return method(input, *args, **kwargs)
    function.__name__ = function.__qualname__ = name
    doc = method.__doc__ or ""
    function.__doc__ = doc.replace(f"{name}(self", f"{name}(input", 1)
    return function


for _name, _value in list(globals().items()):
    if (not _name.startswith("_") and callable(_value) and not isinstance(_value, type)
            and getattr(Tensor, _name, None) is _value):
        globals()[_name] = _as_function(_value, _name)
del _name, _value
