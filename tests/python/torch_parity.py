"""What the tests that hold sinter against torch share: inputs drawn alike for either library,
and the comparison of a result with torch's."""

import math
import random

import pytest


def rand(lib, shape, seed, low=-2.0, high=2.0):
    """An f64 tensor of lib (sinter or torch) of this shape, uniform in [low, high]: the same
    values for either library from the same seed."""
    rng = random.Random(seed)
    values = [rng.uniform(low, high) for _ in range(math.prod(shape))]
    return lib.tensor(values, dtype=lib.float64).reshape(tuple(shape))


class G:
    """A differentiable f64 input of this shape, uniform in [low, high]."""

    def __init__(self, shape, low=-2.0, high=2.0):
        self.shape, self.low, self.high = shape, low, high

    def make(self, lib, seed):
        return rand(lib, self.shape, seed, self.low, self.high).requires_grad_(True)


class C:
    """A constant input (a target), fn(lib) for either library."""

    def __init__(self, fn):
        self.fn = fn

    def make(self, lib, seed):
        return self.fn(lib)


def assert_same(got, want, what="", rel=1e-9):
    """got (sinter's) has want's (torch's) shape and values: integers equal, floats within rel
    (and rel * 1e-3 absolute), NaN exactly where torch has NaN."""
    assert tuple(got.shape) == tuple(want.shape), what
    g, w = got.detach().flatten().tolist(), want.detach().flatten().tolist()
    if want.is_floating_point():
        assert g == pytest.approx(w, rel=rel, abs=rel * 1e-3, nan_ok=True), what
    else:
        assert g == w, what


def assert_functional_as_torch(torch, fn, name, rel):
    """fn(lib, F, x) on one differentiable (4, 6) f64 input gives torch's output and, where torch's
    output has a graph, torch's input gradient (none, or zeros, where torch gives none)."""
    import sinter
    import sinter.nn.functional as F
    import torch.nn.functional as TF
    x, tx = rand(sinter, (4, 6), 5).requires_grad_(True), rand(torch, (4, 6), 5)
    tx.requires_grad_(True)
    got, want = fn(sinter, F, x), fn(torch, TF, tx)
    assert_same(got, want, name, rel)
    if not want.requires_grad:
        return
    got.backward(rand(sinter, tuple(want.shape), 6))
    want.backward(rand(torch, tuple(want.shape), 6))
    if tx.grad is None:
        assert x.grad is None or x.grad.abs().sum().item() == 0
    else:
        assert_same(x.grad, tx.grad, name + " gradient", rel)


def assert_error_as_torch(torch, fn, kind, message):
    """fn(lib) raises `kind` in torch, and in sinter with a message matching `message`."""
    import sinter
    with pytest.raises(kind):
        fn(torch)
    with pytest.raises(kind, match=message):
        fn(sinter)
