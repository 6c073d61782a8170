"""sinter.save and sinter.load: any picklable object holding tensors (a state dict, an optimizer's,
a checkpoint dict with the epoch), as torch.save and torch.load. Tensors pickle as their bytes,
dtype, shape, device and requires_grad (a Parameter stays one); save writes atomically (a temporary
file, then a rename), so a run that dies mid-save leaves the previous file whole. For weights other
programs read, use sinter.safetensors."""

import io
import os
import pickle

from . import _C

_NUMPY_NAME = {"float32": "float32", "float64": "float64", "float16": "float16",
               "int64": "int64", "int32": "int32", "uint8": "uint8", "bool": "bool"}


def _rebuild(data, dtype_name, shape, requires_grad, device, parameter):
    import numpy as np
    from . import _tensor_data  # noqa: F401  (the package is loaded)
    stored = "float32" if dtype_name == "bfloat16" else dtype_name
    array = np.frombuffer(bytearray(data), dtype=_NUMPY_NAME[stored]).reshape(shape)
    t = _C.from_dlpack(array).clone().to(getattr(_C, dtype_name))
    if device != "cpu":
        t = t.to(device)
    if parameter:
        from .nn import Parameter
        return Parameter(t, requires_grad)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _reduce(self, protocol=2):
    del protocol
    dtype_name = str(self.dtype).split(".")[-1]
    host = self.detach().cpu().contiguous()
    if dtype_name == "bfloat16":
        host = host.float()  # every bfloat16 is a float32: the round trip is exact
    data = host.numpy().tobytes()
    device = "cpu" if not self.is_cuda else f"cuda:{self.device.index}"
    parameter = type(self).__name__ == "Parameter"
    return (_rebuild, (data, dtype_name, tuple(self.shape), self.requires_grad, device, parameter))


_C.Tensor.__reduce_ex__ = _reduce


def save(obj, f, pickle_protocol=2):
    """Pickles obj to f (a path, written atomically, or a binary file object)."""
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            with open(tmp, "wb") as out:
                pickle.dump(obj, out, protocol=pickle_protocol)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return
    pickle.dump(obj, f, protocol=pickle_protocol)


def load(f, map_location=None, weights_only=None):
    """What save wrote; map_location "cpu" (or a device) puts every tensor there. weights_only is
    taken for torch's callers (load only files you trust: this is pickle)."""
    del weights_only
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as src:
            obj = pickle.load(src)
    else:
        obj = pickle.load(f if not isinstance(f, bytes) else io.BytesIO(f))
    if map_location is not None:
        obj = _move(obj, map_location)
    return obj


def _move(obj, device):
    if isinstance(obj, _C.Tensor):
        moved = obj.to(device)
        if type(obj) is not _C.Tensor and type(moved) is not type(obj):
            moved = type(obj)(moved, obj.requires_grad)  # a Parameter stays one
        return moved
    if isinstance(obj, dict):
        return type(obj)((k, _move(v, device)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move(v, device) for v in obj)
    return obj
