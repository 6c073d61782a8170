"""torch's out-of-place assignments (select_scatter, slice_scatter, diagonal_scatter, index_put,
masked_scatter) and their in-place methods, composed as a copy of the input with the assignment
written into it: autograd records the write (Note [in-place autograd] in
include/sinter/autograd.h), so the input's gradient is zero where the source was written and the
source gets the gradient of the elements it filled."""

import math

from . import _C
from ._methods import _apply
from ._ops_more2 import _method, _tensor_arg, _wrap_dim

Tensor = _C.Tensor

__all__ = ["select_scatter", "slice_scatter", "diagonal_scatter", "index_put", "masked_scatter",
           "broadcast_shapes", "broadcast_tensors"]


def broadcast_shapes(*shapes):
    """The shape that shapes (sequences of sizes, or single ints) broadcast to, as torch's."""
    sizes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    out = []
    for dims in zip(*[(1,) * (max(map(len, sizes), default=0) - len(s)) + s for s in sizes]):
        wide = {d for d in dims if d != 1}
        if len(wide) > 1:
            raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape. "
                               f"Mismatch is between {list(dims)}")
        out.append(wide.pop() if wide else 1)
    return tuple(out)


def broadcast_tensors(*tensors):
    """The tensors expanded (views) to their common shape, as torch's."""
    shape = broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(t.expand(*shape) for t in tensors)


def _written(name, view, src):
    """src written into view, whose shape it must have (torch broadcasts none here)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"{name}(): argument 'src' must be Tensor, not {type(src).__name__}")
    if tuple(src.shape) != tuple(view.shape):
        raise RuntimeError(f"{name}: expected src to have a size equal to the slice of self. src "
                           f"size = {list(src.shape)}, slice size = {list(view.shape)}")
    view.copy_(src)


def select_scatter(input, src, dim, index):
    """input with its slice input.select(dim, index) replaced by src."""
    out = _tensor_arg("select_scatter", input).clone()
    _written("select_scatter", out.select(dim, index), src)
    return out


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with the slice start:end:step along dim replaced by src."""
    out = _tensor_arg("slice_scatter", input).clone()
    d = _wrap_dim(dim, out.dim())
    key = (slice(None),) * d + (slice(start, end, step),)
    _written("slice_scatter", out[key], src)
    return out


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with its diagonal (offset, dim1, dim2, as diagonal takes it) replaced by src."""
    out = _tensor_arg("diagonal_scatter", input).clone()
    _written("diagonal_scatter", out.diagonal(offset, dim1, dim2), src)
    return out


def _index_tensors(name, input, indices):
    """indices (a tuple of integer or bool tensors, one per leading dim) as integer tensors, a bool
    mask standing for its nonzero positions' coordinates."""
    if isinstance(indices, Tensor) or not isinstance(indices, (tuple, list)):
        raise TypeError(f"{name}(): argument 'indices' must be tuple of Tensors, not "
                        f"{type(indices).__name__}")
    out = []
    for i in indices:
        if not isinstance(i, Tensor):
            raise TypeError(f"{name}(): each index must be a Tensor, got {type(i).__name__}")
        if i.dtype == _C.bool:
            covered = tuple(input.shape[len(out):len(out) + i.dim()])
            if tuple(i.shape) != covered:
                raise IndexError(f"The shape of the mask {list(i.shape)} at index {len(out)} does "
                                 f"not match the shape of the indexed tensor {list(covered)}")
            out.extend(i.to(input.device).nonzero().unbind(1))
        elif i.is_floating_point():
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        else:
            out.append(i.to(input.device).to(_C.int64))
    if len(out) > input.dim():
        raise IndexError(f"{name}: too many indices for tensor of dimension {input.dim()} "
                         f"(got {len(out)})")
    return out


def _accumulated(input, indices, values):
    """input plus values added at indices, repeated positions summing (torch's accumulate);
    integer tensors add in f64 (exact to 2^53, where torch's int64 sums wrap)."""
    idx = broadcast_tensors(*indices)
    lead, rest = tuple(input.shape[:len(idx)]), tuple(input.shape[len(idx):])
    flat = _C.zeros(idx[0].shape, dtype=_C.int64, device=input.device)
    for size, i in zip(lead, idx):
        if bool(((i < -size) | (i >= size)).any()):
            raise IndexError(f"index_put: index out of range for a dim of size {size}")
        flat = flat * size + i.remainder(size)
    rows = math.prod(lead)
    shape = tuple(flat.shape) + rest
    vals = values.expand(*shape).reshape(-1, *rest)
    floating = input.is_floating_point()
    base = input if floating else input.to(_C.float64)
    added = base.reshape(rows, *rest).index_add(0, flat.reshape(-1),
                                                vals if floating else vals.to(_C.float64))
    added = added.reshape(*input.shape)
    return added if floating else added.to(input.dtype)


def index_put(input, indices, values, accumulate=False):
    """input with values written (or added, with accumulate) at the positions the index tensors
    name, as input[indices] = values (or +=, repeated positions summing)."""
    _tensor_arg("index_put", input)
    idx = _index_tensors("index_put", input, indices)
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' must be Tensor, not "
                        f"{type(values).__name__}")
    if values.dtype != input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{input.dtype} for the destination and {values.dtype} for the "
                           "source.")
    if not idx:
        out = input.clone()
        out.copy_(values + out if accumulate else values.expand(*out.shape))
        return out
    if accumulate:
        return _accumulated(input, idx, values)
    out = input.clone()
    out[tuple(idx)] = values
    return out


def masked_scatter(input, mask, source):
    """input with the positions where mask (broadcast to input's shape) is True filled, in order,
    by source's first elements."""
    _tensor_arg("masked_scatter", input)
    if not isinstance(mask, Tensor) or mask.dtype != _C.bool:
        raise RuntimeError("masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{getattr(mask, 'dtype', type(mask).__name__)}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got "
                           f"{input.dtype} and {source.dtype}")
    input, m = broadcast_tensors(input, mask.to(input.device))
    count = int(m.sum().item())
    if source.numel() < count:
        raise RuntimeError(f"masked_scatter: expected source to have at least {count} elements "
                           f"(the mask's True count), got {source.numel()}")
    out = input.clone()
    out[m] = source.reshape(-1)[:count]
    return out


def _index_put_(self, indices, values, accumulate=False):
    """index_put written into this tensor."""
    return _apply(self, "index_put_", lambda x: index_put(x, indices, values, accumulate))


def _masked_scatter_(self, mask, source):
    """masked_scatter written into this tensor (the mask broadcasts to its shape)."""
    if not isinstance(mask, Tensor) or tuple(broadcast_shapes(tuple(self.shape), tuple(
            mask.shape))) != tuple(self.shape):
        raise RuntimeError(f"masked_scatter_: the mask of shape {tuple(getattr(mask, 'shape', ()))}"
                           f" does not broadcast to the tensor's shape {tuple(self.shape)}")
    return _apply(self, "masked_scatter_", lambda x: masked_scatter(x, mask, source))


for _name, _fn in (("select_scatter", select_scatter), ("slice_scatter", slice_scatter),
                   ("diagonal_scatter", diagonal_scatter), ("index_put", index_put),
                   ("masked_scatter", masked_scatter), ("index_put_", _index_put_),
                   ("masked_scatter_", _masked_scatter_)):
    _method(_name, _fn)
