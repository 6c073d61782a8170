"""The functions of sinter and the Tensor methods of ops.cpp and _ops.py, each called as torch is
called and compared with torch's result for the same inputs (f64), plus their argument errors."""

import random

import pytest

import sinter


def _data(shape, seed, low=-2.0, high=2.0):
    rng = random.Random(seed)
    n = 1
    for s in shape:
        n *= s
    flat = [rng.uniform(low, high) for _ in range(n)]
    for s in reversed(shape[1:]):
        flat = [flat[i:i + s] for i in range(0, len(flat), s)]
    return flat


def _both(lib, data, dtype=None):
    return lib.tensor(data, dtype=dtype or lib.float64)


def _flat(x):
    """A result as a flat list of numbers (tuples of tensors element by element), with the shapes
    it was made of, so that two results compare by value and by shape."""
    if isinstance(x, (tuple, list)):
        out, shapes = [], []
        for v in x:
            values, shape = _flat(v)
            out += values
            shapes.append(shape)
        return out, shapes
    if hasattr(x, "tolist"):
        return [float(v) for v in x.flatten().tolist()] if x.dim() else [float(x.item())], \
            tuple(x.shape)
    return [float(x)], ()


# (name, fn(lib, a, b, c)): a and b are (3, 4) f64, c is (2, 3, 4) f64; each row runs on both.
CASES = [
    ("add alpha", lambda L, a, b, c: L.add(a, b, alpha=2)),
    ("add number", lambda L, a, b, c: L.add(a, 1.5, alpha=2)),
    ("sub", lambda L, a, b, c: L.sub(a, b, alpha=0.5)),
    ("mul method", lambda L, a, b, c: a.mul(b)),
    ("div floor", lambda L, a, b, c: L.div(a, b, rounding_mode="floor")),
    ("div trunc", lambda L, a, b, c: a.div(0.3, rounding_mode="trunc")),
    ("floor_divide", lambda L, a, b, c: L.floor_divide(a, 0.7)),
    ("remainder", lambda L, a, b, c: L.remainder(a, b)),
    ("pow number base", lambda L, a, b, c: L.pow(2, a)),
    ("maximum", lambda L, a, b, c: L.maximum(a, b)),
    ("minimum method", lambda L, a, b, c: a.minimum(b)),
    ("max elementwise", lambda L, a, b, c: L.max(a, b)),
    ("atan2", lambda L, a, b, c: L.atan2(a, b)),
    ("hypot", lambda L, a, b, c: a.hypot(b)),
    ("comparisons", lambda L, a, b, c: [L.lt(a, b), a.ge(0.5), L.eq(a, a), a.ne(b)]),
    ("where number", lambda L, a, b, c: L.where(a > 0, a, 0.0)),
    ("where method", lambda L, a, b, c: a.where(a > b, b)),
    ("masked_fill", lambda L, a, b, c: a.masked_fill(a < 0, -7.0)),
    ("lerp", lambda L, a, b, c: L.lerp(a, b, 0.25)),
    ("addcmul", lambda L, a, b, c: L.addcmul(a, a, b, value=0.5)),
    ("addcdiv", lambda L, a, b, c: a.addcdiv(a, b.abs() + 1, value=2)),
    ("baddbmm", lambda L, a, b, c: L.baddbmm(c[:, :3, :3], c, c.transpose(1, 2), beta=0.5,
                                             alpha=2)),
    ("bmm", lambda L, a, b, c: L.bmm(c, c.transpose(1, 2))),
    ("mm", lambda L, a, b, c: L.mm(a, b.t())),
    ("matmul", lambda L, a, b, c: L.matmul(c, a.t())),
    ("einsum", lambda L, a, b, c: L.einsum("bij,kj->bik", c, a)),
    ("einsum list", lambda L, a, b, c: L.einsum("ij,ij->i", [a, b])),
    ("kron", lambda L, a, b, c: L.kron(a[:2, :2], b[:2, :3])),
    ("tril triu", lambda L, a, b, c: [L.tril(a), a.triu(1), L.tril(a, -1)]),
    ("gather", lambda L, a, b, c: L.gather(a, 1, L.tensor([[0, 0], [1, 0], [3, 2]]))),
    ("index_select", lambda L, a, b, c: a.index_select(0, L.tensor([2, 0]))),
    ("scatter_add", lambda L, a, b, c: L.zeros(3, 4, dtype=L.float64).scatter_add(
        1, L.tensor([[0, 1, 0, 1]] * 3), a)),
    ("index_add", lambda L, a, b, c: L.index_add(a, 0, L.tensor([0, 2]), b[:2], alpha=2)),
    ("nonzero", lambda L, a, b, c: [L.nonzero(a > 0), (a > 0).nonzero(as_tuple=True)]),
    ("logsumexp", lambda L, a, b, c: [L.logsumexp(a, 1), c.logsumexp((0, 2), keepdim=True)]),
    ("topk", lambda L, a, b, c: list(L.topk(a, 2))),
    ("topk smallest", lambda L, a, b, c: list(a.topk(2, dim=0, largest=False))),
    ("sort", lambda L, a, b, c: list(L.sort(a, dim=0, descending=True))),
    ("sort method", lambda L, a, b, c: list(a.sort())),
    ("argsort", lambda L, a, b, c: a.argsort(dim=1, descending=True)),
    ("unique", lambda L, a, b, c: list(L.unique(L.tensor([3, 1, 3, 2, 1]), return_inverse=True,
                                                 return_counts=True))),
    ("rounding", lambda L, a, b, c: [L.floor(a * 3), L.ceil(a * 3), L.round(a * 3),
                                     L.trunc(a * 3), L.frac(a * 3), L.fix(a * 3),
                                     (a * 30).round(decimals=-1), a.round(decimals=2),
                                     (a * 3).floor(), (a * 3).ceil(), (a * 3).trunc()]),
    ("unique dim", lambda L, a, b, c: [
        list(L.unique((c * 2).floor().clamp(-1, 1), dim=d, return_inverse=True,
                      return_counts=True)) for d in (0, 1, 2)]),
    ("searchsorted", lambda L, a, b, c: L.searchsorted(L.tensor([0.0, 1.0, 2.0]), a)),
    ("bucketize", lambda L, a, b, c: L.bucketize(a, L.tensor([0.0, 1.0]), right=True)),
    ("cat", lambda L, a, b, c: [L.cat([a, b]), L.cat((a, b), dim=1), L.concat([a, b], 1)]),
    ("stack", lambda L, a, b, c: L.stack([a, b], dim=1)),
    ("split", lambda L, a, b, c: [list(L.split(a, 2)), list(a.split([1, 3], dim=1))]),
    ("chunk", lambda L, a, b, c: list(a.chunk(2, dim=1))),
    ("unbind", lambda L, a, b, c: [list(L.unbind(a)), list(c.unbind(1)), list(c.unbind(dim=-1))]),
    ("flip roll", lambda L, a, b, c: [L.flip(a, [0, 1]), a.roll(1), L.roll(a, (1, -1), (0, 1))]),
    ("diagonal diag", lambda L, a, b, c: [L.diagonal(c, 0, 1, 2), a.diag(1), L.diag(a[0])]),
    ("repeat_interleave", lambda L, a, b, c: [L.repeat_interleave(a, 2, dim=0),
                                              a.repeat_interleave(L.tensor([1, 0, 2]), dim=0)]),
    ("meshgrid", lambda L, a, b, c: list(L.meshgrid(a[0], b[0], indexing="xy"))),
    ("squeeze", lambda L, a, b, c: [L.squeeze(a[:1]), L.squeeze(c[:, :1], 1)]),
    ("isclose allclose", lambda L, a, b, c: [L.isclose(a, a + 1e-9), L.allclose(a, b),
                                             a.allclose(a)]),
    ("std var", lambda L, a, b, c: [L.std(a), a.std(1), a.std(0, unbiased=False),
                                    L.var(a, 1, keepdim=True)]),
    ("functions of methods", lambda L, a, b, c: [L.exp(a), L.sum(a, 1), L.mean(c, (0, 2)),
                                                 L.softmax(a, 1), L.clamp(a, -1, 1),
                                                 L.square(a), L.clip(a, max=0.5)]),
    ("max min dim", lambda L, a, b, c: [list(L.max(a, 1)), list(L.min(a, 0, keepdim=True)),
                                        L.max(a), a.max(1).indices]),
]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_op_matches_pytorch(torch, name, fn):
    a, b, c = _data((3, 4), 1), _data((3, 4), 2), _data((2, 3, 4), 3)
    got, got_shapes = _flat(fn(sinter, _both(sinter, a), _both(sinter, b), _both(sinter, c)))
    want, want_shapes = _flat(fn(torch, _both(torch, a), _both(torch, b), _both(torch, c)))
    assert got_shapes == want_shapes
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_named_tuples_and_types():
    a = sinter.tensor([[1.0, 5.0, 3.0]])
    top = a.topk(2)
    assert type(top).__name__ == "topk" and top.values.tolist() == [[5.0, 3.0]]
    assert sinter.sort(a).indices.tolist() == [[0, 2, 1]]
    assert isinstance(sinter.split(a, 1, dim=1), tuple)
    assert sinter.add(sinter.arange(3), 2).dtype == sinter.int64  # an int stays int
    assert sinter.add(sinter.arange(3), 2.5).dtype == sinter.float32


def test_argument_errors():
    a = sinter.ones(2)
    with pytest.raises(TypeError, match="add\\(\\): argument 'other' must be Tensor or Number"):
        sinter.add(a, "x")
    with pytest.raises(TypeError, match="where\\(\\): argument 'other'"):
        sinter.where(a > 0, a, None)
    with pytest.raises(RuntimeError, match="mm: expected 2-D tensors"):
        sinter.mm(a, a)
    with pytest.raises(RuntimeError, match="cat"):
        sinter.cat([a, sinter.ones(2, 2)])


def test_alpha_and_masked_fill_arguments_as_torch(torch):
    for L in (sinter, torch):
        assert L.add(L.ones(2), L.ones(2), alpha=L.tensor(3.0)).tolist() == [4.0, 4.0]
    with pytest.raises(TypeError, match="argument 'alpha' must be Number"):
        sinter.add(sinter.ones(2), sinter.ones(2), alpha="x")
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        sinter.sub(sinter.arange(2), 1, alpha=2.5)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        sinter.ones(3).masked_fill(sinter.ones(3) > 0, sinter.ones(1, 1))
    data = [[0.0, 1.0, 2.0], [3.0, 4.0, 6.0]]
    for unbiased in (True, False):
        assert sinter.tensor(data).std(unbiased).item() == pytest.approx(
            torch.tensor(data).std(unbiased).item())
