"""torch.Tensor's in-place methods (x.sub_(y), x.clamp_(...), ...), random fills, new_* factories
and small properties, composed in sinter/_methods.py: each against torch's for the same call."""

import math
import warnings

import pytest

import sinter

VALUES = [0.25, -0.5, 0.75, 0.1, -0.9, 0.6]


def _pair(lib, values=VALUES, dtype=None):
    return lib.tensor(values, dtype=dtype or lib.float64)


# (method, args(lib)): x.<method>_(*args) and x.<method>(*args), on both libraries.
IN_PLACE = [
    ("sub", lambda L: (_pair(L).flip(0),)), ("div", lambda L: (3.0,)), ("pow", lambda L: (2,)),
    ("exp", lambda L: ()), ("sqrt", lambda L: ()), ("abs", lambda L: ()), ("neg", lambda L: ()),
    ("sign", lambda L: ()), ("sin", lambda L: ()), ("tanh", lambda L: ()),
    ("sigmoid", lambda L: ()), ("relu", lambda L: ()), ("floor", lambda L: ()),
    ("round", lambda L: ()), ("trunc", lambda L: ()), ("frac", lambda L: ()),
    ("clamp", lambda L: (-0.3, 0.3)), ("clip", lambda L: (None, 0.2)),
    ("clamp_min", lambda L: (0.0,)), ("clamp_max", lambda L: (0.1,)), ("square", lambda L: ()),
    ("reciprocal", lambda L: ()), ("masked_fill", lambda L: (_pair(L) > 0, 7.0)),
    ("lerp", lambda L: (_pair(L).flip(0), 0.25)),
    ("addcmul", lambda L: (_pair(L), _pair(L).flip(0))), ("asin", lambda L: ()),
    ("atan2", lambda L: (_pair(L).flip(0),)), ("remainder", lambda L: (0.3,)),
    ("nan_to_num", lambda L: ()), ("logit", lambda L: (0.1,)), ("xlogy", lambda L: (2.0,)),
    ("sgn", lambda L: ()), ("log1p", lambda L: ()), ("exp2", lambda L: ()),
]


@pytest.mark.parametrize("name,args", IN_PLACE, ids=[r[0] for r in IN_PLACE])
def test_in_place_methods_match_torch(torch, name, args):
    x, tx = _pair(sinter), _pair(torch)
    out = getattr(x, name + "_")(*args(sinter))
    want = getattr(tx, name + "_")(*args(torch))
    assert out is x
    got, ref = x.tolist(), want.tolist()
    assert len(got) == len(ref)
    for g, w in zip(got, ref):
        assert (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, rel=1e-12, abs=1e-12)


def test_in_place_integer_and_bool_forms_match_torch(torch):
    for f in [lambda a: a.bitwise_and_(6), lambda a: a.bitwise_not_(), lambda a: a.tril_(),
              lambda a: a.floor_divide_(2), lambda a: a.remainder_(3),
              lambda a: a.logical_not_(), lambda a: a.abs_(), lambda a: a.clamp_(0, 3)]:
        x = sinter.tensor([[5, -3], [2, 0]])
        tx = torch.tensor([[5, -3], [2, 0]])
        f(x)
        f(tx)
        assert x.tolist() == tx.tolist() and str(x.dtype)[7:] == str(tx.dtype)[6:]
    # A result of a higher category is refused, as torch refuses it.
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        sinter.tensor([1, 2]).div_(2)
    with pytest.raises(RuntimeError, match="can't be cast"):
        sinter.tensor([True]).add_(1)


def test_in_place_methods_refuse_a_leaf_that_requires_grad():
    w = sinter.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="sub_: a leaf tensor that requires grad"):
        w.sub_(1)
    with pytest.raises(RuntimeError, match="clamp_: a view .* of a leaf tensor that requires"):
        w[1:].clamp_(min=0.5)
    with sinter.no_grad():
        w.sub_(1).mul_(2)
    assert w.tolist() == [0.0, 0.0, 0.0] and w.requires_grad


def test_random_fills_keep_dtype_and_range():
    sinter.manual_seed(0)
    x = sinter.empty(4096, dtype=sinter.float64)
    assert x.uniform_(-2, 3) is x
    assert min(x.tolist()) >= -2 and max(x.tolist()) < 3
    # The 4096 draws of N(1, 2) have mean 1 and std 2 within 10 standard errors (certain).
    v = x.normal_(1.0, 2.0).tolist()
    mean = sum(v) / len(v)
    std = math.sqrt(sum((a - mean) ** 2 for a in v) / (len(v) - 1))
    assert abs(mean - 1.0) < 10 * 2.0 / 64 and abs(std - 2.0) < 0.5
    b = sinter.zeros(1000, dtype=sinter.int64).bernoulli_(0.25)
    assert b.dtype == sinter.int64 and set(b.tolist()) <= {0, 1}
    assert sinter.zeros(10).bernoulli_(1.0).tolist() == [1.0] * 10
    assert sinter.ones(10).bernoulli_(sinter.zeros(10)).tolist() == [0.0] * 10
    with pytest.raises(RuntimeError, match="normal_: a leaf tensor that requires grad"):
        sinter.zeros(2, requires_grad=True).normal_()


def test_new_factories_and_properties_match_torch(torch):
    x, tx = _pair(sinter, dtype=sinter.float16), _pair(torch, dtype=torch.float16)
    for f in [lambda t: t.new_zeros(2, 3), lambda t: t.new_ones((2,)),
              lambda t: t.new_full((2, 2), 7), lambda t: t.new_tensor([1, 2]),
              lambda t: t.new_zeros(2, dtype=t.new_tensor([1]).long().dtype),
              lambda t: t.new_tensor([[1.5]])]:
        got, want = f(x), f(tx)
        assert tuple(got.shape) == tuple(want.shape) and got.tolist() == want.tolist()
        assert str(got.dtype)[7:] == str(want.dtype)[6:]
    assert tuple(x.new_empty(4, 5).shape) == (4, 5)
    assert x.new_ones(2, requires_grad=True).requires_grad
    m, tm = sinter.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    assert m.mT.tolist() == tm.mT.tolist()
    assert (m.nbytes, m.itemsize, m.nelement(), m.ndimension()) == \
        (tm.nbytes, tm.itemsize, tm.nelement(), tm.ndimension())
    assert x.nbytes == tx.nbytes and not m.is_complex()
    assert sinter.tensor([2.0]).is_nonzero() and not sinter.tensor([0]).is_nonzero()
    with pytest.raises(RuntimeError, match="ambiguous"):
        m.is_nonzero()
    # data: the values without history, sharing storage.
    w = sinter.ones(2, requires_grad=True)
    d = w.data
    assert not d.requires_grad
    d.mul_(3)
    assert w.tolist() == [3.0, 3.0]


def test_review_cases_match_torch(torch):
    # clamp_ and clamp_min with tensor bounds.
    for f in [lambda L, a: a.clamp_(L.tensor([2.0, 2.0]), L.tensor(3.0)),
              lambda L, a: a.clamp_min(L.tensor(2.0)),
              lambda L, a: a.clamp(max=L.tensor([0.0, 4.0]))]:
        got, want = f(sinter, sinter.tensor([1.0, 5.0])), f(torch, torch.tensor([1.0, 5.0]))
        assert got.tolist() == want.tolist()
    # new_tensor of a tensor takes the calling tensor's dtype; sizes as torch takes them.
    x, tx = sinter.ones(1, dtype=sinter.float64), torch.ones(1, dtype=torch.float64)
    with warnings.catch_warnings():  # torch recommends detach().clone() over this form
        warnings.simplefilter("ignore")
        want_dtype = str(tx.new_tensor(torch.tensor([1, 2])).dtype)[6:]
    assert str(x.new_tensor(sinter.tensor([1, 2])).dtype)[7:] == want_dtype
    assert tuple(x.new_zeros(size=(2, 3)).shape) == tuple(tx.new_zeros(size=(2, 3)).shape)
    with pytest.raises(TypeError):
        x.new_zeros()
    # add_ and mul_ take another dtype of the same kind; a float alpha on integers is refused.
    a, ta = sinter.zeros(2).add_(sinter.ones(2, dtype=sinter.float64), alpha=2), \
        torch.zeros(2).add_(torch.ones(2, dtype=torch.float64), alpha=2)
    assert a.tolist() == ta.tolist() and a.dtype == sinter.float32
    assert sinter.ones(2, dtype=sinter.int32).mul_(sinter.tensor([2, 3])).tolist() == [2, 3]
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        sinter.tensor([1, 2]).add_(2, alpha=0.5)
    # data = t writes t's values; mT needs two dims.
    w = sinter.ones(2, requires_grad=True)
    w.data = sinter.tensor([3.0, 4.0])
    assert w.tolist() == [3.0, 4.0] and w.requires_grad
    with pytest.raises(RuntimeError, match="shape, dtype and device"):
        w.data = sinter.tensor([3, 4])
    with pytest.raises(TypeError, match="keepdim needs a dim"):
        w.median(keepdim=True)
    with pytest.raises(RuntimeError, match="mT is only supported on matrices"):
        sinter.ones(3).mT
    # The random fills check their arguments and take torch's keywords.
    with pytest.raises(RuntimeError, match=r"p must be in \[0, 1\]"):
        sinter.zeros(2).bernoulli_(1.5)
    u = sinter.zeros(100).uniform_(**{"from": 2.0, "to": 3.0}).tolist()
    assert min(u) >= 2.0 and max(u) < 3.0


def test_order_statistics_review_cases_match_torch(torch):
    # An infinite median with autograd on stays infinite; its gradient is shared.
    m = sinter.tensor([math.inf, math.inf, math.inf], requires_grad=True)
    v = m.median()
    assert v.item() == math.inf
    v.backward()
    assert m.grad.tolist() == pytest.approx([1 / 3] * 3)
    # A 0-d input with keepdim keeps no dim, as torch.
    for q in [0.5, sinter.tensor([0.25, 0.5])]:
        tq = q if isinstance(q, float) else torch.tensor(q.tolist())
        got = sinter.quantile(sinter.tensor(2.5), q, dim=0, keepdim=True)
        want = torch.quantile(torch.tensor(2.5), tq, dim=0, keepdim=True)
        assert tuple(got.shape) == tuple(want.shape)
    # f32 slices past 2^24 elements: the rank of q = 1 is the last place.
    n = (1 << 24) + 4
    big = sinter.arange(float(n))
    assert sinter.quantile(big, 1.0).item() == big[-1].item()  # read, not past the end
