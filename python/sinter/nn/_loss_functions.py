"""torch.nn.functional's likelihood, margin and triplet losses, composed in Python from the sinter
ops (no C++ kernel of their own), with torch's signatures, values, gradients and checks."""

import math

from .. import _C
from .._grad_mode import no_grad
from . import functional as _F  # looked up at call time: functional imports this module last

__all__ = [
    "gaussian_nll_loss",
    "poisson_nll_loss",
    "hinge_embedding_loss",
    "soft_margin_loss",
    "multilabel_soft_margin_loss",
    "multilabel_margin_loss",
    "multi_margin_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]


def _reduction(size_average, reduce, reduction):
    """reduction, or the one torch's deprecated size_average and reduce ask for (with torch's
    warning, pointing at the loss's caller), checked."""
    if size_average is not None or reduce is not None:
        reduction = _F._legacy_reduction(size_average, reduce, stacklevel=4)
    _F._check_reduction(reduction)
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_no_grad(tensor, op, name):
    # torch's kernels of these ops give no gradient to this argument and refuse one that asks.
    if tensor.requires_grad and _C.is_grad_enabled():
        raise RuntimeError(f"The function '{op}' is not differentiable with respect to argument "
                           f"'{name}'. This input cannot have requires_grad True.")


def _positive_part(x):
    """max(x, 0) with the gradient of torch's clamp_min(x, 0): 1 where x > 0, 0 at 0 and below
    (relu's); NaN stays NaN."""
    return x.relu()


# --- likelihoods ---

def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(var) + (input - target)^2 / var) (+ 0.5 log(2 pi) when full), reduced, as torch's:
    var a float or a tensor of input's shape, of input's shape less its last dimension, or with
    one dimension of size 1 where input's differs. var is clamped to eps without a graph, so its
    gradient is that of the formula at the clamped value."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError(f"gaussian_nll_loss: var has negative entry/entries: {var}")
        var = var * _C.ones_like(input)
    elif not isinstance(var, _C.Tensor):
        raise TypeError(f"gaussian_nll_loss: var must be a Tensor or a float, got "
                        f"{type(var).__name__}")
    elif bool((var < 0).any()):
        raise ValueError(f"gaussian_nll_loss: var has negative entry/entries, the least "
                         f"{var.min().item()}")
    in_shape, var_shape = tuple(input.shape), tuple(var.shape)
    if var_shape != in_shape:
        if in_shape[:-1] == var_shape:
            var = var.unsqueeze(-1)  # one variance per row, broadcast over the last dimension
        elif not (len(in_shape) == len(var_shape)
                  and sum(v for i, v in zip(in_shape, var_shape) if i != v) == 1):
            raise ValueError(f"gaussian_nll_loss: var is of incorrect size {list(var_shape)} for "
                             f"input of size {list(in_shape)}: it must be input's size, that "
                             "size less the last dimension, or 1 in one dimension where it "
                             "differs")
    _F._check_reduction(reduction)
    var = var.clone()
    with no_grad():
        var.copy_(var.clamp(min=eps))
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(input) - target input (log_input) or input - target log(input + eps), plus, when full,
    Stirling's target log(target) - target + 0.5 log(2 pi target) where target > 1; reduced, as
    torch's (an integer input or target computed in float32, as torch promotes them)."""
    reduction = _reduction(size_average, reduce, reduction)
    if not input.is_floating_point():
        input = input.to(_C.float32)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        t = target if target.is_floating_point() else target.to(_C.float32)
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + stirling.masked_fill(t <= 1, 0)
    return _reduce(loss, reduction)


# --- margins ---

def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """max(0, margin - input) where target != 1 plus input where target != -1 (so one of them
    for targets of 1 and -1), reduced, as torch's; the gradient at input == margin is 0."""
    reduction = _reduction(size_average, reduce, reduction)
    if input.is_floating_point():
        below = _positive_part(margin - input)
    else:  # an integer loss, margin truncated to the input's dtype (torch converts it)
        below = int(margin) - input
        below = _C.where(below > 0, below, 0)
    below = _C.where(target != 1, below, 0)
    return _reduce(below + _C.where(target != -1, input, 0), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target input)) in input's dtype and shape (target broadcast to it), reduced,
    as torch's (which gives target no gradient)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_no_grad(target, "soft_margin_loss", "target")
    if not input.is_floating_point():
        raise RuntimeError(f"soft_margin_loss: an input of dtype {input.dtype} cannot hold the "
                           "floating loss (result type Float can't be cast to the desired output "
                           "type)")
    shape = _F._broadcast_shape(input.shape, target.shape)
    if shape != tuple(input.shape):
        raise RuntimeError(f"soft_margin_loss: output with shape {list(input.shape)} doesn't "
                           f"match the broadcast shape {list(shape)} of input and target")
    loss = (-input * target).to(input.dtype).exp().log1p()
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """The mean over the last (class) dimension of -(target log(sigmoid(input)) + (1 - target)
    log(sigmoid(-input))), times weight, reduced over the rest, as torch's."""
    if size_average is not None or reduce is not None:
        reduction = _F._legacy_reduction(size_average, reduce)
    _F._check_floating(input, "multilabel_soft_margin_loss")
    if input.dim() == 0:
        raise IndexError("multilabel_soft_margin_loss: input needs a class dimension, got a 0-d "
                         "input (Dimension specified as -1 but tensor has no dimensions)")
    loss = -(target * _F.logsigmoid(input) + (1 - target) * _F.logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.dim() - 1) / input.shape[-1]
    _F._check_reduction(reduction)  # after the loss, in torch's order
    return _reduce(loss, reduction)


def _margin_input_size(input, op):
    """(rows, classes) of a margin loss's (N, C), (C) or 0-d input, with torch's check."""
    shape = tuple(input.shape)
    if not ((len(shape) <= 1 and input.numel() > 0) or (len(shape) == 2 and shape[1] > 0)):
        raise RuntimeError(f"{op}: Expected non-empty vector or matrix with optional 0-dim "
                           f"batch size, but got: {list(shape)}")
    if len(shape) <= 1:
        return 1, input.numel()
    return shape


def _check_long_target(target, op):
    if target.dtype != _C.int64:
        raise RuntimeError(f"{op}: expected scalar type Long but found {target.dtype} for the "
                           "target of class indices")


def _check_range(target, low, high, op, what):
    if target.numel() and bool(((target < low) | (target >= high)).any()):
        bad = [v for v in target.flatten().tolist() if v < low or v >= high]
        raise RuntimeError(f"{op}: {what} out of range: {bad[0]} not in [{low}, {high})")


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over target classes j and other classes i of max(0, 1 - (x[j] - x[i])) / C per row,
    reduced, as torch's: target (of input's shape, int64) lists each row's classes up to its
    first -1; a pair at the margin (the term 0) adds nothing and has a zero gradient."""
    reduction = _reduction(size_average, reduce, reduction)
    op = "multilabel_margin_loss"
    rows, classes = _margin_input_size(input, op)
    if input.dim() <= 1:
        ok = target.dim() <= 1 and target.numel() == classes
    else:
        ok = tuple(target.shape) == tuple(input.shape)
    if not ok:
        raise RuntimeError(f"{op}: inconsistent target size: {list(target.shape)} for input of "
                           f"size: {list(input.shape)}")
    _F._check_floating(input, op)
    _check_long_target(target, op)
    _check_range(target, -1, classes, op, "argument #2 'target' is")
    # x, y: (N, C); listed: (N, K), the entries of y before each row's first -1, K the longest
    # such list (the pairs below take N K C elements)
    x, y = input.reshape(rows, classes), target.reshape(rows, classes)
    listed = (y == -1).long().cumsum(1) == 0
    width = int(listed.long().sum(1).max().item()) if rows else 0
    y, listed = y.narrow(1, 0, width), listed.narrow(1, 0, width)
    hits = (y.unsqueeze(2) == _C.arange(classes, device=input.device)) & listed.unsqueeze(2)
    other = hits.any(1).logical_not()  # (N, C): the classes no listed entry names
    # z: (N, K, C), 1 - x[y_k] + x[i] for each listed entry k and class i
    z = (1 - x.gather(1, y.clamp(min=0))).unsqueeze(2) + x.unsqueeze(1)
    pairs = listed.unsqueeze(2) & other.unsqueeze(1) & (z > 0)
    loss = _C.where(pairs, z, 0.0).sum((1, 2)) / classes
    return _reduce(loss.reshape(()) if input.dim() <= 1 else loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """sum over classes i != y of max(0, margin - x[y] + x[i])^p (times weight[y]) / C per row,
    reduced, as torch's: input (N, C), (C) or 0-d, target int64 of one class per row (the
    result of reduction 'none' has target's shape), p 1 or 2; a class at the margin adds
    nothing and has a zero gradient."""
    reduction = _reduction(size_average, reduce, reduction)
    op = "multi_margin_loss"
    if p != 1 and p != 2:
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got p={p}")
    if weight is not None and weight.dim() != 1:
        raise ValueError(f"{op}: weight must be one-dimensional, got shape {list(weight.shape)}")
    if weight is not None:
        _check_no_grad(weight, op, "weight")
    rows, classes = _margin_input_size(input, op)
    if target.dim() > 1 or target.numel() != rows:
        raise RuntimeError(f"{op}: target tensor should be 1-D with size equal to the number of "
                           f"input samples (batch size). Expected target size [{rows}], but got "
                           f"{list(target.shape)}. Input has shape {list(input.shape)}.")
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(f"{op}: inconsistent weight size, expected {classes} but got "
                           f"{list(weight.shape)}")
    _F._check_floating(input, op)
    _check_long_target(target, op)
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"{op}: expected scalar type {input.dtype} but found {weight.dtype} "
                           "for weight (it must have input's dtype)")
    _check_range(target, 0, classes, op, "target")
    # x: (N, C), y: (N, 1); z: (N, C), margin - x[y] + x[i]
    x, y = input.reshape(rows, classes), target.reshape(rows, 1)
    z = (margin - x.gather(1, y)) + x
    h = _C.where((_C.arange(classes, device=input.device) != y) & (z > 0), z, 0.0)
    if p == 2:
        h = h * h
    if weight is not None:
        h = h * weight.gather(0, y.reshape(rows)).unsqueeze(1)
    loss = (h.sum(1) / classes).reshape(target.shape)
    return _reduce(loss, reduction)


# --- triplets ---

def _check_triplet(anchor, positive, negative, margin):
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if dims[0] != dims[1] or dims[1] != dims[2]:
        raise RuntimeError("The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {dims[0]}D, positive "
                           f"{dims[1]}D, and negative {dims[2]}D inputs")


def _triplet(distance, anchor, positive, negative, margin, swap, reduction):
    """max(0, margin + d(a, p) - d(a, n)), d(a, n) replaced by d(p, n) where that is smaller when
    swap; reduced."""
    dist_pos = distance(anchor, positive)
    dist_neg = distance(anchor, negative)
    if swap:
        dist_neg = _C.minimum(dist_neg, distance(positive, negative))
    return _reduce(_positive_part(margin + dist_pos - dist_neg), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + ||a - p + eps||_p - ||a - n + eps||_p) over the last dimension, the
    negative distance the smaller of (a, n) and (p, n) when swap; reduced, as torch's (the
    gradient 0 where the term is 0; a tie of the swap splits it in halves)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_triplet(anchor, positive, negative, margin)

    def distance(x1, x2):
        return _F.pairwise_distance(x1, x2, p, eps)

    return _triplet(distance, anchor, positive, negative, margin, swap, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with distance_function(x1, x2) (pairwise_distance by default) for
    the distances, as torch's."""
    _F._check_reduction(reduction)
    _check_triplet(anchor, positive, negative, margin)
    distance = _F.pairwise_distance if distance_function is None else distance_function
    return _triplet(distance, anchor, positive, negative, margin, swap, reduction)
