"""sinter.autograd: backward over several roots, Functions with forward and backward written in
Python (as torch.autograd.Function), and gradcheck."""

from . import _C


def backward(tensors, grad_tensors=None, retain_graph=False):
    """Runs backward from each tensor, seeded with grad_tensors (None: 1 for a scalar)."""
    if isinstance(tensors, _C.Tensor):
        tensors = [tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, _C.Tensor):
        grad_tensors = [grad_tensors]
    _C._backward(list(tensors), list(grad_tensors), retain_graph)


class FunctionCtx:
    """What forward leaves for backward: save_for_backward's tensors, needs_input_grad, and any
    other attribute (tensors are best saved with save_for_backward, which keeps no graph alive)."""

    def save_for_backward(self, *tensors):
        self._saved = tuple(t.detach() if isinstance(t, _C.Tensor) else t for t in tensors)

    @property
    def saved_tensors(self):
        return getattr(self, "_saved", ())


class Function:
    """Subclass with @staticmethod forward(ctx, *args) and backward(ctx, *grad_outputs), and call
    apply(*args): forward runs without a graph; backward returns one gradient (or None) per
    argument of forward."""

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward(ctx, ...)")

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx()
        positions = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
        inputs = [args[i] for i in positions]
        ctx.needs_input_grad = tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)
        try:
            result = cls.forward(ctx, *args)
        finally:
            _C._set_grad_enabled(prev)
        outputs = result if isinstance(result, tuple) else (result,)
        if prev and any(ctx.needs_input_grad):
            # A returned input is a new handle on it, so that the node's outputs are its own.
            outputs = tuple(o.detach() if any(o is a for a in inputs) else o for o in outputs)
            n_args = len(args)

            def run_backward(grads):
                got = cls.backward(ctx, *grads)
                got = got if isinstance(got, tuple) else (got,)
                if len(got) != n_args:
                    raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect "
                                       f"number of gradients (expected {n_args}, got {len(got)})")
                return [got[i] for i in positions]

            tensors = [o for o in outputs if isinstance(o, _C.Tensor)]
            _C._record_function(cls.__name__ + "Backward", tensors, inputs, run_backward)
        return outputs if isinstance(result, tuple) else outputs[0]


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Checks fn's analytic gradients against central differences, as torch.autograd.gradcheck:
    inputs are f64 tensors (those with requires_grad are checked); raises on a mismatch."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    out = fn(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    for k, o in enumerate(outs):
        for j in range(o.numel()):
            for x in inputs:
                x.grad = None
            seed = _C.zeros(o.numel(), dtype=o.dtype)
            seed[j] = 1.0
            o.backward(seed.reshape(*o.shape) if o.dim() else seed.reshape(), retain_graph=True)
            for i, x in enumerate(inputs):
                if not isinstance(x, _C.Tensor) or not x.requires_grad:
                    continue
                analytic = x.grad.flatten().tolist() if x.grad is not None else [0.0] * x.numel()
                flat = x.detach().view(-1)
                for e in range(x.numel()):
                    orig = flat[e].item()
                    flat[e] = orig + eps
                    plus = _value(fn, inputs, k, j)
                    flat[e] = orig - eps
                    minus = _value(fn, inputs, k, j)
                    flat[e] = orig
                    numeric = (plus - minus) / (2 * eps)
                    if abs(analytic[e] - numeric) > atol + rtol * abs(numeric):
                        raise RuntimeError(
                            f"gradcheck: Jacobian mismatch for output {k} element {j} with "
                            f"respect to input {i} element {e}: numerical {numeric}, analytical "
                            f"{analytic[e]}")
    return True


def _value(fn, inputs, k, j):
    prev = _C.is_grad_enabled()
    _C._set_grad_enabled(False)
    try:
        out = fn(*inputs)
    finally:
        _C._set_grad_enabled(prev)
    out = out[k] if isinstance(out, tuple) else out
    return out.flatten()[j].item()
