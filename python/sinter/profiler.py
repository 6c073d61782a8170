"""sinter.profiler: the op profiler, as torch.profiler: ops (forward and backward) recorded with
their shapes, host and device times and allocations while a `profile` block runs, a table of
them, a Chrome trace (chrome://tracing, Perfetto), schedules that record a window of steps, and
named ranges.

    with sinter.profiler.profile() as prof:
        train_step()
    print(prof.key_averages().table())
    prof.export_chrome_trace("trace.json")
"""

import functools
import os

from . import _C

Event = _C.profiler.Event


class ProfilerActivity:
    """Taken for torch's callers: ops on the CPU and CUDA devices are both recorded."""
    CPU = "cpu"
    CUDA = "cuda"


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """Which steps to record (profile.step() ends one): skip_first steps, then `repeat` cycles
    (0: no end) of `wait` steps not recorded, `warmup` recorded and dropped, `active` recorded."""
    return (skip_first, wait, warmup, active, repeat)


def _write_atomically(path, text):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class _Averages:
    """The per-op table (calls, total and self host time, device time, memory)."""

    def __init__(self, text):
        self._text = text

    def table(self, sort_by=None, row_limit=None, **kwargs):
        del sort_by, row_limit, kwargs  # the table comes sorted by total time, whole
        return self._text

    def __str__(self):
        return self._text


class _Recorded:
    """What was recorded: events(), key_averages().table(), export_chrome_trace(path)."""

    def __init__(self, result):
        self._result = result

    def _done(self):
        return self._result

    def events(self):
        return list(self._done().events)

    def key_averages(self):
        return _Averages(self._done().table)

    def export_chrome_trace(self, path):
        _write_atomically(path, self._done().trace)

    @property
    def peak_saved_bytes(self):
        """The most bytes saved for backward at once (parameters not counted)."""
        return self._done().peak_saved_bytes


class profile(_Recorded):
    """Records the ops run inside the with-block (or, with a schedule, the active steps of each
    cycle, handed to on_trace_ready as they end). The results stay readable after the block."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes=True,
                 profile_memory=True, with_stack=False, **kwargs):
        del activities, record_shapes, profile_memory, with_stack, kwargs
        callback = None
        if on_trace_ready is not None:
            def callback(result):
                on_trace_ready(_Recorded(result))
        super().__init__(None)
        self._impl = _C.profiler._Profiler(list(schedule) if schedule else None, callback)

    def __enter__(self):
        self._impl.start()
        return self

    def __exit__(self, *exc):
        self._result = self._impl.stop()
        return False

    def step(self):
        """Ends a step of the schedule."""
        self._impl.step()

    def _done(self):
        if self._result is None:
            raise RuntimeError("profiler: the results are read after the with-block ends")
        return self._result


def tensorboard_trace_handler(dir_name, worker_name=None):
    """An on_trace_ready that writes each cycle's trace to dir_name/<worker>.<n>.pt.trace.json,
    where TensorBoard's profiler plugin finds it."""
    worker = worker_name or f"{os.uname().nodename}_{os.getpid()}"
    count = [0]

    def handler(recorded):
        os.makedirs(dir_name, exist_ok=True)
        count[0] += 1
        recorded.export_chrome_trace(os.path.join(dir_name,
                                                  f"{worker}.{count[0]}.pt.trace.json"))
    return handler


class record_function:
    """A named range of the program ("forward", "data"), recorded as an op while a profile runs
    (and an NVTX range); a context manager or a decorator."""

    def __init__(self, name):
        self._name = name
        self._range = None

    def __enter__(self):
        self._range = _C.profiler._Range(self._name)
        self._range.enter()
        return self

    def __exit__(self, *exc):
        self._range.exit()
        return False

    def __call__(self, fn):
        name = self._name

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            span = _C.profiler._Range(name)  # one per call: calls may nest or run on threads
            span.enter()
            try:
                return fn(*args, **kwargs)
            finally:
                span.exit()
        return wrapped
