"""The math, logic and bitwise functions of sinter/ops_math.h from Python (functions, methods and
the operators ~ & | ^ and their in-place forms), each called as torch is called and compared with
torch's result for the same inputs: values (NaN where torch gives NaN), dtypes, shapes, gradients
and errors."""

import math

import pytest

import sinter

INF, NAN = math.inf, math.nan
# Inputs with every special value beside ordinary ones, in f64.
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.5, 1e-8, 1000.0]


def _same(got, want, rel=1e-12):
    """got (sinter) equals want (torch): dtype name, shape, and values (NaN where NaN)."""
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    g, w = got.flatten().tolist(), want.flatten().tolist()
    for x, y in zip(g, w):
        if isinstance(y, float) and math.isnan(y):
            assert isinstance(x, float) and math.isnan(x), (g, w)
        else:
            assert x == pytest.approx(y, rel=rel, abs=1e-300), (g, w)


UNARY = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2",
         "log10", "exp2", "reciprocal", "deg2rad", "rad2deg", "arcsin", "arccos", "arctan",
         "arcsinh", "arccosh", "arctanh", "isnan", "isinf", "isposinf", "isneginf", "isfinite",
         "logical_not", "nan_to_num", "logit"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_functions_and_methods_match_torch(torch, name):
    x, tx = sinter.tensor(SPECIAL, dtype=sinter.float64), torch.tensor(SPECIAL, dtype=torch.float64)
    _same(getattr(sinter, name)(x), getattr(torch, name)(tx))
    _same(getattr(x, name)(), getattr(tx, name)())
    # Integer inputs: f32 results for the math, the tests of values on integers.
    i, ti = sinter.tensor([0, 1, 2, -3]), torch.tensor([0, 1, 2, -3])
    _same(getattr(sinter, name)(i), getattr(torch, name)(ti), rel=1e-6)


@pytest.mark.parametrize("name", ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
                                  "atanh", "log2", "log10", "exp2", "reciprocal", "logit"])
def test_gradients_match_torch(torch, name):
    vals = [0.1, 0.35, 0.6, 0.85]
    x = sinter.tensor(vals, dtype=sinter.float64, requires_grad=True)
    tx = torch.tensor(vals, dtype=torch.float64, requires_grad=True)
    getattr(sinter, name)(x).sum().backward()
    getattr(torch, name)(tx).sum().backward()
    _same(x.grad, tx.grad)


def test_acosh_gradient_and_options_match_torch(torch):
    x = sinter.tensor([1.5, 3.0], dtype=sinter.float64, requires_grad=True)
    tx = torch.tensor([1.5, 3.0], dtype=torch.float64, requires_grad=True)
    sinter.acosh(x).sum().backward()
    torch.acosh(tx).sum().backward()
    _same(x.grad, tx.grad)
    s, ts = sinter.tensor(SPECIAL, dtype=sinter.float64), torch.tensor(SPECIAL, dtype=torch.float64)
    _same(s.nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0),
          ts.nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0))
    _same(sinter.nan_to_num(s.float(), neginf=-1.0), torch.nan_to_num(ts.float(), neginf=-1.0))
    _same(sinter.logit(s, eps=0.25), torch.logit(ts, eps=0.25))
    _same(s.logit(0.1), ts.logit(0.1))


def test_binary_functions_match_torch(torch):
    a = [NAN, INF, -INF, INF, 0.0, 0.0, 2.0, 0.0, 1000.0, -1.0]
    b = [1.0, INF, -INF, -INF, NAN, 0.0, 0.0, -1.0, 1000.0, 3.0]
    x, y = sinter.tensor(a, dtype=sinter.float64), sinter.tensor(b, dtype=sinter.float64)
    tx, ty = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    for name in ["logaddexp", "logaddexp2", "xlogy", "logical_and", "logical_or", "logical_xor"]:
        _same(getattr(sinter, name)(x, y), getattr(torch, name)(tx, ty))
        _same(getattr(x, name)(y), getattr(tx, name)(ty))
    _same(sinter.xlogy(x, 2.0), torch.xlogy(tx, 2.0))
    _same(x.xlogy(3), tx.xlogy(3))
    # Broadcast, and xlogy's gradients at a = 0 (NaN where torch's are).
    p = sinter.tensor([[0.0], [2.0]], dtype=sinter.float64, requires_grad=True)
    q = sinter.tensor([0.0, 3.0], dtype=sinter.float64, requires_grad=True)
    tp = torch.tensor([[0.0], [2.0]], dtype=torch.float64, requires_grad=True)
    tq = torch.tensor([0.0, 3.0], dtype=torch.float64, requires_grad=True)
    sinter.xlogy(p, q).sum().backward()
    torch.xlogy(tp, tq).sum().backward()
    _same(p.grad, tp.grad)
    _same(q.grad, tq.grad)


def test_bitwise_operators_match_torch(torch):
    ints, other = [0, 5, -6, 127, -128, 3], [3, 3, 7, -1, 1, 0]
    cases = [(sinter.int64, torch.int64), (sinter.int32, torch.int32), (sinter.uint8, torch.uint8)]
    for sd, td in cases:
        vals = [v % 256 for v in ints] if sd == sinter.uint8 else ints
        x, tx = sinter.tensor(vals, dtype=sd), torch.tensor(vals, dtype=td)
        y, ty = sinter.tensor(other).abs(), torch.tensor(other).abs()
        for f in [lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b,
                  lambda a, b: a & 6, lambda a, b: 6 | a, lambda a, b: a ^ 255,
                  lambda a, b: ~a, lambda a, b: a.bitwise_and(b), lambda a, b: a.bitwise_not()]:
            _same(f(x, y), f(tx, ty))
        for name in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
            _same(getattr(sinter, name)(x, y), getattr(torch, name)(tx, ty))
    m, tm = sinter.tensor([True, False, True]), torch.tensor([True, False, True])
    n, tn = sinter.tensor([True, True, False]), torch.tensor([True, True, False])
    for f in [lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b, lambda a, b: ~a,
              lambda a, b: a & True, lambda a, b: False | a, lambda a, b: a & 1,
              lambda a, b: (a > 0) & b]:
        _same(f(m, n), f(tm, tn))
    # In place: &=, |=, ^= keep the tensor (and refuse a result that does not fit, as torch).
    x, tx = sinter.tensor([12, 10]), torch.tensor([12, 10])
    before = x
    x &= 6
    tx &= 6
    assert x is before
    _same(x, tx)
    x |= sinter.tensor([1, 1])
    tx |= torch.tensor([1, 1])
    x ^= 3
    tx ^= 3
    _same(x, tx)
    with pytest.raises(RuntimeError, match="result type"):
        m &= sinter.tensor([1, 1, 1])


def test_bitwise_errors_name_the_op():
    f = sinter.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="bitwise_and: not implemented for f32"):
        f & f
    with pytest.raises(RuntimeError, match="bitwise_not"):
        ~f
    with pytest.raises(RuntimeError, match="bitwise_or"):
        sinter.tensor([1]) | 2.5
    with pytest.raises(TypeError):
        sinter.tensor([1]) & "x"


def test_reductions_match_torch(torch):
    data = [[[0, 1, 2], [3, 0, 0]], [[1, 1, 1], [0, 0, 0]]]
    x, tx = sinter.tensor(data), torch.tensor(data)
    for f in [lambda L, a: L.all(a), lambda L, a: L.any(a), lambda L, a: a.all(1),
              lambda L, a: a.any(dim=2, keepdim=True), lambda L, a: L.all(a, dim=(0, 2)),
              lambda L, a: L.count_nonzero(a), lambda L, a: a.count_nonzero(dim=(1, 2)),
              lambda L, a: L.count_nonzero(a, 0), lambda L, a: L.all(a.float() > 0.5, 2),
              lambda L, a: L.all(a.to(L.uint8)), lambda L, a: L.any(L.tensor([]))]:
        _same(f(sinter, x), f(torch, tx))
    f, tf = sinter.tensor([NAN, 0.0]), torch.tensor([NAN, 0.0])
    assert bool(sinter.any(f)) == bool(torch.any(tf)) is True
    assert bool(f[:1].all()) == bool(tf[:1].all()) is True


def test_numbers_on_either_side_and_empty_dims_as_torch(torch):
    t, tt = sinter.tensor([0.5, 2.0, 0.0]), torch.tensor([0.5, 2.0, 0.0])
    _same(sinter.xlogy(2.0, t), torch.xlogy(2.0, tt), rel=1e-6)
    _same(sinter.xlogy(3, t), torch.xlogy(3, tt), rel=1e-6)
    i, ti = sinter.tensor([2], dtype=sinter.int32), torch.tensor([2], dtype=torch.int32)
    _same(i.xlogy(2 ** 40), ti.xlogy(2 ** 40), rel=1e-6)
    _same(sinter.xlogy(i, 2 ** 40), torch.xlogy(ti, 2 ** 40), rel=1e-6)
    n, tn = sinter.tensor([6, 5]), torch.tensor([6, 5])
    _same(sinter.bitwise_and(3, n), torch.bitwise_and(3, tn))
    _same(sinter.bitwise_or(True, n > 5), torch.bitwise_or(True, tn > 5))
    _same(sinter.bitwise_xor(n, 1), torch.bitwise_xor(tn, 1))
    for d in [(), []]:
        _same(n.all(dim=d), tn.all(dim=d))
        _same(sinter.any(n - 5, d), torch.any(tn - 5, d))
    with pytest.raises(TypeError):
        t.xlogy("x")
    with pytest.raises(TypeError):
        n.bitwise_and(None)


def test_logit_edges_and_half_logaddexp_as_torch(torch):
    vals = [0.0, 1.0, 2.0, -0.5, 0.25, 0.1, 0.9]
    for eps in [None, -0.1, 0.0, 0.2, 0.6]:
        x = sinter.tensor(vals, dtype=sinter.float64, requires_grad=True)
        tx = torch.tensor(vals, dtype=torch.float64, requires_grad=True)
        y, ty = sinter.logit(x, eps), torch.logit(tx, eps)
        _same(y, ty)
        y.sum().backward()
        ty.sum().backward()
        _same(x.grad, tx.grad)
    a, b = [-0.3965, -0.5, 3.0, -INF], [-1.1172, -1.0, 3.0, 2.0]
    for sd, td in [(sinter.bfloat16, torch.bfloat16), (sinter.float16, torch.float16)]:
        for name in ["logaddexp", "logaddexp2"]:
            got = getattr(sinter, name)(sinter.tensor(a, dtype=sd), sinter.tensor(b, dtype=sd))
            want = getattr(torch, name)(torch.tensor(a, dtype=td), torch.tensor(b, dtype=td))
            _same(got, want, rel=1e-2)
    with pytest.raises(RuntimeError, match="logaddexp: not implemented"):
        sinter.logaddexp(sinter.tensor([1]), sinter.tensor([2]))


def test_composed_tensor_ops_match_torch(torch):
    import random
    rng = random.Random(5)
    data = [[rng.uniform(-2, 2) for _ in range(4)] for _ in range(3)]
    x, tx = sinter.tensor(data, dtype=sinter.float64), torch.tensor(data, dtype=torch.float64)
    v, tv = x[0], tx[0]
    cases = [
        lambda L, a, b: a.repeat(2, 1, 3), lambda L, a, b: a.repeat((2, 2)),
        lambda L, a, b: L.tile(a, (2,)), lambda L, a, b: a.tile(2, 1, 1),
        lambda L, a, b: L.broadcast_to(b, (2, 3, 4)), lambda L, a, b: a.broadcast_to(2, 3, 4),
        lambda L, a, b: L.movedim(a.reshape(1, 3, 4), 0, 2), lambda L, a, b: L.moveaxis(
            a.reshape(1, 3, 4), (0, 1), (2, 0)), lambda L, a, b: a.swapaxes(0, 1),
        lambda L, a, b: L.swapdims(a, 1, 0), lambda L, a, b: L.masked_select(a, b > 0),
        lambda L, a, b: a.masked_select(a > 0.5), lambda L, a, b: L.diff(a),
        lambda L, a, b: a.diff(n=2, dim=0, prepend=a[:1], append=a[-2:]),
        lambda L, a, b: L.diff(a > 0, dim=1), lambda L, a, b: L.outer(b, b[:3]),
        lambda L, a, b: L.ger(b, b), lambda L, a, b: L.dot(b, b), lambda L, a, b: a.mv(b),
        lambda L, a, b: L.addmm(b, a.t(), a, beta=0.5, alpha=2),
        lambda L, a, b: a[:, :3].addmm(a, a.t()[:, :3]), lambda L, a, b: L.trace(a),
        lambda L, a, b: L.nansum(a.log()), lambda L, a, b: a.log().nansum(1, keepdim=True),
        lambda L, a, b: L.nanmean(a.log(), dim=0), lambda L, a, b: a.log().nanmean(),
    ]
    for f in cases:
        _same(f(sinter, x, v), f(torch, tx, tv))
    # Gradients through the compositions.
    for f in [lambda L, a: a.repeat(2, 2).sum(), lambda L, a: L.diff(a, 2).pow(2).sum(),
              lambda L, a: L.nanmean(a.log(), 1).sum(), lambda L, a: L.trace(a @ a.t()),
              lambda L, a: L.masked_select(a, a > 0).pow(2).sum()]:
        a = sinter.tensor(data, dtype=sinter.float64, requires_grad=True)
        ta = torch.tensor(data, dtype=torch.float64, requires_grad=True)
        f(sinter, a).backward()
        f(torch, ta).backward()
        _same(a.grad, ta.grad)
    with pytest.raises(RuntimeError, match="repeat: 1 repeats"):
        x.repeat(2)


def test_order_statistics_match_torch(torch):
    import random
    rng = random.Random(11)
    data = [[rng.choice([NAN, 1.0, 2.0, 0.5]) if j % 3 == 0 else rng.uniform(-2, 2)
             for j in range(7)] for _ in range(4)]
    data[3] = [NAN] * 7
    x, tx = sinter.tensor(data, dtype=sinter.float64), torch.tensor(data, dtype=torch.float64)
    clean = [[0.75 if math.isnan(v) else v for v in row] for row in data[:3]]
    for f in [lambda L, a: a.median(1).values, lambda L, a: L.nanmedian(a, 1).values,
              lambda L, a: L.nanmedian(a, 0, keepdim=True).values, lambda L, a: L.median(a),
              lambda L, a: a.nanmedian(), lambda L, a: a.kthvalue(3, 1).values,
              lambda L, a: L.kthvalue(a, 1, 0, True).values,
              lambda L, a: L.nanquantile(a, 0.3, dim=1),
              lambda L, a: L.quantile(a, L.tensor([0.0, 0.4, 1.0], dtype=L.float64), dim=0),
              lambda L, a: a.nanquantile(0.5), lambda L, a: a.quantile(0.5, 1, keepdim=True)]:
        _same(f(sinter, x), f(torch, tx))
    c, tc = sinter.tensor(clean, dtype=sinter.float64), torch.tensor(clean, dtype=torch.float64)
    for how in ["linear", "lower", "higher", "nearest", "midpoint"]:
        for q in [0.0, 0.3, 0.5, 0.625, 1.0]:
            _same(sinter.quantile(c, q, 1, interpolation=how),
                  torch.quantile(tc, q, 1, interpolation=how))
    # Without ties the indices name the same elements as torch's, and the gradients agree.
    u = [[rng.uniform(-2, 2) for _ in range(5)] for _ in range(3)]
    for f in [lambda L, a: a.median(1), lambda L, a: L.kthvalue(a, 2, 0),
              lambda L, a: L.nanmedian(a, 1)]:
        got, want = f(sinter, sinter.tensor(u)), f(torch, torch.tensor(u))
        assert got.indices.tolist() == want.indices.tolist()
    for f in [lambda L, a: L.median(a), lambda L, a: a.median(0).values.sum(),
              lambda L, a: L.quantile(a, 0.3, 1).sum(),
              lambda L, a: L.quantile(a, 0.6, interpolation="midpoint")]:
        a = sinter.tensor(u, dtype=sinter.float64, requires_grad=True)
        ta = torch.tensor(u, dtype=torch.float64, requires_grad=True)
        f(sinter, a).backward()
        f(torch, ta).backward()
        _same(a.grad, ta.grad)
    with pytest.raises(RuntimeError, match="interpolation must be one of"):
        sinter.quantile(c, 0.5, interpolation="cubic")
