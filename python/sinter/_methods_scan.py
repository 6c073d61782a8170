"""torch's scans and mode as Tensor methods and package functions (cummax, cummin, logcumsumexp,
mode), and the random fills that torch.Tensor has beside uniform_ and normal_ (random_,
exponential_, log_normal_, geometric_, cauchy_), composed over sinter's ops. _methods_more.py
re-exports them."""

import math
import warnings
from collections import namedtuple

from . import _C
from ._grad_mode import no_grad
from ._methods import _check_in_place
from ._ops_more2 import _method, _no_generator, _wrap_dim

Tensor = _C.Tensor

__all__ = ["cummax", "cummin", "logcumsumexp", "mode"]

_return_types = {name: namedtuple(name, ["values", "indices"])
                 for name in ("cummax", "cummin", "mode")}


# --- scans ---

def _scan(state, dim, combine):
    """The inclusive scan along dim of the tensors in state (one summary per element):
    combine(earlier, later), associative, joins two runs' summaries. Hillis and Steele's
    doubling: after the step of offset k, each element summarizes the 2k elements ending at it,
    so log2(n) whole-tensor steps."""
    n = state[0].shape[dim]
    offset = 1
    while offset < n:
        earlier = [t.narrow(dim, 0, n - offset) for t in state]
        later = [t.narrow(dim, offset, n - offset) for t in state]
        joined = combine(earlier, later)
        state = [_C.cat([t.narrow(dim, 0, offset), j], dim) for t, j in zip(state, joined)]
        offset *= 2
    return state


def _positions(x, dim):
    """0 .. n-1 along dim, broadcast to x's shape."""
    shape = [1] * x.dim()
    shape[dim] = x.shape[dim]
    return _C.arange(x.shape[dim], dtype=_C.int64, device=x.device).reshape(*shape) \
        .expand(*x.shape)


def _cum_extreme(name, self, dim, beats):
    """(values, indices) of the running maximum or minimum along dim (beats(a, b): a replaces
    b). A NaN wins and then stays, an equal later element takes the index (torch's rules); the
    values are gathered at the indices, so the gradient reaches the elements chosen."""
    if self.dim() == 0:
        _wrap_dim(dim, 0)
        return _return_types[name](self.clone(), _C.zeros((), dtype=_C.int64,
                                                          device=self.device))
    d = _wrap_dim(dim, self.dim())
    with no_grad():
        x = self.detach()
        x = x.to(_C.uint8) if x.dtype == _C.bool else x

        def combine(earlier, later):
            (value_e, index_e), (value_l, index_l) = earlier, later
            take = beats(value_l, value_e)
            if x.is_floating_point():
                take = value_l.isnan() | (take & ~value_e.isnan())
            return [_C.where(take, value_l, value_e), _C.where(take, index_l, index_e)]

        _, indices = _scan([x, _positions(x, d)], d, combine)
        indices = indices.contiguous()
    return _return_types[name](self.gather(d, indices), indices)


def cummax(input, dim):
    """(values, indices): the largest element so far along dim, and where it is (the last of
    equal ones; a NaN, once met, stays)."""
    return _cum_extreme("cummax", input, dim, lambda a, b: a >= b)


def cummin(input, dim):
    """(values, indices): the smallest element so far along dim, and where it is (the last of
    equal ones; a NaN, once met, stays)."""
    return _cum_extreme("cummin", input, dim, lambda a, b: a <= b)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along dim without overflow: a doubling scan of logaddexp, so no
    exp of a large value is taken."""
    if not input.is_floating_point():
        raise NotImplementedError(f"logcumsumexp: expected a floating input, got {input.dtype}")
    if input.dim() == 0:
        _wrap_dim(dim, 0)
        return input.clone()
    d = _wrap_dim(dim, input.dim())
    if input.shape[d] <= 1:
        return input.clone()
    (out,) = _scan([input], d, lambda earlier, later: [earlier[0].logaddexp(later[0])])
    return out


def mode(input, dim=-1, keepdim=False):
    """(values, indices): the most frequent value along dim (the smallest of equally frequent
    ones) and the last index where it occurs, as torch's; the gradient reaches that element.
    NaNs count as distinct values."""
    if input.dim() == 0:
        _wrap_dim(dim, 0)
        return _return_types["mode"](input.clone(), _C.zeros((), dtype=_C.int64,
                                                             device=input.device))
    d = _wrap_dim(dim, input.dim())
    n = input.shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    with no_grad():
        x = input.detach().movedim(d, -1)
        x = x.to(_C.uint8) if x.dtype == _C.bool else x
        ordered = x.sort(-1)[0]
        ones = _C.ones(*x.shape[:-1], 1, dtype=_C.bool, device=x.device)
        starts = _C.cat([ones, ordered[..., 1:] != ordered[..., :-1]], -1)
        run = starts.to(_C.int64).cumsum(-1) - 1
        counts = _C.zeros_like(run).scatter_reduce(-1, run, _C.ones_like(run), "sum")
        counts = counts.gather(-1, run)
        first = (counts == counts.amax(-1, keepdim=True)).to(_C.int64).argmax(-1, True)
        value = ordered.gather(-1, first)
        match = (x == value) | (x.isnan() & value.isnan())
        ranks = _C.where(match, _positions(x, x.dim() - 1), -1).amax(-1, keepdim=True)
        indices = ranks.movedim(-1, d)
    values = input.gather(d, indices)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return _return_types["mode"](values, indices)


for _name, _fn in (("cummax", cummax), ("cummin", cummin), ("logcumsumexp", logcumsumexp),
                   ("mode", mode)):
    _method(_name, _fn)


# --- random fills (from sinter's default generator), under the in-place rules of _methods ---

_FLOAT_DIGITS = {_C.float16: 11, _C.bfloat16: 8, _C.float32: 24, _C.float64: 53}
_INT_RANGE = {_C.bool: (0, 1), _C.uint8: (0, 255), _C.int32: (-2**31, 2**31 - 1),
              _C.int64: (-2**63, 2**63 - 1)}


def _random_bounds(self, args, kwargs):
    """random_'s [from, to) from torch's forms random_(), random_(to), random_(from, to) (to
    None: up to the dtype's largest value)."""
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments, got {len(args)}")
    keys = ("from", "to") if len(args) == 2 or (len(args) == 1 and "to" in kwargs) else ("to",)
    bounds = dict(zip(keys, args))
    for key, value in kwargs.items():
        if key not in ("from", "to") or key in bounds:
            raise TypeError(f"random_() got an unexpected or repeated argument '{key}'")
        bounds[key] = value
    if "from" in bounds and "to" not in bounds:
        raise TypeError("random_(): 'from' needs 'to' (random_(from, to))")
    if self.dtype in _FLOAT_DIGITS:
        top = 2 ** _FLOAT_DIGITS[self.dtype]
    elif self.dtype in _INT_RANGE:
        top = _INT_RANGE[self.dtype][1]
    else:
        raise NotImplementedError(f"random_: not implemented for dtype {self.dtype}")
    low = int(bounds.get("from", 0))
    high = top + 1 if bounds.get("to") is None else int(bounds["to"])
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    if self.dtype in _INT_RANGE:
        least = _INT_RANGE[self.dtype][0]
        for what, value in (("from", low), ("to - 1", high - 1)):
            if not least <= value <= top:
                raise RuntimeError(f"random_: {what} is out of bounds for {self.dtype}")
    elif low < -top or high - 1 > top:
        warnings.warn(f"random_: [{low}, {high}) goes past [-(2^{_FLOAT_DIGITS[self.dtype]}), "
                      f"2^{_FLOAT_DIGITS[self.dtype]}], where {self.dtype} holds every "
                      "integer", stacklevel=3)
    return low, high


def _random_(self, *args, generator=None, **kwargs):
    """Integers uniform in [from, to), in place: random_(to) from 0, random_() over [0, the
    dtype's largest] (for a floating dtype, the largest integer up to which every integer is
    exact: 2^24 for float32)."""
    _no_generator("random_", generator)
    low, high = _random_bounds(self, args, kwargs)
    _check_in_place(self, "random_")
    # randint takes an int64 high: int64's own top value (2^63 - 1) is not drawn.
    draw = _C.randint(max(low, -2**63), min(high, 2**63 - 1), tuple(self.shape),
                      dtype=_C.int64, device=self.device)
    return self.copy_(draw)


def _uniform(self):
    return _C.rand(*self.shape, dtype=_C.float64, device=self.device)


def _continuous(self, name, error=RuntimeError):
    if not self.is_floating_point():
        raise error(f"{name}: the distribution is continuous; expected a floating tensor, got "
                    f"{self.dtype}")


def _exponential_(self, lambd=1.0, *, generator=None):
    """Exponential draws of rate lambd (mean 1 / lambd), in place."""
    _no_generator("exponential_", generator)
    _continuous(self, "exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    _check_in_place(self, "exponential_")
    return self.copy_(-(-_uniform(self)).log1p() / lambd)


def _log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """exp of normal draws of this mean and std, in place."""
    _no_generator("log_normal_", generator)
    _continuous(self, "log_normal_", NotImplementedError)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    _check_in_place(self, "log_normal_")
    normal = _C.randn(*self.shape, dtype=_C.float64, device=self.device)
    return self.copy_((normal * std + mean).exp())


def _geometric_(self, p, *, generator=None):
    """The number of Bernoulli(p) trials up to the first success (1, 2, ...), in place."""
    _no_generator("geometric_", generator)
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    _check_in_place(self, "geometric_")
    trials = ((-_uniform(self)).log1p() / math.log1p(-p)).ceil().clamp(min=1.0)
    return self.copy_(trials)


def _cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Cauchy draws of this median and scale sigma (half the interquartile range), in place."""
    _no_generator("cauchy_", generator)
    _continuous(self, "cauchy_")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    _check_in_place(self, "cauchy_")
    return self.copy_(((_uniform(self) - 0.5) * math.pi).tan() * sigma + median)


for _name, _fn in (("random_", _random_), ("exponential_", _exponential_),
                   ("log_normal_", _log_normal_), ("geometric_", _geometric_),
                   ("cauchy_", _cauchy_)):
    _method(_name, _fn)
