"""sinter.distributions: torch.distributions' families (Normal, Uniform, Laplace, Exponential,
Bernoulli, Categorical, Independent) with their parameters, shapes, log_prob, entropy, cdf,
moments and argument checks, reparameterized sampling (rsample) where torch has it, and
kl_divergence between them. Draws come from sinter's generator (sinter.manual_seed), so they are
not torch's draws; every formula is torch's."""

from ._base import Distribution  # noqa: F401
from ._families import (  # noqa: F401
    Bernoulli,
    Categorical,
    Exponential,
    Independent,
    Laplace,
    Normal,
    Uniform,
)
from .kl import kl_divergence, register_kl  # noqa: F401
