"""More of torch.Tensor's methods, composed in Python over sinter's ops, with the package functions
of the same name where torch has them: autograd and type queries (grad_fn, type, get_device, ...),
norm, torch's aliases (multiply, greater_equal, ...) and in-place comparisons, and shape methods
(unfold, unflatten, diag_embed, unique_consecutive, ...). The scans (cummax, logcumsumexp, ...) and
the random fills (random_, exponential_, ...) are in _methods_scan.py, re-exported here."""

import math

from . import _C, _methods_scan
from ._grad_mode import no_grad
from ._methods import _apply, _in_place
from ._methods_scan import *  # noqa: F401,F403  (re-exported)
from ._ops_more import _NoDerivative
from ._ops_more2 import _method, _tensor_arg, _wrap_dim
from .nn.functional import _vector_norm

Tensor = _C.Tensor

__all__ = _methods_scan.__all__ + [
    "absolute", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan2", "arctan_", "arctanh_",
    "detach_", "diag_embed", "diagflat", "divide", "equal", "fliplr", "flipud", "get_device",
    "greater", "greater_equal", "is_same_size", "is_signed", "less", "less_equal", "msort",
    "multiply", "narrow_copy", "negative", "negative_", "norm", "not_equal", "positive",
    "ravel", "split_with_sizes", "subtract", "unflatten", "unique_consecutive",
]


# --- autograd and type queries ---

class _GradFn:
    """The node that made a tensor, as torch's grad_fn shows it: name() and a repr of the form
    <MulBackward0 object at 0x...>."""

    __slots__ = ()

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"


_GRAD_FN_TYPES = {}


def _grad_fn(self):
    """None for a leaf or a tensor outside any graph; else its node, named from sinter's node
    name the way torch names its nodes (mul -> MulBackward0; a Function F's node stays
    FBackward)."""
    raw = self._grad_fn_name()
    if raw is None:
        return None
    if raw not in _GRAD_FN_TYPES:
        name = raw if raw.endswith("Backward") else \
            "".join(part.capitalize() for part in raw.split("_")) + "Backward0"
        _GRAD_FN_TYPES[raw] = type(name, (_GradFn,), {"__slots__": ()})
    return _GRAD_FN_TYPES[raw]()


def _get_device(self):
    """The CUDA device's index, -1 for a CPU tensor."""
    return -1 if self.device.type == "cpu" else (self.device.index or 0)


# torch's legacy tensor type names, per dtype ('torch.FloatTensor', 'torch.cuda.LongTensor').
_TYPE_NAMES = {
    _C.float32: "Float", _C.float64: "Double", _C.float16: "Half", _C.bfloat16: "BFloat16",
    _C.int64: "Long", _C.int32: "Int", _C.uint8: "Byte", _C.bool: "Bool",
    _C.float8_e4m3fn: "Float8_e4m3fn", _C.float8_e5m2: "Float8_e5m2",
}
_TYPE_DTYPES = {name: dtype for dtype, name in _TYPE_NAMES.items()}


def _type(self, dtype=None, non_blocking=False):
    """Without dtype, torch's type name ('torch.FloatTensor', 'torch.cuda.FloatTensor'); with a
    dtype, this tensor converted to it; with a type name, converted to its dtype and device (a
    CPU name moves a CUDA tensor to the CPU). Itself where nothing changes."""
    cuda = self.device.type == "cuda"
    if dtype is None:
        return f"torch.{'cuda.' if cuda else ''}{_TYPE_NAMES[self.dtype]}Tensor"
    if isinstance(dtype, str):
        prefix, _, name = dtype.rpartition(".")
        if prefix not in ("torch", "torch.cuda") or not name.endswith("Tensor") or \
                name[:-6] not in _TYPE_DTYPES:
            raise ValueError(f"invalid type: {dtype!r}")
        to_cuda = prefix == "torch.cuda"
        device = (self.device if cuda else "cuda") if to_cuda else "cpu"
        if (self.dtype, cuda) == (_TYPE_DTYPES[name[:-6]], to_cuda):
            return self
        return self.to(device, non_blocking=non_blocking).to(_TYPE_DTYPES[name[:-6]])
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"type(): expected a dtype or a type name, got {type(dtype).__name__}")
    return self if dtype == self.dtype else self.to(dtype)


def _byte(self):
    """This tensor as uint8 (itself if it is uint8 already)."""
    return self if self.dtype == _C.uint8 else self.to(_C.uint8)


def _is_signed(self):
    """Whether the dtype holds negative numbers (all but uint8 and bool)."""
    return self.dtype not in (_C.uint8, _C.bool)


def _other(name, other):
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'other' (position 1) must be Tensor, not "
                        f"{type(other).__name__}")
    return other


def _is_same_size(self, other):
    """Whether other has this tensor's shape."""
    return tuple(self.shape) == tuple(_other("is_same_size", other).shape)


def _equal(self, other):
    """True where other has this shape and equal values (compared after type promotion, so a
    NaN is equal to nothing)."""
    other = _other("equal", other)
    if self.device != other.device:
        raise RuntimeError(f"equal: expected both tensors on one device, got {self.device} and "
                           f"{other.device}")
    if tuple(self.shape) != tuple(other.shape):
        return False
    return bool((self.detach() == other.detach()).all())


def _detach_(self):
    """Cuts this tensor from autograd in place: a leaf stops requiring grad. sinter cannot make a
    non-leaf a leaf in place, so a result of an op is refused (detach() gives that)."""
    if self._grad_fn_name() is not None:
        raise RuntimeError("detach_: sinter cannot cut a result of an op from its graph in "
                           "place; use detach() instead")
    return self.requires_grad_(False) if self.requires_grad else self


Tensor.grad_fn = property(_grad_fn, doc=_grad_fn.__doc__)
Tensor.is_cpu = property(lambda self: self.device.type == "cpu",
                         doc="Whether this tensor is on the CPU.")
Tensor.get_device = _get_device
Tensor.type = _type
Tensor.byte = _byte
Tensor.is_signed = _is_signed
Tensor.is_same_size = _is_same_size
Tensor.equal = _equal
Tensor.detach_ = _detach_


# --- norm ---

def _norm_dims(input, dim):
    """dim as a list of wrapped dims (None: all of them), torch's error for a repeat."""
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return None
    dims = [_wrap_dim(d, input.dim()) for d in ([dim] if isinstance(dim, int) else dim)]
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return dims


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm: the vector p-norm over dim (all dims by default) for a number p (inf, -inf,
    0, ...; None is 2), or p='fro' over at most 2 dims (the 2-norm of those elements); computed
    in dtype when given. p='nuc' needs singular values, which sinter does not compute."""
    _tensor_arg("norm", input)
    if out is not None:
        raise NotImplementedError("norm: out= is not supported; assign the result instead")
    if isinstance(p, str):
        if p == "nuc":
            raise NotImplementedError("norm: p='nuc' (the nuclear norm) needs singular values, "
                                      "which sinter does not compute")
        if p != "fro":
            raise RuntimeError(f"norm: order {p} not supported (expected a number, 'fro' or "
                               "'nuc')")
        if dim is not None and not isinstance(dim, int) and len(dim) > 2:
            raise RuntimeError(f"norm: p='fro' takes at most 2 dims, got dim={tuple(dim)}")
        p = 2
    p = 2 if p is None else p
    if dtype is not None and not dtype.is_floating_point:
        raise RuntimeError(f"norm: dtype should be floating point, but got {dtype}")
    if not input.is_floating_point():
        raise NotImplementedError(f"norm: expected a floating input, got {input.dtype}")
    dims = _norm_dims(input, dim)
    reduced = input.numel() if dims is None else math.prod(input.shape[d] for d in dims)
    if reduced == 0 and (p < 0 or p == math.inf):
        raise RuntimeError(f"norm: cannot compute the {p} norm on an empty tensor because the "
                           "operation does not have an identity")
    x = input if dtype is None else input.to(dtype)
    narrow = x.dtype in (_C.float16, _C.bfloat16)  # summed in float32, as torch does
    result = _vector_norm(x.float() if narrow else x, p, dims, keepdim)
    return result.to(x.dtype) if narrow else result


def _norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.Tensor.norm: see norm."""
    return norm(self, p, dim, keepdim, dtype=dtype)


Tensor.norm = _norm


# --- torch's aliases, and the in-place comparisons ---

def _positive(self):
    """This tensor itself (+x); refused for bool, as torch does."""
    if self.dtype == _C.bool:
        raise NotImplementedError("positive: the `+` operator on a bool tensor is not supported")
    return self


def _compare_in_place(base):
    """x.<base>_(other): the comparison's 0 or 1 written into x in its dtype. Only x is checked
    against autograd: the comparison has no gradient, so other may require grad."""
    plain = getattr(Tensor, base)
    name = base + "_"

    def method(self, other):
        def compared(x):
            result = plain(x, other)
            if tuple(result.shape) != tuple(self.shape):
                raise RuntimeError(f"{name}: other of shape {tuple(other.shape)} does not "
                                   f"broadcast to this tensor's shape {tuple(self.shape)}")
            return result

        return _apply(self, name, compared)

    method.__name__ = name
    method.__doc__ = f"x.{base}(other) as 0 and 1 written into x (its dtype kept)."
    return method


for _base in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Tensor, _base + "_", _compare_in_place(_base))
_ALIASES = {
    "multiply": "mul", "multiply_": "mul_", "subtract": "sub", "subtract_": "sub_",
    "divide": "div", "divide_": "div_", "negative": "neg", "absolute": "abs",
    "greater": "gt", "greater_": "gt_", "greater_equal": "ge", "greater_equal_": "ge_",
    "less": "lt", "less_": "lt_", "less_equal": "le", "less_equal_": "le_",
    "not_equal": "ne", "not_equal_": "ne_", "arctan2": "atan2", "arctan2_": "atan2_",
    "arccos_": "acos_", "arcsin_": "asin_", "arctan_": "atan_", "arccosh_": "acosh_",
    "arcsinh_": "asinh_", "arctanh_": "atanh_",
}
for _alias, _base in _ALIASES.items():
    _method(_alias, getattr(Tensor, _base))
Tensor.positive = _positive


# --- shapes ---

def _ravel(self):
    """The elements as one contiguous dim (a view where the layout allows)."""
    return self.reshape(-1)


def _unflatten(self, dim, sizes):
    """dim split into sizes (one of them may be -1, inferred), a view where the layout
    allows."""
    sizes = [int(s) for s in sizes]
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if self.dim() == 0:
        raise IndexError(f"unflatten: dimension specified as {dim} but tensor has no dimensions")
    dim = _wrap_dim(dim, self.dim())
    size = self.shape[dim]
    if sizes.count(-1) > 1:
        raise RuntimeError(f"unflatten: only one dimension can be inferred, got sizes {sizes}")
    known = math.prod(s for s in sizes if s != -1)
    if (-1 in sizes and (known == 0 or size % known)) or (-1 not in sizes and known != size):
        raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of "
                           f"dim {dim} ({size}) in the input tensor")
    shape = list(self.shape)
    return self.reshape(*shape[:dim], *sizes, *shape[dim + 1:])


def _unfold(self, dimension, size, step):
    """The windows of size elements along dimension, every step elements, in a new last dim
    (torch's sliding windows). A copy, not torch's view: writes to it do not reach this tensor;
    the gradient sums over the windows that share an element, as torch's."""
    d = _wrap_dim(dimension, self.dim())
    length = self.shape[d] if self.dim() else 1
    if size < 0:
        raise RuntimeError(f"unfold: size is {size} but must be >= 0")
    if size > length:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {d} is {length} but "
                           f"size is {size}")
    if step <= 0:
        raise RuntimeError(f"unfold: step is {step} but must be > 0")
    if self.dim() == 0:
        return self.reshape(1).clone()
    windows = (length - size) // step + 1
    starts = _C.arange(windows, dtype=_C.int64, device=self.device) * step
    index = starts.unsqueeze(1) + _C.arange(size, dtype=_C.int64, device=self.device)
    picked = self.index_select(d, index.reshape(-1))
    shape = list(self.shape)
    return picked.reshape(*shape[:d], windows, size, *shape[d + 1:]).movedim(d + 1, -1)


def _split_with_sizes(self, split_sizes, dim=0):
    """Views of the pieces of these sizes along dim (they must sum to its size)."""
    split_sizes = [int(s) for s in split_sizes]
    dim = _wrap_dim(dim, self.dim())
    if any(s < 0 for s in split_sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative "
                           f"entries, but got split_sizes={split_sizes}")
    if sum(split_sizes) != self.shape[dim]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to "
                           f"{self.shape[dim]} (input tensor's size at dimension {dim}), but "
                           f"got split_sizes={split_sizes}")
    starts = [sum(split_sizes[:i]) for i in range(len(split_sizes))]
    return tuple(self.narrow(dim, start, s) for start, s in zip(starts, split_sizes))


def _sum_to_size(self, *size):
    """The sum of this tensor down to size, which must broadcast to its shape (torch's
    reduction of a broadcast gradient); itself where the shape is size already."""
    if len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0])
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(s not in (1, n) for s, n in zip(size, shape[lead:])):
        raise RuntimeError(f"sum_to_size: size {list(size)} is not expandable to size "
                           f"{list(shape)}")
    if tuple(size) == shape:
        return self
    out = self.sum(tuple(range(lead))) if lead else self
    ones = tuple(i for i, (s, n) in enumerate(zip(size, shape[lead:])) if s == 1 and n != 1)
    return out.sum(ones, keepdim=True) if ones else out


def _fliplr(self):
    """The columns (dim 1) in reverse order."""
    if self.dim() < 2:
        raise RuntimeError("fliplr: input must be >= 2-d")
    return self.flip([1])


def _flipud(self):
    """The rows (dim 0) in reverse order."""
    if self.dim() < 1:
        raise RuntimeError("flipud: input must be >= 1-d")
    return self.flip([0])


def _msort(self):
    """The values sorted along dim 0."""
    return self.sort(0)[0]


def _diag_embed(self, offset=0, dim1=-2, dim2=-1):
    """Each vector along the last dim on the diagonal (offset above it, as diag) of a matrix in
    the new dims dim1 (rows) and dim2 (columns), zeros elsewhere."""
    ndim = self.dim() + 1
    d1, d2 = _wrap_dim(dim1, ndim), _wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = self.shape[-1]
    m = n + abs(offset)
    positions = _C.arange(n, dtype=_C.int64, device=self.device)
    flat = (positions + max(-offset, 0)) * m + positions + max(offset, 0)
    out = _C.zeros(*self.shape[:-1], m * m, dtype=self.dtype, device=self.device)
    out = out.index_copy(ndim - 2, flat, self)
    return out.reshape(*self.shape[:-1], m, m).movedim((ndim - 2, ndim - 1), (d1, d2))


def _diagflat(self, offset=0):
    """The flattened elements on the diagonal (offset above it) of a square matrix."""
    return _diag_embed(self.reshape(-1), offset)


def _fill_diagonal_(self, fill_value, wrap=False):
    """fill_value written on the main diagonal (every dim's index equal), in place; a tall
    matrix with wrap=True continues it N+1 rows down, as torch's wrap."""
    if self.dim() < 2:
        raise RuntimeError(f"fill_diagonal_: dimensions must larger than 1, got {self.dim()}")
    if self.dim() > 2 and any(s != self.shape[0] for s in self.shape):
        raise RuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length, "
                           f"got shape {tuple(self.shape)}")
    rows, cols = self.shape[0], self.shape[1]
    # Flat (row-major) index of (i, i, ..., i) is i times the sum of the contiguous strides.
    step = sum(math.prod(self.shape[d + 1:]) for d in range(self.dim()))
    count = min(rows, cols)
    if wrap and self.dim() == 2 and rows > cols + 1:
        count = -(-self.numel() // step)
    index = _C.arange(count, dtype=_C.int64, device=self.device) * step
    value = fill_value if self.is_floating_point() else \
        bool(fill_value) if self.dtype == _C.bool else int(fill_value)
    return _apply(self, "fill_diagonal_",
                  lambda x: x.reshape(-1).index_fill(0, index, value).reshape(*self.shape))


def _unique_runs(self, dim):
    """(values, start of each run as a bool mask, the starts' positions, length along the runs)
    of unique_consecutive, without a graph."""
    if dim is None:
        flat = self.reshape(-1)
        rows, length = flat, flat.numel()
    else:
        if self.dim() == 0:
            raise IndexError(f"unique_consecutive: dimension specified as {dim} but tensor has "
                             "no dimensions")
        dim = _wrap_dim(dim, self.dim())
        length = self.shape[dim]
        if length and self.numel() == 0:
            raise RuntimeError(f"unique_consecutive: shape {tuple(self.shape)} has 0 sized "
                               f"dimensions besides dim {dim}, so unique cannot be applied")
        rows = self.movedim(dim, 0).reshape(length, -1) if length else None
    starts = _C.ones(length, dtype=_C.bool, device=self.device)
    if length > 1:
        differs = rows[1:] != rows[:-1]
        differs = differs if dim is None else differs.any(1)
        starts = _C.cat([starts[:1], differs])
    index = _C.nonzero(starts).reshape(-1)
    values = flat.index_select(0, index) if dim is None else self.index_select(dim, index)
    return values, starts, index, length


def _unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    """The first element of each run of equal consecutive elements (of the flattened tensor, or
    of slices along dim), with each element's run (inverse) and the runs' lengths (counts), as
    torch's; it has no derivative, as in torch."""
    with no_grad():
        values, starts, index, length = _unique_runs(self, dim)
    out = [_NoDerivative.apply("unique_consecutive", values, self)]
    if return_inverse:
        inverse = starts.to(_C.int64).cumsum(0) - 1
        out.append(inverse.reshape(*self.shape) if dim is None else inverse)
    if return_counts:
        end = _C.full((1,), length, dtype=_C.int64, device=self.device)
        out.append(_C.cat([index, end]).diff() if length else index)
    return out[0] if len(out) == 1 else tuple(out)


def _narrow_copy(self, dim, start, length):
    """narrow(dim, start, length), as a new tensor."""
    return self.narrow(dim, start, length).clone()


def _new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                       layout=None, pin_memory=False):
    """new_empty(size) where stride is size's contiguous layout; other strides are refused (a
    sinter tensor is made contiguous)."""
    size = tuple(size)
    contiguous = tuple(math.prod(size[d + 1:]) for d in range(len(size)))
    if any(s != c for s, c, n in zip(tuple(stride), contiguous, size) if n > 1) or \
            len(tuple(stride)) != len(size):
        raise NotImplementedError(f"new_empty_strided: sinter makes contiguous tensors only; "
                                  f"got stride {tuple(stride)} for size {size} (contiguous "
                                  f"{contiguous})")
    if layout is not None or pin_memory:
        raise NotImplementedError("new_empty_strided: layout and pin_memory are not supported")
    return self.new_empty(size, dtype=dtype, device=device, requires_grad=requires_grad)


for _name, _fn in (("ravel", _ravel), ("unflatten", _unflatten), ("unfold", _unfold),
                   ("split_with_sizes", _split_with_sizes), ("sum_to_size", _sum_to_size),
                   ("fliplr", _fliplr), ("flipud", _flipud), ("msort", _msort),
                   ("diag_embed", _diag_embed), ("diagflat", _diagflat),
                   ("fill_diagonal_", _fill_diagonal_),
                   ("unique_consecutive", _unique_consecutive),
                   ("narrow_copy", _narrow_copy), ("new_empty_strided", _new_empty_strided)):
    _method(_name, _fn)
for _name in ("cumsum", "cumprod"):
    _method(_name + "_", _in_place(_name))


# The package functions of the same name (sinter/__init__.py names their tensor argument input).
get_device = Tensor.get_device
is_signed = Tensor.is_signed
is_same_size = Tensor.is_same_size
equal = Tensor.equal
detach_ = Tensor.detach_
multiply = Tensor.multiply
subtract = Tensor.subtract
divide = Tensor.divide
negative = Tensor.negative
negative_ = Tensor.negative_
positive = Tensor.positive
absolute = Tensor.absolute
greater = Tensor.greater
greater_equal = Tensor.greater_equal
less = Tensor.less
less_equal = Tensor.less_equal
not_equal = Tensor.not_equal
arctan2 = Tensor.arctan2
arccos_, arcsin_, arctan_ = Tensor.arccos_, Tensor.arcsin_, Tensor.arctan_
arccosh_, arcsinh_, arctanh_ = Tensor.arccosh_, Tensor.arcsinh_, Tensor.arctanh_
ravel = Tensor.ravel
unflatten = Tensor.unflatten
split_with_sizes = Tensor.split_with_sizes
fliplr = Tensor.fliplr
flipud = Tensor.flipud
msort = Tensor.msort
diag_embed = Tensor.diag_embed
diagflat = Tensor.diagflat
unique_consecutive = Tensor.unique_consecutive
narrow_copy = Tensor.narrow_copy
