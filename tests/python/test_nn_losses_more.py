"""The likelihood, margin and triplet losses of sinter.nn.functional (_loss_functions.py) and
their modules (losses.py), each against torch's: the same call on the same f64 inputs gives the
same output and input gradients (at the edges too: margins, clamps, ties, Stirling's term), the
same dtypes, errors, printouts, attributes and state_dict keys; and fp64 finite differences agree
with each function's gradient.

To add a loss: rows in FUNCTIONS, MODULES, GRADCHECKS, ERRORS and REPRS."""

import inspect
import math
import random
import warnings

import pytest

import sinter
import sinter.nn.functional as F
from torch_parity import assert_error_as_torch, assert_same as _assert_same, C, G, rand as _rand


class V:
    """A differentiable f64 input of these values (an edge: a margin, a tie, a zero)."""

    def __init__(self, values):
        self.values = values

    def make(self, lib, seed):
        return lib.tensor(self.values, dtype=lib.float64).requires_grad_(True)


def _long(values):
    return lambda L: L.tensor(values)


def _f64(values):
    return lambda L: L.tensor(values, dtype=L.float64)


def _signs(shape, seed=8):
    rng = random.Random(seed)
    values = [rng.choice((1.0, -1.0)) for _ in range(math.prod(shape))]
    return lambda L: L.tensor(values, dtype=L.float64).reshape(shape)


def _bits(shape, seed=7):
    rng = random.Random(seed)
    values = [float(rng.random() < 0.5) for _ in range(math.prod(shape))]
    return lambda L: L.tensor(values, dtype=L.float64).reshape(shape)


def _resolve(lib, value):
    """A call argument: fn(lib) for tensors (a weight, a distance), else the value."""
    return value(lib) if callable(value) else value


def _compare(torch, fn, inputs):
    """fn(lib, *tensors) for both libraries: the same output, then the same input gradients for
    one random output gradient."""
    tin = [spec.make(torch, seed) for seed, spec in enumerate(inputs)]
    sin = [spec.make(sinter, seed) for seed, spec in enumerate(inputs)]
    want, got = fn(torch, *tin), fn(sinter, *sin)
    _assert_same(got, want, "output")
    shape = tuple(want.shape)
    want.backward(_rand(torch, shape, 99))
    got.backward(_rand(sinter, shape, 99))
    for i, (s, t) in enumerate(zip(sin, tin)):
        if t.requires_grad and t.grad is None:  # torch gives this input no gradient
            assert s.grad is None or s.grad.abs().sum().item() == 0, f"gradient of input {i}"
        elif t.requires_grad:
            _assert_same(s.grad, t.grad, f"gradient of input {i}")


def _fn(name, *args, **kwargs):
    """A row's call: F.<name>(*tensors, *args, **kwargs), tensor-valued arguments resolved."""
    def call(lib, *tensors):
        return getattr(lib.nn.functional, name)(
            *tensors, *[_resolve(lib, a) for a in args],
            **{k: _resolve(lib, v) for k, v in kwargs.items()})
    return call


def _cosine_distance(lib):
    return lambda x, y: 1.0 - lib.nn.functional.cosine_similarity(x, y)


NONE, SUM = {"reduction": "none"}, {"reduction": "sum"}

# (id, name, args after the tensors, kwargs, inputs): F.<name>(*inputs, *args, **kwargs).
FUNCTIONS = [
    # gaussian_nll_loss: var of input's shape, one per row, (N, 1), a float; clamped at eps
    ("gaussian", "gaussian_nll_loss", (), {}, [G((3, 4)), G((3, 4)), G((3, 4), 0.1, 2.0)]),
    ("gaussian full none", "gaussian_nll_loss", (True,), NONE,
     [G((3, 4)), G((3, 4)), G((3, 4), 0.1, 2.0)]),
    ("gaussian var per row", "gaussian_nll_loss", (), SUM, [G((3, 4)), G((3, 4)), G((3,), 0.1, 2)]),
    ("gaussian var (N, 1)", "gaussian_nll_loss", (), NONE,
     [G((3, 4)), G((3, 4)), G((3, 1), 0.1, 2.0)]),
    ("gaussian var (1, C, 1)", "gaussian_nll_loss", (), {"full": True},
     [G((2, 3, 4)), G((2, 3, 4)), G((2, 3, 1), 0.1, 2.0)]),
    ("gaussian var float", "gaussian_nll_loss", (0.7,), NONE, [G((3, 4)), G((3, 4))]),
    ("gaussian target broadcast", "gaussian_nll_loss", (), NONE,
     [G((3, 4)), G((1, 4)), G((3, 4), 0.1, 2.0)]),
    ("gaussian var clamped", "gaussian_nll_loss", (), {"eps": 1e-3, "reduction": "none"},
     [G((2, 3)), G((2, 3)), V([[0.0, 1e-4, 1e-3], [2e-3, 0.5, 1e-8]])]),
    ("gaussian unbatched", "gaussian_nll_loss", (), {}, [G((5,)), G((5,)), G((5,), 0.1, 2.0)]),
    # poisson_nll_loss: Stirling's term only where target > 1; target 0 gives torch's NaN
    # gradient
    ("poisson", "poisson_nll_loss", (), {}, [G((3, 4)), G((3, 4), 0.0, 4.0)]),
    ("poisson none", "poisson_nll_loss", (), NONE, [G((3, 4)), G((3, 4), 0.0, 4.0)]),
    ("poisson not log", "poisson_nll_loss", (False,), SUM, [G((3, 4), 0.1, 3.0), G((3, 4), 0, 4)]),
    ("poisson full", "poisson_nll_loss", (True, True), NONE,
     [G((6,)), V([0.0, 0.5, 1.0, 1.5, 2.0, 7.0])]),
    ("poisson full not log", "poisson_nll_loss", (False, True), {"eps": 0.25},
     [G((6,), 0.0, 3.0), V([0.0, 0.5, 1.0, 1.0 + 1e-9, 3.0, 9.0])]),
    ("poisson eps 0 at 0", "poisson_nll_loss", (False,), {"eps": 0.0, "reduction": "none"},
     [V([0.0, 1.0, 2.0]), C(_f64([0.0, 1.0, 2.0]))]),
    ("poisson broadcast", "poisson_nll_loss", (), NONE, [G((1, 4)), G((3, 1), 0.0, 4.0)]),
    ("poisson integer target", "poisson_nll_loss", (True, True), NONE,
     [G((2, 3)), C(_long([[0, 1, 2], [3, 4, 5]]))]),
    # hinge_embedding_loss: targets 1 and -1, others (both terms), at the margin
    ("hinge", "hinge_embedding_loss", (), {}, [G((3, 4)), C(_signs((3, 4)))]),
    ("hinge margin sum", "hinge_embedding_loss", (0.5,), SUM, [G((3, 4)), C(_signs((3, 4)))]),
    ("hinge edges", "hinge_embedding_loss", (), NONE,
     [V([1.0, 1.0, 0.0, -1.0, 2.0, 0.5, 1.0]),
      C(_f64([-1.0, 1.0, -1.0, -1.0, 0.0, 3.0, 0.0]))]),
    ("hinge broadcast", "hinge_embedding_loss", (), {"margin": 1.5, "reduction": "none"},
     [G((3, 4)), C(_signs((3, 1)))]),
    ("hinge integer target", "hinge_embedding_loss", (), NONE,
     [G((4,)), C(_long([1, -1, 1, -1]))]),
    # soft_margin_loss: target broadcast to input
    ("soft margin", "soft_margin_loss", (), {}, [G((3, 4)), C(_signs((3, 4)))]),
    ("soft margin none", "soft_margin_loss", (), NONE, [G((3, 4), -30, 30), C(_signs((3, 4)))]),
    ("soft margin broadcast", "soft_margin_loss", (), SUM, [G((3, 4)), C(_signs((1, 4)))]),
    ("soft margin zero", "soft_margin_loss", (), NONE, [V([0.0, 0.0]), C(_f64([1.0, -1.0]))]),
    # multilabel_soft_margin_loss: class means over the last dimension, weights
    ("multilabel soft", "multilabel_soft_margin_loss", (), {}, [G((3, 5)), C(_bits((3, 5)))]),
    ("multilabel soft weight", "multilabel_soft_margin_loss",
     (_f64([0.5, 1.0, 2.0, 0.0, 3.0]),), NONE, [G((3, 5)), C(_bits((3, 5)))]),
    ("multilabel soft 3-d", "multilabel_soft_margin_loss", (), {"reduction": "none"},
     [G((2, 3, 4)), G((2, 3, 4), 0.0, 1.0)]),
    ("multilabel soft unbatched", "multilabel_soft_margin_loss", (), SUM,
     [G((5,)), C(_bits((5,)))]),
    ("multilabel soft zero logits", "multilabel_soft_margin_loss", (), NONE,
     [V([[0.0, 0.0, 40.0, -40.0]]), C(_f64([[1.0, 0.0, 0.0, 1.0]]))]),
    # multilabel_margin_loss: targets up to the first -1, duplicates, pairs at the margin
    ("multilabel margin", "multilabel_margin_loss", (), {},
     [G((3, 4)), C(_long([[3, 0, -1, 1], [1, 2, 0, 3], [-1, 2, 2, 2]]))]),
    ("multilabel margin edges", "multilabel_margin_loss", (), NONE,
     [V([[0.1, 0.2, 0.4, 0.8], [0.5, 1.5, 0.5, 0.2], [0.0, 1.0, 0.0, 0.5]]),
      C(_long([[3, 0, -1, 1], [1, 1, -1, 2], [1, 3, 1, -1]]))]),
    ("multilabel margin sum", "multilabel_margin_loss", (), SUM,
     [G((2, 5)), C(_long([[4, 4, 0, -1, 3], [0, 1, 2, 3, 4]]))]),
    ("multilabel margin unbatched", "multilabel_margin_loss", (), NONE,
     [G((4,)), C(_long([2, 0, -1, -1]))]),
    ("multilabel margin 0-d", "multilabel_margin_loss", (), NONE, [G(()), C(_long(0))]),
    ("multilabel margin no targets", "multilabel_margin_loss", (), {},
     [G((2, 3)), C(_long([[-1, 0, 1], [-1, -1, -1]]))]),
    ("multilabel margin one target", "multilabel_margin_loss", (), NONE,
     [G((3, 5)), C(_long([[4, -1, 0, 1, 2], [-1, 3, 3, 3, 3], [0, -1, -1, -1, -1]]))]),
    # multi_margin_loss: p 1 and 2, margin, weight, a class at the margin, target shapes
    ("multi margin", "multi_margin_loss", (), {}, [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("multi margin p=2", "multi_margin_loss", (2, 0.5), NONE,
     [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("multi margin weight", "multi_margin_loss", (1, 2.0, _f64([0.5, 1.0, 2.0, 0.7, 1.3])), SUM,
     [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("multi margin p=2 weight", "multi_margin_loss", (),
     {"p": 2, "weight": _f64([0.5, 1.0, 2.0, 0.7, 1.3])}, [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("multi margin edges", "multi_margin_loss", (), NONE,
     [V([[0.1, 0.2, 0.4, 0.8], [0.5, 1.5, 0.5, 0.2]]), C(_long([3, 1]))]),
    ("multi margin unbatched", "multi_margin_loss", (), NONE, [G((5,)), C(_long(2))]),
    ("multi margin unbatched (1,)", "multi_margin_loss", (2,), NONE, [G((5,)), C(_long([2]))]),
    ("multi margin one row 0-d target", "multi_margin_loss", (), NONE,
     [G((1, 5)), C(_long(4))]),
    ("multi margin 0-d", "multi_margin_loss", (), NONE, [G(()), C(_long(0))]),
    # triplet_margin_loss: p, eps, swap, unbatched, broadcast; the term at 0, a zero distance,
    # swap ties (d(a, n) == d(p, n): torch splits the gradient in halves)
    ("triplet", "triplet_margin_loss", (), {}, [G((4, 5)), G((4, 5)), G((4, 5))]),
    ("triplet none p=1", "triplet_margin_loss", (), {"p": 1, "margin": 2.0, "reduction": "none"},
     [G((4, 5)), G((4, 5)), G((4, 5))]),
    ("triplet swap p=3", "triplet_margin_loss", (0.5, 3.0, 1e-3, True), SUM,
     [G((4, 5)), G((4, 5)), G((4, 5))]),
    ("triplet unbatched", "triplet_margin_loss", (), {"swap": True}, [G((5,)), G((5,)), G((5,))]),
    ("triplet broadcast", "triplet_margin_loss", (), NONE, [G((4, 5)), G((1, 5)), G((4, 5))]),
    ("triplet edges", "triplet_margin_loss", (), {"eps": 0.0, "reduction": "none"},
     [V([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]), V([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]),
      V([[2.0, 0.0], [1.0, 2.0], [0.0, 0.0]])]),
    ("triplet swap edges", "triplet_margin_loss", (), {"eps": 0.0, "swap": True,
                                                       "reduction": "none"},
     [V([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),
      V([[2.0, 0.0], [0.0, 2.0], [3.0, 0.0], [1.0, 0.0]]),
      V([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])]),
    # triplet_margin_with_distance_loss: the default, a function, a module
    ("triplet distance", "triplet_margin_with_distance_loss", (), {},
     [G((4, 5)), G((4, 5)), G((4, 5))]),
    ("triplet distance cosine swap", "triplet_margin_with_distance_loss", (),
     {"distance_function": _cosine_distance, "swap": True, "margin": 0.3, "reduction": "none"},
     [G((4, 5)), G((4, 5)), G((4, 5))]),
    ("triplet distance module", "triplet_margin_with_distance_loss", (),
     {"distance_function": lambda L: L.nn.PairwiseDistance(1.0), "reduction": "sum"},
     [G((4, 5)), G((4, 5)), G((4, 5))]),
    ("triplet distance edges", "triplet_margin_with_distance_loss", (),
     {"distance_function": lambda L: L.nn.PairwiseDistance(eps=0.0), "swap": True,
      "reduction": "none"},
     [V([[0.0, 0.0], [0.0, 0.0]]), V([[2.0, 0.0], [0.0, 1.0]]), V([[1.0, 0.0], [0.0, -1.0]])]),
]


@pytest.mark.parametrize("what,name,args,kwargs,inputs", FUNCTIONS,
                         ids=[row[0] for row in FUNCTIONS])
def test_function_matches_torch(torch, what, name, args, kwargs, inputs):
    _compare(torch, _fn(name, *args, **kwargs), inputs)


@pytest.mark.parametrize("name, target_shape", [("multi_margin_loss", (0,)),
                                                 ("multilabel_margin_loss", (0, 3))])
def test_margin_losses_of_an_empty_batch(name, target_shape):
    # torch's multi_margin_loss and multilabel_margin_loss of a (0, C) input return uninitialized
    # memory (a different value each run), so this case is held to the sums themselves: 0
    # summed, 0 / 0 averaged.
    loss = getattr(F, name)
    x = sinter.zeros(0, 3, dtype=sinter.float64, requires_grad=True)
    target = sinter.zeros(*target_shape, dtype=sinter.int64)
    total = loss(x, target, reduction="sum")
    assert total.item() == 0.0 and math.isnan(loss(x, target).item())
    assert tuple(loss(x, target, reduction="none").shape) == (0,)
    total.backward()
    assert tuple(x.grad.shape) == (0, 3)


# (name, args, kwargs, inputs): torch.nn.<name>(*args, **kwargs) and sinter.nn.<name>.
MODULES = [
    ("GaussianNLLLoss", (), {}, [G((3, 4)), G((3, 4)), G((3, 4), 0.1, 2.0)]),
    ("GaussianNLLLoss", (), {"full": True, "eps": 0.5, "reduction": "none"},
     [G((3, 4)), G((3, 4)), G((3,), 0.1, 2.0)]),
    ("PoissonNLLLoss", (), {}, [G((3, 4)), G((3, 4), 0.0, 4.0)]),
    ("PoissonNLLLoss", (False, True), {"eps": 1e-3, "reduction": "sum"},
     [G((3, 4), 0.1, 3.0), G((3, 4), 0.0, 4.0)]),
    ("HingeEmbeddingLoss", (), {}, [G((3, 4)), C(_signs((3, 4)))]),
    ("HingeEmbeddingLoss", (0.3,), NONE, [G((3, 4)), C(_signs((3, 4)))]),
    ("SoftMarginLoss", (), {}, [G((3, 4)), C(_signs((3, 4)))]),
    ("SoftMarginLoss", (), NONE, [G((3, 4)), C(_signs((3, 4)))]),
    ("MultiLabelSoftMarginLoss", (), {}, [G((3, 5)), C(_bits((3, 5)))]),
    ("MultiLabelSoftMarginLoss", (_f64([0.5, 1.0, 2.0, 0.0, 3.0]),), SUM,
     [G((3, 5)), C(_bits((3, 5)))]),
    ("MultiLabelMarginLoss", (), {}, [G((2, 4)), C(_long([[3, 0, -1, 1], [1, 2, 0, 3]]))]),
    ("MultiLabelMarginLoss", (), NONE, [G((4,)), C(_long([1, -1, 0, 0]))]),
    ("MultiMarginLoss", (), {}, [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("MultiMarginLoss", (2, 0.7, _f64([0.5, 1.0, 2.0, 0.7, 1.3])), NONE,
     [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("TripletMarginLoss", (), {}, [G((4, 5)), G((4, 5)), G((4, 5))]),
    ("TripletMarginLoss", (0.5, 1.0, 1e-4, True), NONE, [G((4, 5)), G((4, 5)), G((4, 5))]),
    ("TripletMarginWithDistanceLoss", (), {}, [G((4, 5)), G((4, 5)), G((4, 5))]),
    ("TripletMarginWithDistanceLoss", (),
     {"distance_function": _cosine_distance, "margin": 0.4, "swap": True, "reduction": "sum"},
     [G((4, 5)), G((4, 5)), G((4, 5))]),
]


@pytest.mark.parametrize("name,args,kwargs,inputs", MODULES,
                         ids=[f"{row[0]}-{i}" for i, row in enumerate(MODULES)])
def test_module_matches_torch(torch, name, args, kwargs, inputs):
    def call(lib, *tensors):
        module = getattr(lib.nn, name)(*[_resolve(lib, a) for a in args],
                                       **{k: _resolve(lib, v) for k, v in kwargs.items()})
        return module(*tensors)

    _compare(torch, call, inputs)


def _legacy_calls():
    """(name, call(lib, x, target) with size_average and reduce set positionally)."""
    yield "poisson_nll_loss", lambda L, x, t: L.nn.functional.poisson_nll_loss(
        x, t.abs(), True, False, False, 1e-8, None)
    yield "hinge_embedding_loss", lambda L, x, t: L.nn.functional.hinge_embedding_loss(
        x, t, 1.0, None, False)
    yield "soft_margin_loss", lambda L, x, t: L.nn.functional.soft_margin_loss(x, t, False)
    yield "multilabel_soft_margin_loss", lambda L, x, t: \
        L.nn.functional.multilabel_soft_margin_loss(x, t.abs(), None, False, True)
    yield "multilabel_margin_loss", lambda L, x, t: L.nn.functional.multilabel_margin_loss(
        x, L.tensor([[1, -1, 0], [2, 0, -1]]), None, False)
    yield "multi_margin_loss", lambda L, x, t: L.nn.functional.multi_margin_loss(
        x, L.tensor([2, 0]), 1, 1.0, None, False, None)
    yield "triplet_margin_loss", lambda L, x, t: L.nn.functional.triplet_margin_loss(
        x, t, -x, 1.0, 2, 1e-6, False, None, False)
    yield "PoissonNLLLoss", lambda L, x, t: L.nn.PoissonNLLLoss(True, False, False)(x, t.abs())
    yield "HingeEmbeddingLoss", lambda L, x, t: L.nn.HingeEmbeddingLoss(1.0, False)(x, t)
    yield "SoftMarginLoss", lambda L, x, t: L.nn.SoftMarginLoss(None, False)(x, t)
    yield "MultiLabelSoftMarginLoss", lambda L, x, t: L.nn.MultiLabelSoftMarginLoss(
        None, False)(x, t.abs())
    yield "MultiLabelMarginLoss", lambda L, x, t: L.nn.MultiLabelMarginLoss(None, False)(
        x, L.tensor([[1, -1, 0], [2, 0, -1]]))
    yield "MultiMarginLoss", lambda L, x, t: L.nn.MultiMarginLoss(1, 1.0, None, None, False)(
        x, L.tensor([2, 0]))
    yield "TripletMarginLoss", lambda L, x, t: L.nn.TripletMarginLoss(
        1.0, 2.0, 1e-6, False, False, True)(x, t, -x)


@pytest.mark.parametrize("name,call", list(_legacy_calls()),
                         ids=[name for name, _ in _legacy_calls()])
def test_legacy_size_average_and_reduce_as_torch(torch, name, call):
    """size_average and reduce, deprecated, set reduction with torch's warning."""
    x, tx = _rand(sinter, (2, 3), 1), _rand(torch, (2, 3), 1)
    t, tt = _signs((2, 3))(sinter), _signs((2, 3))(torch)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        got = call(sinter, x, t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = call(torch, tx, tt)
    _assert_same(got, want, name)


NAMES = sinter.nn._loss_functions.__all__
MODULE_NAMES = sorted({row[0] for row in MODULES})


def _parameters(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_signatures_as_torch(torch):
    """The same positional order, keyword names, keyword-only marks and defaults."""
    for name in NAMES:
        assert _parameters(getattr(F, name)) == _parameters(
            getattr(torch.nn.functional, name)), name
    for name in MODULE_NAMES:
        for method in ("__init__", "forward"):
            assert _parameters(getattr(getattr(sinter.nn, name), method)) == _parameters(
                getattr(getattr(torch.nn, name), method)), f"{name}.{method}"


# (id, fn(lib) -> a loss): the result's dtype is torch's for mixed and integer dtypes.
DTYPES = [
    ("gaussian f32 input", lambda L: L.nn.functional.gaussian_nll_loss(
        L.ones(2, 3), L.zeros(2, 3, dtype=L.float64), L.ones(2, 3))),
    ("gaussian f32 var float", lambda L: L.nn.functional.gaussian_nll_loss(
        L.ones(2, 3), L.zeros(2, 3), 0.5)),
    ("poisson f32 f64", lambda L: L.nn.functional.poisson_nll_loss(
        L.ones(2, 3), L.ones(2, 3, dtype=L.float64))),
    ("poisson f64 long full", lambda L: L.nn.functional.poisson_nll_loss(
        L.ones(2, 3, dtype=L.float64), L.tensor([[0, 1, 2], [3, 4, 5]]), full=True)),
    ("poisson long long", lambda L: L.nn.functional.poisson_nll_loss(
        L.tensor([[0, 1, 2]]), L.tensor([[3, 1, 2]]), full=True, reduction="none")),
    ("poisson long not log", lambda L: L.nn.functional.poisson_nll_loss(
        L.tensor([[1, 2]]), L.tensor([[1, 3]]), log_input=False, reduction="none")),
    ("hinge f32 f64", lambda L: L.nn.functional.hinge_embedding_loss(
        L.ones(4), L.tensor([1.0, -1.0, 1.0, -1.0], dtype=L.float64), reduction="none")),
    ("hinge long", lambda L: L.nn.functional.hinge_embedding_loss(
        L.tensor([1, 2, 0, -3]), L.tensor([1, -1, -1, -1]), margin=-1.5, reduction="none")),
    ("hinge long margin sum", lambda L: L.nn.functional.hinge_embedding_loss(
        L.tensor([1, 2, 0, -3]), L.tensor([1, -1, -1, -1]), margin=2.7, reduction="sum")),
    ("soft margin f32 f64", lambda L: L.nn.functional.soft_margin_loss(
        L.ones(4), L.tensor([1.0, -1.0, 1.0, -1.0], dtype=L.float64), reduction="none")),
    ("multilabel soft f32 f64 weight", lambda L: L.nn.functional.multilabel_soft_margin_loss(
        L.ones(2, 3), L.ones(2, 3), L.ones(3, dtype=L.float64))),
    ("multilabel margin f32", lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(2, 3), L.tensor([[0, -1, 0], [2, 1, 0]]))),
    ("multi margin f32", lambda L: L.nn.functional.multi_margin_loss(
        L.tensor([[0.1, 0.5, 0.2]]), L.tensor([1]), margin=0.7)),
    ("triplet f32 f64", lambda L: L.nn.functional.triplet_margin_loss(
        L.ones(2, 3), L.ones(2, 3, dtype=L.float64), L.zeros(2, 3))),
]


@pytest.mark.parametrize("what,fn", DTYPES, ids=[row[0] for row in DTYPES])
def test_dtypes_as_torch(torch, what, fn):
    got, want = fn(sinter), fn(torch)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    _assert_same(got.double(), want.double(), what, rel=1e-6)


def _small(shape, seed, low=-1.0, high=1.0):
    return _rand(sinter, shape, seed, low, high).requires_grad_(True)


# (id, fn(*tensors), tensors): fp64 central differences against each function's gradient,
# away from the kinks (margins, clamps).
GRADCHECKS = [
    ("gaussian_nll_loss", lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True),
     lambda: (_small((2, 3), 1), _small((2, 3), 2), _small((2, 3), 3, 0.2, 1.5))),
    ("gaussian_nll_loss var per row", lambda x, t, v: F.gaussian_nll_loss(
        x, t, v, reduction="none"),
     lambda: (_small((2, 3), 1), _small((2, 3), 2), _small((2,), 3, 0.2, 1.5))),
    ("poisson_nll_loss", lambda x, t: F.poisson_nll_loss(x, t, full=True, reduction="none"),
     lambda: (_small((2, 3), 1), _small((2, 3), 2, 1.5, 4.0))),
    ("poisson_nll_loss not log", lambda x, t: F.poisson_nll_loss(x, t, False, True),
     lambda: (_small((2, 3), 1, 0.2, 2.0), _small((2, 3), 2, 0.0, 4.0))),
    ("hinge_embedding_loss", lambda x: F.hinge_embedding_loss(
        x, _signs((2, 3))(sinter), margin=0.5, reduction="none"), lambda: (_small((2, 3), 4),)),
    ("soft_margin_loss", lambda x: F.soft_margin_loss(x, _signs((2, 3))(sinter)),
     lambda: (_small((2, 3), 5, -3.0, 3.0),)),
    ("multilabel_soft_margin_loss", lambda x, t: F.multilabel_soft_margin_loss(
        x, t, _f64([0.5, 2.0, 1.0])(sinter), reduction="none"),
     lambda: (_small((2, 3), 6), _small((2, 3), 7, 0.0, 1.0))),
    ("multilabel_margin_loss", lambda x: F.multilabel_margin_loss(
        x, sinter.tensor([[2, 0, -1, 1], [3, -1, 0, 0]]), reduction="none"),
     lambda: (_small((2, 4), 8),)),
    ("multi_margin_loss", lambda x: F.multi_margin_loss(x, sinter.tensor([0, 3]), p=2,
                                                        weight=_f64([1, 2, 3, 4])(sinter)),
     lambda: (_small((2, 4), 9),)),
    ("triplet_margin_loss", lambda a, p, n: F.triplet_margin_loss(
        a, p, n, margin=2.0, p=3, swap=True, reduction="none"),
     lambda: (_small((3, 4), 10), _small((3, 4), 11), _small((3, 4), 12))),
    ("triplet_margin_with_distance_loss", lambda a, p, n: F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=_cosine_distance(sinter), margin=1.5),
     lambda: (_small((3, 4), 13), _small((3, 4), 14), _small((3, 4), 15))),
]


@pytest.mark.parametrize("what,fn,inputs", GRADCHECKS, ids=[row[0] for row in GRADCHECKS])
def test_gradients_match_finite_differences(what, fn, inputs):
    assert sinter.autograd.gradcheck(fn, inputs())


# (id, fn(lib) that fails, exception type, what sinter's message says): torch raises the same
# type for the same misuse.
ERRORS = [
    ("gaussian negative var", lambda L: L.nn.functional.gaussian_nll_loss(
        L.ones(2), L.ones(2), L.tensor([1.0, -0.5])), ValueError,
     "var has negative entry/entries, the least -0.5"),
    ("gaussian negative float var", lambda L: L.nn.functional.gaussian_nll_loss(
        L.ones(2), L.ones(2), -0.5), ValueError, "var has negative entry/entries: -0.5"),
    ("gaussian int var", lambda L: L.nn.functional.gaussian_nll_loss(L.ones(2), L.ones(2), 1),
     TypeError, "var must be a Tensor or a float, got int"),
    ("gaussian var size", lambda L: L.nn.GaussianNLLLoss()(L.ones(4, 3), L.ones(4, 3),
                                                           L.ones(1, 1)),
     ValueError, r"var is of incorrect size \[1, 1\] for input of size \[4, 3\]"),
    ("gaussian 0-d var", lambda L: L.nn.functional.gaussian_nll_loss(
        L.ones(2, 3), L.ones(2, 3), L.tensor(1.0)), ValueError, "var is of incorrect size"),
    ("gaussian reduction", lambda L: L.nn.GaussianNLLLoss(reduction="avg")(
        L.ones(2), L.ones(2), L.ones(2)), ValueError, "avg is not a valid value"),
    ("poisson reduction", lambda L: L.nn.functional.poisson_nll_loss(
        L.ones(2), L.ones(2), reduction="avg"), ValueError, "avg is not a valid value"),
    ("hinge reduction", lambda L: L.nn.HingeEmbeddingLoss(reduction="avg")(L.ones(2), L.ones(2)),
     ValueError, "avg is not a valid value"),
    ("hinge shapes", lambda L: L.nn.functional.hinge_embedding_loss(L.ones(6), L.ones(2)),
     RuntimeError, r"shapes \[2\] and \[6\] cannot be broadcast together"),
    ("soft margin broadcast", lambda L: L.nn.functional.soft_margin_loss(
        L.ones(3), L.ones(2, 3)), RuntimeError,
     r"soft_margin_loss: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"),
    ("soft margin target grad", lambda L: L.nn.SoftMarginLoss()(
        L.ones(2), L.ones(2).requires_grad_(True)), RuntimeError,
     "'soft_margin_loss' is not differentiable with respect to argument 'target'"),
    ("soft margin integer", lambda L: L.nn.functional.soft_margin_loss(
        L.tensor([1, 2]), L.tensor([1, -1])), RuntimeError, "dtype sinter.int64"),
    ("multilabel soft integer", lambda L: L.nn.functional.multilabel_soft_margin_loss(
        L.tensor([[1, 2]]), L.tensor([[1, 0]])), NotImplementedError,
     "multilabel_soft_margin_loss: expected a floating tensor"),
    ("multilabel soft 0-d", lambda L: L.nn.functional.multilabel_soft_margin_loss(
        L.ones(()), L.ones(())), IndexError, "needs a class dimension"),
    ("multilabel soft weight", lambda L: L.nn.MultiLabelSoftMarginLoss(L.ones(3))(
        L.ones(2, 2), L.ones(2, 2)), RuntimeError,
     r"mul: shapes \[2, 2\] and \[3\] cannot be broadcast"),
    ("multilabel soft reduction", lambda L: L.nn.functional.multilabel_soft_margin_loss(
        L.ones(2, 2), L.ones(2, 2), reduction="avg"), ValueError, "avg is not a valid value"),
    ("multilabel margin 3-d", lambda L: L.nn.MultiLabelMarginLoss()(
        L.ones(2, 3, 4), L.ones(2, 3, 4, dtype=L.int64)), RuntimeError,
     r"multilabel_margin_loss: Expected non-empty vector or matrix .* got: \[2, 3, 4\]"),
    ("multilabel margin no classes", lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(2, 0), L.ones(2, 0, dtype=L.int64)), RuntimeError, r"got: \[2, 0\]"),
    ("multilabel margin target size", lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(2, 4), L.zeros(2, 3, dtype=L.int32)), RuntimeError,
     r"inconsistent target size: \[2, 3\] for input of size: \[2, 4\]"),
    ("multilabel margin unbatched target size", lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(4), L.zeros(1, 4, dtype=L.int64)), RuntimeError,
     r"inconsistent target size: \[1, 4\] for input of size: \[4\]"),
    ("multilabel margin int32 target", lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(2, 3), L.zeros(2, 3, dtype=L.int32)), RuntimeError,
     "expected scalar type Long but found sinter.int32"),
    ("multilabel margin float target", lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(2, 3), L.zeros(2, 3)), RuntimeError, "expected scalar type Long"),
    ("multilabel margin integer input", lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(2, 3, dtype=L.int64), L.zeros(2, 3, dtype=L.int64)), NotImplementedError,
     "multilabel_margin_loss: expected a floating tensor"),
    ("multilabel margin target too large", lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(1, 4), L.tensor([[0, -1, 7, 0]])), RuntimeError,
     r"'target' is out of range: 7 not in \[-1, 4\)"),
    ("multilabel margin target below -1", lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(1, 4), L.tensor([[-2, -1, 0, 0]])), RuntimeError, "out of range: -2"),
    ("multilabel margin reduction", lambda L: L.nn.MultiLabelMarginLoss(reduction="avg")(
        L.ones(2, 3), L.zeros(2, 3, dtype=L.int64)), ValueError, "avg is not a valid value"),
    ("multi margin p", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 3), L.zeros(2, dtype=L.int64), p=3), ValueError,
     "multi_margin_loss: only p == 1 and p == 2 supported, got p=3"),
    ("multi margin 2-d weight", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 3), L.zeros(2, dtype=L.int64), weight=L.ones(1, 3)), ValueError,
     r"weight must be one-dimensional, got shape \[1, 3\]"),
    ("multi margin weight size", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 4), L.zeros(2, dtype=L.int64), weight=L.ones(3)), RuntimeError,
     r"inconsistent weight size, expected 4 but got \[3\]"),
    ("multi margin weight dtype", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 4), L.zeros(2, dtype=L.int64), weight=L.ones(4, dtype=L.float64)),
     RuntimeError, "found sinter.float64 for weight"),
    ("multi margin weight grad", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 4), L.zeros(2, dtype=L.int64), weight=L.ones(4).requires_grad_(True)),
     RuntimeError, "'multi_margin_loss' is not differentiable with respect to argument 'weight'"),
    ("multi margin target size", lambda L: L.nn.MultiMarginLoss()(
        L.ones(2, 4), L.zeros(3, dtype=L.int64)), RuntimeError,
     r"Expected target size \[2\], but got \[3\]. Input has shape \[2, 4\]"),
    ("multi margin 2-d target", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(4), L.zeros(1, 1, dtype=L.int64)), RuntimeError, r"but got \[1, 1\]"),
    ("multi margin 3-d", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 3, 4), L.zeros(2, dtype=L.int64)), RuntimeError,
     r"Expected non-empty vector or matrix .* got: \[2, 3, 4\]"),
    ("multi margin int32 target", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 3), L.zeros(2, dtype=L.int32)), RuntimeError, "expected scalar type Long"),
    ("multi margin integer input", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(3, dtype=L.int64), L.tensor(0)), NotImplementedError, "floating"),
    ("multi margin target range", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 4), L.tensor([4, 0])), RuntimeError, r"target out of range: 4 not in \[0, 4\)"),
    ("multi margin negative target", lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 4), L.tensor([0, -1])), RuntimeError, "target out of range: -1"),
    ("MultiMarginLoss p", lambda L: L.nn.MultiMarginLoss(p=3), ValueError,
     "only p == 1 and p == 2 supported"),
    ("MultiMarginLoss weight", lambda L: L.nn.MultiMarginLoss(weight=L.ones(2, 2)), ValueError,
     "MultiMarginLoss: expected weight to be None or 1D tensor, got 2D instead"),
    ("triplet margin", lambda L: L.nn.functional.triplet_margin_loss(
        L.ones(2, 3), L.ones(2, 3), L.ones(2, 3), margin=0), ValueError,
     "margin must be greater than 0, got 0"),
    ("triplet dims", lambda L: L.nn.TripletMarginLoss()(L.ones(2, 3), L.ones(2, 3), L.ones(3)),
     RuntimeError, "anchor 2D, positive 2D, and negative 1D inputs"),
    ("triplet reduction", lambda L: L.nn.functional.triplet_margin_loss(
        L.ones(2, 3), L.ones(2, 3), L.ones(2, 3), reduction="avg"), ValueError,
     "avg is not a valid value"),
    ("TripletMarginLoss margin", lambda L: L.nn.TripletMarginLoss(margin=-1.0), ValueError,
     "TripletMarginLoss: expected margin to be greater than 0, got -1.0 instead"),
    ("triplet distance margin", lambda L: L.nn.functional.triplet_margin_with_distance_loss(
        L.ones(2, 3), L.ones(2, 3), L.ones(2, 3), margin=-1), ValueError,
     "margin must be greater than 0, got -1"),
    ("triplet distance reduction first", lambda L: L.nn.functional.
     triplet_margin_with_distance_loss(L.ones(2, 3), L.ones(2, 3), L.ones(3), margin=-1,
                                       reduction="avg"), ValueError, "avg is not a valid value"),
    ("triplet distance dims", lambda L: L.nn.TripletMarginWithDistanceLoss()(
        L.ones(3), L.ones(2, 3), L.ones(2, 3)), RuntimeError, "anchor 1D, positive 2D"),
    ("TripletMarginWithDistanceLoss margin", lambda L: L.nn.TripletMarginWithDistanceLoss(
        margin=0.0), ValueError, "TripletMarginWithDistanceLoss: expected margin to be greater"),
]


@pytest.mark.parametrize("what,fn,kind,message", ERRORS, ids=[row[0] for row in ERRORS])
def test_errors_as_torch(torch, what, fn, kind, message):
    assert_error_as_torch(torch, fn, kind, message)


def test_no_grad_lifts_the_not_differentiable_errors(torch):
    for lib in (torch, sinter):
        with lib.no_grad():
            lib.nn.functional.soft_margin_loss(lib.ones(2), lib.ones(2).requires_grad_(True))
            lib.nn.functional.multi_margin_loss(lib.ones(2, 4), lib.zeros(2, dtype=lib.int64),
                                                weight=lib.ones(4).requires_grad_(True))


REPRS = [
    ("GaussianNLLLoss", (), {"full": True, "eps": 0.1}), ("PoissonNLLLoss", (False,), {}),
    ("HingeEmbeddingLoss", (0.5,), {}), ("SoftMarginLoss", (), {}),
    ("MultiLabelSoftMarginLoss", (), {}), ("MultiLabelMarginLoss", (), {}),
    ("MultiMarginLoss", (2, 0.5), {}), ("TripletMarginLoss", (), {"swap": True}),
    ("TripletMarginWithDistanceLoss", (), {}),
    ("TripletMarginWithDistanceLoss", (), {"distance_function": _cosine_distance}),
    ("TripletMarginWithDistanceLoss", (), {"distance_function": lambda L: L.nn.Sequential(
        L.nn.PairwiseDistance(3.0))}),
]


@pytest.mark.parametrize("name,args,kwargs", REPRS,
                         ids=[f"{row[0]}-{i}" for i, row in enumerate(REPRS)])
def test_modules_print_as_torch(torch, name, args, kwargs):
    def build(lib):
        return getattr(lib.nn, name)(*args, **{k: _resolve(lib, v) for k, v in kwargs.items()})

    assert repr(build(sinter)) == repr(build(torch))


ATTRIBUTES = ("reduction", "full", "eps", "log_input", "margin", "p", "swap")

# (name, kwargs): the modules' attributes, buffers and state_dict keys.
STATES = [
    ("GaussianNLLLoss", {"full": True, "eps": 0.1, "reduction": "sum"}),
    ("PoissonNLLLoss", {"log_input": False, "full": True, "eps": 1e-3}),
    ("HingeEmbeddingLoss", {"margin": 0.2, "reduction": "none"}),
    ("SoftMarginLoss", {}),
    ("MultiLabelSoftMarginLoss", {"weight": _f64([0.5, 1.0, 2.0])}),
    ("MultiLabelSoftMarginLoss", {}),
    ("MultiLabelMarginLoss", {"reduction": "sum"}),
    ("MultiMarginLoss", {"p": 2, "margin": 0.3, "weight": _f64([0.5, 1.0, 2.0])}),
    ("MultiMarginLoss", {}),
    ("TripletMarginLoss", {"margin": 0.5, "p": 1.0, "eps": 0.0, "swap": True}),
    ("TripletMarginWithDistanceLoss", {"margin": 0.5, "swap": True}),
]


@pytest.mark.parametrize("name,kwargs", STATES, ids=[f"{r[0]}-{i}" for i, r in enumerate(STATES)])
def test_modules_keep_torch_attributes_and_buffers(torch, name, kwargs):
    theirs = getattr(torch.nn, name)(**{k: _resolve(torch, v) for k, v in kwargs.items()})
    mine = getattr(sinter.nn, name)(**{k: _resolve(sinter, v) for k, v in kwargs.items()})
    attrs = [a for a in ATTRIBUTES if hasattr(theirs, a)]
    assert {a: getattr(mine, a) for a in attrs} == {a: getattr(theirs, a) for a in attrs}
    assert not [a for a in ATTRIBUTES if hasattr(mine, a) and not hasattr(theirs, a)]
    assert list(mine.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in mine.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    for key, value in theirs.state_dict().items():
        assert mine.state_dict()[key].tolist() == value.tolist()
    assert (getattr(mine, "weight", None) is None) == (getattr(theirs, "weight", None) is None)
    assert [n for n, _ in mine.named_children()] == [n for n, _ in theirs.named_children()]
