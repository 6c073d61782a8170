"""sinter's functions that are also Tensor methods (sinter.exp(x) is x.exp()), with torch's
names, and torch's named tuples (values, indices) for max, min, topk and sort."""

from collections import namedtuple

from . import _C

Tensor = _C.Tensor

_return_types = {name: namedtuple(name, ["values", "indices"])
                 for name in ("max", "min", "topk", "sort", "kthvalue", "median", "nanmedian")}


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
Tensor.kthvalue = _named("kthvalue", Tensor.kthvalue, False)
Tensor.median = _named("median", Tensor.median, True)
Tensor.nanmedian = _named("nanmedian", Tensor.nanmedian, True)
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
lgamma = Tensor.lgamma
digamma = Tensor.digamma
expm1 = Tensor.expm1
log1p = Tensor.log1p
floor = Tensor.floor
ceil = Tensor.ceil
round = Tensor.round
trunc = Tensor.trunc
fix = Tensor.fix
frac = Tensor.frac
tan = Tensor.tan
asin = Tensor.asin
acos = Tensor.acos
atan = Tensor.atan
sinh = Tensor.sinh
cosh = Tensor.cosh
asinh = Tensor.asinh
acosh = Tensor.acosh
atanh = Tensor.atanh
log2 = Tensor.log2
log10 = Tensor.log10
exp2 = Tensor.exp2
reciprocal = Tensor.reciprocal
deg2rad = Tensor.deg2rad
rad2deg = Tensor.rad2deg
isnan = Tensor.isnan
isinf = Tensor.isinf
isposinf = Tensor.isposinf
isneginf = Tensor.isneginf
isfinite = Tensor.isfinite
logical_not = Tensor.logical_not
logical_and = Tensor.logical_and
logical_or = Tensor.logical_or
logical_xor = Tensor.logical_xor
bitwise_not = Tensor.bitwise_not
logaddexp = Tensor.logaddexp
logaddexp2 = Tensor.logaddexp2
logit = Tensor.logit
nan_to_num = Tensor.nan_to_num
all = Tensor.all
any = Tensor.any
count_nonzero = Tensor.count_nonzero
tile = Tensor.tile
broadcast_to = Tensor.broadcast_to
movedim = Tensor.movedim
masked_select = Tensor.masked_select
diff = Tensor.diff
outer = Tensor.outer
dot = Tensor.dot
mv = Tensor.mv
addmm = Tensor.addmm
trace = Tensor.trace
nansum = Tensor.nansum
nanmean = Tensor.nanmean
moveaxis = Tensor.moveaxis = Tensor.movedim
swapaxes = swapdims = Tensor.swapaxes = Tensor.swapdims = Tensor.transpose
ger = Tensor.ger = Tensor.outer
kthvalue = Tensor.kthvalue
median = Tensor.median
nanmedian = Tensor.nanmedian
quantile = Tensor.quantile
nanquantile = Tensor.nanquantile
arcsin, arccos, arctan = asin, acos, atan


def _number_dtype(number, tensor):
    """The dtype torch gives a Python number beside a tensor: the tensor's where the number's kind
    (bool < integer < floating) is not higher, else the default dtype of the number's kind."""
    kind = 2 if isinstance(number, float) else 0 if isinstance(number, bool) else 1
    t_kind = 2 if tensor.is_floating_point() else 0 if tensor.dtype == _C.bool else 1
    if kind <= t_kind:
        return tensor.dtype
    return _C.float32 if kind == 2 else _C.int64


def _number_first(name, method, input, other):
    """method(input, other) where input may be a Python number beside a tensor (torch's functions
    take a number on either side)."""
    if isinstance(input, Tensor):
        return method(input, other)
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}: expected a tensor among the arguments, got {input!r} and "
                        f"{other!r}")
    number = _C.full((), input, dtype=_number_dtype(input, other), device=other.device)
    return method(number, other)


def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN); either may be a number."""
    return _number_first("xlogy", Tensor.xlogy, input, other)


def bitwise_and(input, other):
    """input & other of integral and bool tensors or numbers."""
    return _number_first("bitwise_and", Tensor.bitwise_and, input, other)


def bitwise_or(input, other):
    """input | other of integral and bool tensors or numbers."""
    return _number_first("bitwise_or", Tensor.bitwise_or, input, other)


def bitwise_xor(input, other):
    """input ^ other of integral and bool tensors or numbers."""
    return _number_first("bitwise_xor", Tensor.bitwise_xor, input, other)


arcsinh, arccosh, arctanh = asinh, acosh, atanh
Tensor.arcsin, Tensor.arccos, Tensor.arctan = asin, acos, atan
Tensor.arcsinh, Tensor.arccosh, Tensor.arctanh = asinh, acosh, atanh
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
