"""sinter.nn.functional: ops with torch.nn.functional's names and signatures."""

from .._C.nn.functional import (  # noqa: F401  (re-exported)
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    batch_norm,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    cosine_embedding_loss,
    cross_entropy,
    dropout,
    elu,
    embedding,
    fold,
    gelu,
    group_norm,
    hardsigmoid,
    hardswish,
    hardtanh,
    huber_loss,
    instance_norm,
    interpolate,
    kl_div,
    l1_loss,
    layer_norm,
    leaky_relu,
    linear,
    log_softmax,
    margin_ranking_loss,
    max_pool1d,
    max_pool2d,
    mish,
    mse_loss,
    nll_loss,
    one_hot,
    pad,
    pixel_shuffle,
    pixel_unshuffle,
    prelu,
    relu,
    relu6,
    rms_norm,
    scaled_dot_product_attention,
    selu,
    sigmoid,
    silu,
    smooth_l1_loss,
    softmax,
    softplus,
    tanh,
    unfold,
)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """input / max(||input||_p along dim, eps), as torch's F.normalize."""
    norm = input.abs().pow(p).sum(dim, keepdim=True).pow(1.0 / p) if p != 2.0 else \
        (input * input).sum(dim, keepdim=True).sqrt()
    return input / norm.clamp(min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 x2) / (max(||x1||, eps) max(||x2||, eps)) along dim, as torch's (2.x)."""
    n1 = (x1 * x1).sum(dim).sqrt().clamp(min=eps)
    n2 = (x2 * x2).sum(dim).sqrt().clamp(min=eps)
    return (x1 * x2).sum(dim) / (n1 * n2)
