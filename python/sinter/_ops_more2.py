"""torch's package functions on dtypes, the *_like factories, and the shape and linear algebra
functions (stacking, splitting, indexing, tensordot, addmv, ...), composed over sinter's ops with
torch's signatures, type promotion and errors. _ops_more.py re-exports them."""

import itertools
import math

from . import _C
from .nn.functional import _broadcast_shape

Tensor = _C.Tensor

__all__ = [
    "addbmm", "addmv", "atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "can_cast",
    "cartesian_prod", "chain_matmul", "column_stack", "combinations", "dsplit", "dstack",
    "full_like", "hsplit", "hstack", "is_complex", "is_floating_point", "is_tensor", "mvlgamma",
    "promote_types", "rand_like", "randint_like", "randn_like", "result_type", "rot90",
    "row_stack", "take", "take_along_dim", "tensor_split", "tensordot", "tril_indices",
    "triu_indices", "vsplit", "vstack",
]


# --- dtypes: torch's promotion lattice over sinter's dtypes ---

# Note [promotion order]
# bool < uint8 < int32 < int64 < (float16, bfloat16) < float32 < float64; float16 with bfloat16
# gives float32, and a float8 promotes with nothing but itself.
_ORDER = (_C.bool, _C.uint8, _C.int32, _C.int64, _C.float16, _C.bfloat16, _C.float32,
          _C.float64)
_FLOAT8 = (_C.float8_e4m3fn, _C.float8_e5m2)


def _rank(dtype):
    if dtype == _C.bfloat16:
        return _ORDER.index(_C.float16)
    return _ORDER.index(dtype)


def promote_types(type1, type2):
    """The smallest dtype both type1 and type2 convert to without losing their kind (torch's
    table, see Note [promotion order])."""
    if type1 == type2:
        return type1
    if type1 in _FLOAT8 or type2 in _FLOAT8:
        raise RuntimeError(f"promote_types: promotion of float8 types is not supported, "
                           f"attempted to promote {type1} and {type2}")
    if {type1, type2} == {_C.float16, _C.bfloat16}:
        return _C.float32
    return type1 if _rank(type1) > _rank(type2) else type2


def can_cast(from_, to):
    """Whether torch's in-place ops may write a from_ result into a to tensor: not floating into
    integral, not anything but bool into bool."""
    if from_.is_floating_point and not to.is_floating_point:
        return False
    return from_ == to or to != _C.bool


def _number_type(value, name):
    if isinstance(value, bool):
        return _C.bool
    if isinstance(value, int):
        return _C.int64
    if isinstance(value, float):
        return _C.float32
    raise TypeError(f"{name}: expected tensors or numbers (bool, int, float), got "
                    f"{type(value).__name__}")


def _combine(higher, lower):
    """A higher category's dtype beside a lower one's: the lower counts only where it is of a
    higher kind (a float beside integers, anything beside bool)."""
    if higher is None or lower is None:
        return lower if higher is None else higher
    if higher.is_floating_point:
        return higher
    if higher == _C.bool or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def _result_type(*operands, name="result_type"):
    """The dtype of an op on these tensors and numbers, as torch's result_type: tensors with
    dims rank first, then 0-d tensors, then numbers (a float number as float32, an int as
    int64)."""
    dims, zero_dims, numbers = None, None, None
    for x in operands:
        if isinstance(x, Tensor):
            if x.dim():
                dims = x.dtype if dims is None else promote_types(dims, x.dtype)
            else:
                zero_dims = x.dtype if zero_dims is None else promote_types(zero_dims, x.dtype)
        else:
            kind = _number_type(x, name)
            numbers = kind if numbers is None else promote_types(numbers, kind)
    return _combine(dims, _combine(zero_dims, numbers))


def result_type(tensor1, tensor2):
    """The dtype torch's arithmetic gives tensor1 and tensor2 (tensors or numbers)."""
    return _result_type(tensor1, tensor2)


def is_tensor(obj):
    """Whether obj is a sinter Tensor."""
    return isinstance(obj, Tensor)


def _no_generator(name, generator):
    if generator is not None:
        raise NotImplementedError(f"{name}: generator= is not supported; sinter draws from its "
                                  "default generator (seed it with sinter.manual_seed)")


def _tensor_arg(name, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return input


def is_floating_point(input):
    """Whether input's dtype is a floating one."""
    return _tensor_arg("is_floating_point", input).is_floating_point()


def is_complex(input):
    """False: sinter has no complex dtypes."""
    return _tensor_arg("is_complex", input).is_complex()


# --- factories like another tensor ---

def _check_layout(name, layout, memory_format=None):
    """torch's layout and memory_format, taken at their defaults alone (sinter's tensors are
    dense); torch's own constants (torch.strided, ...) are taken too."""
    for key, value, accepted in (("layout", layout, ("strided",)),
                                 ("memory_format", memory_format,
                                  ("preserve_format", "contiguous_format"))):
        if value is not None and str(value).rpartition(".")[2] not in accepted:
            raise NotImplementedError(f"{name}: {key}={value} is not supported (sinter's "
                                      f"tensors are dense and contiguous)")


def _like(name, input, dtype, device, layout, memory_format):
    """The dtype and device of a tensor like input."""
    _tensor_arg(name, input)
    _check_layout(name, layout, memory_format)
    return {"dtype": dtype if dtype is not None else input.dtype,
            "device": device if device is not None else input.device}


def _grad_dtype(name, dtype, requires_grad):
    if requires_grad and not dtype.is_floating_point:
        raise RuntimeError(f"{name}: only floating tensors can require grad, got dtype {dtype}")


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    """A tensor of input's shape filled with fill_value, in input's dtype and device unless
    given."""
    options = _like("full_like", input, dtype, device, layout, memory_format)
    _grad_dtype("full_like", options["dtype"], requires_grad)
    return _C.full(tuple(input.shape), fill_value, **options, requires_grad=requires_grad)


def _floating_like(name, make, input, dtype, device, requires_grad, layout, memory_format):
    options = _like(name, input, dtype, device, layout, memory_format)
    if not options["dtype"].is_floating_point:
        raise NotImplementedError(f"{name}: expected a floating dtype, got {options['dtype']}")
    return make(*input.shape, **options, requires_grad=requires_grad)


def rand_like(input, *, generator=None, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None):
    """Uniform in [0, 1), of input's shape, dtype (floating) and device unless given."""
    _no_generator("rand_like", generator)
    return _floating_like("rand_like", _C.rand, input, dtype, device, requires_grad, layout,
                          memory_format)


def randn_like(input, *, generator=None, dtype=None, layout=None, device=None,
               requires_grad=False, memory_format=None):
    """Standard normal, of input's shape, dtype (floating) and device unless given."""
    _no_generator("randn_like", generator)
    return _floating_like("randn_like", _C.randn, input, dtype, device, requires_grad, layout,
                          memory_format)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None,
                 device=None, requires_grad=False, memory_format=None):
    """Integers uniform in [low, high) of input's shape, dtype and device unless given;
    randint_like(input, high) draws from [0, high), as torch's."""
    _no_generator("randint_like", generator)
    if high is None:
        low, high = 0, low
    if low >= high:
        raise RuntimeError(f"randint_like: expected low < high, got low={low} >= high={high}")
    options = _like("randint_like", input, dtype, device, layout, memory_format)
    _grad_dtype("randint_like", options["dtype"], requires_grad)
    out = _C.randint(low, high, tuple(input.shape), **options)
    return out.requires_grad_(True) if requires_grad else out


# --- dims and shapes ---

def _wrap_dim(dim, ndim):
    """dim in [0, ndim) from torch's range [-ndim, ndim) (a 0-d tensor counts as 1-d)."""
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-size}, "
                         f"{size - 1}], but got {dim})")
    return dim % size


def _tensor_list(name, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): argument 'tensors' must be a tuple or list of Tensors, not "
                        f"{type(tensors).__name__}")
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


def _atleast(shape_of, tensors):
    """Each tensor reshaped by shape_of (itself where it has the dims already): one tensor for
    one tensor, else a tuple, as torch's atleast_*d."""
    def one(t):
        if not isinstance(t, Tensor):
            raise TypeError(f"atleast_*d: expected tensors, got {type(t).__name__}")
        shape = shape_of(tuple(t.shape))
        return t if shape is None else t.reshape(*shape)

    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return one(tensors[0])
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return tuple(one(t) for t in tensors)


def atleast_1d(*tensors):
    """Each tensor with at least one dim (a 0-d one as (1,))."""
    return _atleast(lambda s: (1,) if not s else None, tensors)


def atleast_2d(*tensors):
    """Each tensor with at least two dims: () as (1, 1), (n,) as (1, n)."""
    return _atleast(lambda s: (1,) * (2 - len(s)) + s if len(s) < 2 else None, tensors)


def atleast_3d(*tensors):
    """Each tensor with at least three dims: () as (1, 1, 1), (n,) as (1, n, 1), (m, n) as
    (m, n, 1)."""
    def shape_of(s):
        return {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s))

    return _atleast(shape_of, tensors)


def hstack(tensors):
    """The tensors joined along dim 1 (dim 0 where they are 1-d)."""
    tensors = atleast_1d(_tensor_list("hstack", tensors))
    return _C.cat(list(tensors), 0 if tensors[0].dim() == 1 else 1)


def vstack(tensors):
    """The tensors, made at least 2-d, joined along dim 0."""
    return _C.cat(list(atleast_2d(_tensor_list("vstack", tensors))), 0)


row_stack = vstack


def dstack(tensors):
    """The tensors, made at least 3-d, joined along dim 2."""
    return _C.cat(list(atleast_3d(_tensor_list("dstack", tensors))), 2)


def column_stack(tensors):
    """The tensors as columns: 0-d and 1-d ones as (n, 1), joined along dim 1."""
    tensors = _tensor_list("column_stack", tensors)
    return _C.cat([t.reshape(t.numel(), 1) if t.dim() <= 1 else t for t in tensors], 1)


# --- splitting ---

def _split_points(name, indices_or_sections, size):
    """The (start, length) of each piece: n sections of sizes that differ by at most one (the
    first ones larger), or the pieces between the indices (Python's slice bounds)."""
    sections = indices_or_sections
    if isinstance(sections, Tensor):
        if sections.dtype != _C.int64:
            raise RuntimeError(f"{name}: expected tensor_indices_or_sections to have dtype "
                               f"int64, got {sections.dtype}")
        if sections.dim() > 1:
            raise RuntimeError(f"{name}: expected tensor_indices_or_sections to be a 0-d or "
                               f"1-d tensor, got {sections.dim()} dims")
        sections = sections.item() if sections.dim() == 0 else sections.tolist()
    if isinstance(sections, int):
        if sections <= 0:
            raise RuntimeError(f"{name}: number of sections must be larger than 0, got "
                               f"{sections}")
        small, extra = divmod(size, sections)
        lengths = [small + 1] * extra + [small] * (sections - extra)
        return list(zip(itertools.accumulate([0] + lengths[:-1]), lengths))
    bounds = [0] + list(sections) + [size]
    pieces = [range(size)[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return [(p.start, len(p)) for p in pieces]


def tensor_split(input, indices_or_sections, dim=0):
    """Views of input along dim: indices_or_sections equal-as-possible sections (an int), or the
    pieces between the given indices."""
    if input.dim() == 0:
        raise RuntimeError("tensor_split: expected at least a 1-dimensional tensor, got a 0-d "
                           "tensor")
    dim = _wrap_dim(dim, input.dim())
    points = _split_points("tensor_split", indices_or_sections, input.shape[dim])
    return tuple(input.narrow(dim, start, length) for start, length in points)


def _split_by(name, input, indices_or_sections, dim, min_dims):
    if input.dim() < min_dims:
        raise RuntimeError(f"{name}: requires a tensor with at least {min_dims} dims, got "
                           f"{input.dim()}")
    size = input.shape[dim]
    if isinstance(indices_or_sections, int) and indices_or_sections > 0 and \
            size % indices_or_sections:
        raise RuntimeError(f"{name}: the size {size} of dim {dim} is not divisible by the "
                           f"number of sections {indices_or_sections}")
    return tensor_split(input, indices_or_sections, dim)


def hsplit(input, indices_or_sections):
    """tensor_split along dim 1 (dim 0 of a 1-d tensor), into equal sections for an int."""
    dim = 1 if input.dim() > 1 else 0
    return _split_by("hsplit", input, indices_or_sections, dim, 1)


def vsplit(input, indices_or_sections):
    """tensor_split along dim 0 of a tensor of 2 or more dims, into equal sections for an
    int."""
    return _split_by("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    """tensor_split along dim 2 of a tensor of 3 or more dims, into equal sections for an
    int."""
    return _split_by("dsplit", input, indices_or_sections, 2, 3)


# --- indexing ---

def _long_indices(name, indices):
    if indices.dtype != _C.int64:
        raise RuntimeError(f"{name}: expected indices of dtype int64, got {indices.dtype}")


def take_along_dim(input, indices, dim=None):
    """input's values at indices along dim, the other dims broadcast (indices into the flattened
    input without dim)."""
    _long_indices("take_along_dim", indices)
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.dim() != indices.dim():
        raise RuntimeError(f"take_along_dim: input and indices should have the same number of "
                           f"dims, got {input.dim()} and {indices.dim()}")
    dim = _wrap_dim(dim, input.dim())
    wanted = list(input.shape)
    wanted[dim] = indices.shape[dim]
    shape = list(_broadcast_shape(wanted, indices.shape))
    indices = indices.expand(*shape)
    shape[dim] = input.shape[dim]
    return input.expand(*shape).gather(dim, indices)


def take(input, index):
    """The elements of the flattened input at index (negative ones count from the end), in
    index's shape."""
    _long_indices("take", index)
    n = input.numel()
    outside = (index >= n) | (index < -n)
    if bool(outside.any()):
        bad = index.masked_select(outside)[0].item()
        raise IndexError(f"take: index {bad} is out of range for a tensor of {n} elements")
    index = _C.where(index < 0, index + n, index)
    return input.reshape(-1).gather(0, index.reshape(-1)).reshape(*index.shape)


def rot90(input, k=1, dims=(0, 1)):
    """input rotated by k quarter turns in the plane of dims, from the first dim towards the
    second."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"rot90: expected 2 rotation dims, got dims = {dims}")
    if input.dim() < 2:
        raise RuntimeError(f"rot90: expected a tensor of at least 2 dims, got {input.dim()}")
    d0, d1 = (_wrap_dim(d, input.dim()) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"rot90: expected different rotation dims, got dims = {dims}")
    k %= 4
    if k == 0:
        return input.clone()
    if k == 2:
        return input.flip([d0, d1])
    return input.flip([d1 if k == 1 else d0]).transpose(d0, d1)


def _tri_indices(name, keep, row, col, dtype, device, layout):
    if row < 0 or col < 0:
        raise RuntimeError(f"{name}: row and col must be non-negative, got {row} and {col}")
    if dtype not in (_C.int64, _C.int32):
        raise NotImplementedError(f"{name}: dtype must be int64 or int32, got {dtype}")
    _check_layout(name, layout)
    rows = _C.arange(row, device=device).unsqueeze(1)
    cols = _C.arange(col, device=device).unsqueeze(0)
    return _C.nonzero(keep(cols - rows)).t().contiguous().to(dtype)


def tril_indices(row, col, offset=0, *, dtype=_C.int64, device="cpu", layout=None):
    """The (2, N) coordinates of a row x col matrix's lower triangle (with the diagonal moved up
    by offset), row by row."""
    return _tri_indices("tril_indices", lambda d: d <= offset, row, col, dtype, device, layout)


def triu_indices(row, col, offset=0, *, dtype=_C.int64, device="cpu", layout=None):
    """The (2, N) coordinates of a row x col matrix's upper triangle (from the diagonal moved up
    by offset), row by row."""
    return _tri_indices("triu_indices", lambda d: d >= offset, row, col, dtype, device, layout)


def _vectors(name, tensors):
    for i, t in enumerate(tensors):
        if t.dim() != 1:
            raise RuntimeError(f"{name}: expected 1-d tensors, got shape {tuple(t.shape)} at "
                               f"position {i}")


def cartesian_prod(*tensors):
    """Every tuple of one element of each 1-d tensor, as the rows of an (N, len(tensors)) tensor
    (in order, the last tensor varying fastest); one tensor is returned as it is."""
    if not tensors:
        raise RuntimeError("cartesian_prod: expected at least one tensor")
    _vectors("cartesian_prod", tensors)
    if any(t.dtype != tensors[0].dtype for t in tensors):
        raise RuntimeError(f"cartesian_prod: expected tensors of one dtype, got "
                           f"{', '.join(str(t.dtype) for t in tensors)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = _C.meshgrid(*tensors, indexing="ij")
    return _C.stack([g.reshape(-1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The r-element combinations of a 1-d tensor's elements (with repeats if with_replacement),
    as the rows of an (N, r) tensor, in lexicographic order of positions."""
    _vectors("combinations", (input,))
    if r < 0:
        raise RuntimeError(f"combinations: r must be non-negative, got {r}")
    if r == 0:
        return input.new_empty(0)
    positions = _C.arange(input.shape[0], device=input.device)
    grids = _C.meshgrid(*([positions] * r), indexing="ij")
    keep = _C.ones(*grids[0].shape, dtype=_C.bool, device=input.device)
    for lo, hi in zip(grids[:-1], grids[1:]):
        keep = keep & (lo <= hi if with_replacement else lo < hi)
    index = _C.stack([g.masked_select(keep) for g in grids], 1)
    return input.index_select(0, index.reshape(-1)).reshape(-1, r)


def block_diag(*tensors):
    """The tensors (0-d as 1x1, 1-d as one row) along the diagonal of one matrix, zeros
    elsewhere, in the tensors' promoted dtype."""
    if not tensors:
        return _C.empty(1, 0)
    blocks = []
    for i, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError(f"block_diag: input tensors must have 2 or fewer dims, input {i} "
                               f"has {t.dim()}")
        blocks.append(t.reshape(1, -1) if t.dim() == 1 else t.reshape(1, 1) if t.dim() == 0
                      else t)
    dtype = _result_type(*tensors, name="block_diag")
    device = tensors[0].device
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        height, cols = b.shape
        right = width - left - cols
        rows.append(_C.cat([_C.zeros(height, left, dtype=dtype, device=device), b.to(dtype),
                            _C.zeros(height, right, dtype=dtype, device=device)], 1))
        left += cols
    return _C.cat(rows, 0)


# --- products ---

def _contracted_dims(a, b, dims):
    """tensordot's dims as two lists of wrapped dims: an int n contracts a's last n dims with
    b's first n."""
    if isinstance(dims, Tensor):
        dims = dims.item() if dims.dim() == 0 else dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot: expected dims >= 0, got dims={dims}")
        if dims > a.dim() or dims > b.dim():
            raise RuntimeError(f"tensordot: expected dims <= the dims of a ({a.dim()}) and b "
                               f"({b.dim()}), got dims={dims}")
        return list(range(a.dim() - dims, a.dim())), list(range(dims))
    dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise RuntimeError(f"tensordot: both dim lists should have the same length, got "
                           f"{dims_a} and {dims_b}")
    dims_a = [_wrap_dim(d, a.dim()) for d in dims_a]
    dims_b = [_wrap_dim(d, b.dim()) for d in dims_b]
    for name, ds in (("a", dims_a), ("b", dims_b)):
        if len(set(ds)) != len(ds):
            raise RuntimeError(f"tensordot: a dim of {name} appears twice in {ds}")
    return dims_a, dims_b


def tensordot(a, b, dims=2, out=None):
    """The sum over the contracted dims (dims: a count of a's last and b's first dims, or two
    lists) of a times b; a's free dims then b's make the shape."""
    if out is not None:
        raise NotImplementedError("tensordot: out= is not supported; assign the result instead")
    if a.dtype != b.dtype:
        raise RuntimeError(f"tensordot: both inputs should have the same dtype, got {a.dtype} "
                           f"and {b.dtype}")
    dims_a, dims_b = _contracted_dims(a, b, dims)
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"tensordot: contracted dims need to match, but a has size "
                               f"{a.shape[da]} in dim {da} and b has size {b.shape[db]} in dim "
                               f"{db}")
    free_a = [d for d in range(a.dim()) if d not in dims_a]
    free_b = [d for d in range(b.dim()) if d not in dims_b]
    inner = math.prod(a.shape[d] for d in dims_a)
    shape = [a.shape[d] for d in free_a] + [b.shape[d] for d in free_b]
    rows = math.prod(a.shape[d] for d in free_a)
    cols = math.prod(b.shape[d] for d in free_b)
    left = a.permute(*free_a, *dims_a).reshape(rows, inner)
    right = b.permute(*dims_b, *free_b).reshape(inner, cols)
    if a.is_floating_point():
        product = left.mm(right)
    else:  # sinter's mm is floating only: an exact integer sum of products, in a's dtype
        product = (left.unsqueeze(2) * right.unsqueeze(0)).sum(1).to(a.dtype)
    return product.reshape(*shape)


def _same_dtype(name, *tensors):
    if any(t.dtype != tensors[0].dtype for t in tensors):
        raise RuntimeError(f"{name}: input tensors must have the same dtype, got "
                           f"{', '.join(str(t.dtype) for t in tensors)}")


def _broadcasts_to(shape, target):
    """Whether a tensor of shape broadcasts to target without growing it."""
    shape, target = tuple(shape), tuple(target)
    return len(shape) <= len(target) and all(
        s in (1, t) for s, t in zip(shape[::-1], target[::-1]))


def _scaled_sum(input, product, beta, alpha):
    """beta * input + alpha * product (input broadcasts to product), input's values ignored when
    beta is 0 (torch's addmm-family rule, so NaN in input does not show)."""
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        return product
    return (input if beta == 1 else input * beta) + product


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    _same_dtype("addmv", input, mat, vec)
    if mat.dim() != 2 or vec.dim() != 1 or mat.shape[1] != vec.shape[0] or \
            not _broadcasts_to(input.shape, mat.shape[:1]):
        raise RuntimeError(f"addmv: size mismatch, got input {tuple(input.shape)}, mat "
                           f"{tuple(mat.shape)}, vec {tuple(vec.shape)}")
    return _scaled_sum(input, mat.mv(vec), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]."""
    _same_dtype("addbmm", input, batch1, batch2)
    if batch1.dim() != 3 or batch2.dim() != 3:
        raise RuntimeError(f"addbmm: batch1 and batch2 must be 3-d, got {batch1.dim()} and "
                           f"{batch2.dim()} dims")
    if batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"addbmm: batch1 {tuple(batch1.shape)} and batch2 "
                           f"{tuple(batch2.shape)} do not match")
    shape = (batch1.shape[1], batch2.shape[2])
    if not _broadcasts_to(input.shape, shape):
        raise RuntimeError(f"addbmm: input {tuple(input.shape)} does not broadcast to {shape}")
    return _scaled_sum(input, batch1.bmm(batch2).sum(0), beta, alpha)


def chain_matmul(*matrices, out=None):
    """The product of the 2-d matrices, left to right (torch's deprecated form of
    linalg.multi_dot)."""
    if out is not None:
        raise NotImplementedError("chain_matmul: out= is not supported; assign the result "
                                  "instead")
    if not matrices:
        raise RuntimeError("chain_matmul: expected one or more matrices")
    for i, m in enumerate(matrices):
        if m.dim() != 2:
            raise RuntimeError(f"chain_matmul: expected 2-d tensors, got {m.dim()} dims at "
                               f"position {i}")
    product = matrices[0]
    for m in matrices[1:]:
        product = product.mm(m)
    return product.clone() if len(matrices) == 1 else product


def mvlgamma(input, p):
    """The log of the multivariate gamma function of dimension p, elementwise: the sum of
    lgamma(input - i / 2) over i < p, plus p (p - 1) / 4 log(pi), as torch's (inf at and below
    (p - 1) / 2's poles, as there)."""
    _tensor_arg("mvlgamma", input)
    if p < 1:
        raise RuntimeError(f"p has to be greater than or equal to 1, got {p}")
    x = input if input.is_floating_point() else input.to(_C.float32)
    out = sum((x - i / 2).lgamma() for i in range(p))
    return out + p * (p - 1) / 4 * math.log(math.pi)


def _method(name, fn):
    """fn as a Tensor method, where sinter's Tensor does not have it yet."""
    if not hasattr(Tensor, name):
        setattr(Tensor, name, fn)


for _name, _fn in (("tensor_split", tensor_split), ("hsplit", hsplit), ("vsplit", vsplit),
                   ("dsplit", dsplit), ("take_along_dim", take_along_dim), ("take", take),
                   ("rot90", rot90), ("addmv", addmv), ("addbmm", addbmm),
                   ("mvlgamma", mvlgamma)):
    _method(_name, _fn)
