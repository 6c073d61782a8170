"""sinter.nn.utils: gradient clipping, as torch.nn.utils's."""

import math

from .. import _C
from .._grad_mode import no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients in place so that their total norm (as if one vector) is at most
    max_norm; returns that norm before scaling, a 0-dim tensor (no host synchronization). As
    torch's, an infinite norm scales every gradient by 0 and a NaN norm makes them NaN, unless
    error_if_nonfinite (then an inf or NaN gradient is an error, before any change)."""
    del foreach  # one fused pass either way
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return _C.zeros(())
    if error_if_nonfinite and not all(math.isfinite(p.grad.abs().max().item()) for p in params):
        raise RuntimeError(f"The total norm of order {float(norm_type)} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable this "
                           "error and scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    total = _C.optim._clip_grad_norm_(params, float(max_norm), float(norm_type))
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient element into [-clip_value, clip_value] in place."""
    del foreach
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    _C.optim._clip_grad_value_([p for p in parameters if p.grad is not None], float(clip_value))


def parameters_to_vector(parameters):
    """The parameters flattened and joined into one vector, as torch's."""
    return _C.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of vec into the parameters, in place, as torch's."""
    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].reshape(*p.shape))
            offset += n
