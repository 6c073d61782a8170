"""kl_divergence(p, q) as torch.distributions.kl_divergence: a closed form per pair of families,
registered with register_kl; a pair without one is NotImplementedError."""

from ..nn import functional as F
from ._base import sum_rightmost
from ._families import Bernoulli, Categorical, Exponential, Independent, Laplace, Normal, Uniform

_KL = {}


def register_kl(type_p, type_q):
    """Decorator: fn(p, q) is KL(p || q) for p of type_p and q of type_q (subclasses included)."""
    def decorator(fn):
        _KL[(type_p, type_q)] = fn
        return fn
    return decorator


def kl_divergence(p, q):
    """KL(p || q), per batch element."""
    for tp in type(p).__mro__:
        for tq in type(q).__mro__:
            if (tp, tq) in _KL:
                return _KL[(tp, tq)](p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and "
                              f"q type {type(q).__name__}")


def _inf_where(value, cond):
    return value.masked_fill(cond, float("inf"))


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _inf_where(t1, q.probs == 0).masked_fill(p.probs == 0, 0.0)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _inf_where(t2, q.probs == 1).masked_fill(p.probs == 1, 0.0)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _inf_where(t, (q.probs == 0).expand(*t.shape)).masked_fill(
        (p.probs == 0).expand(*t.shape), 0.0)
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where(result, (q.low > p.low) | (q.high < p.high))


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return -scale_ratio.log() + loc_abs_diff / q.scale + t3 - 1


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL of Independent distributions with different "
                                  "reinterpreted_batch_ndims")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)

