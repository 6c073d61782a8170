"""sinter.tensor(data): a new tensor from nested lists and tuples of Python numbers, from another
tensor, or from any array that speaks DLPack (NumPy, PyTorch), copying as torch.tensor does."""

from . import _C


def _walk(data, depth, state):
    """Appends data's numbers to state["values"], its dims to state["shape"]; every number must sit
    at the same depth (no ragged lists)."""
    shape, leaf = state["shape"], state["leaf_depth"]
    if isinstance(data, (list, tuple)):
        if leaf is not None and depth >= leaf:
            raise ValueError(f"expected a number at dim {depth}, got a sequence (ragged data)")
        if len(shape) == depth:
            shape.append(len(data))
        elif shape[depth] != len(data):
            raise ValueError(
                f"expected sequence of length {shape[depth]} at dim {depth} (got {len(data)})")
        for item in data:
            _walk(item, depth + 1, state)
        return
    if leaf is None:
        state["leaf_depth"] = depth
        if len(shape) > depth:
            raise ValueError(f"expected a sequence at dim {depth}, got {type(data).__name__}")
    elif depth != leaf:
        raise ValueError(f"expected a sequence at dim {depth}, got {type(data).__name__}")
    if isinstance(data, _C.Tensor) and data.dim() == 0:
        data = data.item()
    elif type(data).__module__ == "numpy" and getattr(data, "shape", None) == ():
        data = data.item()  # a NumPy scalar
    if isinstance(data, bool):
        state["kinds"].add("bool")
    elif isinstance(data, int):
        state["kinds"].add("int")
    elif isinstance(data, float):
        state["kinds"].add("float")
    else:
        raise TypeError(f"Could not infer dtype of {type(data).__name__}")
    state["values"].append(data)


def _from_array(data):
    """A copy of an array that speaks DLPack (a read-only NumPy array is copied first)."""
    try:
        return _C.from_dlpack(data).clone()
    except TypeError:
        import numpy

        return _C.from_dlpack(numpy.array(data, copy=True)).clone()


def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (dtype inferred as PyTorch infers it)."""
    if isinstance(data, _C.Tensor):
        out = data.detach().clone()
    elif hasattr(data, "__dlpack__") and getattr(data, "shape", None) != ():
        out = _from_array(data)
    else:
        state = {"shape": [], "values": [], "kinds": set(), "leaf_depth": None}
        _walk(data, 0, state)
        shape, values, kinds = state["shape"], state["values"], state["kinds"]
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
