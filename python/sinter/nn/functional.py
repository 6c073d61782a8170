"""sinter.nn.functional: ops with torch.nn.functional's names and signatures: the C++ ops, and
in Python those composed from them."""

import warnings

from .. import _C
from .._grad_mode import no_grad
from .._C.nn.functional import (
    adaptive_max_pool2d as _adaptive_max_pool2d,
    avg_pool1d as _avg_pool1d,
    avg_pool2d as _avg_pool2d,
    avg_pool3d as _avg_pool3d,
    binary_cross_entropy as _binary_cross_entropy,
    binary_cross_entropy_with_logits as _binary_cross_entropy_with_logits,
    cosine_embedding_loss as _cosine_embedding_loss,
    ctc_loss as _ctc_loss,
    embedding as _embedding,
    huber_loss as _huber_loss,
    kl_div as _kl_div,
    l1_loss as _l1_loss,
    margin_ranking_loss as _margin_ranking_loss,
    mse_loss as _mse_loss,
    smooth_l1_loss as _smooth_l1_loss,
    cross_entropy as _cross_entropy,
    max_pool1d as _max_pool1d,
    nll_loss as _nll_loss,
    pad as _pad,
)
from .._C.nn.functional import (  # noqa: F401  (re-exported)
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    batch_norm,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    dropout,
    elu,
    fold,
    gelu,
    group_norm,
    hardsigmoid,
    hardswish,
    hardtanh,
    instance_norm,
    interpolate,
    layer_norm,
    leaky_relu,
    linear,
    log_softmax,
    max_pool2d,
    max_pool3d,
    mish,
    one_hot,
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
    softmax,
    softplus,
    tanh,
    unfold,
)


# --- norms and distances ---

def _vector_norm(x, p, dim, keepdim):
    """||x||_p along dim with torch.linalg.vector_norm's value and gradient: p = inf and -inf the
    largest and smallest |x|, p = 0 the count of non-zeros (with a zero gradient). The gradient
    is 0 where the norm is 0 and, for p < 1, at the zero elements (torch's masks), where the
    root's and the power's derivatives would otherwise make 0 * inf = NaN."""
    if p == float("inf"):
        return x.abs().amax(dim, keepdim=keepdim)
    if p == float("-inf"):
        return x.abs().amin(dim, keepdim=keepdim)
    if p == 0:
        return (x * 0).sum(dim, keepdim=keepdim) + (x != 0).to(x.dtype).sum(dim, keepdim=keepdim)
    if p == 1:
        return x.abs().sum(dim, keepdim=keepdim)
    if p == 2:
        total = (x * x).sum(dim, keepdim=keepdim)
    else:
        # |x|^p, a zero element's taken as 0 (inf for p < 0) with a zero gradient.
        zero = x == 0
        powered = _C.where(zero, 1.0, x.abs()).pow(p)
        total = _C.where(zero, 0.0 if p > 0 else float("inf"), powered)
        total = total.sum(dim, keepdim=keepdim)
    null = total == 0
    root = _C.where(null, 1.0, total)
    root = root.sqrt() if p == 2 else root.pow(1.0 / p)
    return _C.where(null, 0.0, root)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """input / max(||input||_p along dim, eps), as torch's F.normalize (its gradient finite
    where the norm is 0)."""
    return input / _vector_norm(input, p, dim, True).clamp(min=eps)


def _broadcast_shape(a, b):
    """The shape that tensors of shapes a and b broadcast to; torch's error where they do
    not."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                               f"({y}) at non-singleton dimension {i}")
    return tuple(y if x == 1 else x for x, y in zip(a, b))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum((x1 / max(||x1||, eps)) (x2 / max(||x2||, eps))) along dim, as torch's (2.x): the
    inputs broadcast first, so a norm runs over the broadcast size. As in torch, the clamp to
    eps is made in place without a graph, so the gradient is that of x1 / ||x1|| (||x1||'s
    gradient 0 where it is 0) evaluated at the clamped norm."""
    shape = _broadcast_shape(x1.shape, x2.shape)
    x1, x2 = x1.expand(*shape), x2.expand(*shape)
    n1 = _vector_norm(x1, 2, dim, True).clone()
    n2 = _vector_norm(x2, 2, dim, True).clone()
    with no_grad():
        n1.copy_(n1.clamp(min=eps))
        n2.copy_(n2.clamp(min=eps))
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p along the last dimension, as torch's (its gradient 0 where the
    distance is 0)."""
    return _vector_norm(x1 - x2 + eps, p, -1, keepdim)


# --- losses ---

def _legacy_reduction(size_average, reduce, stacklevel=3):
    """reduction from torch's deprecated size_average and reduce (None counts as True), with
    torch's warning."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = ("mean" if size_average else "sum") if reduce else "none"
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  f"reduction='{reduction}' instead.", stacklevel=stacklevel)
    return reduction


def _check_reduction(reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _unbatched(loss, input, target, weight, ignore_index, reduction, *rest):
    # input (C) and target (): the batched op on a batch of one, its 'none' result a 0-dim tensor.
    out = loss(input.unsqueeze(0), target.unsqueeze(0), weight, ignore_index, reduction, *rest)
    return out.squeeze(0) if reduction == "none" else out


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """-input[n, target[n]] (times weight[target[n]]), reduced; input (N, C), (N, C, d1, ...) or,
    unbatched, (C); as torch's (size_average and reduce, deprecated, set reduction)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if input.dim() == 1:
        return _unbatched(_nll_loss, input, target, weight, ignore_index, reduction)
    return _nll_loss(input, target, weight, ignore_index, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """nll_loss of log_softmax over the class dimension, as torch's: target holds class indices
    (input (N, C), (N, C, d1, ...) or unbatched (C)) or, floating and of input's shape, class
    probabilities; label_smoothing mixes the target with the uniform distribution;
    size_average and reduce (deprecated) set reduction."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if not target.is_floating_point():
        if input.dim() == 1:
            return _unbatched(_cross_entropy, input, target, weight, ignore_index, reduction,
                              label_smoothing)
        return _cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)
    # Class probabilities, with torch's checks in its order (cross_entropy_loss and
    # cross_entropy_loss_prob_target): the mean divides by the number of samples (N d1 ...),
    # not by the weights; a negative label_smoothing smooths nothing.
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"cross_entropy: a target of class probabilities must have the "
                           f"input's shape {list(input.shape)}, got {list(target.shape)}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    class_dim = 0 if input.dim() == 1 else 1
    n_classes = input.shape[class_dim]
    if weight is not None and (weight.dim() != 1 or weight.numel() != n_classes):
        raise RuntimeError(f"cross_entropy: weight tensor should be defined either for all "
                           f"{n_classes} classes or no classes but got weight tensor of shape: "
                           f"{list(weight.shape)}")
    if label_smoothing > 1.0:
        raise RuntimeError("cross_entropy: label_smoothing must be in [0, 1], got "
                           f"{label_smoothing}")
    if label_smoothing > 0.0:
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    loss = input.log_softmax(class_dim) * target
    if weight is not None:
        loss = loss * weight.reshape(n_classes, *([1] * (input.dim() - class_dim - 1)))
    if reduction == "none":
        return -loss.sum(class_dim)
    if reduction == "sum":
        return -loss.sum()
    return -loss.sum() / (input.numel() // n_classes)


# --- torch's full signatures over the C++ losses ---

def _reduction_of(size_average, reduce, reduction):
    """reduction, or the one torch's deprecated size_average and reduce set (with its warning
    pointing at the caller of the loss)."""
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce, stacklevel=4)
    return reduction


def _elementwise_weighted(loss, input, target, weight, reduction, mean_by_weight):
    """loss(input, target, 'none') times weight (of input's shape), reduced as torch's weighted
    l1/mse (the mean divides by the weights' sum) or huber (the plain mean) losses."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', "
                         "'sum'.")
    each = loss(input, target, "none") * weight
    if reduction == "none":
        return each
    if reduction == "sum":
        return each.sum()
    return each.sum() / weight.sum() if mean_by_weight else each.mean()


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(input - target)^2, reduced; weight scales each element (the mean then divides by the
    weights' sum), as torch's."""
    reduction = _reduction_of(size_average, reduce, reduction)
    if weight is None:
        return _mse_loss(input, target, reduction)
    return _elementwise_weighted(_mse_loss, input, target, weight, reduction, True)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target|, reduced; weight as mse_loss's."""
    reduction = _reduction_of(size_average, reduce, reduction)
    if weight is None:
        return _l1_loss(input, target, reduction)
    return _elementwise_weighted(_l1_loss, input, target, weight, reduction, True)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """Huber's loss, reduced; weight scales each element (the mean stays the plain mean), as
    torch's."""
    if weight is None:
        return _huber_loss(input, target, reduction, delta)
    return _elementwise_weighted(lambda a, b, r: _huber_loss(a, b, r, delta), input, target,
                                 weight, reduction, False)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1 (Huber's loss divided by beta), reduced."""
    return _smooth_l1_loss(input, target, _reduction_of(size_average, reduce, reduction), beta)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(target log(input) + (1 - target) log(1 - input)), the logs clamped at -100, as torch's."""
    return _binary_cross_entropy(input, target, weight,
                                 _reduction_of(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """binary_cross_entropy of sigmoid(input), computed stably; pos_weight scales the positive
    term."""
    return _binary_cross_entropy_with_logits(
        input, target, weight, _reduction_of(size_average, reduce, reduction), pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1."""
    return _cosine_embedding_loss(input1, input2, target, margin,
                                  _reduction_of(size_average, reduce, reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target (input1 - input2) + margin)."""
    return _margin_ranking_loss(input1, input2, target, margin,
                                _reduction_of(size_average, reduce, reduction))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target (log target - input), input holding log-probabilities (and target too with
    log_target); 'batchmean' divides the sum by the batch size."""
    return _kl_div(input, target, _reduction_of(size_average, reduce, reduction), log_target)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """The connectionist temporal classification loss, as torch's; the lengths may be tensors or
    sequences of ints."""
    def lengths(v):
        if isinstance(v, _C.Tensor):
            return v
        return _C._from_flat([], [int(x) for x in v], [len(v)], _C.int64, log_probs.device)
    return _ctc_loss(log_probs, targets, lengths(input_lengths), lengths(target_lengths), blank,
                     reduction, zero_infinity)


# --- embeddings and average pooling with torch's further arguments ---

def _renorm_rows_(weight, indices, max_norm, norm_type):
    """Rows of weight named in indices with a norm_type-norm above max_norm scaled down to
    max_norm (times 1 / (1 + 1e-7 / norm)), in place, as torch's embedding_renorm_."""
    with no_grad():
        rows = indices.reshape(-1).long().unique()
        picked = weight.index_select(0, rows)
        norms = _vector_norm(picked, norm_type, 1, True)
        scale = (max_norm / (norms + 1e-7)).clamp(max=1.0)
        scale = _C.where(norms > max_norm, scale, _C.ones_like(scale))
        weight[rows] = picked * scale


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of weight at the indices of input, as torch's: padding_idx's row gets no gradient;
    max_norm renormalises the rows looked up, in place, first; scale_grad_by_freq divides each
    row's gradient by its count in input. sparse is taken; the gradient is dense (README)."""
    del sparse
    if max_norm is not None:
        _renorm_rows_(weight, input, max_norm, norm_type)
    out = _embedding(input, weight, padding_idx)
    if scale_grad_by_freq and out.requires_grad:
        _, inverse, counts = input.unique(return_inverse=True, return_counts=True)
        freq = counts.to(out.dtype)[inverse.reshape(-1)].reshape(*input.shape, 1)
        out.register_hook(lambda g: g / freq)
    return out


def _pool_sum_padding(input, kernel, stride, padding, ceil_mode):
    """F.pad's list that pads input's last len(kernel) dims by padding and past the right end
    far enough for every window of the pooling's output (torch's ceil_mode rule) to be whole."""
    pads = []
    for i in range(len(kernel) - 1, -1, -1):
        n, k, s, p = input.shape[input.dim() - len(kernel) + i], kernel[i], stride[i], padding[i]
        out = (n + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (out - 1) * s >= n + p:
            out -= 1
        pads += [p, p + max(0, (out - 1) * s + k - (n + 2 * p))]
    return pads


def _avg_pool_divided(op, pool, input, kernel_size, stride, padding, ceil_mode, dims, divisor):
    """The window sums divided by divisor: the count-including average of zero-padded input
    times the window's size over divisor."""
    if divisor == 0:
        raise RuntimeError(f"{op}: divisor must be not zero")
    def tup(v):
        v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        return v * dims if len(v) == 1 else v
    kernel = tup(kernel_size)
    stride = kernel if stride is None or stride == [] or stride == () else tup(stride)
    padded = pad(input, _pool_sum_padding(input, kernel, stride, tup(padding), ceil_mode))
    size = 1
    for k in kernel:
        size *= k
    return pool(padded, kernel, stride, 0, False, True) * (size / divisor)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Average pooling of (N, C, H, W) or (C, H, W), as torch's; divisor_override divides each
    window's sum by it instead of the window's count."""
    if divisor_override is None:
        return _avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)
    return _avg_pool_divided("avg_pool2d", _avg_pool2d, input, kernel_size, stride, padding,
                             ceil_mode, 2, divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Average pooling of (N, C, D, H, W) or (C, D, H, W); divisor_override as avg_pool2d's."""
    if divisor_override is None:
        return _avg_pool3d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)
    return _avg_pool_divided("avg_pool3d", _avg_pool3d, input, kernel_size, stride, padding,
                             ceil_mode, 3, divisor_override)


# --- 1-d and adaptive pooling over the C++ ops ---

def _int1(value, op, name):
    """An int from torch's int-or-one-int-sequence argument of a 1-d op."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise RuntimeError(f"{op}: {name} must be an int or a sequence of one int, got "
                               f"{value}")
        return value[0]
    return value


def _positive1(value, op, name):
    """A positive int from torch's int-or-one-int-sequence argument of a 1-d op."""
    value = _int1(value, op, name)
    if value <= 0:
        raise RuntimeError(f"{op}: {name} must be greater than zero, but got {value}")
    return value


def _stride1(stride, kernel_size, op):
    """A 1-d pooling op's stride: None (or, as torch's, an empty sequence) means kernel_size;
    any other stride must be positive."""
    if stride is None or (isinstance(stride, (tuple, list)) and not stride):
        return kernel_size
    return _positive1(stride, op, "stride")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum over windows of the last dimension of (N, C, L) or (C, L) input, as torch's;
    with return_indices, also where each maximum sits (see _max_pool1d_indices). The sizes are
    ints or sequences of one int; stride None means kernel_size."""
    kernel_size = _positive1(kernel_size, "max_pool1d", "kernel_size")
    stride = _stride1(stride, kernel_size, "max_pool1d")
    padding = _int1(padding, "max_pool1d", "padding")
    dilation = _int1(dilation, "max_pool1d", "dilation")
    out = _max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode)
    if not return_indices:
        return out
    return out, _max_pool1d_indices(input, out.shape[-1], kernel_size, stride, padding,
                                    dilation)


def _max_pool1d_indices(input, out_len, kernel_size, stride, padding, dilation):
    """Where each window's maximum sits along input's last dimension, as torch's indices: the
    last NaN of the window if it holds one, else the first input position (never a padding
    one) holding the window's maximum."""
    x = input.detach()
    length = x.shape[-1]
    span = (out_len - 1) * stride + dilation * (kernel_size - 1) + 1  # the padded length used
    # x: (..., L) -> (B, 1, 1, span) -> cols: (B, kernel_size, out_len)
    x = pad(x.reshape(-1, 1, 1, length), (padding, span - length - padding),
            value=float("-inf"))
    cols = unfold(x, (1, kernel_size), dilation=(1, dilation), stride=(1, stride))
    # pos: (kernel_size, out_len), the input position of each window element
    j = _C.arange(kernel_size, device=input.device).reshape(kernel_size, 1)
    start = _C.arange(out_len, device=input.device) * stride - padding
    pos = start + j * dilation
    valid = (pos >= 0) & (pos < length)
    top = cols == cols.amax(1, keepdim=True)
    # One score per element, largest at torch's pick (its loop keeps the first element above
    # the running maximum, starting at -inf from the first position at or after 0, and
    # replaces it with any NaN): a NaN, the last; else a valid maximum, the first; else (a
    # window of padding alone) the first position at or after 0.
    k = kernel_size
    score = _C.where(cols.isnan(), 3 * k + j,
                     _C.where(valid & top, 2 * k - j, _C.where(pos >= 0, k - j, 0)))
    return (start + score.argmax(1) * dilation).reshape(*input.shape[:-1], out_len)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """The mean over windows of the last dimension of (N, C, L) or (C, L) input (the padding
    counted unless count_include_pad=False), as torch's; the sizes as max_pool1d's."""
    kernel_size = _positive1(kernel_size, "avg_pool1d", "kernel_size")
    stride = _stride1(stride, kernel_size, "avg_pool1d")
    padding = _int1(padding, "avg_pool1d", "padding")
    return _avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The maximum over output_size windows that tile the last two dimensions, as torch's: a
    None in output_size keeps the input's size there; with return_indices, also where each
    maximum sits (h * W + w)."""
    if isinstance(output_size, (tuple, list)):
        if input.dim() <= len(output_size):
            raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
        sizes = input.shape[-len(output_size):]
        output_size = tuple(d if v is None else v for v, d in zip(output_size, sizes))
    return _adaptive_max_pool2d(input, output_size, return_indices)


# --- padding ---

def pad(input, pad, mode="constant", value=None):
    """input padded by pad = (left, right, top, bottom, front, back) over its last dimensions,
    as torch's F.pad: mode constant (value, 0 by default), reflect, replicate or circular. A
    negative pad crops, in each mode as torch does: reflect and replicate pad the whole input
    and then crop (torch reads the reflection and the edge from the uncropped input); circular
    crops first and then wraps the cropped input around (torch copies the wrap from the cropped
    core)."""
    if (mode == "constant" or all(p >= 0 for p in pad) or len(pad) % 2
            or len(pad) > 2 * input.dim()):
        return _pad(input, pad, mode, value)
    grow = [max(p, 0) for p in pad]
    if mode == "circular":
        return _pad(_crop(input, pad), grow, mode, value)
    for i in range(len(pad) // 2):
        dim = input.dim() - 1 - i
        if input.shape[dim] + pad[2 * i] + pad[2 * i + 1] < 1:
            raise RuntimeError(f"pad: {mode} pads ({pad[2 * i]}, {pad[2 * i + 1]}) of dim {dim} "
                               f"leave no element of its size {input.shape[dim]} (torch's "
                               "reflect and replicate modes need at least one)")
    return _crop(_pad(input, grow, mode, value), pad)


def _crop(input, pad):
    """input narrowed by pad's negative entries (pad as F.pad's)."""
    for i in range(len(pad) // 2):
        dim = input.dim() - 1 - i
        left, right = max(-pad[2 * i], 0), max(-pad[2 * i + 1], 0)
        size = input.shape[dim]
        if left + right > size:
            raise RuntimeError(f"pad: negative pads ({pad[2 * i]}, {pad[2 * i + 1]}) of dim "
                               f"{dim} crop more than its size {size}")
        input = input.narrow(dim, left, size - left - right)
    return input


# --- activations composed from the elementwise ops ---

def _get_softmax_dim(name, ndim, stacklevel):
    """torch's implicit dim of softmax and softmin (0 for 0-, 1- and 3-d input, else 1), with its
    warning; stacklevel as warnings.warn's, from this helper (3: the caller of softmin)."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input) along dim, as torch's (dim None: torch's implicit choice, with its
    warning pointing at softmin's caller)."""
    if dim is None:
        dim = _get_softmax_dim("softmin", input.dim(), _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    return (-input).softmax(dim)


def _check_floating(input, op):
    # torch dispatches these ops on floating dtypes alone.
    if not input.is_floating_point():
        raise NotImplementedError(f"{op}: expected a floating tensor, got dtype {input.dtype}")


def logsigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for any x, with torch's gradient
    sigmoid(-x) (1/2 at 0)."""
    negative = input < 0
    magnitude = _C.where(negative, -input, input)
    return _C.where(negative, input, 0.0) - (-magnitude).exp().log1p()


def softsign(input):
    """x / (1 + |x|)."""
    return input / (input.abs() + 1)


def tanhshrink(input):
    """x - tanh(x); an integer input is taken as float32 (torch's promotion)."""
    if input.dtype == _C.bool:
        raise NotImplementedError("tanhshrink: subtraction of bool tensors is not supported")
    if not input.is_floating_point():
        input = input.to(_C.float32)
    return input - input.tanh()


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between; floating input."""
    _check_floating(input, "softshrink")
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambd must be at least 0, got {lambd}")
    return _C.where(input > lambd, input - lambd,
                    _C.where(input < -lambd, input + lambd, input * 0))


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0; floating input."""
    _check_floating(input, "hardshrink")
    return _C.where(input.abs() <= lambd, 0.0, input)


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value, in input's dtype (for an integer input threshold and
    value are truncated to integers first, as torch converts them). inplace is taken for
    torch's callers: the result is a new tensor either way."""
    del inplace
    if input.dtype == _C.bool:
        raise NotImplementedError("threshold: not implemented for dtype bool")
    if not input.is_floating_point():
        threshold, value = int(threshold), int(value)
    return _C.where(input <= threshold, value, input)


def glu(input, dim=-1):
    """a * sigmoid(b), a and b the halves of input along dim."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if input.shape[dim] % 2:
        raise RuntimeError("glu: halving dimension must be even, but dimension "
                           f"{dim % input.dim()} is size {input.shape[dim]}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)); floating input. inplace as
    threshold's."""
    del inplace
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    _check_floating(input, "celu")
    # The exponential sees min(x, 0), so that a large x makes no inf in the branch not taken.
    return _C.where(input > 0, input, (input.clamp(max=0.0) / alpha).expm1() * alpha)


# --- channel dropout ---

def _check_dropout_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_dropout(input, p, training, batched=True):
    """Zeroes whole channels (input[n, c], or input[c] unbatched) with probability p and scales
    the rest by 1 / (1 - p), as torch's feature_dropout, with its checks in its order: the input
    itself when not training, p is 0 or input is empty, input * 0 when p is 1, and only then
    the need for a channel dimension and for a floating input."""
    if p == 0 or not training or input.numel() == 0:
        return input
    if p == 1:
        return input * _C.zeros((), dtype=input.dtype, device=input.device)
    lead = 2 if batched else 1
    if input.dim() < lead:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not input.is_floating_point():
        raise RuntimeError(f"feature dropout: the kept channels are scaled by 1 / (1 - p), a "
                           f"floating result that dtype {input.dtype} cannot hold")
    # One draw per channel, broadcast over its elements.
    shape = tuple(input.shape[:lead]) + (1,) * (input.dim() - lead)
    keep = _C.rand(*shape, device=input.device) < 1 - p
    return input * (keep.to(input.dtype) / (1 - p))


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of (N, C, L) or (C, L) input, as torch's. inplace as threshold's."""
    del inplace
    _check_dropout_p(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D "
                           "input (channel-wise dropout of inputs with 1 spatial dimension, a "
                           "channel dimension and an optional batch dimension)")
    return _feature_dropout(input, p, training, batched=input.dim() == 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of (N, C, H, W) input, as torch's: a 3-D input is taken as (N, C, L), with
    torch's warning. inplace as threshold's."""
    del inplace
    _check_dropout_p(p)
    if input.dim() not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.dim()}-D input to dropout2d, which is "
                      "deprecated; dropout2d exists for inputs with 2 spatial dimensions, a "
                      "channel dimension and an optional batch dimension (3D or 4D)", stacklevel=2)
    if input.dim() == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L); "
                      "use dropout1d for that", stacklevel=2)
    return _feature_dropout(input, p, training)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of (N, C, D, H, W) or (C, D, H, W) input, as torch's. inplace as
    threshold's."""
    del inplace
    _check_dropout_p(p)
    if input.dim() not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.dim()}-D input to dropout3d, which is "
                      "deprecated; dropout3d exists for inputs with 3 spatial dimensions, a "
                      "channel dimension and an optional batch dimension (4D or 5D)", stacklevel=2)
    return _feature_dropout(input, p, training, batched=input.dim() == 5)



def _in_place_form(base):
    """torch's F.<base>_: F.<base> written into input (its dtype kept), recorded by autograd as
    the Tensor methods' in-place forms (python/sinter/_methods.py)."""
    plain = globals()[base]
    name = base + "_"

    def function(input, *args, **kwargs):
        from .._methods import _apply
        return _apply(input, name, lambda x: plain(x, *args, **kwargs))

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"{base}, written into input: F.{name}(x, ...) is x.copy_(F.{base}(x, ...))."
    return function


def multi_head_attention_forward(*args, **kwargs):
    """torch's functional multi-head attention (sinter.nn.transformer's, which imports this
    module: looked up when called)."""
    from .transformer import multi_head_attention_forward as forward
    return forward(*args, **kwargs)


relu_ = _in_place_form("relu")
elu_ = _in_place_form("elu")
leaky_relu_ = _in_place_form("leaky_relu")
hardtanh_ = _in_place_form("hardtanh")
celu_ = _in_place_form("celu")
selu_ = _in_place_form("selu")
threshold_ = _in_place_form("threshold")

# More of torch.nn.functional, in files of their own.
from ._functional_extra import *  # noqa: E402,F401,F403
from ._loss_functions import *  # noqa: E402,F401,F403
