"""More of torch's package functions, composed in Python over sinter's ops with torch's
signatures, dtypes, gradients and errors: elementwise math (fmod, copysign, erfc, ...),
statistics and distances (std_mean, aminmax, cdist, cov, histc, bincount, ...) and random draws
(normal, bernoulli, poisson, randperm). The dtype, factory, shape and product functions are in
_ops_more2.py, re-exported here."""

import math
import warnings
from collections import namedtuple

from . import _C, _ops_more2
from ._grad_mode import no_grad
from ._methods import _in_place
from ._ops import _number_first
from ._ops import std as _std
from ._tensor_data import tensor as _tensor
from ._ops_more2 import *  # noqa: F401,F403  (re-exported)
from ._ops_more2 import (_check_layout, _grad_dtype, _method, _no_generator, _result_type,
                         _tensor_arg, _wrap_dim, promote_types)
from .autograd import Function
from .nn.functional import _broadcast_shape, _vector_norm

Tensor = _C.Tensor

__all__ = _ops_more2.__all__ + [
    "aminmax", "argwhere", "bernoulli", "bincount", "cdist", "clamp_max", "clamp_min",
    "copysign", "corrcoef", "cov", "dist", "erfc", "float_power", "fmax", "fmin", "fmod",
    "heaviside", "histc", "normal", "poisson", "randperm", "renorm", "sgn", "signbit", "sinc",
    "std_mean", "true_divide", "var_mean",
]


def _floating(input):
    """input, an integral or bool one as float32 (torch's promotion for its floating math)."""
    return input if input.is_floating_point() else input.to(_C.float32)


def _check_floating(name, input, what="input"):
    if not input.is_floating_point():
        raise NotImplementedError(f"{name}: expected a floating {what}, got dtype {input.dtype}")


# --- autograd links for results that torch differentiates in its own way ---

class _ZeroGrad(Function):
    """A random draw joined to the tensors it was drawn from with a zero gradient, as torch's
    normal, bernoulli and poisson are."""

    @staticmethod
    def forward(ctx, result, *sources):
        ctx.like = [(tuple(s.shape), s.dtype, s.device) if isinstance(s, Tensor) else None
                    for s in sources]
        return result

    @staticmethod
    def backward(ctx, grad):
        return (None,) + tuple(None if like is None else
                               _C.zeros(*like[0], dtype=like[1], device=like[2])
                               for like in ctx.like)


class _NoDerivative(Function):
    """A result whose backward fails, as torch's does for ops it has no derivative of."""

    @staticmethod
    def forward(ctx, name, result, *sources):
        ctx.name = name
        return result

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(f"{ctx.name}: the derivative is not implemented")


# --- statistics ---

def _spread_mean(name, spread, input, dim, unbiased, keepdim, correction):
    _check_floating(name, input)
    if isinstance(dim, bool):  # std_mean(x, True): torch's old positional unbiased
        dim, unbiased = None, dim
    if correction is None:
        correction = 0 if unbiased is False else 1
    return (spread(input, dim, keepdim=keepdim, correction=correction),
            input.mean(dim, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) of input along dim (all of it by default), with Bessel's correction unless
    unbiased=False or correction says otherwise."""
    return _spread_mean("std_mean", _std, input, dim, unbiased, keepdim, correction)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) of input along dim (all of it by default), with Bessel's correction unless
    unbiased=False or correction says otherwise."""
    return _spread_mean("var_mean", Tensor.var, input, dim, unbiased, keepdim, correction)


_aminmax = namedtuple("aminmax", ["min", "max"])


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) of input along dim (all of it by default), as torch's named tuple; the
    gradient of equal extremes is shared among them."""
    if dim is None:
        size = input.numel()
    else:
        size = input.shape[_wrap_dim(dim, input.dim())] if input.dim() else input.numel()
    if size == 0:  # torch's classes: a RuntimeError for all elements, an IndexError by dim
        error = RuntimeError if dim is None else IndexError
        raise error(f"aminmax: cannot reduce over an empty dim (shape {tuple(input.shape)}, "
                    f"dim {dim}): it has no identity")
    return _aminmax(input.amin(dim, keepdim), input.amax(dim, keepdim))


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of input's rows (variables) over its columns (observations),
    observations weighted by the integer fweights and the floating aweights, normalized by the
    sum of weights less correction (torch's formula, numpy's too); a 0-d tensor for one
    variable."""
    if input.dim() > 2:
        raise RuntimeError(f"cov: expected input to have two or fewer dims, got {input.dim()}")
    if input.dtype == _C.bool:
        raise NotImplementedError("cov: bool input is not supported")
    x = _floating(input)
    if aweights is not None and aweights.is_floating_point():
        x = x.to(promote_types(x.dtype, aweights.dtype))
    x = x.reshape(1, -1) if x.dim() < 2 else x
    n = x.shape[1]
    weights = None
    for name, w, integral in (("fweights", fweights, True), ("aweights", aweights, False)):
        if w is None:
            continue
        if w.dim() > 1 or w.numel() != n:
            raise RuntimeError(f"cov: expected {name} to be 0-d or 1-d with one weight per "
                               f"observation ({n}), got shape {tuple(w.shape)}")
        if w.is_floating_point() == integral or w.dtype == _C.bool:
            kind = "an integral" if integral else "a floating"
            raise RuntimeError(f"cov: expected {name} of {kind} dtype, got {w.dtype}")
        if bool((w < 0).any()):
            raise RuntimeError(f"cov: {name} cannot be negative")
        w = w.reshape(-1).to(x.dtype)
        weights = w if weights is None else weights * w
    if weights is None:
        total = float(n)
        mean = x.mean(1, keepdim=True)
    else:
        total = weights.sum()
        mean = (x * weights).sum(1, keepdim=True) / total
    if correction == 0:
        dof = total
    elif aweights is None:
        dof = total - correction
    else:
        dof = total - correction * (weights * aweights.reshape(-1).to(x.dtype)).sum() / total
    if float(dof) <= 0:
        warnings.warn("cov: degrees of freedom is <= 0; correction should be strictly less "
                      "than the number of observations", stacklevel=2)
        dof = 0.0
    centered = x - mean
    weighted = centered if weights is None else centered * weights
    return (weighted.mm(centered.t()) / dof).squeeze()


def corrcoef(input):
    """Pearson's correlation coefficients of input's rows: cov normalized by the standard
    deviations, clipped to [-1, 1]."""
    c = cov(input)
    if c.dim() == 0:
        return c / c
    std = c.diagonal().sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1, 1)


def histc(input, bins=100, min=0, max=0):
    """Counts of input's elements in bins equal bins over [min, max] (the data's range when min
    equals max), in input's dtype; elements outside are ignored, max counts in the last bin."""
    _check_floating("histc", input)
    if bins <= 0:
        raise RuntimeError(f"histc: bins must be > 0, got {bins}")
    x = input.detach().reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and x.numel():
        lo, hi = x.amin().item(), x.amax().item()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"histc: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError(f"histc: max must be larger than min, got min={lo}, max={hi}")
    inside = x.masked_select((x >= lo) & (x <= hi))
    if inside.dtype in (_C.float16, _C.bfloat16):
        inside = inside.float()
    position = ((inside - lo) * bins / (hi - lo)).to(_C.int64).clamp(max=bins - 1)
    counts = _C.zeros(bins, dtype=_C.float64, device=input.device)
    ones = _C.ones(inside.numel(), dtype=_C.float64, device=input.device)
    return counts.scatter_add(0, position, ones).to(input.dtype)


def bincount(input, weights=None, minlength=0):
    """How often each value 0..max(input) of a 1-d non-negative integral tensor occurs (at least
    minlength bins), or the sum of weights per value: float32 for float32 weights, float64 for
    others."""
    if input.is_floating_point() or input.dtype == _C.bool:
        raise NotImplementedError(f"bincount: expected an integral input, got {input.dtype}")
    if input.dim() != 1 or (input.numel() and input.amin().item() < 0):
        raise RuntimeError("bincount: only supports 1-d non-negative integral inputs")
    if minlength < 0:
        raise RuntimeError(f"bincount: minlength should be >= 0, got {minlength}")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError(f"bincount: weights should be 1-d and have the same length as input "
                           f"({input.shape[0]}), got shape {tuple(weights.shape)}")
    size = max(input.amax().item() + 1 if input.numel() else 0, minlength)
    index = input.to(_C.int64)
    if weights is None or input.numel() == 0:  # torch's empty weighted count is i64 too
        counts = _C.zeros(size, dtype=_C.int64, device=input.device)
        ones = _C.ones(input.numel(), dtype=_C.int64, device=input.device)
        return counts.scatter_reduce(0, index, ones, "sum")
    dtype = _C.float32 if weights.dtype == _C.float32 else _C.float64
    with no_grad():
        sums = _C.zeros(size, dtype=dtype, device=input.device)
        sums = sums.scatter_add(0, index, weights.to(dtype))
    return _NoDerivative.apply("bincount", sums, weights)


def argwhere(input):
    """The coordinates of input's non-zero elements, one row each (nonzero's)."""
    return _C.nonzero(input)


# --- distances and norms ---

def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), torch's norms: p = inf and -inf the largest and
    smallest |difference|, p = 0 the count of non-zero ones."""
    diff = input - other
    _check_floating("dist", diff, "input")
    return _vector_norm(diff.reshape(-1), p, 0, False)


_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                  "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance of each row of x1 (..., P, M) to each row of x2 (..., R, M), as
    (..., P, R), the batch dims broadcast. As torch's: for p = 2, with more than 25 rows on
    either side or compute_mode 'use_mm_for_euclid_dist', from |a|^2 + |b|^2 - 2 a.b by a
    matmul (clamped at 1e-30 before the root); otherwise from the differences ((P, R, M) in
    memory)."""
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"cdist: {compute_mode} is not a valid value for compute_mode")
    for name, x in (("x1", x1), ("x2", x2)):
        if x.dim() < 2:
            raise RuntimeError(f"cdist: expected tensors of at least 2 dims, {name} has "
                               f"{x.dim()}")
        _check_floating("cdist", x, name)
    if x1.dtype != x2.dtype:
        raise RuntimeError(f"cdist: x1 and x2 must have one dtype, got {x1.dtype} and "
                           f"{x2.dtype}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"cdist: x1 and x2 must have the same number of columns, got "
                           f"{x1.shape[-1]} and {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist: p must be non-negative, got {p}")
    _broadcast_shape(x1.shape[:-2], x2.shape[:-2])
    many = x1.shape[-2] > 25 or x2.shape[-2] > 25
    if p == 2 and (compute_mode == "use_mm_for_euclid_dist" or
                   (compute_mode == _COMPUTE_MODES[0] and many)):
        squares = (x1 * x1).sum(-1, keepdim=True) + (x2 * x2).sum(-1).unsqueeze(-2)
        return (squares - 2 * x1.matmul(x2.transpose(-2, -1))).clamp(min=1e-30).sqrt()
    return _vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, -1, False)


def renorm(input, p, dim, maxnorm):
    """input with each slice along dim whose p-norm exceeds maxnorm scaled to norm maxnorm
    (torch's maxnorm / (norm + 1e-7))."""
    _check_floating("renorm", input)
    if p <= 0:
        raise RuntimeError(f"renorm: p must be positive, got {p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0, got {maxnorm}")
    if input.dim() < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dims, got {input.dim()}")
    dim = _wrap_dim(dim, input.dim())
    others = tuple(d for d in range(input.dim()) if d != dim)
    norm = _vector_norm(input, p, others, True)
    return input * _C.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)


# --- elementwise math ---

def signbit(input):
    """Whether each element's sign bit is set: true for negative numbers and -0.0 (a NaN's sign
    is not read: false)."""
    input = input.detach()
    if not input.is_floating_point():
        return input < 0
    return (input < 0) | ((input == 0) & (input.reciprocal() < 0))


def copysign(input, other):
    """|input| with the sign of other (a tensor or a number; -0.0 counts as negative), in the
    promoted floating dtype; the gradient reaches input alone."""
    _tensor_arg("copysign", input)
    dtype = _result_type(input, other, name="copysign")
    magnitude = input.to(dtype if dtype.is_floating_point else _C.float32).abs()
    if isinstance(other, Tensor):
        return _C.where(signbit(other), -magnitude, magnitude)
    return -magnitude if math.copysign(1.0, other) < 0 else magnitude


def heaviside(input, values):
    """The step function: 0 where input < 0, values where input is 0, 1 where input > 0 (input
    and values of one dtype); it has no derivative, as in torch."""
    if not isinstance(values, Tensor) or input.dtype != values.dtype:
        raise RuntimeError(f"heaviside: expected values to be a tensor of input's dtype "
                           f"({input.dtype}), got {getattr(values, 'dtype', type(values))}")
    with no_grad():
        out = _C.where(input == 0, values, (input > 0).to(input.dtype))
    return _NoDerivative.apply("heaviside", out, input, values)


def float_power(input, exponent):
    """input ** exponent computed in float64 (either may be a number), as torch's."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError(f"float_power: expected a tensor among the arguments, got {input!r} "
                        f"and {exponent!r}")
    base, power = (x.to(_C.float64) if isinstance(x, Tensor) else float(x)
                   for x in (input, exponent))
    return _C.pow(base, power)


def true_divide(dividend, divisor):
    """dividend / divisor, true division (div without a rounding mode); either may be a
    number."""
    return _number_first("true_divide", Tensor.div, dividend, divisor)


def fmod(input, other):
    """C's fmod: input - trunc(input / other) * other, of the sign of input (remainder's has the
    sign of other), exact; integers too, where a zero divisor is an error."""
    _tensor_arg("fmod", input)
    dtype = _result_type(input, other, name="fmod")
    a = input.to(dtype)
    b = other.to(dtype) if isinstance(other, Tensor) else other
    if not dtype.is_floating_point and (bool((b == 0).any()) if isinstance(b, Tensor)
                                        else b == 0):
        raise RuntimeError(f"fmod: integer division by zero (a divisor of dtype {dtype} is 0)")
    size = b.abs() if isinstance(b, Tensor) else abs(b)
    positive = _C.remainder(a, size)
    if dtype == _C.uint8:
        return positive
    # Each sign's remainder from its own magnitude: exact, and the gradient 1 at input 0 too.
    return _C.where(signbit(a), -_C.remainder(-a, size), positive)


def _nan_ignoring(name, input, other, prefer):
    _tensor_arg(name, input)
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'other' must be Tensor, not "
                        f"{type(other).__name__}")
    dtype = _result_type(input, other, name=name)
    a, b = input.to(dtype), other.to(dtype)
    out = _C.where(prefer(a, b) | b.isnan(), a, b)
    if not out.is_floating_point() or not (a.requires_grad or b.requires_grad):
        return out
    # Equal values share the gradient half and half, as torch's; the value stays a's exactly.
    half = a * 0.5 + b * 0.5
    return _C.where(a == b, half - half.detach() + a.detach(), out)


def fmax(input, other):
    """The elementwise maximum, a NaN ignored where the other is a number (equal ones share the
    gradient)."""
    return _nan_ignoring("fmax", input, other, lambda a, b: a > b)


def fmin(input, other):
    """The elementwise minimum, a NaN ignored where the other is a number (equal ones share the
    gradient)."""
    return _nan_ignoring("fmin", input, other, lambda a, b: a < b)


class _Erfc(Function):
    """1 - erf(x), from erf below 2 and from the continued fraction
    exp(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / ...))) above, in float64 (below 2
    the subtraction loses at most 1 / erfc(2) ~ 2^8 ulps)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        x64 = x.to(_C.float64)
        far = x64.clamp(min=2.0)
        fraction = far
        for k in range(50, 0, -1):
            fraction = far + (k / 2) / fraction
        tail = (-far * far).exp() / (math.sqrt(math.pi) * fraction)
        return _C.where(x64 < 2.0, 1.0 - x64.erf(), tail).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (-x * x).exp() * (-2 / math.sqrt(math.pi))


def erfc(input):
    """The complementary error function 1 - erf(input), accurate where it is small (float32 for
    an integral input)."""
    return _Erfc.apply(_floating(input))


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0 (with a zero gradient there), float32 for an integral
    input."""
    x = _floating(input)
    zero = x == 0
    scaled = _C.where(zero, 1.0, x) * math.pi
    return _C.where(zero, 1.0, scaled.sin() / scaled)


# --- random draws (from sinter's default generator) ---

_EXACT_UP_TO = {_C.uint8: 255, _C.int32: 2**31 - 1, _C.int64: 2**63 - 1, _C.float16: 2**11,
                _C.bfloat16: 2**8, _C.float32: 2**24, _C.float64: 2**53}


def randperm(n, *, generator=None, dtype=_C.int64, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """A random permutation of 0 .. n-1 (the order of n uniform draws)."""
    _no_generator("randperm", generator)
    _check_layout("randperm", layout)
    if pin_memory:
        raise NotImplementedError("randperm: pin_memory=True is not supported")
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    if n - 1 > _EXACT_UP_TO.get(dtype, -1):
        raise RuntimeError(f"randperm: n={n} does not fit dtype {dtype}")
    _grad_dtype("randperm", dtype, requires_grad)
    perm = _C.argsort(_C.rand(n, dtype=_C.float64, device=device)).to(dtype)
    return perm.requires_grad_(True) if requires_grad else perm


def _normal_of_tensors(mean, std):
    for name, v in (("mean", mean), ("std", std)):
        if isinstance(v, Tensor):
            _check_floating("normal", v, name)
    if bool((std < 0).any()) if isinstance(std, Tensor) else std < 0:
        raise RuntimeError("normal: expected all elements of std >= 0.0")
    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    shape = tuple(tensors[0].shape)
    if len(tensors) == 2:
        shape = _broadcast_shape(shape, tensors[1].shape)
    dtype = _result_type(mean, std, name="normal")
    with no_grad():
        sample = _C.randn(*shape, dtype=dtype, device=tensors[0].device) * std + mean
    return _ZeroGrad.apply(sample, mean, std)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False):
    """Normal draws: of tensor means and/or stds (broadcast; their gradient is zero, as torch's),
    or of a float mean and std in the given size (float32 unless dtype)."""
    _no_generator("normal", generator)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        if size is not None or dtype is not None or device is not None or requires_grad:
            raise TypeError("normal: size, dtype, device and requires_grad are taken only with "
                            "a float mean and std")
        return _normal_of_tensors(mean, std)
    if size is None:
        raise TypeError("normal: expected a size with a float mean and std")
    _check_layout("normal", layout)
    if pin_memory:
        raise NotImplementedError("normal: pin_memory=True is not supported")
    if std < 0:
        raise RuntimeError(f"normal: expected std >= 0.0, got {std}")
    size = (size,) if isinstance(size, int) else tuple(size)
    sample = _C.randn(*size, dtype=dtype or _C.float32, device=device) * std + mean
    return sample.requires_grad_(True) if requires_grad else sample


def bernoulli(input, p=None, *, generator=None):
    """1 with probability input (or p, a number), else 0, in input's floating dtype; the
    gradient is zero, as torch's."""
    _no_generator("bernoulli", generator)
    _check_floating("bernoulli", input)
    if p is None and not bool(((input >= 0) & (input <= 1)).all()):
        raise RuntimeError("bernoulli: expected all the probabilities in input to be in [0, 1]")
    with no_grad():
        out = _C.empty_like(input).bernoulli_(input if p is None else p)
    return _ZeroGrad.apply(out, input)


_LOG_FACTORIALS = [math.lgamma(k + 1) for k in range(10)]


def _log_factorial(k):
    """log(k!) of float64 k >= 0: a table below 10, Stirling's series (error < 1e-10) above."""
    table = _tensor(_LOG_FACTORIALS, dtype=_C.float64, device=k.device)
    small = table.gather(0, k.clamp(max=9).to(_C.int64))
    n = k.clamp(min=10.0)
    big = n * n.log() - n + 0.5 * (2 * math.pi * n).log() + 1 / (12 * n) - \
        1 / (360 * n ** 3) + 1 / (1260 * n ** 5)
    return _C.where(k < 10, small, big)


def _poisson_inversion(rate):
    """Poisson draws of rates below 10: the first k whose cumulative probability reaches a
    uniform draw (at most 200 terms, past any reachable k)."""
    u = _C.rand(rate.numel(), dtype=_C.float64, device=rate.device)
    k = _C.zeros_like(rate)
    term = (-rate).exp()
    cumulative = term
    for j in range(1, 201):
        above = u > cumulative
        if not bool(above.any()):
            break
        k = k + above.to(_C.float64)
        term = term * rate / j
        cumulative = cumulative + term
    return k


def _poisson_rejection(rate):
    """Poisson draws of rates from 10 up: Hormann's transformed rejection with squeeze (PTRS),
    every pending draw retried until accepted (about 1.1 tries each)."""
    b = 0.931 + 2.53 * rate.sqrt()
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)
    log_rate = rate.log()
    result = _C.zeros_like(rate)
    pending = _C.ones(rate.numel(), dtype=_C.bool, device=rate.device)
    while bool(pending.any()):
        u = _C.rand(rate.numel(), dtype=_C.float64, device=rate.device) - 0.5
        v = _C.rand(rate.numel(), dtype=_C.float64, device=rate.device)
        us = 0.5 - u.abs()
        k = ((2 * a / us + b) * u + rate + 0.43).floor()
        quick = (us >= 0.07) & (v <= v_r)
        refused = (k < 0) | ((us < 0.013) & (v > us))
        bound = -rate + k * log_rate - _log_factorial(k.clamp(min=0.0))
        slow = ~refused & ((v * inv_alpha / (a / (us * us) + b)).log() <= bound)
        accepted = pending & (quick | slow)
        result = _C.where(accepted, k, result)
        pending = pending & ~accepted
    return result


def poisson(input, generator=None):
    """Poisson draws of the rates in input (floating, finite, non-negative), in input's dtype;
    the gradient is zero, as torch's."""
    _no_generator("poisson", generator)
    _check_floating("poisson", input)
    rate = input.detach().reshape(-1).to(_C.float64)
    if not bool(((rate >= 0) & rate.isfinite()).all()):
        raise RuntimeError("poisson: invalid rate, expected finite non-negative rates")
    out = _C.zeros_like(rate)
    for keep, draw in ((rate < 10, _poisson_inversion), (rate >= 10, _poisson_rejection)):
        index = _C.nonzero(keep).reshape(-1)
        if index.numel():
            out = out.index_add(0, index, draw(rate.index_select(0, index)))
    return _ZeroGrad.apply(out.reshape(*input.shape).to(input.dtype), input)


clamp_min = Tensor.clamp_min
clamp_max = Tensor.clamp_max
sgn = Tensor.sgn


for _name, _fn in (("aminmax", aminmax), ("cov", cov), ("corrcoef", corrcoef),
                   ("histc", histc), ("bincount", bincount), ("argwhere", argwhere),
                   ("dist", dist), ("renorm", renorm), ("signbit", signbit),
                   ("copysign", copysign), ("heaviside", heaviside),
                   ("float_power", float_power), ("true_divide", true_divide),
                   ("fmod", fmod), ("fmax", fmax), ("fmin", fmin), ("erfc", erfc),
                   ("sinc", sinc), ("bernoulli", bernoulli)):
    _method(_name, _fn)
for _name in ("fmod", "copysign", "true_divide", "erfc", "sinc", "renorm", "heaviside", "addmv",
              "addbmm"):
    _method(_name + "_", _in_place(_name))
