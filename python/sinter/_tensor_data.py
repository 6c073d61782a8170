"""sinter.tensor(data): a new tensor from nested lists and tuples of Python numbers, from another
tensor, or from any array that speaks DLPack (NumPy, PyTorch), copying as torch.tensor does."""

from . import _C


def _walk(data, depth, shape, values, kinds):
    if isinstance(data, (list, tuple)):
        if len(shape) == depth:
            shape.append(len(data))
        elif shape[depth] != len(data):
            raise ValueError(
                f"expected sequence of length {shape[depth]} at dim {depth} (got {len(data)})")
        for item in data:
            _walk(item, depth + 1, shape, values, kinds)
        return
    if len(shape) != depth:
        raise ValueError(f"expected a sequence at dim {depth}, got {type(data).__name__}")
    if isinstance(data, _C.Tensor) and data.dim() == 0:
        data = data.item()
    if isinstance(data, bool):
        kinds.add("bool")
    elif isinstance(data, int):
        kinds.add("int")
    elif isinstance(data, float):
        kinds.add("float")
    else:
        raise TypeError(f"Could not infer dtype of {type(data).__name__}")
    values.append(data)


def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (dtype inferred as PyTorch infers it)."""
    if isinstance(data, _C.Tensor):
        out = data.detach().clone()
    elif hasattr(data, "__dlpack__") and not isinstance(data, (list, tuple)):
        out = _C.from_dlpack(data).clone()
    else:
        shape, values, kinds = [], [], set()
        _walk(data, 0, shape, values, kinds)
        if "float" in kinds or not kinds or (dtype is not None and dtype.is_floating_point):
            out = _C._from_flat([float(v) for v in values], [], shape, dtype or _C.float32)
        else:
            inferred = _C.int64 if "int" in kinds else _C.bool
            out = _C._from_flat([], [int(v) for v in values], shape, dtype or inferred)
    if dtype is not None:
        out = out.to(dtype)
    if device is not None:
        out = out.to(device)
    if requires_grad:
        out.requires_grad_(True)
    return out
