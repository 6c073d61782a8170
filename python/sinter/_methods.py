"""torch.Tensor methods that sinter composes in Python over its own: the in-place forms of the
elementwise ops (x.sub_(y) computes x - y and writes it into x, as x -= y does, recorded by
autograd as torch records it; refused where the result's dtype does not fit x's), the random
fills, the new_* factories, and torch's small properties (data, mT, nbytes, itemsize, ...)."""

from . import _C
from ._grad_mode import no_grad
from .nn import init as _init

Tensor = _C.Tensor


def _kind(dtype):
    """bool < integer < floating, the categories a result may not rise through in place."""
    return 0 if dtype == _C.bool else 2 if dtype.is_floating_point else 1


def _check_in_place(self, name, args=()):
    """Refuses, as torch, an in-place op that autograd records on a leaf that requires grad or on
    a view of one (args: the op's other arguments, which such a refusal does not depend on)."""
    self._check_in_place(name)


def _fits(self, result, name):
    if _kind(result.dtype) > _kind(self.dtype):
        raise RuntimeError(f"{name}: result type {result.dtype} can't be cast to the desired "
                           f"output type {self.dtype}")
    return result


def _write(self, result, name):
    return self.copy_(_fits(self, result, name))


def _apply(self, name, fn):
    """fn(x) written into self, recorded by autograd where it must be (Note [in-place autograd]
    in include/sinter/autograd.h: x is self, or a clone of it when fn's backward keeps self)."""
    return self._in_place(lambda x: _fits(self, fn(x), name), name)


def _fill_with(self, name, fill):
    """fill(t) draws into t: into self, or where autograd records the write, into a new tensor
    that is then copied into self (its past gets a zero gradient, as in torch)."""
    if not self._records_in_place():
        return fill(self)
    self._check_in_place(name)
    fresh = _C.empty_like(self)
    fill(fresh)
    return self.copy_(fresh)


def _in_place(base):
    plain = getattr(Tensor, base)
    name = base + "_"

    def method(self, *args, **kwargs):
        return _apply(self, name, lambda x: plain(x, *args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"{base}, written into this tensor (its dtype kept): x.{name}(...) is " \
                     f"x.copy_(x.{base}(...))."
    return method


def _clamp_min(self, min):
    return self.clamp(min=min)


def _clamp_max(self, max):
    return self.clamp(max=max)


Tensor.clamp_min = _clamp_min
Tensor.clamp_max = _clamp_max
Tensor.sgn = Tensor.sign
Tensor.clip = Tensor.clamp

_IN_PLACE = """sub div pow exp log sqrt rsqrt abs neg sign sin cos tan tanh sigmoid relu erf erfinv
lgamma digamma expm1 log1p floor ceil round trunc frac fix clamp clip clamp_min clamp_max square
reciprocal masked_fill lerp addcmul addcdiv logical_not logical_and logical_or logical_xor
bitwise_not bitwise_and bitwise_or bitwise_xor tril triu remainder floor_divide nan_to_num log2
log10 exp2 asin acos atan sinh cosh asinh acosh atanh deg2rad rad2deg hypot atan2 xlogy logit sgn
scatter scatter_add scatter_reduce index_add index_copy index_fill index_reduce""".split()
for _base in _IN_PLACE:
    setattr(Tensor, _base + "_", _in_place(_base))
Tensor.absolute_ = Tensor.abs_
Tensor.negative_ = Tensor.neg_


# --- random fills (from sinter's default generator) ---

def _uniform_(self, *args, **kwargs):
    """Uniform in [from, to) (0 and 1 by default, positional or by torch's keywords), in place."""
    bounds = dict(zip(("from", "to"), args))
    for key, value in kwargs.items():
        if key not in ("from", "to") or key in bounds:
            raise TypeError(f"uniform_() got an unexpected or repeated argument '{key}'")
        bounds[key] = value
    return _fill_with(self, "uniform_",
                      lambda t: _init.uniform_(t, bounds.get("from", 0.0), bounds.get("to", 1.0)))


def _normal_(self, mean=0.0, std=1.0):
    """Normal of this mean and std, in place."""
    return _fill_with(self, "normal_", lambda t: _init.normal_(t, mean, std))


def _bernoulli_(self, p=0.5):
    """1 with probability p (a number, or a tensor of probabilities), else 0, in place."""
    _check_in_place(self, "bernoulli_", (p,))
    draw = _C.rand(*self.shape, dtype=_C.float64, device=self.device)
    if isinstance(p, Tensor):
        p = p.to(_C.float64)
        if not bool(((p >= 0) & (p <= 1)).all()):
            raise RuntimeError("bernoulli_: all the probabilities p must be in [0, 1]")
    elif not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_: p must be in [0, 1], got {p}")
    return self.copy_(draw < p)


Tensor.uniform_ = _uniform_
Tensor.normal_ = _normal_
Tensor.bernoulli_ = _bernoulli_


# --- factories of this tensor's dtype and device ---

def _size_of(size, kwargs, name):
    """A size given as numbers, as one sequence, or as size=..., as torch takes it."""
    if "size" in kwargs:
        if size:
            raise TypeError(f"{name}() got multiple values for argument 'size'")
        size = (kwargs.pop("size"),)
    if not size:
        raise TypeError(f"{name}() missing 1 required positional argument: 'size'")
    return tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size


def _options(self, dtype, device):
    return {"dtype": dtype if dtype is not None else self.dtype,
            "device": device if device is not None else self.device}


def _new_factory(name, make):
    def method(self, *size, dtype=None, device=None, requires_grad=False, **kwargs):
        shape = _size_of(size, kwargs, name)
        if kwargs:
            raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")
        return make(*shape, **_options(self, dtype, device), requires_grad=requires_grad)

    method.__name__ = name
    method.__doc__ = f"{make.__name__} of this size, in this tensor's dtype and device unless " \
                     "given."
    return method


_new_zeros = _new_factory("new_zeros", _C.zeros)
_new_ones = _new_factory("new_ones", _C.ones)
_new_empty = _new_factory("new_empty", _C.empty)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _C.full(tuple(size), fill_value, **_options(self, dtype, device),
                   requires_grad=requires_grad)


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    from ._tensor_data import tensor
    if isinstance(data, Tensor):
        out = data.detach().clone().to(dtype if dtype is not None else self.dtype)
        out = out.to(device if device is not None else self.device)
    else:
        out = tensor(data, **_options(self, dtype, device))
    return out.requires_grad_(requires_grad) if requires_grad else out


Tensor.new_zeros = _new_zeros
Tensor.new_ones = _new_ones
Tensor.new_empty = _new_empty
Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor


# --- small properties and aliases ---

def _is_nonzero(self):
    if self.numel() != 1:
        raise RuntimeError(f"Boolean value of Tensor with {self.numel()} values is ambiguous"
                           if self.numel() else "Boolean value of Tensor with no values is "
                           "ambiguous")
    return bool(self.item())


def _set_data(self, value):
    """x.data = t: t's values written into x (shapes alike; torch also takes another shape)."""
    if (tuple(value.shape), value.dtype, value.device) != (tuple(self.shape), self.dtype,
                                                           self.device):
        raise RuntimeError(f"data: sinter writes the new values into the tensor, so they must "
                           f"have its shape, dtype and device ({tuple(self.shape)}, "
                           f"{self.dtype}, {self.device}), got ({tuple(value.shape)}, "
                           f"{value.dtype}, {value.device})")
    with no_grad():
        self.copy_(value)


def _mT(self):
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self.dim()}-D tensor.")
    return self.transpose(-2, -1)


Tensor.data = property(lambda self: self.detach(), _set_data,
                       doc="This tensor's values without its autograd history (shared storage).")
Tensor.mT = property(_mT, doc="The last two dims swapped (a view).")
Tensor.nbytes = property(lambda self: self.numel() * self.element_size())
Tensor.itemsize = property(lambda self: self.element_size())
Tensor.nelement = Tensor.numel
Tensor.ndimension = Tensor.dim
Tensor.is_complex = lambda self: False
Tensor.is_nonzero = _is_nonzero
