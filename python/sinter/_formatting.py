"""Tensor printing as PyTorch prints: tensor([...]) with 4 digits, integer and scientific modes,
columns aligned, rows wrapped at 80 characters, the first and last 3 of each dim past 1000
elements, and the suffixes (device, dtype where not the default, requires_grad or grad_fn)."""

import math

_PRECISION = 4
_THRESHOLD = 1000
_EDGE = 3
_LINEWIDTH = 80


def _summarized(t, summarize):
    """t's values as nested lists, with only the edges of each dim when summarizing."""
    if t.dim() == 0:
        return t.item()
    n = t.shape[0]
    if summarize and n > 2 * _EDGE:
        idx = list(range(_EDGE)) + list(range(n - _EDGE, n))
    else:
        idx = range(n)
    if t.dim() == 1:
        return [t[i].item() for i in idx] if summarize else t.tolist()
    return [_summarized(t[i], summarize) for i in idx]


def _flat(values):
    if isinstance(values, list):
        for v in values:
            yield from _flat(v)
    else:
        yield values


class _Formatter:
    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = list(_flat(values))
        if not floating:
            for v in flat:
                self.width = max(self.width, len(str(v)))
            return
        finite = [v for v in flat if math.isfinite(v) and v != 0]
        if not finite:
            return
        lo = min(abs(v) for v in finite)
        hi = max(abs(v) for v in finite)
        self.int_mode = all(v == math.ceil(v) for v in finite)
        if self.int_mode:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8
            for v in finite:
                s = f"{v:.{_PRECISION}e}" if self.sci_mode else f"{v:.0f}"
                self.width = max(self.width, len(s) + (0 if self.sci_mode else 1))
        else:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
            for v in finite:
                s = f"{v:.{_PRECISION}e}" if self.sci_mode else f"{v:.{_PRECISION}f}"
                self.width = max(self.width, len(s))

    def format(self, v):
        if not self.floating:
            s = str(v)
        elif self.sci_mode:
            s = f"{v:{self.width}.{_PRECISION}e}"
        elif self.int_mode:
            s = f"{v:.0f}"
            if math.isfinite(v):
                s += "."
        else:
            s = f"{v:.{_PRECISION}f}"
        return " " * (self.width - len(s)) + s


def _vector(values, indent, summarize, fmt, n):
    per_line = max(1, int(math.floor((_LINEWIDTH - indent) / (fmt.width + 2))))
    if summarize and n > 2 * _EDGE:
        data = [fmt.format(v) for v in values[:_EDGE]] + [" ..."]
        data += [fmt.format(v) for v in values[-_EDGE:]]
    else:
        data = [fmt.format(v) for v in values]
    lines = [", ".join(data[i : i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values, shape, indent, summarize, fmt):
    if len(shape) == 0:
        return fmt.format(values)
    if len(shape) == 1:
        return _vector(values, indent, summarize, fmt, shape[0])
    n = shape[0]
    parts = [_nested(v, shape[1:], indent + 1, summarize, fmt) for v in values]
    if summarize and n > 2 * _EDGE:
        parts = parts[:_EDGE] + ["..."] + parts[-_EDGE:]
    joiner = "," + "\n" * (len(shape) - 1) + " " * (indent + 1)
    return "[" + joiner.join(parts) + "]"


def _add_suffixes(text, suffixes, indent):
    out = [text]
    last = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > _LINEWIDTH:
            out.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            out.append(", " + s)
            last += len(s) + 2
    out.append(")")
    return "".join(out)


def tensor_repr(t):
    from . import _C

    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    default = t.dtype in (_C.float32, _C.int64, _C.bool)
    if t.numel() == 0:
        if t.dim() != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype != _C.float32:
            suffixes.append(f"dtype={t.dtype!r}")
        body = "[]"
    else:
        if not default:
            suffixes.append(f"dtype={t.dtype!r}")
        summarize = t.numel() > _THRESHOLD
        view = t.detach()
        if view.dtype in (_C.float16, _C.bfloat16):
            view = view.float()
        values = _summarized(view, summarize)
        fmt = _Formatter(values, t.is_floating_point())
        body = _nested(values, tuple(t.shape), indent, summarize, fmt)
    name = t._grad_fn_name()
    if name is not None:
        suffixes.append(f"grad_fn=<{name}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
