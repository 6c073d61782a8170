"""A context manager, and decorator, over a C++ guard that the extension enters and exits:
sinter.amp.autocast and sinter.fp8.autocast."""

import functools


class GuardContext:
    """Subclasses set self._guard (with enter() and exit()) and define _fresh(), a new context
    of the same arguments for each decorated call."""

    def __enter__(self):
        self._guard.enter()
        return self

    def __exit__(self, *exc):
        self._guard.exit()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self._fresh():
                return fn(*args, **kwargs)

        return wrapped
