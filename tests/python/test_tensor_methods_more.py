"""torch.Tensor's methods composed in sinter/_methods_more.py and _methods_scan.py (grad_fn, type,
norm, torch's aliases, unfold, diag_embed, unique_consecutive, cummax, logcumsumexp, mode, the
random fills, ...), each called as torch is called and held against torch's result for the same
inputs: values, dtypes, gradients of f64 inputs, and the class of the error for bad input.

To add a method: a row in CASES (values and, for f64 inputs that require grad, gradients), a row
in ERRORS for each bad input, and a gradcheck row in GRADCHECK where it has a gradient."""

import math
import re
import sys

import pytest
from torch_parity import assert_same, rand

import sinter
from sinter.autograd import gradcheck

INF, NAN = math.inf, math.nan


def _dtype_name(dtype):
    return str(dtype).rpartition(".")[2]


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _check(fn, make, torch, grad=True):
    """fn on make(sinter) and make(torch): the same values and dtypes, and, where an f64 input
    requires grad, the same gradients for one upstream gradient of each output."""
    xs, txs = make(sinter), make(torch)
    got, want = _outputs(fn(*xs)), _outputs(fn(*txs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert _dtype_name(g.dtype) == _dtype_name(w.dtype)
        assert_same(g, w)
    leaves = [i for i, x in enumerate(txs) if isinstance(x, torch.Tensor) and x.requires_grad]
    pairs = [(g, w) for g, w in zip(got, want) if w.requires_grad]
    if not grad or not leaves or not pairs:
        return
    for k, (g, w) in enumerate(pairs):
        seed = rand(torch, w.shape, 100 + k)
        (w * seed).sum().backward(retain_graph=True)
        (g * rand(sinter, g.shape, 100 + k)).sum().backward(retain_graph=True)
    for i in leaves:
        assert xs[i].grad is not None, f"input {i} got no gradient"
        assert_same(xs[i].grad, txs[i].grad, f"gradient of input {i}")


def _g(shape, seed, low=-2.0, high=2.0):
    """An f64 input that requires grad, alike for both libraries."""
    return lambda L: rand(L, shape, seed, low, high).requires_grad_(True)


def _lib(x):
    """The library (sinter or torch) of tensor x."""
    return sinter if isinstance(x, sinter.Tensor) else sys.modules["torch"]


def _ties(L):
    return L.tensor([[1., 3., 3., 2., 1., 1., 3.], [5., 2., 5., 2., 7., 0., 0.]],
                    dtype=L.float64).requires_grad_(True)


# (id, fn(x, ...), make(L) -> inputs): values against torch and, for f64 inputs, gradients.
CASES = [
    ("norm fro", lambda x: x.norm(), lambda L: (_g((3, 4), 1)(L),)),
    ("norm p dims", lambda x: [x.norm(p, d, k) for p, d, k in (
        (1, 1, False), (3, (0, 2), True), (0.5, -1, False), (INF, 0, True), (-INF, 1, False),
        (0, (1,), False), ("fro", (0, 1), True), (None, None, False), (-1.5, 2, False))],
     lambda L: (_g((2, 3, 4), 2)(L),)),
    ("norm zeros", lambda x: [x.norm(), x.norm(1.5, 1), x.norm(INF, 1)],
     lambda L: (L.zeros(2, 3, dtype=L.float64).requires_grad_(True),)),
    ("norm dtype", lambda x: x.norm(3, dtype=_lib(x).float64),
     lambda L: (rand(L, (5,), 3).float(),)),
    ("norm function", lambda x: [_lib(x).norm(x, 2.5, 0, True), _lib(x).norm(x, "fro", (0, 1))],
     lambda L: (_g((3, 2), 4)(L),)),
    ("multiply subtract divide", lambda x, y: [x.multiply(y), x.subtract(y, alpha=2),
                                               x.divide(y), x.divide(y, rounding_mode="floor"),
                                               x.divide(y, rounding_mode="trunc")],
     lambda L: (_g((3, 4), 5)(L), _g((4,), 6, 0.5, 2.0)(L))),
    ("negative positive absolute arctan2", lambda x, y: [x.negative(), x.positive(),
                                                         x.absolute(), x.arctan2(y)],
     lambda L: (_g((3, 4), 7)(L), _g((3, 4), 8)(L))),
    ("comparisons", lambda x, y: [x.greater(y), x.greater_equal(0.5), x.less(y),
                                  x.less_equal(y), x.not_equal(y)],
     lambda L: (rand(L, (3, 4), 9).round(), rand(L, (3, 4), 10).round())),
    ("ravel unflatten", lambda x: [x.transpose(0, 1).ravel(), x.unflatten(1, (2, -1)),
                                   x.unflatten(-1, (1, 4, 1))],
     lambda L: (_g((3, 4), 11)(L),)),
    ("unfold", lambda x: [x.unfold(1, 3, 2), x.unfold(0, 2, 1), x.unfold(-1, 5, 5),
                          x.unfold(1, 0, 3), x.unfold(1, 2, 7)],
     lambda L: (_g((3, 7), 12)(L),)),
    ("unfold 0-d", lambda x: x.unfold(0, 1, 1), lambda L: (_g((), 13)(L),)),
    ("split_with_sizes", lambda x: x.split_with_sizes([1, 0, 3], 1),
     lambda L: (_g((2, 4), 14)(L),)),
    ("sum_to_size", lambda x: [x.sum_to_size(1, 4, 1), x.sum_to_size((4, 1)),
                               x.sum_to_size(1), x.sum_to_size(2, 4, 3)],
     lambda L: (_g((2, 4, 3), 15)(L),)),
    ("flips msort", lambda x: [x.fliplr(), x.flipud(), x.msort()],
     lambda L: (_g((3, 4), 16)(L),)),
    ("diag_embed", lambda x: [x.diag_embed(), x.diag_embed(1), x.diag_embed(-2, 0, 2),
                              x.diag_embed(2, -1, 0), x.diag_embed(0, 1, -1)],
     lambda L: (_g((2, 3), 17)(L),)),
    ("diagflat", lambda x: [x.diagflat(), x.diagflat(-1), x.diagflat(2)],
     lambda L: (_g((2, 2), 18)(L),)),
    ("diag_embed int", lambda x: x.diag_embed(1), lambda L: (L.tensor([[1, 2], [3, 4]]),)),
    ("narrow_copy", lambda x: x.narrow_copy(1, 1, 2), lambda L: (_g((3, 4), 19)(L),)),
    ("cummax cummin", lambda x: [*x.cummax(1), *x.cummin(1), *x.cummax(0), *x.cummin(-2)],
     lambda L: (_ties(L),)),
    ("cummax random", lambda x: [*x.cummax(2), *x.cummin(0)], lambda L: (_g((3, 4, 9), 20)(L),)),
    ("cummax nan", lambda x: [*x.cummax(0), *x.cummin(0)],
     lambda L: (L.tensor([1., 3., NAN, 2., NAN, 4.], dtype=L.float64),)),
    ("cummax int bool", lambda x, b: [*x.cummax(0), *x.cummin(1), *b.cummax(1), *b.cummin(1)],
     lambda L: (L.tensor([[3, 1, 3], [0, 5, 5]]),
                L.tensor([[True, False, True], [False, False, True]]))),
    ("cummax 0-d", lambda x: [*x.cummax(0), *x.cummin(-1)], lambda L: (_g((), 21)(L),)),
    ("logcumsumexp", lambda x: [x.logcumsumexp(1), x.logcumsumexp(0), x.logcumsumexp(-1)],
     lambda L: (_g((3, 11), 22, -5.0, 5.0)(L),)),
    ("logcumsumexp large", lambda x: x.logcumsumexp(0),
     lambda L: (L.tensor([1e4, 1e4, -1e4, 2e4, -INF, 3.0], dtype=L.float64),)),
    ("mode", lambda x: [*x.mode(), *x.mode(1, True), *x.mode(0)], lambda L: (_ties(L),)),
    ("mode int bool", lambda x, b: [*x.mode(0), *x.mode(), *b.mode(), *b.mode(0)],
     lambda L: (L.tensor([[3, 1, 3], [0, 1, 1], [3, 5, 0]]),
                L.tensor([[True, False, False], [False, True, True]]))),
    ("mode 0-d", lambda x: [*x.mode(), *x.mode(0, True)], lambda L: (_g((), 24)(L),)),
    ("mode empty rows", lambda x: [*x.mode(0), *x.t().mode(1, True)],
     lambda L: (L.zeros(2, 0),)),
    ("unique_consecutive", lambda x: [
        *x.unique_consecutive(return_inverse=True, return_counts=True),
        *x.unique_consecutive(True, True, dim=0), *x.unique_consecutive(True, True, dim=1),
        x.unique_consecutive()],
     lambda L: (L.tensor([[1, 1, 2], [1, 1, 2], [3, 1, 1], [3, 1, 1]]),)),
    ("unique_consecutive nan empty", lambda x, e: [
        *x.unique_consecutive(return_counts=True), *e.unique_consecutive(True, True),
        *e.unique_consecutive(True, True, dim=0), *e.t().unique_consecutive(True, True, dim=1)],
     lambda L: (L.tensor([NAN, NAN, 1., 1., 2.]), L.zeros(0, 3))),
]


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(torch, name, fn, make):
    _check(fn, make, torch)


# (id, fn(L), error class): torch and sinter both raise this class for the call.
ERRORS = [
    ("norm bad order", lambda L: L.ones(2, 3).norm("foo"), RuntimeError),
    ("norm fro 3 dims", lambda L: L.ones(2, 3, 4).norm("fro", (0, 1, 2)), RuntimeError),
    ("norm int", lambda L: L.arange(3).norm(), NotImplementedError),
    ("norm int dtype", lambda L: L.ones(3).norm(dtype=L.int64), RuntimeError),
    ("norm empty inf", lambda L: L.ones(0).norm(INF), RuntimeError),
    ("norm empty negative", lambda L: L.ones(2, 0).norm(-1, 1), RuntimeError),
    ("norm repeated dim", lambda L: L.ones(2, 3).norm(2, (0, 0)), RuntimeError),
    ("type bad name", lambda L: L.ones(2).type("DoubleTensor"), ValueError),
    ("type dtype name", lambda L: L.ones(2).type("torch.float64"), ValueError),
    ("equal number", lambda L: L.ones(2).equal(1), TypeError),
    ("is_same_size number", lambda L: L.ones(2).is_same_size(3), TypeError),
    ("positive bool", lambda L: L.tensor([True]).positive(), NotImplementedError),
    ("unflatten empty", lambda L: L.ones(3).unflatten(0, ()), RuntimeError),
    ("unflatten product", lambda L: L.ones(3).unflatten(0, (2, 2)), RuntimeError),
    ("unflatten two inferred", lambda L: L.ones(6).unflatten(0, (-1, -1)), RuntimeError),
    ("unflatten 0-d", lambda L: L.tensor(5.).unflatten(0, (1,)), (IndexError, RuntimeError)),
    ("unfold too long", lambda L: L.ones(3).unfold(0, 4, 1), RuntimeError),
    ("unfold step", lambda L: L.ones(3).unfold(0, 2, 0), RuntimeError),
    ("unfold size", lambda L: L.ones(3).unfold(0, -1, 1), RuntimeError),
    ("unfold dim", lambda L: L.ones(3).unfold(1, 1, 1), IndexError),
    ("split_with_sizes sum", lambda L: L.ones(3).split_with_sizes([1, 1]), RuntimeError),
    ("split_with_sizes negative", lambda L: L.ones(3).split_with_sizes([-1, 4]), RuntimeError),
    ("sum_to_size", lambda L: L.ones(2, 3).sum_to_size(2), RuntimeError),
    ("sum_to_size longer", lambda L: L.ones(2, 3).sum_to_size(1, 2, 3, 1), RuntimeError),
    ("fliplr 1-d", lambda L: L.ones(3).fliplr(), RuntimeError),
    ("flipud 0-d", lambda L: L.tensor(1.).flipud(), RuntimeError),
    ("diag_embed same dims", lambda L: L.ones(2, 3).diag_embed(0, 1, 1), RuntimeError),
    ("diag_embed dim", lambda L: L.ones(2, 3).diag_embed(0, 0, 3), IndexError),
    ("diag_embed 0-d", lambda L: L.tensor(2.).diag_embed(), IndexError),
    ("fill_diagonal_ 1-d", lambda L: L.ones(3).fill_diagonal_(2), RuntimeError),
    ("fill_diagonal_ unequal", lambda L: L.ones(2, 3, 3).fill_diagonal_(2), RuntimeError),
    ("fill_diagonal_ grad", lambda L: L.ones(2, 2, requires_grad=True).fill_diagonal_(2),
     RuntimeError),
    ("cumsum_ bool", lambda L: L.tensor([True]).cumsum_(0), (RuntimeError, NotImplementedError)),
    ("cummax dim", lambda L: L.ones(2, 3).cummax(2), IndexError),
    ("cummin 0-d dim", lambda L: L.tensor(1.).cummin(1), IndexError),
    ("logcumsumexp int", lambda L: L.arange(3).logcumsumexp(0), NotImplementedError),
    ("mode empty", lambda L: L.ones(0).mode(), IndexError),
    ("mode empty dim", lambda L: L.ones(0, 0).mode(0), IndexError),
    ("mode dim", lambda L: L.ones(2, 3).mode(-3), IndexError),
    ("unique_consecutive 0-d dim", lambda L: L.tensor(3.).unique_consecutive(dim=0),
     IndexError),
    ("unique_consecutive empty rows", lambda L: L.zeros(0, 3).unique_consecutive(dim=1),
     RuntimeError),
    ("unique_consecutive grad", lambda L: L.ones(3, requires_grad=True)
     .unique_consecutive().sum().backward(), (NotImplementedError, RuntimeError)),
    ("eq_ broadcast", lambda L: L.ones(3).eq_(L.ones(2, 3)), RuntimeError),
    ("random_ from to", lambda L: L.zeros(3).random_(5, 3), RuntimeError),
    ("random_ zero to", lambda L: L.zeros(3, dtype=L.int32).random_(0), RuntimeError),
    ("random_ uint8 to", lambda L: L.zeros(3, dtype=L.uint8).random_(0, 300), RuntimeError),
    ("random_ uint8 from", lambda L: L.zeros(3, dtype=L.uint8).random_(-1, 3), RuntimeError),
    ("random_ bool to", lambda L: L.zeros(3, dtype=L.bool).random_(0, 3), RuntimeError),
    ("random_ from alone", lambda L: L.zeros(3).random_(**{"from": 4}), TypeError),
    ("exponential_ lambda", lambda L: L.zeros(3).exponential_(0), RuntimeError),
    ("exponential_ int", lambda L: L.zeros(3, dtype=L.int64).exponential_(), RuntimeError),
    ("log_normal_ std", lambda L: L.zeros(3).log_normal_(1, 0), RuntimeError),
    ("log_normal_ int", lambda L: L.zeros(3, dtype=L.int64).log_normal_(), NotImplementedError),
    ("geometric_ p 0", lambda L: L.zeros(3).geometric_(0), RuntimeError),
    ("geometric_ p 1", lambda L: L.zeros(3).geometric_(1), RuntimeError),
    ("cauchy_ sigma", lambda L: L.zeros(3).cauchy_(0, -1), RuntimeError),
    ("cauchy_ int", lambda L: L.zeros(3, dtype=L.int64).cauchy_(), RuntimeError),
    ("random fill grad", lambda L: L.zeros(3, requires_grad=True).exponential_(), RuntimeError),
]


@pytest.mark.parametrize("name,fn,error", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(torch, name, fn, error):
    with pytest.raises(error):
        fn(torch)
    with pytest.raises(error):
        fn(sinter)


def test_error_messages_name_the_method_and_values():
    with pytest.raises(NotImplementedError, match="norm: p='nuc'"):
        sinter.ones(2, 2).norm("nuc")
    with pytest.raises(RuntimeError, match=r"unfold: maximum size .* is 3 but size is 4"):
        sinter.ones(3).unfold(0, 4, 1)
    with pytest.raises(RuntimeError, match=r"split_with_sizes .* sum exactly to 3"):
        sinter.ones(3).split_with_sizes([1, 1])
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but "
                                           "got from=5 >= to=3"):
        sinter.zeros(3).random_(5, 3)
    with pytest.raises(RuntimeError, match="geometric_ expects p to be in \\(0, 1\\), but got "
                                           "p=1.5"):
        sinter.zeros(3).geometric_(1.5)
    with pytest.raises(RuntimeError, match="exponential_: a leaf tensor that requires"):
        sinter.zeros(3, requires_grad=True).exponential_()


# (id, fn, inputs): sinter.autograd.gradcheck (central differences in f64).
GRADCHECK = [
    ("norm", lambda x: [x.norm(), x.norm(3, 1), x.norm(-INF, 0)], (3, 4)),
    ("unfold", lambda x: x.unfold(1, 3, 1), (2, 5)),
    ("diag_embed", lambda x: x.diag_embed(-1, 0, 2), (2, 3)),
    ("sum_to_size", lambda x: x.sum_to_size(1, 4), (3, 4)),
    ("cummax", lambda x: x.cummax(1)[0] + x.cummin(1)[0], (2, 6)),
    ("logcumsumexp", lambda x: x.logcumsumexp(1), (2, 7)),
    ("mode", lambda x: x.mode(1)[0], (2, 5)),
]


@pytest.mark.parametrize("name,fn,shape", GRADCHECK, ids=[g[0] for g in GRADCHECK])
def test_gradcheck(name, fn, shape):
    def outputs(x):
        out = fn(x)
        return tuple(out) if isinstance(out, list) else out

    assert gradcheck(outputs, (rand(sinter, shape, 7).requires_grad_(True),))


# --- autograd and type queries ---

def test_grad_fn_names_and_repr_follow_torch(torch):
    class Twice(sinter.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    x, tx = sinter.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    for f in (lambda a: a.sum(), lambda a: a * 2, lambda a: a + a, lambda a: a - a,
              lambda a: a / 2, lambda a: a.exp(), lambda a: a.abs(), lambda a: a.relu()):
        got, want = f(x).grad_fn, f(tx).grad_fn
        assert got.name() == want.name() and type(got).__name__ == want.name()
        assert re.fullmatch(rf"<{want.name()} object at 0x[0-9a-f]+>", repr(got))
    assert Twice.apply(x).grad_fn.name() == "TwiceBackward"
    assert x.grad_fn is None and x.detach().grad_fn is None and sinter.ones(2).grad_fn is None
    with sinter.no_grad():
        assert (x * 2).grad_fn is None


def test_devices_types_and_sizes(torch):
    x = sinter.ones(2, 3)
    assert x.is_cpu and x.get_device() == -1 and sinter.get_device(x) == -1
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool",
                 "float8_e4m3fn", "float8_e5m2"):
        s = x.to(getattr(sinter, name))
        t = torch.ones(2, 3).to(getattr(torch, name))
        assert s.type() == t.type()
        assert s.is_signed() == t.is_signed() == sinter.is_signed(s), name
    assert x.type(sinter.float32) is x and x.type("torch.FloatTensor") is x
    for target in ("torch.DoubleTensor", "torch.IntTensor", "torch.BoolTensor"):
        assert x.type(target).type() == target
    assert x.type(sinter.int64).dtype == sinter.int64 and x.byte().dtype == sinter.uint8
    w = sinter.ones(2, requires_grad=True)
    assert w.type(sinter.float64).grad_fn is not None
    assert x.is_same_size(sinter.zeros(2, 3)) and not x.is_same_size(sinter.zeros(3, 2))
    assert sinter.is_same_size(x, x)


def test_equal_matches_torch(torch):
    pairs = [([1.0, 2.0], [1.0, 2.0]), ([1.0, 2.0], [1.0, 2.5]), ([NAN], [NAN]),
             ([1.0], [1.0, 1.0])]
    for a, b in pairs:
        assert sinter.tensor(a).equal(sinter.tensor(b)) == torch.equal(torch.tensor(a),
                                                                         torch.tensor(b))
    assert sinter.equal(sinter.tensor([1, 2]), sinter.tensor([1.0, 2.0]))
    assert not sinter.equal(sinter.ones(2), sinter.ones(1, 2))


def test_detach_in_place_on_leaves_only(torch):
    w = sinter.ones(2, requires_grad=True)
    assert w.detach_() is w and not w.requires_grad and w.grad_fn is None
    assert sinter.detach_(sinter.ones(2)).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="detach_: sinter cannot cut"):
        (sinter.ones(2, requires_grad=True) * 2).detach_()


# --- aliases and in-place forms ---

@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal",
                                  "less", "less_equal", "not_equal"])
def test_in_place_comparisons_keep_dtype(torch, name):
    for dtype in ("float64", "int64", "uint8"):
        x = sinter.tensor([[1, 2, 3], [3, 2, 1]]).to(getattr(sinter, dtype))
        tx = torch.tensor([[1, 2, 3], [3, 2, 1]]).to(getattr(torch, dtype))
        for other in (2, [2, 2, 1]):
            a, ta = x.clone(), tx.clone()
            s_other = sinter.tensor(other).to(a.dtype) if isinstance(other, list) else other
            t_other = torch.tensor(other).to(ta.dtype) if isinstance(other, list) else other
            assert getattr(a, name + "_")(s_other) is a
            getattr(ta, name + "_")(t_other)
            assert _dtype_name(a.dtype) == _dtype_name(ta.dtype)
            assert a.tolist() == ta.tolist()
    # The other tensor may require grad: a comparison has no gradient.
    y = sinter.ones(2)
    y.eq_(sinter.ones(2, requires_grad=True))
    assert y.tolist() == [1.0, 1.0]


def test_in_place_aliases_match_torch(torch):
    calls = [("multiply_", (3.0,)), ("subtract_", (0.5,)), ("divide_", (2.0,)),
             ("negative_", ()), ("arcsin_", ()), ("arccos_", ()),
             ("arctan_", ()), ("arcsinh_", ()), ("arctanh_", ()), ("absolute_", ())]
    for name, args in calls:
        x, tx = rand(sinter, (5,), 30, -0.9, 0.9), rand(torch, (5,), 30, -0.9, 0.9)
        assert getattr(x, name)(*args) is x
        getattr(tx, name)(*args)
        assert_same(x, tx, name)
    x, tx = sinter.tensor([1.5, 3.0]), torch.tensor([1.5, 3.0])
    x.arccosh_()
    tx.arccosh_()
    assert_same(x, tx)
    x.arctan2_(sinter.tensor([-1.0, 2.0]))
    tx.arctan2_(torch.tensor([-1.0, 2.0]))
    assert_same(x, tx)
    x, tx = sinter.tensor([7.0, -7.0]), torch.tensor([7.0, -7.0])
    x.divide_(2, rounding_mode="floor")
    tx.divide_(2, rounding_mode="floor")
    assert x.tolist() == tx.tolist()
    x = sinter.tensor([0.5])
    assert sinter.negative_(x) is x and x.tolist() == [-0.5]
    assert sinter.arcsin_(sinter.tensor([0.0])).tolist() == [0.0]


def test_package_functions_match_torch(torch):
    a, ta = rand(sinter, (3, 4), 31), rand(torch, (3, 4), 31)
    b, tb = rand(sinter, (3, 4), 32, 0.5, 2.0), rand(torch, (3, 4), 32, 0.5, 2.0)
    for name in ("multiply", "subtract", "divide", "greater", "greater_equal", "less",
                 "less_equal", "not_equal", "arctan2"):
        assert_same(getattr(sinter, name)(a, b), getattr(torch, name)(ta, tb), name)
        assert_same(getattr(sinter, name)(input=a, other=b), getattr(torch, name)(ta, tb), name)
    for name in ("negative", "positive", "absolute", "ravel", "fliplr", "flipud", "msort",
                 "diag_embed", "diagflat"):
        assert_same(getattr(sinter, name)(a), getattr(torch, name)(ta), name)
    assert_same(sinter.unflatten(a, 1, (2, 2)), torch.unflatten(ta, 1, (2, 2)))
    assert_same(sinter.narrow_copy(a, 0, 1, 2), torch.narrow_copy(ta, 0, 1, 2))
    for got, want in zip(sinter.split_with_sizes(a, [3, 1], 1),
                         torch.split_with_sizes(ta, [3, 1], 1)):
        assert_same(got, want)
    for name in ("cummax", "cummin"):
        got, want = getattr(sinter, name)(a, 1), getattr(torch, name)(ta, 1)
        assert type(got).__name__ == name and got._fields == ("values", "indices")
        assert_same(got.values, want.values)
        assert_same(got.indices, want.indices)
    assert_same(sinter.logcumsumexp(a, 0), torch.logcumsumexp(ta, 0))
    assert_same(sinter.mode(a.round(), 1).values, torch.mode(ta.round(), 1).values)
    got = sinter.unique_consecutive(a.round(), return_counts=True)
    for g, w in zip(got, torch.unique_consecutive(ta.round(), return_counts=True)):
        assert_same(g, w)
    assert_same(sinter.norm(a, 1.5, 1), torch.norm(ta, 1.5, 1))
    assert sinter.equal(a, a) and sinter.is_signed(a) and sinter.get_device(a) == -1


# --- in-place shape methods ---

@pytest.mark.parametrize("shape,value,wrap", [
    ((3, 3), 2, False), ((2, 4), 5.5, False), ((7, 3), 2, True), ((7, 3), 2, False),
    ((4, 3), 1, True), ((8, 2), -1, True), ((3, 3, 3), 9, False), ((0, 3), 1, False)])
def test_fill_diagonal_matches_torch(torch, shape, value, wrap):
    x, tx = rand(sinter, shape, 40), rand(torch, shape, 40)
    assert x.fill_diagonal_(value, wrap) is x
    tx.fill_diagonal_(value, wrap)
    assert_same(x, tx)
    i, ti = sinter.zeros(*shape, dtype=sinter.int64), torch.zeros(*shape, dtype=torch.int64)
    i.fill_diagonal_(2.7, wrap)
    ti.fill_diagonal_(2.7, wrap)
    assert i.tolist() == ti.tolist()
    if len(shape) == 2 and not wrap:  # a transposed layout (torch's wrap misreads one)
        t, tt = rand(sinter, shape[::-1], 41).t(), rand(torch, shape[::-1], 41).t()
        t.fill_diagonal_(value)
        tt.fill_diagonal_(value)
        assert_same(t, tt)


def test_cumulative_in_place_matches_torch(torch):
    for dtype in ("float64", "int32", "int64"):
        x = sinter.tensor([[1, 2, 3], [4, 5, 6]]).to(getattr(sinter, dtype))
        tx = torch.tensor([[1, 2, 3], [4, 5, 6]]).to(getattr(torch, dtype))
        assert x.cumsum_(1) is x and x.cumprod_(0) is x
        tx.cumsum_(1)
        tx.cumprod_(0)
        assert x.tolist() == tx.tolist() and _dtype_name(x.dtype) == _dtype_name(tx.dtype)


def test_new_empty_strided_takes_contiguous_strides_only():
    x = sinter.ones(2, dtype=sinter.float64)
    y = x.new_empty_strided((2, 3), (3, 1))
    assert tuple(y.shape) == (2, 3) and y.dtype == sinter.float64
    assert tuple(x.new_empty_strided((1, 3), (5, 1)).shape) == (1, 3)
    with pytest.raises(NotImplementedError, match="new_empty_strided: .*contiguous"):
        x.new_empty_strided((2, 3), (1, 2))


def test_logcumsumexp_float32_matches_torch(torch):
    got = rand(sinter, (9,), 23, -30.0, 30.0).float().logcumsumexp(0)
    want = rand(torch, (9,), 23, -30.0, 30.0).float().logcumsumexp(0)
    assert got.dtype == sinter.float32
    assert_same(got, want, rel=1e-6)


def test_unfold_gradient_sums_overlapping_windows():
    x = sinter.arange(5, dtype=sinter.float64).requires_grad_(True)
    x.unfold(0, 3, 1).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 3.0, 2.0, 1.0]


# --- random fills: statistics under fixed seeds, wide tolerances ---

def _draws(dtype=sinter.float64, n=20000):
    sinter.manual_seed(3)
    return sinter.empty(n, dtype=dtype)


def test_exponential_log_normal_cauchy_statistics():
    x = _draws()
    assert x.exponential_(2.0) is x
    assert x.min().item() >= 0 and abs(x.mean().item() - 0.5) < 0.03
    assert abs(x.std().item() - 0.5) < 0.03
    x.log_normal_(1.0, 0.5)
    assert x.min().item() > 0
    assert abs(x.log().mean().item() - 1.0) < 0.03 and abs(x.log().std().item() - 0.5) < 0.03
    x.cauchy_(1.0, 2.0)
    q = x.quantile(sinter.tensor([0.25, 0.5, 0.75], dtype=sinter.float64)).tolist()
    assert abs(q[1] - 1.0) < 0.15 and abs(q[2] - q[0] - 4.0) < 0.3
    y = _draws(sinter.float32, 1000)
    y.exponential_()
    assert y.dtype == sinter.float32 and y.min().item() >= 0


def test_geometric_statistics():
    x = _draws()
    x.geometric_(0.25)
    assert x.min().item() >= 1 and x.eq(x.round()).all().item()
    assert abs(x.mean().item() - 4.0) < 0.15
    assert abs(x.eq(1).double().mean().item() - 0.25) < 0.02
    i = _draws(sinter.int64, 1000)
    i.geometric_(0.5)
    assert i.dtype == sinter.int64 and i.min().item() >= 1


@pytest.mark.parametrize("dtype,args,low,high", [
    ("float64", (3, 7), 3, 7), ("float32", (5,), 0, 5), ("int64", (-4, 4), -4, 4),
    ("int32", (3, None), 3, 2**31 - 1), ("uint8", (), 0, 256), ("bool", (), 0, 2),
    ("float32", (), 0, 2**24 + 1), ("int64", (), 0, 2**63 - 1)])
def test_random_ranges(dtype, args, low, high):
    x = _draws(getattr(sinter, dtype), 4000)
    assert x.random_(*args) is x and x.dtype == getattr(sinter, dtype)
    values = x.to(sinter.int64).tolist() if dtype != "float32" else x.tolist()
    assert min(values) >= low and max(values) < high
    assert all(v == int(v) for v in values)
    if high - low <= 16:  # every value drawn, each about equally often
        counts = [values.count(v) for v in range(low, high)]
        assert min(counts) > 0.6 * len(values) / (high - low)
    else:
        assert abs(sum(values) / len(values) - (low + high) / 2) < 0.05 * (high - low)


def test_random_keywords_and_bounds(torch):
    x = _draws(sinter.int64, 500)
    x.random_(to=3)
    assert set(x.tolist()) == {0, 1, 2}
    x.random_(**{"from": 10, "to": 12})
    assert set(x.tolist()) == {10, 11}
    with pytest.warns(UserWarning, match="random_: .*2\\^24"):
        sinter.zeros(3).random_(0, 2**25)
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds"):
        sinter.zeros(3, dtype=sinter.uint8).random_(0, 300)


def test_random_fills_run_under_no_grad():
    w = sinter.zeros(4, requires_grad=True)
    with sinter.no_grad():
        for fill in (lambda t: t.random_(0, 3), lambda t: t.exponential_(),
                     lambda t: t.log_normal_(), lambda t: t.geometric_(0.5),
                     lambda t: t.cauchy_()):
            assert fill(w) is w
    assert w.requires_grad and w.grad_fn is None


@pytest.mark.cuda
@pytest.mark.skipif(not sinter.cuda.is_available(), reason="no CUDA device")
def test_on_cuda_matches_cpu():
    x = rand(sinter, (3, 7), 50)
    c = x.cuda()
    assert not c.is_cpu and c.get_device() == 0 and c.type() == "torch.cuda.DoubleTensor"
    assert c.type("torch.FloatTensor").is_cpu and c.type("torch.cuda.LongTensor").get_device() == 0
    assert x.type("torch.cuda.FloatTensor").type() == "torch.cuda.FloatTensor"
    for f in (lambda t: t.norm(3, 1), lambda t: t.unfold(1, 3, 2), lambda t: t.diag_embed(1),
              lambda t: t.cummax(1).indices, lambda t: t.logcumsumexp(1),
              lambda t: t.round().mode(1).indices, lambda t: t.round().unique_consecutive(dim=1)):
        assert_same(f(c).cpu(), f(x))
    sinter.manual_seed(0)
    d = sinter.empty(1000, dtype=sinter.float64, device="cuda")
    assert d.exponential_().min().item() >= 0 and d.random_(0, 3).max().item() == 2
