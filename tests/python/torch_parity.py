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
