"""sinter.autograd: backward over several roots, Functions with forward and backward written in
Python (as torch.autograd.Function), and gradcheck."""

from . import _C
from ._grad_mode import no_grad


def backward(tensors, grad_tensors=None, retain_graph=False):
    """Runs backward from each tensor, seeded with grad_tensors (None: 1 for a scalar)."""
    if isinstance(tensors, _C.Tensor):
        tensors = [tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, _C.Tensor):
        grad_tensors = [grad_tensors]
    _C._backward(list(tensors), list(grad_tensors), retain_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """The gradients of outputs with respect to inputs, as torch.autograd.grad: a tuple, one per
    input; nothing is accumulated into .grad, and only the graph between them runs. An input the
    outputs do not use is an error unless allow_unused (None) or materialize_grads (zeros).
    create_graph (second derivatives) is not supported."""
    if create_graph:
        raise NotImplementedError("sinter.autograd.grad: create_graph=True (a graph of the "
                                  "gradients, for second derivatives) is not supported")
    outputs = [outputs] if isinstance(outputs, _C.Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, _C.Tensor) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, _C.Tensor):
        grad_outputs = [grad_outputs]
    if allow_unused is False and materialize_grads:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    got = _C._grad(outputs, inputs, list(grad_outputs), bool(retain_graph),
                   bool(allow_unused or materialize_grads))
    if materialize_grads:
        got = [g if g is not None else _C.zeros_like(x) for g, x in zip(got, inputs)]
    return tuple(got)


class FunctionCtx:
    """What forward leaves for backward: save_for_backward's tensors, needs_input_grad, and any
    other attribute (tensors are best saved with save_for_backward, which keeps no graph alive)."""

    def save_for_backward(self, *tensors):
        # Detached handles share the tensor's memory and version count, not its graph; the
        # version taken now finds an in-place change made before backward.
        self._saved = tuple((t.detach(), t._version) if isinstance(t, _C.Tensor) else (t, None)
                            for t in tensors)

    @property
    def saved_tensors(self):
        out = []
        for t, version in getattr(self, "_saved", ()):
            if version is not None and t._version != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by "
                    f"an inplace operation: it is at version {t._version}, saved at {version}")
            out.append(t)
        return tuple(out)


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
        with no_grad():
            result = cls.forward(ctx, *args)
        outputs = result if isinstance(result, tuple) else (result,)
        if prev and any(ctx.needs_input_grad):
            # A returned input is a new handle on it, so that the node's outputs are its own.
            outputs = tuple(o.detach() if any(o is a for a in inputs) else o for o in outputs)
            n_args = len(args)
            # Floating tensor outputs get the node; backward gets one gradient per output,
            # zeros where none flowed and None for the others (as PyTorch materializes them).
            slots = [i for i, o in enumerate(outputs)
                     if isinstance(o, _C.Tensor) and o.is_floating_point()]
            # The outputs' shapes, not the outputs: they hold the node, which holds this
            # function, a cycle through C++ that Python's collector cannot see.
            like = {i: (tuple(outputs[i].shape), outputs[i].dtype, outputs[i].device)
                    for i in slots}
            n_outputs = len(outputs)

            def run_backward(grads):
                full = [None] * n_outputs
                for i, g in zip(slots, grads):
                    shape, dtype, device = like[i]
                    full[i] = g if g is not None else _C.zeros(shape, dtype=dtype, device=device)
                got = cls.backward(ctx, *full)
                got = got if isinstance(got, tuple) else (got,)
                if len(got) != n_args:
                    raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect "
                                       f"number of gradients (expected {n_args}, got {len(got)})")
                return [got[i] for i in positions]

            _C._record_function(cls.__name__ + "Backward", [outputs[i] for i in slots], inputs,
                                run_backward)
        return outputs if isinstance(result, tuple) else outputs[0]


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Checks fn's analytic gradients against central differences, as torch.autograd.gradcheck:
    the f64 tensor inputs with requires_grad are checked (numbers pass through); the differences
    are taken on copies, so the graph of the analytic pass stays valid, and no .grad is touched.
    Raises on a mismatch."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    checked = [i for i, x in enumerate(inputs) if isinstance(x, _C.Tensor) and x.requires_grad]
    out = fn(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    for k, o in enumerate(outs):
        for j in range(o.numel()):
            seed = _C.zeros(o.numel(), dtype=o.dtype)
            seed[j] = 1.0
            grads = grad(o, [inputs[i] for i in checked], seed.reshape(*o.shape),
                         retain_graph=True, materialize_grads=True) if o.requires_grad else \
                [_C.zeros_like(inputs[i]) for i in checked]
            for i, g in zip(checked, grads):
                x = inputs[i]
                analytic = g.flatten().tolist()
                for e in range(x.numel()):
                    numeric = _central_difference(fn, inputs, i, e, k, j, eps)
                    if abs(analytic[e] - numeric) > atol + rtol * abs(numeric):
                        raise RuntimeError(
                            f"gradcheck: Jacobian mismatch for output {k} element {j} with "
                            f"respect to input {i} element {e}: numerical {numeric}, analytical "
                            f"{analytic[e]}")
    return True


def _central_difference(fn, inputs, i, e, k, j, eps):
    """d output[k][j] / d inputs[i][e], from copies of the inputs."""
    values = []
    for step in (eps, -eps):
        copies = [x.detach().clone() if isinstance(x, _C.Tensor) else x for x in inputs]
        flat = copies[i].view(-1)
        flat[e] = flat[e].item() + step
        with no_grad():
            out = fn(*copies)
        out = out[k] if isinstance(out, tuple) else out
        values.append(out.flatten()[j].item())
    return (values[0] - values[1]) / (2 * eps)
