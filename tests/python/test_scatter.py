"""The scatter family against torch: scatter (src, value, legacy reduce), scatter_reduce's five
reductions with and without the tensor's own values, index_copy, index_fill, index_reduce and the
in-place forms: the same values, dtypes and f64 gradients on the same inputs, and the errors."""

import pytest

import sinter
from torch_parity import assert_same, rand


def _index(lib, values):
    return lib.tensor(values)


# (call, float input shapes, index rows): the call on differentiable f64 inputs x0, x1 and the
# index i, in either library. Each index names every target at most once where src gets a
# gradient from an overwritten position (scatter's is torch's either way).
CALLS = [
    ("x0.scatter(1, i, x1)", [(3, 4), (2, 3)], [[3, 0, 2], [1, 2, 0]]),
    ("x0.scatter(0, i, 2.5)", [(4, 3)], [[0, 3, 3], [0, 1, 3]]),
    ("x0.scatter_reduce(1, i, x1, 'sum')", [(3, 4), (2, 3)], [[3, 0, 3], [1, 1, 1]]),
    ("x0.scatter_reduce(1, i, x1, 'prod')", [(3, 4), (2, 3)], [[3, 0, 3], [1, 1, 1]]),
    ("x0.scatter_reduce(1, i, x1, 'mean')", [(3, 4), (2, 3)], [[3, 0, 3], [1, 1, 1]]),
    ("x0.scatter_reduce(1, i, x1, 'amax')", [(3, 4), (2, 3)], [[3, 0, 3], [1, 1, 1]]),
    ("x0.scatter_reduce(1, i, x1, 'amin')", [(3, 4), (2, 3)], [[3, 0, 3], [1, 1, 1]]),
    ("x0.scatter_reduce(1, i, x1, 'sum', include_self=False)", [(3, 4), (2, 3)],
     [[3, 0, 3], [1, 1, 1]]),
    ("x0.scatter_reduce(1, i, x1, 'prod', include_self=False)", [(3, 4), (2, 3)],
     [[3, 0, 3], [1, 1, 1]]),
    ("x0.scatter_reduce(1, i, x1, 'mean', include_self=False)", [(3, 4), (2, 3)],
     [[3, 0, 3], [1, 1, 1]]),
    ("x0.scatter_reduce(0, i, x1, 'amax', include_self=False)", [(3, 4), (2, 4)],
     [[2, 0, 2, 1], [1, 0, 2, 1]]),
    ("lib.scatter_reduce(x0, -1, i, x1, reduce='amin', include_self=False)", [(3, 4), (2, 3)],
     [[3, 0, 3], [1, 1, 1]]),
    ("x0.index_copy(1, i, x1)", [(2, 5, 3), (2, 3, 3)], [4, 0, 2]),
    ("lib.index_copy(x0, 0, i, x1)", [(4, 2), (2, 2)], [3, 1]),
    ("x0.index_fill(0, i, -1.5)", [(5, 3)], [4, 1]),
    ("x0.index_fill(1, i, lib.tensor(2.0))", [(2, 4)], [3]),
    ("x0.index_reduce(1, i, x1, 'prod')", [(2, 5, 3), (2, 4, 3)], [4, 0, 4, 2]),
    ("x0.index_reduce(1, i, x1, 'mean', include_self=False)", [(2, 5, 3), (2, 4, 3)],
     [4, 0, 4, 2]),
    ("x0.index_reduce(0, i, x1, 'amax')", [(3, 2), (4, 2)], [2, 0, 2, 1]),
]


@pytest.mark.parametrize("call,shapes,index", CALLS, ids=[c for c, _, _ in CALLS])
def test_call_as_torch(torch, call, shapes, index):
    results = []
    for lib in (sinter, torch):
        xs = [rand(lib, s, 3 + k).requires_grad_(True) for k, s in enumerate(shapes)]
        env = {"lib": lib, "i": _index(lib, index), **{f"x{k}": x for k, x in enumerate(xs)}}
        out = eval(call, env)
        out.backward(rand(lib, tuple(out.shape), 40))
        results.append((out, [x.grad for x in xs]))
    (out, grads), (t_out, t_grads) = results
    assert_same(out, t_out, "output")
    for k, (g, tg) in enumerate(zip(grads, t_grads)):
        assert (g is None) == (tg is None), k
        if g is not None:
            assert_same(g, tg, f"gradient of x{k}")


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool", "float32", "bfloat16"])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_reduce_dtypes_as_torch(torch, dtype, reduce, include_self):
    if dtype == "bool" and reduce == "mean":
        pytest.skip("torch refuses a bool mean")
    values, src = [3, 0, 7, 1, 5], [2, 9, 4, 6, 1, 8]
    outs = []
    for lib in (sinter, torch):
        dt = getattr(lib, dtype)
        a = lib.tensor(values).to(dt)
        s = lib.tensor(src).to(dt)
        idx = lib.tensor([4, 0, 4, 2, 0, 4])
        outs.append(a.scatter_reduce(0, idx, s, reduce, include_self=include_self))
    assert str(outs[0].dtype).split(".")[1] == str(outs[1].dtype).split(".")[1]
    assert outs[0].to(sinter.float64).tolist() == outs[1].double().tolist()


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_legacy_reduce_as_torch(torch, reduce):
    """scatter's reduce= (torch has no gradient for it; the values agree)."""
    outs = []
    for lib in (sinter, torch):
        x, src = rand(lib, (3, 4), 1), rand(lib, (2, 3), 2)
        idx = lib.tensor([[3, 0, 3], [1, 1, 1]])
        outs.append((x.scatter(1, idx, src, reduce=reduce), x.scatter(1, idx, 1.5, reduce=reduce)))
    for got, want in zip(*outs):
        assert_same(got, want, reduce)


def test_last_source_wins_and_nan_propagates(torch):
    out = sinter.zeros(3).scatter(0, sinter.tensor([2, 0, 2]), sinter.tensor([1.0, 2.0, 3.0]))
    assert out.tolist() == [2.0, 0.0, 3.0]  # torch's CPU order
    nan = float("nan")
    for reduce in ("amax", "amin"):
        got = sinter.tensor([1.0, 2.0]).scatter_reduce(0, sinter.tensor([0, 0]),
                                                       sinter.tensor([nan, 5.0]), reduce)
        want = torch.tensor([1.0, 2.0]).scatter_reduce(0, torch.tensor([0, 0]),
                                                       torch.tensor([nan, 5.0]), reduce)
        assert got[0].isnan().item() and want[0].isnan().item() and got[1].item() == 2.0


def test_in_place_forms(torch):
    for name, args in (("scatter_", (0, [[1, 0]], 5.0)), ("scatter_add_", (0, [[1, 0]], None)),
                       ("scatter_reduce_", (0, [[1, 0]], None, "amax")),
                       ("index_copy_", (0, [1, 0], None)), ("index_fill_", (1, [0], -2.0)),
                       ("index_add_", (0, [1, 1], None)),
                       ("index_reduce_", (0, [1, 1], None, "prod"))):
        got = []
        for lib in (sinter, torch):
            x = rand(lib, (2, 2), 1)
            src = rand(lib, (2, 2), 2) if args[2] is None else args[2]
            dim, index = args[0], lib.tensor(args[1])
            out = getattr(x, name)(dim, index, src, *args[3:])
            assert out is x
            got.append(x)
        assert_same(got[0], got[1], name)


def test_errors():
    a = sinter.zeros(3, 2)
    with pytest.raises(RuntimeError, match="scatter_reduce: reduce argument must be one of sum"):
        a.scatter_reduce(0, sinter.tensor([[0]]), sinter.ones(1, 1), "max")
    with pytest.raises(RuntimeError, match="index_reduce: reduce argument must be one of prod"):
        a.index_reduce(0, sinter.tensor([0]), sinter.ones(1, 2), "sum")
    with pytest.raises(RuntimeError, match="reduce argument must be either add or multiply"):
        a.scatter(0, sinter.tensor([[0]]), sinter.ones(1, 1), reduce="max")
    with pytest.raises(IndexError, match="scatter: index out of range"):
        a.scatter(0, sinter.tensor([[3]]), 1.0)
    with pytest.raises(RuntimeError, match="index_copy: source shape"):
        a.index_copy(0, sinter.tensor([0]), sinter.ones(2, 2))
    with pytest.raises(RuntimeError, match="scatter_: a leaf tensor that requires grad"):
        sinter.zeros(3, requires_grad=True).scatter_(0, sinter.tensor([0]), 1.0)
