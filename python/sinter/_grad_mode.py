"""no_grad, enable_grad, set_grad_enabled and inference_mode: context managers and decorators, as
PyTorch's."""

import functools

from . import _C


class _GradModeContext:
    """A context manager that is also a decorator (each call of the function runs inside it):
    @no_grad() and, as PyTorch allows, @no_grad without the parentheses."""

    def __new__(cls, *args, **kwargs):
        if cls._bare_decorator and len(args) == 1 and callable(args[0]) and not kwargs:
            return cls()(args[0])
        return super().__new__(cls)

    _bare_decorator = True

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self.__class__(*self._args):
                return fn(*args, **kwargs)

        return wrapped


class _GradModeBlock(_GradModeContext):
    """Grad mode set to `_mode` inside the block, and back to what it was after."""

    _args = ()

    def __enter__(self):
        self._prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self._mode)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False


class no_grad(_GradModeBlock):
    """Ops inside record no graph (as torch.no_grad)."""

    _mode = False


class enable_grad(_GradModeBlock):
    """Ops inside record the graph, even within no_grad (as torch.enable_grad)."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """Sets grad mode now (as a call) or for a block (as a context manager), as PyTorch's; as a
    decorator it sets the mode for each call of the function only."""

    _bare_decorator = False

    def __init__(self, mode):
        self._args = (mode,)
        self._prev = _C.is_grad_enabled()
        _C._set_grad_enabled(mode)

    def __call__(self, fn):
        _C._set_grad_enabled(self._prev)
        return super().__call__(fn)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False


class inference_mode(_GradModeContext):
    """No graph and no version counts for the tensors made inside (as torch.inference_mode)."""

    def __init__(self, mode=True):
        self._args = (mode,)
        self._guard = _C._InferenceGuard(mode)

    def __enter__(self):
        self._guard.enter()

    def __exit__(self, *exc):
        self._guard.exit()
        return False
