"""The families of sinter.distributions with torch.distributions' parameters and formulas: Normal,
Uniform, Laplace and Exponential (reparameterized: rsample's draws are differentiable in the
parameters), Bernoulli and Categorical (by probs or logits), and Independent. The draws come from
sinter's generator, so they are not torch's; every formula is."""

import math

from .. import _C
from .._grad_mode import no_grad
from .._ops_assign import broadcast_shapes
from ..nn import functional as F
from ._base import LOG_SQRT_2PI, Distribution, broadcast_all, eps, lowest, sum_rightmost

Tensor = _C.Tensor

def _is_positive(v):
    return v > 0


def _is_real(v):
    return v == v


def _is_probability(v):
    return (v >= 0) & (v <= 1)


def _is_simplex(v):
    return (v >= 0).all() & ((v.sum(-1) - 1).abs() < 1e-6).all()


# Module-level checks, so that a distribution pickles.
_positive = (_is_positive, "GreaterThan(lower_bound=0.0)")
_real = (_is_real, "Real()")


def _like(param, shape):
    return {"dtype": param.dtype, "device": param.device}, tuple(shape)


class _LocationScale(Distribution):
    """A family of a real location loc (its mean and mode) and a positive scale."""

    arg_constraints = {"loc": _real, "scale": _positive}
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)


class Normal(_LocationScale):
    """N(loc, scale^2)."""

    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.scale.pow(2))

    def rsample(self, sample_shape=()):
        opts, shape = _like(self.loc, self._extended_shape(sample_shape))
        return self.loc + _C.randn(*shape, **opts) * self.scale

    def log_prob(self, value):
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - LOG_SQRT_2PI

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    def cdf(self, value):
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def icdf(self, value):
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)


class Uniform(Distribution):
    """Uniform on [low, high)."""

    arg_constraints = {"low": _real, "high": _real}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(tuple(self.low.shape), validate_args=validate_args)
        if self._validate_args and not bool((self.low < self.high).all()):
            raise ValueError(f"Expected parameter low of distribution {self!r} to satisfy the "
                             "constraint LessThan(high), but found invalid values")

    mean = property(lambda self: (self.high + self.low) / 2)
    mode = property(lambda self: self.low * float("nan"))
    stddev = property(lambda self: (self.high - self.low) / 12 ** 0.5)
    variance = property(lambda self: (self.high - self.low).pow(2) / 12)

    def rsample(self, sample_shape=()):
        opts, shape = _like(self.low, self._extended_shape(sample_shape))
        return self.low + _C.rand(*shape, **opts) * (self.high - self.low)

    def log_prob(self, value):
        self._check_support(value, lambda v: (v >= self.low) & (v <= self.high),
                            "Interval(low, high)")
        inside = (self.low <= value).to(self.low.dtype) * (self.high > value).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def entropy(self):
        return (self.high - self.low).log()

    def cdf(self, value):
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low


class Laplace(_LocationScale):
    """Laplace of location loc and scale (density exp(-|x - loc| / scale) / (2 scale))."""

    stddev = property(lambda self: 2 ** 0.5 * self.scale)
    variance = property(lambda self: 2 * self.scale.pow(2))

    def rsample(self, sample_shape=()):
        opts, shape = _like(self.loc, self._extended_shape(sample_shape))
        u = _C.rand(*shape, **opts) * (2 - eps(self.loc.dtype)) - 1 + eps(self.loc.dtype)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def entropy(self):
        return 1 + (2 * self.scale).log()

    def cdf(self, value):
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() /
                                                         self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()


class Exponential(Distribution):
    """Exponential of this rate (mean 1 / rate)."""

    arg_constraints = {"rate": _positive}
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: _C.zeros_like(self.rate))
    stddev = property(lambda self: self.rate.reciprocal())
    variance = property(lambda self: self.rate.pow(-2))

    def rsample(self, sample_shape=()):
        opts, shape = _like(self.rate, self._extended_shape(sample_shape))
        return _C.empty(*shape, **opts).exponential_() / self.rate

    def log_prob(self, value):
        self._check_support(value, lambda v: v >= 0, "GreaterThanEq(lower_bound=0.0)")
        return self.rate.log() - self.rate * value

    def entropy(self):
        return 1.0 - self.rate.log()

    def cdf(self, value):
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate


def _probs_or_logits(name, probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    return probs, logits


class Bernoulli(Distribution):
    """1 with probability probs (or sigmoid(logits)), else 0."""

    has_rsample = False
    # Only the parameter given is checked (and printed): the other is not in __dict__.
    arg_constraints = {"probs": (_is_probability, "Interval(lower_bound=0.0, upper_bound=1.0)"),
                       "logits": _real}

    def __init__(self, probs=None, logits=None, validate_args=None):
        probs, logits = _probs_or_logits("Bernoulli", probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            shape = self.probs.shape
        else:
            (self.logits,) = broadcast_all(logits)
            shape = self.logits.shape
        super().__init__(tuple(shape), validate_args=validate_args)

    def __getattr__(self, name):
        # The parameter not given, computed once from the other (as torch's lazy_property).
        if name == "probs":
            self.probs = F.sigmoid(self.__dict__["logits"])
            return self.probs
        if name == "logits":
            p = self.__dict__["probs"]
            e = eps(p.dtype)
            clamped = p.clamp(min=e, max=1 - e)
            self.logits = clamped.log() - (-clamped).log1p()
            return self.logits
        raise AttributeError(name)

    mean = property(lambda self: self.probs)
    mode = property(lambda self: (self.probs >= 0.5).to(self.probs.dtype)
                    .masked_fill(self.probs == 0.5, float("nan")))
    variance = property(lambda self: self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        from .. import bernoulli  # the package's, made after this module is imported
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return bernoulli(self.probs.expand(*shape))

    def log_prob(self, value):
        self._check_support(value, lambda v: (v == 0) | (v == 1), "Boolean()")
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value.to(logits.dtype),
                                                   reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    """One of the last dim's categories, with probabilities probs (normalized) or
    softmax(logits)."""

    has_rsample = False
    arg_constraints = {"probs": (_is_simplex, "Simplex()"),
                       "logits": (_is_real, "IndependentConstraint(Real(), 1)")}

    def __init__(self, probs=None, logits=None, validate_args=None):
        probs, logits = _probs_or_logits("Categorical", probs, logits)
        given = probs if probs is not None else logits
        if given.dim() < 1:
            raise ValueError("`probs` or `logits` parameter must be at least one-dimensional.")
        if probs is not None:
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._num_events = given.shape[-1]
        super().__init__(tuple(given.shape[:-1]), validate_args=validate_args)

    def __getattr__(self, name):
        if name == "probs":
            self.probs = F.softmax(self.__dict__["logits"], -1)
            return self.probs
        if name == "logits":
            p = self.__dict__["probs"]
            e = eps(p.dtype)
            self.logits = p.clamp(min=e, max=1 - e).log()
            return self.logits
        raise AttributeError(name)

    param_shape = property(lambda self: self._batch_shape + (self._num_events,))
    mean = property(lambda self: _C.full(self._batch_shape, float("nan"),
                                         dtype=self.probs.dtype, device=self.probs.device))
    variance = mean
    mode = property(lambda self: self.probs.argmax(-1))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            n = math.prod(shape[:len(shape) - len(self._batch_shape)])
            return _C.multinomial(probs_2d, n, True).t().reshape(*shape)

    def log_prob(self, value):
        self._check_support(value, self._in_support,
                            f"IntegerInterval(lower_bound=0, upper_bound={self._num_events - 1})")
        value = value.to(_C.int64).unsqueeze(-1)
        shape = broadcast_shapes(tuple(value.shape), tuple(self.logits.shape))
        value = value.expand(*shape[:-1], 1)
        return self.logits.expand(*shape).gather(-1, value).squeeze(-1)

    def _in_support(self, v):
        whole = v == v.floor() if v.is_floating_point() else v == v
        return (v >= 0) & (v < self._num_events) & whole

    def entropy(self):
        logits = self.logits.clamp(min=lowest(self.logits.dtype))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = _C.arange(self._num_events, dtype=_C.int64, device=self.probs.device)
        values = values.reshape(-1, *([1] * len(self._batch_shape)))
        return values.expand(-1, *self._batch_shape) if expand else values


class Independent(Distribution):
    """base_distribution with its last reinterpreted_batch_ndims batch dims taken as event dims:
    log_prob and entropy sum over them."""

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        batch = tuple(base_distribution.batch_shape)
        n = reinterpreted_batch_ndims
        if n > len(batch):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {n} vs {len(batch)}")
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        super().__init__(batch[:len(batch) - n], batch[len(batch) - n:] +
                         tuple(base_distribution.event_shape), validate_args=False)

    has_rsample = property(lambda self: self.base_dist.has_rsample)
    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
