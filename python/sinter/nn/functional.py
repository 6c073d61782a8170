"""sinter.nn.functional: ops with torch.nn.functional's names and signatures."""

from .._C.nn.functional import (  # noqa: F401  (re-exported)
    conv2d,
    cross_entropy,
    dropout,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    max_pool2d,
    mse_loss,
    relu,
    silu,
    softmax,
)
