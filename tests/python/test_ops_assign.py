"""torch's out-of-place assignments (select_scatter, slice_scatter, diagonal_scatter, index_put,
masked_scatter), their in-place methods and broadcast_tensors, against torch on f64 values and
gradients, and their errors."""

import pytest

import sinter
from torch_parity import assert_error_as_torch, assert_same, rand

CASES = {
    "select_scatter": ((4, 5), (5,), lambda L, a, b: L.select_scatter(a, b, 0, -2)),
    "select_scatter_dim1": ((4, 5), (4,), lambda L, a, b: a.select_scatter(b, 1, 3)),
    "slice_scatter": ((4, 6), (4, 2), lambda L, a, b: L.slice_scatter(a, b, 1, 1, 6, 3)),
    "slice_scatter_default": ((4, 6), (4, 6), lambda L, a, b: L.slice_scatter(a, b)),
    "diagonal_scatter": ((4, 5), (4,), lambda L, a, b: L.diagonal_scatter(a, b)),
    "diagonal_scatter_offset": ((4, 5), (3,), lambda L, a, b: L.diagonal_scatter(a, b, -1)),
    "index_put": ((4, 5), (3,), lambda L, a, b: L.index_put(
        a, (L.tensor([0, 3, -1]), L.tensor([1, 1, 4])), b)),
    "index_put_rows": ((4, 5), (2, 5), lambda L, a, b: a.index_put((L.tensor([2, 0]),), b)),
    "index_put_accumulate": ((4, 5), (3,), lambda L, a, b: L.index_put(
        a, (L.tensor([0, 0, 2]), L.tensor([1, 1, 4])), b, accumulate=True)),
    "index_put_accumulate_rows": ((4, 5), (5,), lambda L, a, b: a.index_put(
        (L.tensor([1, 3, 1]),), b, True)),
    "index_put_mask": ((4, 5), (1,), lambda L, a, b: L.index_put(
        a, (L.tensor([True, False, True, False]),), b)),
    "masked_scatter": ((4, 5), (12,), lambda L, a, b: L.masked_scatter(
        a, L.tensor([True, False, True, True, False]), b)),
    "index_put_in_place": ((4, 5), (2,), lambda L, a, b: (a * 1).index_put_(
        (L.tensor([1, 2]), L.tensor([0, 4])), b, accumulate=True)),
    "masked_scatter_in_place": ((4, 5), (9,), lambda L, a, b: (a * 2).masked_scatter_(
        L.tensor([[True], [False], [True], [False]]).expand(4, 5) & (a > 0), b)),
}


@pytest.mark.parametrize("name", CASES)
def test_assignment_ops_give_torchs_values_and_gradients(torch, name):
    shape_a, shape_b, fn = CASES[name]
    results = []
    for lib in (sinter, torch):
        a = rand(lib, shape_a, 1).requires_grad_(True)
        b = rand(lib, shape_b, 2).requires_grad_(True)
        out = fn(lib, a, b)
        out.backward(rand(lib, tuple(out.shape), 3))
        results.append((out, a.grad, b.grad))
    for got, want, what in zip(*results, ("output", "input grad", "source grad")):
        assert_same(got, want, f"{name} {what}")


def test_index_put_of_integers_and_broadcast_tensors(torch):
    for lib in (sinter, torch):
        x = lib.zeros(3, 4, dtype=lib.int64)
        got = x.index_put((lib.tensor([0, 0, 2]), lib.tensor([1, 1, 3])),
                          lib.tensor([5, 6, 7]), accumulate=True)
        assert got.tolist() == [[0, 11, 0, 0], [0, 0, 0, 0], [0, 0, 0, 7]]
        a, b = lib.broadcast_tensors(lib.ones(3, 1), lib.zeros(4))
        assert tuple(a.shape) == tuple(b.shape) == (3, 4)
        assert tuple(lib.broadcast_shapes((2, 1), (3,), 1)) == (2, 3)


@pytest.mark.parametrize("call, kind, message", [
    ("L.select_scatter(L.zeros(3, 4), L.ones(3), 0, 0)", RuntimeError, "size equal to the slice"),
    ("L.slice_scatter(L.zeros(3, 4), L.ones(3, 3), 1, 0, 2)", RuntimeError, "slice size"),
    ("L.masked_scatter(L.zeros(4), L.tensor([True, True, False, True]), L.ones(2))",
     RuntimeError, "at least 3 elements"),
    ("L.masked_scatter(L.zeros(4), L.ones(4), L.ones(4))", RuntimeError, "boolean masks"),
    ("L.index_put(L.zeros(4), (L.tensor([1]),), L.ones(1, dtype=L.float64))", RuntimeError,
     "dtypes match"),
    ("L.broadcast_shapes((2, 3), (4,))", RuntimeError, "Shape mismatch"),
])
def test_errors_as_torch(torch, call, kind, message):
    assert_error_as_torch(torch, lambda L: eval(call, {"L": L}), kind, message)


def test_mask_shapes_as_torch(torch):
    assert_error_as_torch(torch, lambda L: L.index_put(
        L.zeros(4), (L.tensor([True, False, True]),), L.tensor(1.0)), IndexError,
        "shape of the mask")
    out = []
    for lib in (sinter, torch):
        mask = lib.tensor([[True, False, True], [False, True, False]])
        out.append(lib.masked_scatter(lib.zeros(3), mask, lib.arange(6.0)).tolist())
    assert out[0] == out[1]
