"""The Distribution base class of sinter.distributions, with torch.distributions' shapes
(sample_shape + batch_shape + event_shape), argument checks and printing."""

import math

from .. import _C
from .._ops_assign import broadcast_shapes

Tensor = _C.Tensor

# Each floating dtype's machine epsilon and lowest finite value (torch.finfo's eps and min).
_EPS = {_C.float64: 2.220446049250313e-16, _C.float32: 1.1920928955078125e-07,
        _C.bfloat16: 0.0078125, _C.float16: 0.0009765625}
_LOWEST = {_C.float64: -1.7976931348623157e308, _C.float32: -3.4028234663852886e38,
           _C.bfloat16: -3.3895313892515355e38, _C.float16: -65504.0}


def eps(dtype):
    return _EPS.get(dtype, _EPS[_C.float32])


def lowest(dtype):
    return _LOWEST.get(dtype, _LOWEST[_C.float32])


def broadcast_all(*values):
    """The values as tensors of one shape: numbers become tensors of the tensors' dtype and device
    (f32 on the CPU when all are numbers), then all are expanded to the broadcast shape."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    for v in values:
        if not isinstance(v, (Tensor, int, float)):
            raise ValueError(f"Input arguments must all be instances of numbers.Number or "
                             f"torch.tensor, got {type(v).__name__}")
    like = tensors[0] if tensors else None
    opts = {"dtype": like.dtype if like is not None and like.is_floating_point() else _C.float32,
            "device": like.device if like is not None else "cpu"}
    made = [v if isinstance(v, Tensor) else _C.full((), float(v), **opts) for v in values]
    shape = broadcast_shapes(*(tuple(t.shape) for t in made))
    return tuple(t.expand(*shape) for t in made)


def sum_rightmost(value, dims):
    """value summed over its last `dims` dims."""
    return value.reshape(*value.shape[:value.dim() - dims], -1).sum(-1) if dims > 0 else value


class Distribution:
    """A family's parameters as tensors of batch_shape, with sample (sample_shape + batch_shape +
    event_shape draws), log_prob, entropy and the moments. validate_args (on by default, as in
    torch) checks the parameters when made and log_prob's values against the support."""

    has_rsample = False
    arg_constraints = {}  # parameter name: (the check, its name in errors)

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        self._validate_args = True if validate_args is None else bool(validate_args)
        if self._validate_args:
            for name, (check, description) in self.arg_constraints.items():
                value = self.__dict__.get(name)
                if isinstance(value, Tensor) and not bool(check(value).all()):
                    raise ValueError(
                        f"Expected parameter {name} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {description}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=()):
        sample_shape = (sample_shape,) if isinstance(sample_shape, int) else tuple(sample_shape)
        return sample_shape + self._batch_shape + self._event_shape

    def sample(self, sample_shape=()):
        """Draws without a graph (rsample's, where the family has one)."""
        from .._grad_mode import no_grad
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sampler "
                                  "(rsample)")

    def sample_n(self, n):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    @property
    def stddev(self):
        return self.variance.sqrt()

    def _check_support(self, value, inside, description):
        if self._validate_args and not bool(inside(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{tuple(value.shape)}) to be within the support ({description}) of "
                             f"the distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        parts = []
        for name in self.arg_constraints:
            value = self.__dict__.get(name)
            if isinstance(value, Tensor):
                shown = value.item() if value.numel() == 1 else tuple(value.shape)
                parts.append(f"{name}: {shown}")
        return f"{type(self).__name__}({', '.join(parts)})"


LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
