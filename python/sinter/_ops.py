"""sinter's functions that are also Tensor methods (sinter.exp(x) is x.exp()), with torch's
names, and torch's named tuples (values, indices) for max, min, topk and sort."""

from collections import namedtuple

from . import _C

Tensor = _C.Tensor

_return_types = {name: namedtuple(name, ["values", "indices"])
                 for name in ("max", "min", "topk", "sort")}


def _named(name, plain, takes_dim):
    """`plain` with its (values, indices) result named as torch.return_types names it."""
    kind = _return_types[name]
    if takes_dim:
        def method(self, dim=None, keepdim=False):
            out = plain(self, dim, keepdim)
            return out if dim is None else kind(*out)
    else:
        def method(self, *args, **kwargs):
            return kind(*plain(self, *args, **kwargs))
    method.__name__ = name
    method.__doc__ = plain.__doc__
    return method


Tensor.max = _named("max", Tensor.max, True)
Tensor.min = _named("min", Tensor.min, True)
Tensor.topk = _named("topk", Tensor.topk, False)
Tensor.sort = _named("sort", Tensor.sort, False)
_C_topk, _C_sort = _C.topk, _C.sort


def topk(input, k, dim=-1, largest=True, sorted=True):
    return _return_types["topk"](*_C_topk(input, k, dim, largest, sorted))


def sort(input, dim=-1, descending=False, *, stable=False):
    return _return_types["sort"](*_C_sort(input, dim, descending, stable=stable))


def max(input, dim=None, keepdim=False):
    """The largest element; with dim, (values, indices) along it; with a tensor, the elementwise
    maximum (torch.max's three forms)."""
    if isinstance(dim, Tensor):
        return _C.maximum(input, dim)
    return input.max(dim, keepdim)


def min(input, dim=None, keepdim=False):
    """The smallest element; with dim, (values, indices); with a tensor, the elementwise minimum."""
    if isinstance(dim, Tensor):
        return _C.minimum(input, dim)
    return input.min(dim, keepdim)


def _std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation, sqrt of var (Bessel's correction unless unbiased=False or
    correction=0)."""
    if isinstance(dim, bool):  # std(True): torch's old positional unbiased
        dim, unbiased = None, dim
    if correction is None:
        correction = 0 if unbiased is False else 1
    return self.var(dim, correction=correction, keepdim=keepdim).sqrt()


def _square(self):
    return self * self


Tensor.std = _std
Tensor.square = _square
std = _std
square = _square
# Tensor methods that torch also has as functions of the package.
abs = Tensor.abs
exp = Tensor.exp
log = Tensor.log
sqrt = Tensor.sqrt
rsqrt = Tensor.rsqrt
neg = Tensor.neg
sign = Tensor.sign
sin = Tensor.sin
cos = Tensor.cos
tanh = Tensor.tanh
sigmoid = Tensor.sigmoid
relu = Tensor.relu
erf = Tensor.erf
erfinv = Tensor.erfinv
expm1 = Tensor.expm1
log1p = Tensor.log1p
floor = Tensor.floor
ceil = Tensor.ceil
round = Tensor.round
trunc = Tensor.trunc
fix = Tensor.fix
frac = Tensor.frac
sum = Tensor.sum
mean = Tensor.mean
var = Tensor.var
prod = Tensor.prod
cumsum = Tensor.cumsum
cumprod = Tensor.cumprod
amax = Tensor.amax
amin = Tensor.amin
argmax = Tensor.argmax
argmin = Tensor.argmin
softmax = Tensor.softmax
log_softmax = Tensor.log_softmax
clamp = Tensor.clamp
flatten = Tensor.flatten
reshape = Tensor.reshape
transpose = Tensor.transpose
permute = Tensor.permute
unsqueeze = Tensor.unsqueeze
narrow = Tensor.narrow
select = Tensor.select
t = Tensor.t
clone = Tensor.clone
detach = Tensor.detach
numel = Tensor.numel
clip = Tensor.clamp
