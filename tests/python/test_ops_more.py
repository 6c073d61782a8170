"""The functions of sinter/_ops_more.py and _ops_more2.py (and their Tensor methods), each called
as torch is called and compared with torch's result for the same inputs: values, dtypes, shapes,
gradients of f64 inputs, and the class of the error for bad input. The random draws are checked
by shape, dtype, range and simple statistics under fixed seeds.

To add a function: a row in CASES (values, and gradients unless the row says nograd), a row in
ERRORS for each bad input, and a gradcheck row in GRADCHECK where it has a gradient."""

import math
import random
import warnings
from types import SimpleNamespace

import pytest

import sinter
from sinter.autograd import gradcheck

INF, NAN = math.inf, math.nan


def _data(shape, seed, low=-2.0, high=2.0):
    rng = random.Random(seed)
    flat = [rng.uniform(low, high) for _ in range(math.prod(shape))]
    for s in reversed(shape[1:]):
        flat = [flat[i:i + s] for i in range(0, len(flat), s)]
    return flat


DATA = {"a": _data((3, 4), 1), "b": _data((3, 4), 2), "c": _data((2, 3, 4), 3),
        "v": _data((4,), 4), "w": _data((3,), 5), "p": _data((4,), 6, 0.5, 2.0)}
INTS = [[3, -5, 0, 7], [-2, 4, 1, -1], [6, 0, -3, 2]]
GRID = [-3 + k / 3 for k in range(46)]  # erfc's range, into float32's denormals


def _inputs(L, grad=False):
    """The same inputs for sinter or torch (L): f64 a (3, 4), b (3, 4), c (2, 3, 4), v (4,),
    w (3,), p (4,) positive, which require grad when grad; i (3, 4) int64; n a mix of specials."""
    def f64(values):
        t = L.tensor(values, dtype=L.float64)
        return t.requires_grad_(True) if grad else t

    x = SimpleNamespace(**{k: f64(v) for k, v in DATA.items()})
    x.i = L.tensor(INTS)
    x.n = L.tensor([NAN, 1.0, -0.0, 0.0, -2.5, INF, -INF, 3.0], dtype=L.float64)
    x.m = L.tensor([2.0, NAN, 0.0, -0.0, 1.0, -INF, NAN, 3.0], dtype=L.float64)
    return x


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    return [out]


def _same(got, want, rel=1e-9, abs_=1e-12):
    """got (sinter) equals want (torch): structure (named tuple fields too), dtype names, shapes,
    values (NaN where NaN)."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        if hasattr(want, "_fields"):
            assert tuple(got._fields) == tuple(want._fields)
        for g, w in zip(got, want):
            _same(g, w, rel, abs_)
        return
    if not hasattr(want, "dtype"):
        assert got == want
        return
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got, want)
    assert tuple(got.shape) == tuple(want.shape), (got, want)
    for x, y in zip(got.flatten().tolist(), want.flatten().tolist()):
        if isinstance(y, float) and math.isnan(y):
            assert math.isnan(x), (got, want)
        else:
            assert x == pytest.approx(y, rel=rel, abs=abs_), (got, want)


# (name, fn(L, x), options): x from _inputs; options "nograd" skips the gradient comparison,
# a number gives the relative tolerance.
CASES = [
    ("full_like", lambda L, x: [L.full_like(x.a, 2.5), L.full_like(x.i, 2.7),
                                L.full_like(x.a, 3, dtype=L.int32)], "nograd"),
    ("predicates", lambda L, x: [L.is_tensor(x.a), L.is_tensor(1.0), L.is_floating_point(x.i),
                                 L.is_floating_point(x.a), L.is_complex(x.a), L.numel(x.c),
                                 x.a.is_complex()], "nograd"),
    ("hstack", lambda L, x: [L.hstack([x.a, x.b]), L.hstack((x.v, x.w)),
                             L.hstack([x.v[0], x.w])], ""),
    ("vstack", lambda L, x: [L.vstack([x.a, x.b[:1]]), L.vstack([x.v, x.v]),
                             L.row_stack([x.a, x.a])], ""),
    ("dstack", lambda L, x: [L.dstack([x.a, x.b]), L.dstack([x.v, x.v]), L.dstack([x.c])], ""),
    ("column_stack", lambda L, x: L.column_stack([x.w, x.a, x.a[:, 0], x.i[:, :2]]), ""),
    ("atleast", lambda L, x: [L.atleast_1d(x.a[0, 0]), L.atleast_1d(x.v), L.atleast_2d(x.v),
                              L.atleast_2d(x.a[0, 0], x.v), L.atleast_3d(x.a),
                              L.atleast_3d(x.v), L.atleast_3d([x.a[0, 0], x.c]),
                              L.atleast_1d()], ""),
    ("tensor_split", lambda L, x: [L.tensor_split(x.c, 3, dim=2), L.tensor_split(x.v, 3),
                                   L.tensor_split(x.a, [1, 3, -1, 10], 1),
                                   L.tensor_split(x.a, L.tensor([1, 2])),
                                   L.tensor_split(x.a, L.tensor(2), 1),
                                   x.a.tensor_split(2, -1)], ""),
    ("hsplit vsplit dsplit", lambda L, x: [L.hsplit(x.a, 2), L.hsplit(x.v, [1, 3]),
                                           L.vsplit(x.a, [1]), L.vsplit(x.c, 2),
                                           L.dsplit(x.c, 2), x.c.dsplit([3])], ""),
    ("take_along_dim", lambda L, x: [
        L.take_along_dim(x.a, L.argsort(x.b, 1), 1),
        L.take_along_dim(x.a, L.tensor([[0], [2], [1]]), 1),
        L.take_along_dim(x.c, L.tensor([[[0, 3]]]), -1),
        L.take_along_dim(x.a, L.tensor([11, 0, 5])),
        x.a.take_along_dim(L.tensor([[2, 0, 1, 1]]), dim=0)], ""),
    ("take", lambda L, x: [L.take(x.a, L.tensor([[0, 11], [-1, 5]])),
                           L.take(x.v, L.tensor(-4)), x.a.take(L.tensor([3]))], ""),
    ("rot90", lambda L, x: [L.rot90(x.a), L.rot90(x.a, 2), L.rot90(x.a, -1),
                            L.rot90(x.c, 1, [2, 0]), L.rot90(x.a, 4), x.c.rot90(3, (1, 2))],
     ""),
    ("tril_indices", lambda L, x: [L.tril_indices(3, 4), L.tril_indices(4, 3, -1),
                                   L.triu_indices(3, 4, 1), L.triu_indices(3, 3, dtype=L.int32),
                                   L.tril_indices(0, 3), L.triu_indices(2, 5, -4)], "nograd"),
    ("cartesian_prod", lambda L, x: [L.cartesian_prod(x.v[:2], x.w, x.v[1:]),
                                     L.cartesian_prod(x.w), L.cartesian_prod(x.i[0], x.i[1])],
     ""),
    ("combinations", lambda L, x: [L.combinations(x.v), L.combinations(x.v, 3),
                                   L.combinations(x.w, 2, True), L.combinations(x.w, r=1),
                                   L.combinations(x.w, 4), L.combinations(x.w, 0),
                                   L.combinations(x.i[0], with_replacement=True)], ""),
    ("block_diag", lambda L, x: [L.block_diag(x.a, x.v, x.a[0, 0], x.b[:2, :1]),
                                 L.block_diag(L.tensor([[1, 2]]), x.a[:1, :1]),
                                 L.block_diag(x.i[:2, :2], L.tensor(3, dtype=L.int32)),
                                 L.block_diag()], ""),
    ("tensordot", lambda L, x: [L.tensordot(x.c, x.a, dims=([1, 2], [0, 1])),
                                L.tensordot(x.a, x.c.permute(1, 2, 0)),
                                L.tensordot(x.a, x.v, dims=([1], [0])),
                                L.tensordot(x.v, x.w, dims=0),
                                L.tensordot(x.a, x.c, dims=L.tensor([[0], [1]])),
                                L.tensordot(x.i, x.i, dims=([0], [0]))], ""),
    ("addmv", lambda L, x: [L.addmv(x.w, x.a, x.v, beta=0.5, alpha=2), L.addmv(x.w[:1], x.a, x.v),
                            L.addmv(x.w[0], x.a, x.v, beta=0),
                            L.addmv(L.full((3,), NAN, dtype=L.float64), x.a, x.v, beta=0),
                            x.w.addmv(x.a, x.v, alpha=-1)], ""),
    ("addbmm", lambda L, x: [L.addbmm(x.a[:, :3], x.c, x.c.transpose(1, 2), beta=0.5, alpha=2),
                             x.w.addbmm(x.c, x.c.transpose(1, 2)),
                             L.addbmm(x.a[:, :3], x.c, x.c.transpose(1, 2), beta=0)], ""),
    ("chain_matmul", lambda L, x: [L.chain_matmul(x.a, x.b.t(), x.a, x.v.unsqueeze(1)),
                                   L.chain_matmul(x.a)], ""),
    ("std_mean var_mean", lambda L, x: [
        L.std_mean(x.a), L.std_mean(x.a, 1), L.std_mean(x.a, 1, False, True),
        L.std_mean(x.c, (0, 2), correction=0, keepdim=True), L.std_mean(x.a, False),
        L.var_mean(x.c, dim=-1), L.var_mean(x.a, None, keepdim=True),
        L.var_mean(x.a, 0, unbiased=False), L.var_mean(x.c, [0, 1], correction=2)], ""),
    ("aminmax", lambda L, x: [L.aminmax(x.a), L.aminmax(x.c, dim=1),
                              L.aminmax(x.c, dim=-1, keepdim=True), L.aminmax(x.i, dim=0),
                              L.aminmax(x.a, keepdim=True), x.a.aminmax(dim=0)], ""),
    ("clamp_min clamp_max sgn", lambda L, x: [L.clamp_min(x.a, -0.5), L.clamp_max(x.a, 0.5),
                                              L.clamp_min(x.i, 2), L.clamp_max(x.a, x.b),
                                              L.sgn(x.a), L.sgn(x.i)], ""),
    ("signbit", lambda L, x: [L.signbit(x.n[1:]), L.signbit(x.i), L.signbit(x.i > 0),
                              L.signbit(x.i.to(L.uint8)), x.a.signbit(),
                              L.signbit(x.a.to(L.float16))], "nograd"),
    ("copysign", lambda L, x: [L.copysign(x.a, x.b), L.copysign(x.a, -0.0),
                               L.copysign(x.i, x.b), L.copysign(x.i, -1),
                               L.copysign(x.a[:, :1] * 0, x.v), x.v.copysign(x.n[1:5]),
                               L.copysign(x.a.float(), x.b), L.copysign(x.n, x.m[0])], ""),
    ("heaviside", lambda L, x: [L.heaviside(x.n, L.tensor([0.5], dtype=L.float64)),
                                L.heaviside(x.i, L.tensor(7)), x.a.heaviside(x.b)], "nograd"),
    ("float_power", lambda L, x: [L.float_power(x.a, 2), L.float_power(x.i, 2),
                                  L.float_power(2, x.a), L.float_power(x.a.abs(), x.b),
                                  L.float_power(x.a.float().abs(), 0.5),
                                  x.p.float_power(x.v)], ""),
    ("true_divide", lambda L, x: [L.true_divide(x.i, 2), L.true_divide(x.a, x.b),
                                  L.true_divide(2, x.a), x.i.true_divide(x.i + 10)], ""),
    ("fmod", lambda L, x: [L.fmod(x.a, x.b), L.fmod(x.a, 0.7), L.fmod(x.i, 3),
                           L.fmod(x.i, L.tensor([[3], [-2], [5]])), L.fmod(x.i, 2.5),
                           L.fmod(x.a, L.tensor(0.3, dtype=L.float32)), x.c.fmod(x.v),
                           L.fmod(x.n, 2.0), L.fmod(x.n, x.m), L.fmod(x.i.to(L.uint8), 4),
                           L.fmod(x.i.to(L.int32), -3), L.fmod(L.tensor([1e20, -1e-20]), 3.0)],
     ""),
    ("fmax fmin", lambda L, x: [L.fmax(x.a, x.b), L.fmin(x.a, x.b), L.fmax(x.n, x.m),
                                L.fmin(x.n, x.m), L.fmax(x.i, x.a), x.i.fmin(L.tensor(0)),
                                x.a.fmax(x.a), L.fmin(x.a, x.a[:, :1])], ""),
    ("erfc", lambda L, x: [L.erfc(L.tensor(GRID, dtype=L.float64)), L.erfc(L.tensor(GRID)),
                           L.erfc(x.i), x.a.erfc(), L.erfc(x.n)], 1e-6),
    ("sinc", lambda L, x: [L.sinc(x.a), L.sinc(L.tensor([0., 1., -2.5, 1e-30])), L.sinc(x.i),
                           x.v.sinc()], ""),
    ("dist", lambda L, x: [L.dist(x.a, x.b), L.dist(x.a, x.b, 1), L.dist(x.a, x.b, 0.0).detach(),
                           L.dist(x.a, x.b, INF), L.dist(x.a, x.b, -INF), L.dist(x.a, x.b, 3.5),
                           L.dist(x.a, x.v), x.v.dist(x.p, 0.5)], ""),
    ("cdist", lambda L, x: [L.cdist(x.a, x.b), L.cdist(x.c, x.b, 1), L.cdist(x.a, x.b[:2], 3.0),
                            L.cdist(x.a, x.b, INF), L.cdist(x.c, x.c, 0),
                            L.cdist(x.a, x.b, compute_mode="donot_use_mm_for_euclid_dist")],
     1e-7),
    ("renorm", lambda L, x: [L.renorm(x.a, 2, 0, 1.0), L.renorm(x.c, 1, 1, 2.0),
                             L.renorm(x.a, INF, 1, 1.0), x.c.renorm(3, -1, 10.0)], ""),
    ("cov corrcoef", lambda L, x: [
        L.cov(x.a), L.cov(x.a, correction=0), L.cov(x.v, correction=2), L.cov(x.i.float()),
        L.cov(x.a, fweights=L.tensor([2, 1, 1, 3]), correction=3),
        L.cov(x.a, fweights=L.tensor([1, 2, 0, 3]), aweights=x.p),
        L.cov(x.a, aweights=x.p, correction=2), L.cov(x.c[0, :1]), x.a.cov(),
        L.corrcoef(x.a), L.corrcoef(x.v), x.c[1].corrcoef(), L.cov(x.i)], ""),
    ("cov mixed dtypes", lambda L, x: [L.cov(x.a.float(), aweights=x.p),
                                       L.cov(x.a, aweights=x.p.float())], 1e-6),
    ("histc", lambda L, x: [L.histc(x.a.float(), 5), L.histc(x.a, 4, -1, 1),
                            L.histc(x.c, bins=3, min=0.5, max=0.5), x.v.histc(7),
                            L.histc(L.tensor([1., 1.]), bins=4),
                            L.histc(x.n[1:5], 3, -1, 1)], "nograd"),
    ("bincount", lambda L, x: [L.bincount(L.tensor([1, 1, 3, 0])),
                               L.bincount(L.tensor([1, 1, 3]), minlength=7),
                               L.bincount(L.tensor([1, 1, 3]), L.tensor([1., 2., 3.])),
                               L.bincount(L.tensor([1, 1, 3]), x.w.detach()),
                               L.bincount(L.tensor([2, 0], dtype=L.uint8), L.tensor([1, 5])),
                               L.bincount(L.tensor([], dtype=L.int64)),
                               L.tensor([4, 4]).bincount()], "nograd"),
    ("argwhere", lambda L, x: [L.argwhere(x.i), L.argwhere(L.tensor(3)), x.n.argwhere()],
     "nograd"),
]


def _loss(L, out):
    """A weighted sum of the floating outputs that require grad (None if none do)."""
    total = None
    for t in _leaves(out):
        if isinstance(t, (sinter.Tensor,)) or hasattr(t, "grad_fn"):
            if t.is_floating_point() and t.requires_grad:
                k = L.linspace(1, 2, t.numel(), dtype=L.float64).reshape(tuple(t.shape))
                term = (t.to(L.float64) * k).sum()
                total = term if total is None else total + term
    return total


@pytest.mark.parametrize("name,fn,options", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(torch, name, fn, options):
    rel = options if isinstance(options, float) else 1e-9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(fn(sinter, _inputs(sinter)), fn(torch, _inputs(torch)), rel=rel)
        if options == "nograd":
            return
        xs, xt = _inputs(sinter, True), _inputs(torch, True)
        loss_s, loss_t = _loss(sinter, fn(sinter, xs)), _loss(torch, fn(torch, xt))
    assert (loss_s is None) == (loss_t is None)
    if loss_t is None:
        return
    loss_s.backward()
    loss_t.backward()
    for key in DATA:
        gs, gt = getattr(xs, key).grad, getattr(xt, key).grad
        if gt is None or gs is None:  # None where torch's is all zeros (copysign's other)
            assert not any((gs if gt is None else gt).flatten().tolist()) if gs is not None or \
                gt is not None else True, key
        else:
            _same(gs, gt, rel=max(rel, 1e-8), abs_=1e-10)


def test_in_place_methods_match_torch(torch):
    for L in (sinter, torch):
        x = _inputs(L)
        outs = [x.a.clone().fmod_(0.7), x.a.clone().copysign_(x.b), x.a.clone().true_divide_(3),
                x.a.clone().erfc_(), x.a.clone().sinc_(), x.a.clone().renorm_(2, 0, 1.0),
                x.a.clone().heaviside_(x.b), x.w.clone().addmv_(x.a, x.v, beta=2),
                x.a[:, :3].clone().addbmm_(x.c, x.c.transpose(1, 2), alpha=3)]
        if L is sinter:
            got = outs
        else:
            want = outs
    for g, w in zip(got, want):
        _same(g, w, rel=1e-7)
    with pytest.raises(RuntimeError, match="true_divide_"):
        sinter.tensor([1, 2]).true_divide_(2)


def test_heaviside_and_weighted_bincount_have_no_derivative(torch):
    for L in (sinter, torch):
        x = L.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        out = L.heaviside(x, L.tensor([0.5]))
        assert out.requires_grad
        with pytest.raises(RuntimeError, match="heaviside"):
            out.sum().backward()
        out = L.bincount(L.tensor([0, 2, 2]), weights=x)
        assert out.requires_grad
        with pytest.raises(RuntimeError, match="bincount"):
            out.sum().backward()


def test_signbit_and_copysign_of_zeros(torch):
    x = sinter.tensor([-0.0, 0.0, -1e-300], dtype=sinter.float64)
    assert sinter.signbit(x).tolist() == [True, False, True]
    assert [math.copysign(1, v) for v in sinter.copysign(sinter.ones(3), x).tolist()] == \
        [-1, 1, -1]
    assert math.copysign(1, sinter.fmod(sinter.tensor([-0.0]), 2.0).item()) == -1
    assert math.copysign(1, sinter.fmod(sinter.tensor([-4.0]), 2.0).item()) == -1


DTYPES = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def test_promote_types_and_can_cast_match_torch(torch):
    for x in DTYPES + ["float8_e4m3fn", "float8_e5m2"]:
        for y in DTYPES + ["float8_e4m3fn", "float8_e5m2"]:
            sx, sy, tx, ty = (getattr(m, n) for m in (sinter, torch) for n in (x, y))
            assert str(sinter.can_cast(sx, sy)) == str(torch.can_cast(tx, ty)), (x, y)
            try:
                want = str(torch.promote_types(tx, ty)).split(".")[-1]
            except RuntimeError:
                with pytest.raises(RuntimeError, match="promote_types"):
                    sinter.promote_types(sx, sy)
                continue
            assert str(sinter.promote_types(sx, sy)).split(".")[-1] == want, (x, y)


def test_result_type_matches_torch(torch):
    numbers = [True, 3, -2.5]

    def operands(L):
        out = []
        for name in DTYPES:
            dtype = getattr(L, name)
            out += [L.ones(2, dtype=dtype), L.ones((), dtype=dtype)]
        return out + numbers

    for a, ta in zip(operands(sinter), operands(torch)):
        for b, tb in zip(operands(sinter), operands(torch)):
            want = str(torch.result_type(ta, tb)).split(".")[-1]
            assert str(sinter.result_type(a, b)).split(".")[-1] == want, (ta, tb)
    with pytest.raises(TypeError, match="result_type"):
        sinter.result_type(sinter.ones(1), "x")


# (name the error names, fn(L, x)): torch raises; sinter raises the same class naming the function.
ERRORS = [
    ("rand_like", lambda L, x: L.rand_like(x.i)),
    ("randn_like", lambda L, x: L.randn_like(x.i)),
    ("randint_like", lambda L, x: L.randint_like(x.a, 5, 3)),
    ("is_floating_point", lambda L, x: L.is_floating_point(3)),
    ("full_like", lambda L, x: L.full_like(x.i, 2, requires_grad=True)),
    ("hstack", lambda L, x: L.hstack([])),
    ("tensor_split", lambda L, x: L.tensor_split(x.a, 0)),
    ("tensor_split", lambda L, x: L.tensor_split(x.a[0, 0], 2)),
    ("tensor_split", lambda L, x: L.tensor_split(x.a, L.tensor([1.0]))),
    ("tensor_split", lambda L, x: L.tensor_split(x.a, L.tensor([[1]]))),
    ("Dimension out of range", lambda L, x: L.tensor_split(x.a, 2, dim=5)),
    ("hsplit", lambda L, x: L.hsplit(x.a, 3)),
    ("hsplit", lambda L, x: L.hsplit(x.a[0, 0], 2)),
    ("vsplit", lambda L, x: L.vsplit(x.v, 2)),
    ("dsplit", lambda L, x: L.dsplit(x.a, 2)),
    ("take_along_dim", lambda L, x: L.take_along_dim(x.a, L.tensor([0]), 1)),
    ("take_along_dim", lambda L, x: L.take_along_dim(x.a, L.tensor([[0]], dtype=L.int32), 1)),
    ("Dimension out of range", lambda L, x: L.take_along_dim(x.a, L.tensor([[0]]), 5)),
    ("take", lambda L, x: L.take(x.a, L.tensor([12]))),
    ("take", lambda L, x: L.take(x.a, L.tensor([-13]))),
    ("take", lambda L, x: L.take(x.a, L.tensor([1.0]))),
    ("rot90", lambda L, x: L.rot90(x.v)),
    ("rot90", lambda L, x: L.rot90(x.a, 1, [0])),
    ("rot90", lambda L, x: L.rot90(x.a, 1, [0, -2])),
    ("Dimension out of range", lambda L, x: L.rot90(x.a, 1, [0, 2])),
    ("tril_indices", lambda L, x: L.tril_indices(-1, 3)),
    ("tril_indices", lambda L, x: L.tril_indices(3, 3, dtype=L.float32)),
    ("combinations", lambda L, x: L.combinations(x.a)),
    ("combinations", lambda L, x: L.combinations(x.v, -1)),
    ("cartesian_prod", lambda L, x: L.cartesian_prod(x.a)),
    ("cartesian_prod", lambda L, x: L.cartesian_prod(x.v, x.i[0])),
    ("cartesian_prod", lambda L, x: L.cartesian_prod()),
    ("block_diag", lambda L, x: L.block_diag(x.c)),
    ("tensordot", lambda L, x: L.tensordot(x.a, x.b, dims=1)),
    ("tensordot", lambda L, x: L.tensordot(x.a, x.b.float(), dims=1)),
    ("tensordot", lambda L, x: L.tensordot(x.a, x.b, dims=-1)),
    ("tensordot", lambda L, x: L.tensordot(x.a, x.b, dims=3)),
    ("tensordot", lambda L, x: L.tensordot(x.a, x.b, dims=([1], [0, 1]))),
    ("chain_matmul", lambda L, x: L.chain_matmul(x.c)),
    ("chain_matmul", lambda L, x: L.chain_matmul()),
    ("addmv", lambda L, x: L.addmv(x.w, x.a, x.w)),
    ("addmv", lambda L, x: L.addmv(x.w, x.a.float(), x.v)),
    ("addmv", lambda L, x: L.addmv(x.v, x.a, x.v)),
    ("addbmm", lambda L, x: L.addbmm(x.a, x.c, x.c)),
    ("addbmm", lambda L, x: L.addbmm(x.a[:, :3], x.c, x.c[:1].transpose(1, 2))),
    ("std_mean", lambda L, x: L.std_mean(x.i)),
    ("var_mean", lambda L, x: L.var_mean(x.i, 0)),
    ("aminmax", lambda L, x: L.aminmax(L.zeros(0))),
    ("aminmax", lambda L, x: L.aminmax(L.zeros(2, 0), dim=1)),
    ("heaviside", lambda L, x: L.heaviside(x.a, L.tensor([1]))),
    ("fmod", lambda L, x: L.fmod(x.i, 0)),
    ("fmod", lambda L, x: L.fmod(x.i, L.tensor([0, 1, 1, 1]))),
    ("fmod", lambda L, x: L.fmod(5, x.a)),
    ("fmax", lambda L, x: L.fmax(x.a, 1.0)),
    ("copysign", lambda L, x: L.copysign(2.0, x.a)),
    ("dist", lambda L, x: L.dist(x.i, x.i)),
    ("cdist", lambda L, x: L.cdist(x.v, x.a)),
    ("cdist", lambda L, x: L.cdist(x.i, x.i)),
    ("cdist", lambda L, x: L.cdist(x.a, x.a[:, :3])),
    ("cdist", lambda L, x: L.cdist(x.a, x.b, -1)),
    ("compute_mode", lambda L, x: L.cdist(x.a, x.b, compute_mode="x")),
    ("cdist", lambda L, x: L.cdist(x.a, x.b.float())),
    ("renorm", lambda L, x: L.renorm(x.a, 0, 0, 1.0)),
    ("renorm", lambda L, x: L.renorm(x.a, 2, 0, -1.0)),
    ("renorm", lambda L, x: L.renorm(x.v, 2, 0, 1.0)),
    ("renorm", lambda L, x: L.renorm(x.i, 2, 0, 1.0)),
    ("cov", lambda L, x: L.cov(x.c)),
    ("cov", lambda L, x: L.cov(x.i > 0)),
    ("cov", lambda L, x: L.cov(x.a, fweights=x.p)),
    ("cov", lambda L, x: L.cov(x.a, fweights=L.tensor([1, -1, 1, 1]))),
    ("cov", lambda L, x: L.cov(x.a, aweights=-x.p)),
    ("cov", lambda L, x: L.cov(x.a, aweights=x.w)),
    ("cov", lambda L, x: L.cov(x.a, aweights=L.tensor([1, 2, 3, 4]))),
    ("histc", lambda L, x: L.histc(x.i)),
    ("histc", lambda L, x: L.histc(x.a, 0)),
    ("histc", lambda L, x: L.histc(x.a, 2, 1, 0)),
    ("histc", lambda L, x: L.histc(x.n, 2)),
    ("histc", lambda L, x: L.histc(x.a, 2, NAN, 1)),
    ("bincount", lambda L, x: L.bincount(L.tensor([-1, 1]))),
    ("bincount", lambda L, x: L.bincount(L.tensor([1.0]))),
    ("bincount", lambda L, x: L.bincount(L.tensor([True]))),
    ("bincount", lambda L, x: L.bincount(x.i)),
    ("bincount", lambda L, x: L.bincount(L.tensor([1]), minlength=-1)),
    ("bincount", lambda L, x: L.bincount(L.tensor([1, 2]), x.w)),
    ("randperm", lambda L, x: L.randperm(-1)),
    ("randperm", lambda L, x: L.randperm(300, dtype=L.uint8)),
    ("randperm", lambda L, x: L.randperm(3, requires_grad=True)),
    ("normal", lambda L, x: L.normal(x.a, -1.0)),
    ("normal", lambda L, x: L.normal(x.v, L.tensor([-1.0, 1.0, 1.0, 1.0]))),
    ("normal", lambda L, x: L.normal(x.i, 1.0)),
    ("normal", lambda L, x: L.normal(1.0, 2.0)),
    ("The size of tensor a", lambda L, x: L.normal(x.v, x.w)),
    ("bernoulli", lambda L, x: L.bernoulli(L.tensor([1.5]))),
    ("bernoulli", lambda L, x: L.bernoulli(x.i)),
    ("poisson", lambda L, x: L.poisson(L.tensor([-1.0]))),
    ("poisson", lambda L, x: L.poisson(x.i)),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_errors_match_torch(torch, name, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as want:
            fn(torch, _inputs(torch))
        with pytest.raises(want.type, match=name):
            fn(sinter, _inputs(sinter))


def _small(shape, seed, low=-2.0, high=2.0):
    return sinter.tensor(_data(shape, seed, low, high), dtype=sinter.float64,
                         requires_grad=True)


# (name, fn, inputs): checked by sinter.autograd.gradcheck (central differences in f64).
GRADCHECK = [
    ("fmod", lambda a, b: sinter.fmod(a, b), lambda: (_small((2, 3), 1), _small((3,), 2, 0.6))),
    ("copysign", lambda a, b: sinter.copysign(a, b), lambda: (_small((2, 3), 3), _small((3,), 4))),
    ("fmax", lambda a, b: sinter.fmax(a, b), lambda: (_small((2, 3), 5), _small((2, 3), 6))),
    ("float_power", lambda a, b: sinter.float_power(a, b),
     lambda: (_small((3,), 7, 0.5, 2.0), _small((3,), 8))),
    ("erfc", lambda a: sinter.erfc(a * 3), lambda: (_small((6,), 9),)),
    ("sinc", lambda a: sinter.sinc(a), lambda: (_small((5,), 10),)),
    ("dist", lambda a, b: sinter.dist(a, b) + sinter.dist(a, b, 3.5) + sinter.dist(a, b, INF),
     lambda: (_small((4,), 11), _small((4,), 12))),
    ("cdist", lambda a, b: sinter.cdist(a, b) + sinter.cdist(a, b, 1.5),
     lambda: (_small((3, 2), 13), _small((2, 2), 14))),
    ("renorm", lambda a: sinter.renorm(a, 2, 1, 1.0), lambda: (_small((2, 3), 15),)),
    ("cov", lambda a, w: sinter.cov(a, aweights=w), lambda: (_small((2, 4), 16),
                                                             _small((4,), 17, 0.5, 2.0))),
    ("corrcoef", lambda a: sinter.corrcoef(a), lambda: (_small((2, 4), 18),)),
    ("std_mean", lambda a: sinter.std_mean(a, 1), lambda: (_small((2, 3), 19),)),
    ("var_mean", lambda a: sinter.var_mean(a, 0, correction=0), lambda: (_small((2, 3), 20),)),
    ("aminmax", lambda a: tuple(sinter.aminmax(a, dim=1)), lambda: (_small((2, 3), 21),)),
    ("tensordot", lambda a, b: sinter.tensordot(a, b, dims=([0], [1])),
     lambda: (_small((2, 3), 22), _small((2, 2), 23))),
    ("addmv", lambda i, m, v: sinter.addmv(i, m, v, beta=0.5, alpha=2),
     lambda: (_small((2,), 24), _small((2, 3), 25), _small((3,), 26))),
    ("addbmm", lambda i, b: sinter.addbmm(i, b, b.transpose(1, 2), alpha=0.5),
     lambda: (_small((2, 2), 27), _small((2, 2, 3), 28))),
    ("chain_matmul", lambda a, b: sinter.chain_matmul(a, b, a),
     lambda: (_small((2, 2), 29), _small((2, 2), 30))),
    ("block_diag", lambda a, b: sinter.block_diag(a, b),
     lambda: (_small((2, 1), 31), _small((2,), 32))),
    ("take take_along_dim", lambda a: sinter.take(a, sinter.tensor([5, -1, 0]))
     + sinter.take_along_dim(a, sinter.tensor([[2, 1, 0]]), 1)[0], lambda: (_small((2, 3), 33),)),
    ("rot90", lambda a: sinter.rot90(a, 3), lambda: (_small((2, 3), 34),)),
    ("stacks", lambda a, b: sinter.hstack([a, b])[:3] + sinter.column_stack([a, b])[:, 0],
     lambda: (_small((3,), 35), _small((3,), 36))),
    ("tensor_split", lambda a: sinter.tensor_split(a, [1], 1), lambda: (_small((2, 3), 37),)),
    ("combinations", lambda a, b: sinter.combinations(a, 2, True).sum(1)[:3]
     + sinter.cartesian_prod(a[:2], b).prod(1)[:3], lambda: (_small((3,), 38), _small((2,), 39))),
]


@pytest.mark.parametrize("name,fn,inputs", GRADCHECK, ids=[g[0] for g in GRADCHECK])
def test_gradcheck(name, fn, inputs):
    assert gradcheck(fn, inputs())


# --- random draws: shapes, dtypes, ranges and simple statistics with fixed seeds ---

def test_rand_like_randn_like_randint_like():
    sinter.manual_seed(0)
    x = sinter.zeros(100, 100, dtype=sinter.float64)
    u = sinter.rand_like(x)
    assert u.dtype == sinter.float64 and tuple(u.shape) == (100, 100)
    assert 0 <= u.min().item() and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.02
    n = sinter.randn_like(x, dtype=sinter.float32, requires_grad=True)
    assert n.dtype == sinter.float32 and n.requires_grad and n.is_leaf
    assert abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1) < 0.05
    r = sinter.randint_like(x.int(), 5)
    assert r.dtype == sinter.int32 and r.min().item() == 0 and r.max().item() == 4
    r = sinter.randint_like(x, low=-2, high=3, dtype=sinter.int64)
    assert r.dtype == sinter.int64 and r.min().item() == -2 and r.max().item() == 2
    f = sinter.randint_like(x, 2, 5)
    assert f.dtype == sinter.float64 and (f == f.floor()).all() and f.min().item() == 2
    assert sinter.full_like(x, 7, layout=None, memory_format=None).sum().item() == 70000
    with pytest.raises(NotImplementedError, match="layout"):
        sinter.rand_like(x, layout="sparse_coo")
    with pytest.raises(NotImplementedError, match="generator"):
        sinter.randn_like(x, generator=object())


def test_randperm():
    sinter.manual_seed(1)
    p = sinter.randperm(1000)
    assert p.dtype == sinter.int64 and sorted(p.tolist()) == list(range(1000))
    assert p.tolist() != list(range(1000))
    assert sinter.randperm(0).shape == (0,)
    q = sinter.randperm(10, dtype=sinter.float32, requires_grad=True)
    assert q.requires_grad and sorted(q.tolist()) == [float(k) for k in range(10)]
    sinter.manual_seed(2)
    first = sinter.randperm(50).tolist()
    sinter.manual_seed(2)
    assert sinter.randperm(50).tolist() == first


def test_normal_overloads(torch):
    sinter.manual_seed(3)
    mean = sinter.tensor([0.0, 10.0], dtype=sinter.float64)
    std = sinter.tensor([[1.0], [0.1]], dtype=sinter.float64)
    assert sinter.normal(mean, std).shape == (2, 2)
    draws = sinter.normal(sinter.full((20000,), 3.0), 2.0)
    assert draws.dtype == sinter.float32
    assert abs(draws.mean().item() - 3) < 0.1 and abs(draws.std().item() - 2) < 0.1
    draws = sinter.normal(-1.0, sinter.full((20000,), 0.5, dtype=sinter.float64))
    assert draws.dtype == sinter.float64 and abs(draws.std().item() - 0.5) < 0.02
    draws = sinter.normal(1.0, 0.0, (3, 2), dtype=sinter.float64)
    assert draws.dtype == sinter.float64 and draws.tolist() == [[1.0] * 2] * 3
    assert sinter.normal(0.0, 1.0, size=(4,), requires_grad=True).is_leaf
    # The gradient of the mean and std is zero, as torch's.
    for L in (sinter, torch):
        m = L.tensor([1.0, 2.0], requires_grad=True)
        s = L.tensor([1.0], requires_grad=True)
        L.normal(m, s).sum().backward()
        assert m.grad.tolist() == [0.0, 0.0] and s.grad.tolist() == [0.0]


def test_bernoulli(torch):
    sinter.manual_seed(4)
    p = sinter.tensor([0.0, 0.25, 1.0], dtype=sinter.float64).expand(20000, 3)
    draws = sinter.bernoulli(p)
    assert draws.dtype == sinter.float64 and set(draws.flatten().tolist()) <= {0.0, 1.0}
    means = draws.mean(0).tolist()
    assert means[0] == 0 and means[2] == 1 and abs(means[1] - 0.25) < 0.02
    half = sinter.zeros(20000, dtype=sinter.float16).bernoulli(0.5)
    assert half.dtype == sinter.float16 and abs(half.float().mean().item() - 0.5) < 0.02
    for L in (sinter, torch):
        x = L.tensor([0.5, 0.2], requires_grad=True)
        out = L.bernoulli(x)
        out.sum().backward()
        assert out.requires_grad and x.grad.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("rate", [0.0, 0.5, 4.0, 30.0, 1e4])
def test_poisson_statistics(rate):
    sinter.manual_seed(5)
    draws = sinter.poisson(sinter.full((20000,), rate, dtype=sinter.float64))
    assert draws.dtype == sinter.float64 and (draws == draws.floor()).all()
    assert draws.min().item() >= 0
    if rate == 0:
        assert draws.max().item() == 0
        return
    assert abs(draws.mean().item() - rate) < 5 * math.sqrt(rate / 20000)
    assert abs(draws.var().item() / rate - 1) < 0.06


def test_poisson_shape_dtype_and_gradient():
    sinter.manual_seed(6)
    rates = sinter.tensor([[0.5, 12.0], [0.0, 100.0]], requires_grad=True)
    out = sinter.poisson(rates)
    assert out.dtype == sinter.float32 and out.shape == (2, 2) and out[1, 0].item() == 0
    out.sum().backward()
    assert rates.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
