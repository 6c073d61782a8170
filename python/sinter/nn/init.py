"""sinter.nn.init: initializers with torch.nn.init's names and defaults, in place (under no_grad,
drawing from sinter's default generator); each returns its tensor."""

from .._C.nn.init import (  # noqa: F401  (re-exported)
    calculate_gain,
    constant_,
    kaiming_normal_,
    kaiming_uniform_,
    normal_,
    ones_,
    trunc_normal_,
    uniform_,
    xavier_normal_,
    xavier_uniform_,
    zeros_,
)
