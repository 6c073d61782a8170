"""More of sinter.nn.functional, composed in Python from the existing ops, with torch's names,
signatures and checks: bilinear, power-average pooling, local response normalization, channel
shuffle, alpha dropout, rrelu, adaptive max pooling in 1 and 3 dimensions, max unpooling,
pdist, gumbel_softmax and embedding_bag."""

import math
import warnings

from .. import _C
from .._grad_mode import no_grad
from ..autograd import Function

# functional.py imports this module at its very end, when every name used here is defined.
from . import functional as _F

__all__ = [
    "adaptive_max_pool1d",
    "adaptive_max_pool3d",
    "alpha_dropout",
    "bilinear",
    "channel_shuffle",
    "embedding_bag",
    "feature_alpha_dropout",
    "gumbel_softmax",
    "local_response_norm",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "pdist",
    "rrelu",
]


def _ntuple(value, n, op, name):
    """torch's int-or-sequence argument of an n-d op as a tuple of n ints."""
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise RuntimeError(f"{op}: {name} must be an int or a sequence of {n} ints, got "
                               f"{value}")
        return tuple(value)
    return (value,) * n


def _shape(t):
    return list(t.shape)


# --- bilinear ---

def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o], as torch's:
    the inputs share their leading dimensions; weight is (out, in1, in2)."""
    if not input1.dtype == input2.dtype == weight.dtype:
        raise RuntimeError(f"bilinear(): All tensors must have the same dtype, got input1: "
                           f"{input1.dtype}, input2: {input2.dtype}, weight: {weight.dtype}")
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and "
                           f"{input2.dim()}")
    if input1.dim() == 0:
        raise RuntimeError("bilinear(): the inputs must have at least one dimension, got 0-d "
                           "inputs")
    for d in range(input1.dim() - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {d}: got "
                               f"{input1.shape[d]} and {input2.shape[d]}")
    if weight.dim() != 3:
        raise RuntimeError("bilinear(): weight must be 3-D (out_features, in1_features, "
                           f"in2_features), got shape {_shape(weight)}")
    for k, x in ((1, input1), (2, input2)):
        if x.shape[-1] != weight.shape[k]:
            raise RuntimeError(f"bilinear(): input{k} size does not match weight size: got "
                               f"{x.shape[-1]} but expected {weight.shape[k]}")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[0]):
        got = bias.shape[0] if bias.dim() == 1 else _shape(bias)
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {got} but "
                           f"expected {weight.shape[0]}")
    out = _C.einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias


# --- power-average pooling ---

def _lp_pool(input, norm_type, kernel, avg_pool, max_pool):
    """torch's lp_pool: (sum over each window of x^p)^(1/p), the sum being the window's average
    times the kernel's volume; the average's sign is kept and a zero average has a zero
    gradient (sign(s) relu(|s|)); p = +-inf is the largest (smallest) |x| of the window."""
    if norm_type == 0:
        raise ValueError(f"norm_type must be a non-zero value, but got {norm_type}")
    if norm_type == float("inf"):
        return max_pool(input.abs())
    if norm_type == float("-inf"):
        return -max_pool(-input.abs())
    out = avg_pool(input.pow(norm_type))
    return (out.sign() * _F.relu(out.abs())).mul(math.prod(kernel)).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The p-norm over windows of the last dimension of (N, C, L) or (C, L) input, as torch's
    lp_pool1d (no padding; stride None means kernel_size)."""
    k = _F._int1(kernel_size, "lp_pool1d", "kernel_size")
    return _lp_pool(input, norm_type, (k,),
                    lambda x: _F.avg_pool1d(x, k, stride, 0, ceil_mode),
                    lambda x: _F.max_pool1d(x, k, stride, 0, 1, ceil_mode))


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The p-norm over windows of the last two dimensions of (N, C, H, W) or (C, H, W) input,
    as torch's lp_pool2d."""
    kernel = _ntuple(kernel_size, 2, "lp_pool2d", "kernel_size")
    step = None if stride is None else _ntuple(stride, 2, "lp_pool2d", "stride")

    return _lp_pool(input, norm_type, kernel,
                    lambda x: _F.avg_pool2d(x, kernel, step, 0, ceil_mode),
                    lambda x: _F.max_pool2d(x, kernel, step, 0, 1, ceil_mode))


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The p-norm over windows of the last three dimensions of (N, C, D, H, W) or (C, D, H, W)
    input, as torch's lp_pool3d."""
    kernel = _ntuple(kernel_size, 3, "lp_pool3d", "kernel_size")
    step = None if stride is None else _ntuple(stride, 3, "lp_pool3d", "stride")
    return _lp_pool(input, norm_type, kernel,
                    lambda x: _F.avg_pool3d(x, kernel, step, 0, ceil_mode),
                    lambda x: _F.max_pool3d(x, kernel, step, 0, 1, ceil_mode))


# --- normalization and shuffles ---

def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta, the channel
    window zero-padded by size // 2 before and (size - 1) // 2 after, as torch's."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} "
                         "dimensions)")
    if input.numel() == 0:
        return input
    if size <= 0:
        raise RuntimeError(f"local_response_norm: size must be greater than zero, but got {size}")
    n, c = input.shape[0], input.shape[1]
    # squares: (N, C, ...) -> (N, rest, C), the channel window an average pool over the last dim
    sq = (input * input).reshape(n, c, -1).transpose(1, 2)
    sq = _F.pad(sq, (size // 2, (size - 1) // 2))
    div = _F.avg_pool1d(sq, size, 1).transpose(1, 2).reshape(*input.shape)
    return input / (div * alpha + k).pow(beta)


def channel_shuffle(input, groups):
    """(N, C, *) -> the channels regrouped as (groups, C / groups) and transposed, as torch's
    channel_shuffle."""
    if input.dim() <= 2:
        raise RuntimeError("channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {_shape(input)}")
    if groups <= 0:
        raise RuntimeError("Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    n, rest = input.shape[0], tuple(input.shape[2:])
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


# --- random activations and dropout ---

# -SELU's alpha * scale: the value alpha dropout sets a dropped unit to before its affine map.
_SELU_NEG_SATURATION = 1.7580993408473766


def _alpha_dropout(input, p, training, feature):
    """torch's (feature) alpha dropout: units (whole channels input[n, c] when feature) kept
    with probability q = 1 - p, dropped ones set to -alpha, then a x + b with a = 1 / sqrt((alpha^2
    p + 1) q) and b = a alpha p, keeping a SELU network's mean and variance. The input itself when
    not training, p = 0 or input is empty; input * 0 when p = 1 (torch's order of checks)."""
    _F._check_dropout_p(p)
    if p == 0 or not training or input.numel() == 0:
        return input
    if p == 1:
        return input * _C.zeros((), dtype=input.dtype, device=input.device)
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not input.is_floating_point():
        raise RuntimeError(f"alpha dropout: the result is floating, which dtype {input.dtype} "
                           "cannot hold")
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2) if feature else tuple(input.shape)
    keep = (_C.rand(*shape, dtype=input.dtype, device=input.device) < 1 - p).to(input.dtype)
    alpha = _SELU_NEG_SATURATION
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    b = (keep - 1) * (alpha * a) + alpha * a * p
    return input * (keep * a) + b


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of each element (see _alpha_dropout), as torch's; note torch's default
    training=False. inplace is taken for torch's callers: the result is a new tensor."""
    del inplace
    return _alpha_dropout(input, p, training, feature=False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels input[n, c] (see _alpha_dropout), as torch's. inplace as
    alpha_dropout's."""
    del inplace
    return _alpha_dropout(input, p, training, feature=True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """x where x > 0, else a x: in training a drawn uniformly in [lower, upper) per element (x
    <= 0 gets the draw, as torch's, so that the gradient at 0 is a); otherwise leaky_relu with
    slope (lower + upper) / 2. inplace as alpha_dropout's."""
    del inplace
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    _F._check_floating(input, "rrelu")
    if not training:
        return _F.leaky_relu(input, (lower + upper) / 2)
    slope = _C.rand(*input.shape, dtype=input.dtype, device=input.device) * (upper - lower)
    return input * _C.where(input <= 0, slope + lower, 1.0)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) along dim, g Gumbel(0, 1) noise, as torch's; hard gives the
    one-hot of its argmax in the forward pass with the soft sample's gradient (straight
    through). eps is deprecated and unused, as in torch."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    # -log(E), E = -log(1 - u) ~ Exp(1) with u in [0, 1) kept below 1 - tiny: E stays positive
    # and finite (torch's exponential_ never gives 0), so no row turns NaN.
    u = _C.rand(*logits.shape, dtype=logits.dtype, device=logits.device)
    tiny = 2.0 ** -24 if logits.dtype != _C.float64 else 2.0 ** -53
    gumbels = -(-(1 - u.clamp(max=1 - tiny)).log()).log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    ones = _C.ones(*index.shape, dtype=logits.dtype, device=logits.device)
    y_hard = _C.zeros_like(logits).scatter_add(dim, index, ones)
    return y_hard - y_soft.detach() + y_soft


# --- adaptive max pooling ---

def _empty_pool(input, shape, return_indices):
    """A pooling result with no elements (an output size of 0), still on input's graph."""
    out = input.reshape(-1)[:0].reshape(*shape)
    if not return_indices:
        return out
    return out, _C.zeros(*shape, dtype=_C.int64, device=input.device)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """The maximum over output_size windows that tile the last dimension of (N, C, L) or
    (C, L) input (window i spans [floor(i L / out), ceil((i + 1) L / out))), as torch's; with
    return_indices, also where each maximum sits along L."""
    if input.dim() not in (2, 3):
        raise RuntimeError(f"adaptive_max_pool1d: Expected 2 to 3 dimensions, but got "
                           f"{input.dim()}-dimensional tensor")
    if output_size is None:
        raise TypeError("adaptive_max_pool1d(): argument 'output_size' must be an int or a "
                        "sequence of one int, not NoneType")
    if isinstance(output_size, (tuple, list)) and len(output_size) != 1:
        raise RuntimeError("adaptive_max_pool1d() argument 'output_size' should contain one int "
                           f"(got {len(output_size)})")
    size = _F._int1(output_size, "adaptive_max_pool1d", "output_size")
    _F._check_floating(input, "adaptive_max_pool1d")
    if input.shape[-1] == 0:
        raise RuntimeError("adaptive_max_pool1d(): Expected input to have non-zero size for "
                           f"non-batch dimensions, but input has sizes {_shape(input)} with "
                           f"dimension {input.dim() - 1} being empty")
    if size < 0:
        raise RuntimeError(f"adaptive_max_pool1d: output_size must be non-negative, got {size}")
    if size == 0:
        return _empty_pool(input, tuple(input.shape[:-1]) + (0,), return_indices)
    # (..., L) -> (..., 1, L): a 2-d pool of height 1, whose index h * L + w is w
    out = _F.adaptive_max_pool2d(input.unsqueeze(-2), (1, size), return_indices)
    if not return_indices:
        return out.squeeze(-2)
    return out[0].squeeze(-2), out[1].squeeze(-2)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """The maximum over output_size windows that tile the last three dimensions of
    (N, C, D, H, W) or (C, D, H, W) input, as torch's (a None in output_size keeps the input's
    size); with return_indices, also where each maximum sits (d * H * W + h * W + w). The
    maximum of a box is taken over (H, W) first and then over D (the first maximum in (d, h, w)
    order, as torch's)."""
    if input.dim() not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: "
                           f"{_shape(input)}")
    _F._check_floating(input, "adaptive_max_pool3d")
    sizes = tuple(input.shape[-3:])
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 3:
            raise RuntimeError("adaptive_max_pool3d(): output_size must hold 3 sizes, got "
                               f"{output_size}")
        od, oh, ow = (s if v is None else v for v, s in zip(output_size, sizes))
    else:
        od = oh = ow = output_size
    for d, s in enumerate(sizes):
        if s == 0:
            raise RuntimeError("adaptive_max_pool3d(): Expected input to have non-zero size for "
                               f"non-batch dimensions, but input has sizes {_shape(input)} with "
                               f"dimension {input.dim() - 3 + d} being empty")
    if min(od, oh, ow) < 0:
        raise RuntimeError(f"adaptive_max_pool3d: output_size must be non-negative, got "
                           f"{(od, oh, ow)}")
    lead = tuple(input.shape[:-3])
    if min(od, oh, ow) == 0:
        return _empty_pool(input, lead + (od, oh, ow), return_indices)
    depth, height, width = sizes
    # x: (B, D, H, W) -> plane maxima (B, D, oh, ow) -> (B, oh * ow, 1, D) -> (B, oh * ow, 1, od)
    x = input.reshape(-1, depth, height, width)
    batch = x.shape[0]
    v1, i1 = _F.adaptive_max_pool2d(x, (oh, ow), True)
    v1 = v1.reshape(batch, depth, oh * ow).transpose(1, 2).unsqueeze(2)
    v2, i2 = _F.adaptive_max_pool2d(v1, (1, od), True)

    def arrange(t):  # (B, oh * ow, 1, od) -> (*lead, od, oh, ow)
        return t.reshape(batch, oh, ow, od).permute(0, 3, 1, 2).reshape(*lead, od, oh, ow)

    if not return_indices:
        return arrange(v2)
    # The (h, w) index of the plane maximum that won along D.
    i1 = i1.reshape(batch, depth, oh * ow).transpose(1, 2)
    plane = i1.gather(2, i2.reshape(batch, oh * ow, od))
    index = i2.reshape(batch, oh * ow, od) * (height * width) + plane
    return arrange(v2), arrange(index)


# --- max unpooling ---

def _unpool_output_size(input, kernel, stride, padding, output_size):
    """The spatial output size: (in - 1) stride + kernel - 2 padding by default, or
    output_size (n sizes, or n + 2 with the batch and channel ones first) within a stride of
    it, as torch's."""
    n = len(kernel)
    default = [(input.shape[input.dim() - n + d] - 1) * stride[d] + kernel[d] - 2 * padding[d]
               for d in range(n)]
    if output_size is None:
        size = default
    else:
        size = list(output_size)
        if len(size) == n + 2:
            size = size[2:]
        if len(size) != n:
            raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} "
                             f"elements, but it has a length of '{len(size)}'")
        for d in range(n):
            low, high = default[d] - stride[d], default[d] + stride[d]
            if not low < size[d] < high:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                                 f"{low} and {high})")
    for d, s in enumerate(size):
        if s < 0:
            raise ValueError("max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={s}")
    return size


class _Unpool(Function):
    """out[b, index[b, i]] = x[b, i] over (B, L) planes; an output position that several
    inputs name takes the last of them. The gradient of x[b, i] is grad[b, index[b, i]] for
    every i, as torch's max_unpool backward."""

    @staticmethod
    def forward(ctx, x, index, out_numel):
        ctx.index = index
        planes, length = x.shape
        positions = _C.arange(length, device=x.device)
        # Sorting by (index, position) puts each output position's writers together, the last
        # writer last in its run.
        order = (index * length + positions).argsort(1)
        ranked = index.gather(1, order)
        last = _C.ones(planes, length, dtype=x.dtype, device=x.device)
        if length > 1:
            last[:, :-1] = (ranked[:, :-1] != ranked[:, 1:]).to(x.dtype)
        winner = _C.zeros_like(x).scatter_add(1, order, last) > 0
        out = _C.zeros(planes, out_numel, dtype=x.dtype, device=x.device)
        return out.scatter_add(1, index, _C.where(winner, x, 0.0))

    @staticmethod
    def backward(ctx, grad):
        return grad.gather(1, ctx.index), None, None


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, n):
    """max_unpool{n}d: input's values placed at indices (flat positions in each output plane)
    of a zero output, as torch's."""
    op = f"max_unpool{n}d"
    kernel = _ntuple(kernel_size, n, op, "kernel_size")
    stride = kernel if stride is None else _ntuple(stride, n, op, "stride")
    padding = _ntuple(padding, n, op, "padding")
    if indices.dtype != _C.int64:
        raise RuntimeError(f"{op}: elements in indices should be type int64 but got: "
                           f"{indices.dtype}")
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"{op}: input should be a {n + 1}d or {n + 2}d Tensor, but got a "
                           f"tensor with {input.dim()} dimensions.")
    if _shape(indices) != _shape(input):
        raise RuntimeError(f"{op}: Expected shape of indices to be same as that of the input "
                           f"tensor ({_shape(input)}) but got indices tensor with shape: "
                           f"{_shape(indices)}")
    _F._check_floating(input, op)
    size = _unpool_output_size(input, kernel, stride, padding, output_size)
    lead = tuple(input.shape[:-n])
    out_numel = math.prod(size)
    spatial = math.prod(input.shape[-n:])
    x = input.reshape(-1, spatial)
    index = indices.reshape(-1, spatial)
    invalid = (index < 0) | (index >= out_numel)
    if invalid.any().item():
        raise RuntimeError(f"{op}: Found an invalid max index: "
                           f"{index.masked_select(invalid)[0].item()} (output volumes are of "
                           f"size {'x'.join(str(s) for s in size)})")
    return _Unpool.apply(x, index, out_numel).reshape(*lead, *size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d on (N, C, L) or (C, L) input, as torch's max_unpool1d: zeros
    but at indices, which hold input's values; stride None means kernel_size."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d on (N, C, H, W) or (C, H, W) input, as torch's
    max_unpool2d."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d on (N, C, D, H, W) or (C, D, H, W) input, as torch's
    max_unpool3d."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3)


# --- distances ---

def pdist(input, p=2):
    """||input[i] - input[j]||_p for every pair of rows i < j, in row-major order, as torch's
    (its gradient 0 where the distance is 0)."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.is_floating_point():
        raise RuntimeError(f"pdist only supports floating-point dtypes, got {input.dtype}")
    if p < 0:
        raise RuntimeError(f"pdist only supports non-negative p values, got {p}")
    rows = input.shape[0]
    pairs = _C.triu(_C.ones(rows, rows, device=input.device), 1).nonzero()
    if pairs.shape[0] == 0:
        return input.reshape(-1)[:0]
    diff = input.index_select(0, pairs[:, 0]) - input.index_select(0, pairs[:, 1])
    return _F._vector_norm(diff, p, 1, False)


# --- embedding bags ---

def _bags(input, offsets, include_last_offset, per_sample_weights):
    """input, offsets and per_sample_weights as 1-d tensors, with torch's checks on the forms
    embedding_bag takes."""
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is "
                             "a mini-batch of fixed length sequences. However, found offsets of "
                             f"type {type(offsets)}")
        if input.shape[1] == 0:
            raise RuntimeError(f"embedding_bag: a 2-D input of shape {_shape(input)} holds bags "
                               "of length 0 (torch's bag offsets need a non-zero step)")
        offsets = _C.arange(0, input.numel(), input.shape[1], device=input.device)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
        return input.reshape(-1), offsets, False, per_sample_weights
    if input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        return input, offsets, include_last_offset, per_sample_weights
    raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                     f"{input.dim()}")


def _check_bag_tensors(input, weight, offsets, per_sample_weights, padding_idx):
    """The dtype, offset, index and padding_idx checks of torch's embedding_bag op; returns
    padding_idx in [0, num_embeddings) (or None)."""
    for name, t in (("indices", input), ("offsets", offsets)):
        if t.dtype not in (_C.int64, _C.int32):
            raise RuntimeError(f"embedding_bag: expected {name} of dtype int64 or int32, got "
                               f"{t.dtype}")
    if not weight.is_floating_point():
        raise RuntimeError(f"embedding_bag: expected a floating weight, got dtype {weight.dtype}")
    if per_sample_weights is not None and per_sample_weights.dtype != weight.dtype:
        raise RuntimeError(f"embedding_bag: per_sample_weights of dtype "
                           f"{per_sample_weights.dtype} must have the weight's dtype "
                           f"{weight.dtype}")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, {-num} "
                               f"through {num - 1}, but got {padding_idx}")
        padding_idx %= num
    if offsets.numel():
        first, last = offsets[0].item(), offsets[-1].item()
        if first != 0:
            raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the "
                               "mini-batch has to start from position 0. However, got "
                               f"{first}")
        if last > input.numel():
            raise RuntimeError(f"offsets[-1] can not be greater than input's length "
                               f"{input.numel()} but got offsets[-1] of {last}")
    if input.numel():
        low, high = input.min().item(), input.max().item()
        if low < 0 or high >= num:
            raise RuntimeError("embedding_bag: Expected idx >= 0 && idx < num_embeddings but "
                               f"found idx to be {low if low < 0 else high}")
    return padding_idx


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """The sum, mean or max of each bag of weight's rows, as torch's embedding_bag: input (B, N)
    holds B bags of N indices, or 1-d input holds bags starting at offsets (with
    include_last_offset, offsets ends with one more entry: the end of the last bag where torch's
    fast path takes it, else the last bag runs to input's end, as torch's). per_sample_weights scale the rows (mode 'sum'); padding_idx entries are
    left out of their bag (and of a mean's count); an empty bag gives zeros. max_norm renorms
    the rows used, in place; scale_grad_by_freq divides a row's gradient by its count in input.
    sparse is taken for torch's callers: the gradient is dense."""
    if weight.dtype == _C.int64 and input.is_floating_point():
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage "
                      "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
                      "`embedding_bag(input, weight, ...)`.", stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and _shape(input) != _shape(per_sample_weights):
        raise ValueError(f"embedding_bag: If per_sample_weights ({_shape(per_sample_weights)}) "
                         f"is not None, then it must have the same shape as the input "
                         f"({_shape(input)})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    input, offsets, include_last_offset, per_sample_weights = _bags(
        input, offsets, include_last_offset, per_sample_weights)
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    padding_idx = _check_bag_tensors(input, weight, offsets, per_sample_weights, padding_idx)
    index = input.long()
    if max_norm is not None:
        _F._renorm_rows_(weight, index, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
            "GitHub.")
    starts = offsets.long()
    if include_last_offset:
        # The last offset ends the last bag in torch's fast path (sum and mean of f32, f16 or
        # bf16 rows without padding_idx); its other path runs the last bag to input's end.
        fast = mode != "max" and padding_idx is None and weight.dtype != _C.float64
        end = int(starts[-1].item()) if fast and starts.shape[0] > 0 else index.numel()
        tail = index.numel() - end  # a mean there still divides by them, as torch's
        starts = starts[:-1]
        index = index[:end]
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights[:end]
    if starts.shape[0] == 0:
        return weight[:0] * 1  # no bags
    # bag[i]: the bag of input[i], the last start at or before i.
    positions = _C.arange(index.numel(), device=index.device)
    bag = _C.searchsorted(starts, positions, right=True) - 1
    rows = weight.index_select(0, index)
    if scale_grad_by_freq and rows.requires_grad:
        count = _C.zeros(weight.shape[0], dtype=weight.dtype, device=weight.device)
        count = count.index_add(0, index, _C.ones_like(rows[:, 0])).index_select(0, index)
        rows.register_hook(lambda g: g / count.unsqueeze(1))
    keep = _C.ones_like(index, dtype=_C.bool) if padding_idx is None else index != padding_idx
    return _reduce_bags(rows, bag, keep, starts.shape[0], mode, per_sample_weights,
                        tail if include_last_offset else 0)


def _reduce_bags(rows, bag, keep, n_bags, mode, per_sample_weights, tail=0):
    """rows (n, D), entry i in bag[i] and counted where keep[i] -> (n_bags, D); a mean's last
    bag counts `tail` entries more."""
    dim = rows.shape[1]
    zeros = _C.zeros(n_bags, dim, dtype=rows.dtype, device=rows.device)
    kept = keep.to(rows.dtype)
    count = _C.zeros(n_bags, dtype=rows.dtype, device=rows.device).index_add(0, bag, kept)
    if tail:
        count = _C.cat([count[:-1], count[-1:] + tail])
    if mode != "max":
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.unsqueeze(1)
        out = zeros.index_add(0, bag, _C.where(keep.unsqueeze(1), rows, 0.0))
        return out if mode == "sum" else out / count.clamp(min=1.0).unsqueeze(1)
    if rows.shape[0] == 0:
        return zeros + rows.sum(0)  # no entries: zeros, on the weight's graph
    # dense: (n_bags * longest, D), entry i at slot longest * bag[i] + its place in the bag;
    # the slots of no (kept) entry hold -inf.
    sizes = _C.zeros(n_bags, dtype=_C.float64, device=rows.device)
    sizes = sizes.index_add(0, bag, _C.ones_like(bag, dtype=_C.float64)).long()
    longest = sizes.max().item()
    first = sizes.cumsum(0) - sizes
    slot = bag * longest + _C.arange(bag.shape[0], device=bag.device) - first.index_select(0, bag)
    dense = _C.zeros(n_bags * longest, dim, dtype=rows.dtype, device=rows.device)
    dense = dense.index_add(0, slot, rows)
    filled = _C.zeros(n_bags * longest, dtype=rows.dtype, device=rows.device)
    filled = filled.index_add(0, slot, kept) > 0
    dense = _C.where(filled.unsqueeze(1), dense, float("-inf"))
    out = dense.reshape(n_bags, longest, dim).max(1).values
    return _C.where((count > 0).unsqueeze(1), out, 0.0)
