"""The torch.nn modules written in Python over sinter.nn.functional (losses, containers, pooling,
padding, channel dropout, activations, distances, upsampling), each against torch's: the same
constructor arguments on the same f64 inputs give the same output and input gradients, the same
printout, the same state_dict keys and the same errors.

To add a module: a row in MODULES (and in REPRS), and its misuse in ERRORS."""

import random
import sys
import warnings

import pytest

import sinter
import sinter.nn.functional as F
from torch_parity import (
    assert_error_as_torch,
    assert_functional_as_torch,
    assert_same as _assert_same,
    C,
    G,
    rand as _rand,
)


def _resolve(lib, value):
    """A constructor argument: fn(lib) for tensors (a class weight), else the value."""
    return value(lib) if callable(value) else value


def _long(values):
    return lambda L: L.tensor(values)


def _f64(values):
    return lambda L: L.tensor(values, dtype=L.float64)


def _probs(shape, seed=9):
    """Rows of class probabilities along dim 1 (or 0 for a 1-d shape)."""
    return lambda L: _rand(L, shape, seed, 0.0, 3.0).softmax(1 if len(shape) > 1 else 0)


def _signs(n, seed=8):
    rng = random.Random(seed)
    return _f64([rng.choice((1.0, -1.0)) for _ in range(n)])


INF = float("inf")

# (name, args, kwargs, inputs): torch.nn.<name> and sinter.nn.<name> of these arguments called
# on these inputs.
MODULES = [
    # losses
    ("L1Loss", (), {}, [G((3, 4)), G((3, 4))]),
    ("L1Loss", (), {"reduction": "none"}, [G((3, 4)), G((3, 4))]),
    ("MSELoss", (), {"reduction": "sum"}, [G((3, 4)), G((3, 4))]),
    ("MSELoss", (), {}, [G((2, 3, 4)), G((2, 3, 4))]),
    ("SmoothL1Loss", (), {"beta": 0.5}, [G((3, 4)), G((3, 4))]),
    ("SmoothL1Loss", (), {"reduction": "none", "beta": 2.0}, [G((3, 4)), G((3, 4))]),
    ("HuberLoss", (), {"delta": 0.6}, [G((3, 4)), G((3, 4))]),
    ("HuberLoss", (), {"reduction": "sum", "delta": 2.5}, [G((3, 4)), G((3, 4))]),
    ("NLLLoss", (), {}, [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("NLLLoss", (), {"weight": _f64([0.5, 1.0, 2.0, 0.7, 1.3]), "ignore_index": 1,
                     "reduction": "sum"}, [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("NLLLoss", (), {"weight": _f64([0.5, 1.0, 2.0])}, [G((2, 3, 4)),
                                                         C(_long([[0, 2, 1, 1], [2, 0, 0, 1]]))]),
    ("NLLLoss", (), {"reduction": "none"}, [G((5,)), C(_long(3))]),
    ("CrossEntropyLoss", (), {}, [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("CrossEntropyLoss", (), {"weight": _f64([0.5, 1.0, 2.0, 0.7, 1.3]), "ignore_index": 3,
                              "label_smoothing": 0.1}, [G((4, 5)), C(_long([0, 3, 1, 4]))]),
    ("CrossEntropyLoss", (), {"reduction": "none", "label_smoothing": 0.2},
     [G((2, 3, 2, 2)), C(_long([[[0, 2], [1, 1]], [[2, 0], [0, 1]]]))]),
    ("CrossEntropyLoss", (), {}, [G((4, 5)), C(_probs((4, 5)))]),
    ("CrossEntropyLoss", (), {"weight": _f64([0.5, 1.0, 2.0, 0.7, 1.3]),
                              "label_smoothing": 0.3}, [G((4, 5)), C(_probs((4, 5)))]),
    ("CrossEntropyLoss", (), {"reduction": "none", "weight": _f64([0.5, 1.0, 2.0])},
     [G((2, 3, 4)), C(_probs((2, 3, 4)))]),
    ("CrossEntropyLoss", (), {"reduction": "sum"}, [G((2, 3, 4)), C(_probs((2, 3, 4)))]),
    ("CrossEntropyLoss", (), {"label_smoothing": 0.1}, [G((5,)), C(_long(2))]),
    ("CrossEntropyLoss", (), {"reduction": "none"}, [G((5,)), C(_probs((5,)))]),
    ("CrossEntropyLoss", (), {"ignore_index": -1}, [G((4, 5)), C(_probs((4, 5)))]),
    ("BCELoss", (), {}, [G((3, 4), 0.05, 0.95), G((3, 4), 0.0, 1.0)]),
    ("BCELoss", (), {"weight": _f64([0.5, 1.0, 2.0, 0.7]), "reduction": "none"},
     [G((3, 4), 0.05, 0.95), C(lambda L: _rand(L, (3, 4), 7, 0.0, 1.0))]),
    ("BCEWithLogitsLoss", (), {}, [G((3, 4)), G((3, 4), 0.0, 1.0)]),
    ("BCEWithLogitsLoss", (), {"weight": _f64([0.5, 1.0, 2.0, 0.7]),
                               "pos_weight": _f64([2.0, 0.5, 1.0, 3.0]), "reduction": "sum"},
     [G((3, 4)), C(lambda L: _rand(L, (3, 4), 7, 0.0, 1.0))]),
    ("KLDivLoss", (), {"reduction": "batchmean"}, [G((3, 4)), C(_probs((3, 4)))]),
    ("KLDivLoss", (), {"reduction": "none", "log_target": True},
     [G((3, 4)), C(lambda L: _probs((3, 4))(L).log())]),
    ("KLDivLoss", (), {"reduction": "sum"}, [G((3, 4)), G((3, 4), 0.1, 1.0)]),
    ("CosineEmbeddingLoss", (), {"margin": 0.2}, [G((4, 5)), G((4, 5)), C(_signs(4))]),
    ("CosineEmbeddingLoss", (), {"reduction": "none"}, [G((4, 5)), G((4, 5)), C(_signs(4))]),
    ("MarginRankingLoss", (), {"margin": 0.1}, [G((6,)), G((6,)), C(_signs(6))]),
    ("MarginRankingLoss", (), {"reduction": "none"}, [G((6,)), G((6,)), C(_signs(6))]),
    # activations
    ("Softmin", (1,), {}, [G((3, 4))]),
    ("Softmin", (), {"dim": 0}, [G((3, 4))]),
    ("LogSigmoid", (), {}, [G((4, 5), -40.0, 40.0)]),
    ("LogSigmoid", (), {}, [G((3, 4))]),
    ("Softsign", (), {}, [G((3, 4))]),
    ("Tanhshrink", (), {}, [G((3, 4))]),
    ("Softshrink", (), {}, [G((4, 5))]),
    ("Softshrink", (0.9,), {}, [G((4, 5))]),
    ("Hardshrink", (), {}, [G((4, 5))]),
    ("Hardshrink", (), {"lambd": 1.1}, [G((4, 5))]),
    ("Threshold", (0.1, 20.0), {}, [G((4, 5))]),
    ("Threshold", (-0.5, -3.0), {}, [G((4, 5))]),
    ("GLU", (), {}, [G((3, 4))]),
    ("GLU", (), {"dim": 1}, [G((2, 6, 3))]),
    ("CELU", (), {}, [G((4, 5), -4.0, 4.0)]),
    ("CELU", (0.5,), {}, [G((4, 5), -4.0, 4.0)]),
    # pooling
    ("MaxPool1d", (3,), {}, [G((2, 3, 11))]),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1}, [G((2, 3, 11))]),
    ("MaxPool1d", (2,), {"ceil_mode": True}, [G((2, 3, 11))]),
    ("MaxPool1d", (3,), {"stride": 2, "dilation": 2, "padding": 1, "ceil_mode": True},
     [G((2, 3, 12))]),
    ("MaxPool1d", ((3,),), {"stride": (2,), "return_indices": True}, [G((2, 3, 11))]),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True,
                         "return_indices": True}, [G((2, 3, 12))]),
    ("MaxPool1d", (4,), {"stride": 3, "padding": 2, "ceil_mode": True, "return_indices": True},
     [G((3, 10))]),
    ("AvgPool1d", (3,), {}, [G((2, 3, 11))]),
    ("AvgPool1d", (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}, [G((2, 3, 10))]),
    ("AvgPool1d", ((2,),), {"padding": (1,)}, [G((3, 9))]),
    ("AdaptiveMaxPool2d", ((2, 3),), {}, [G((2, 3, 5, 7))]),
    ("AdaptiveMaxPool2d", (3,), {"return_indices": True}, [G((2, 3, 5, 7))]),
    ("AdaptiveMaxPool2d", ((None, 2),), {}, [G((2, 3, 5, 7))]),
    ("AdaptiveMaxPool2d", ((4, None),), {"return_indices": True}, [G((3, 5, 7))]),
    # padding
    ("ZeroPad1d", (2,), {}, [G((2, 3, 4))]),
    ("ZeroPad2d", ((1, 0, 2, 1),), {}, [G((2, 3, 4))]),
    ("ZeroPad3d", (1,), {}, [G((1, 2, 2, 3, 4))]),
    ("ConstantPad1d", ((1, 3), 3.5), {}, [G((3, 4))]),
    ("ConstantPad2d", ((1, -1, 2, 0), -1.5), {}, [G((2, 3, 4))]),
    ("ConstantPad3d", (1, 0.25), {}, [G((2, 2, 3, 4))]),
    ("ReflectionPad1d", ((2, 1),), {}, [G((2, 3, 4))]),
    ("ReflectionPad1d", (3,), {}, [G((3, 5))]),
    ("ReflectionPad2d", ((1, 2, 2, 1),), {}, [G((2, 2, 3, 4))]),
    ("ReflectionPad3d", (1,), {}, [G((1, 2, 2, 3, 4))]),
    ("ReplicationPad1d", ((2, 1),), {}, [G((2, 3, 4))]),
    ("ReplicationPad2d", (2,), {}, [G((2, 3, 4))]),
    ("ReplicationPad3d", ((1, 0, 2, 1, 0, 2),), {}, [G((2, 2, 3, 4))]),
    ("CircularPad1d", ((2, 1),), {}, [G((2, 3, 4))]),
    ("CircularPad2d", ((1, 2, 2, 1),), {}, [G((2, 2, 3, 4))]),
    ("CircularPad3d", (1,), {}, [G((2, 2, 3, 4))]),
    # negative pads crop: reflect and replicate after padding, circular before
    ("ReflectionPad1d", ((-1, 3),), {}, [G((2, 3, 5))]),
    ("ReflectionPad1d", ((-4, 3),), {}, [G((3, 5))]),
    ("ReflectionPad2d", ((-1, 2, 1, -2),), {}, [G((2, 3, 4))]),
    ("ReplicationPad2d", ((3, -1, 3, -1),), {}, [G((2, 3, 4))]),
    ("ReplicationPad3d", ((-2, 1, 0, -1, 2, -3),), {}, [G((1, 4, 3, 4))]),
    ("CircularPad1d", (-1,), {}, [G((2, 3, 5))]),
    ("CircularPad1d", ((2, -2),), {}, [G((3, 5))]),
    ("CircularPad2d", ((-1, 2, 1, -1),), {}, [G((2, 3, 4))]),
    # distances
    ("CosineSimilarity", (), {}, [G((3, 4)), G((3, 4))]),
    ("CosineSimilarity", (0, 1e-3), {}, [G((3, 4)), G((3, 4))]),
    ("CosineSimilarity", (), {"dim": 0}, [G((1, 4)), G((3, 4))]),
    ("CosineSimilarity", (), {"dim": -1}, [G((2, 1, 4)), G((3, 4))]),
    ("PairwiseDistance", (), {}, [G((3, 4)), G((3, 4))]),
    ("PairwiseDistance", (1.0,), {"keepdim": True}, [G((3, 4)), G((3, 4))]),
    ("PairwiseDistance", (3.0, 1e-3), {}, [G((3, 4)), G((4,))]),
    ("PairwiseDistance", (INF,), {}, [G((3, 4)), G((3, 4))]),
    ("PairwiseDistance", (-INF,), {}, [G((3, 4)), G((3, 4))]),
    ("PairwiseDistance", (0.0,), {}, [G((3, 4)), G((3, 4))]),
    ("PairwiseDistance", (), {}, [G((5,)), G((5,))]),
    # upsampling
    ("UpsamplingNearest2d", (), {"scale_factor": 2}, [G((1, 2, 3, 4))]),
    ("UpsamplingNearest2d", ((5, 7),), {}, [G((1, 2, 3, 4))]),
    ("UpsamplingNearest2d", (), {"scale_factor": (1.5, 2.5)}, [G((1, 2, 3, 4))]),
    ("UpsamplingBilinear2d", (), {"scale_factor": 2}, [G((1, 2, 3, 4))]),
    ("UpsamplingBilinear2d", (), {"size": (5, 3)}, [G((2, 1, 3, 4))]),
    ("UpsamplingBilinear2d", (None, 1.7), {}, [G((1, 2, 3, 4))]),
]


def _outputs(out):
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("name,args,kwargs,inputs", MODULES,
                         ids=[f"{row[0]}-{i}" for i, row in enumerate(MODULES)])
def test_module_matches_torch(torch, name, args, kwargs, inputs):
    def build(lib):
        module = getattr(lib.nn, name)(*[_resolve(lib, a) for a in args],
                                       **{k: _resolve(lib, v) for k, v in kwargs.items()})
        tensors = [spec.make(lib, seed) for seed, spec in enumerate(inputs)]
        return module, tensors

    theirs, tin = build(torch)
    mine, sin = build(sinter)
    want, got = _outputs(theirs(*tin)), _outputs(mine(*sin))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _assert_same(g, w, "output")
    # The gradients of the inputs for the same random output gradient.
    shape = tuple(want[0].shape)
    want[0].backward(_rand(torch, shape, 99))
    got[0].backward(_rand(sinter, shape, 99))
    for i, (s, t) in enumerate(zip(sin, tin)):
        if t.requires_grad and t.grad is None:  # torch's norm for p = 0: no gradient, zeros
            assert s.grad is None or s.grad.abs().sum().item() == 0, f"gradient of input {i}"
        elif t.requires_grad:
            _assert_same(s.grad, t.grad, f"gradient of input {i}")


def test_losses_keep_torch_attributes_and_buffers(torch):
    weight = _f64([0.5, 1.0, 2.0])
    for name, kwargs in (("CrossEntropyLoss", {"weight": weight, "ignore_index": 1,
                                               "label_smoothing": 0.1}),
                         ("BCEWithLogitsLoss", {"weight": weight, "pos_weight": weight}),
                         ("NLLLoss", {}), ("HuberLoss", {"delta": 0.3}),
                         ("KLDivLoss", {"log_target": True}), ("MarginRankingLoss", {})):
        theirs = getattr(torch.nn, name)(**{k: _resolve(torch, v) for k, v in kwargs.items()})
        mine = getattr(sinter.nn, name)(**{k: _resolve(sinter, v) for k, v in kwargs.items()})
        attrs = [a for a in ("reduction", "ignore_index", "label_smoothing", "delta", "margin",
                             "log_target") if hasattr(theirs, a)]
        assert {a: getattr(mine, a) for a in attrs} == {a: getattr(theirs, a) for a in attrs}
        assert list(mine.state_dict()) == list(theirs.state_dict())
        for key, value in theirs.state_dict().items():
            assert mine.state_dict()[key].tolist() == value.tolist()
        assert (getattr(mine, "weight", None) is None) == (getattr(theirs, "weight", None) is None)


def test_legacy_size_average_and_reduce_set_reduction_as_torch(torch):
    for size_average, reduce in ((False, None), (None, False), (True, True), (False, True)):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            mine = sinter.nn.MSELoss(size_average, reduce)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = torch.nn.MSELoss(size_average, reduce)
        assert mine.reduction == theirs.reduction
    assert sinter.nn.CrossEntropyLoss(reduction="sum").reduction == "sum"


def _rows(lib, scales):
    """A column of row scales (0 makes a zero row)."""
    return lib.tensor([[float(v)] for v in scales], dtype=lib.float64)


# (name, fn(lib, F, x), rel) over f64 inputs: the functions new to sinter.nn.functional, called
# as torch's (rel for an f32 result).
FUNCTIONAL = [
    ("softmin", lambda L, F, x: F.softmin(x, dim=0)),
    ("softmin dtype", lambda L, F, x: F.softmin(x, 1, dtype=L.float32).double(), 1e-6),
    ("logsigmoid", lambda L, F, x: F.logsigmoid(x * 30)),
    ("softsign", lambda L, F, x: F.softsign(x)),
    ("tanhshrink", lambda L, F, x: F.tanhshrink(x)),
    ("softshrink", lambda L, F, x: F.softshrink(x, 0.3)),
    ("hardshrink", lambda L, F, x: F.hardshrink(x, lambd=0.3)),
    ("threshold", lambda L, F, x: F.threshold(x, 0.2, -7.0)),
    ("glu", lambda L, F, x: F.glu(x, 0)),
    ("celu", lambda L, F, x: F.celu(x * 3, alpha=2.0)),
    ("pairwise_distance", lambda L, F, x: F.pairwise_distance(x, x.flip(0), p=1.5, eps=0.0,
                                                             keepdim=True)),
    ("cosine_similarity broadcast", lambda L, F, x: F.cosine_similarity(x[:1], x, dim=0)),
    ("cross_entropy unbatched", lambda L, F, x: F.cross_entropy(x[0], L.tensor(1),
                                                               reduction="none")),
    ("cross_entropy probabilities", lambda L, F, x: F.cross_entropy(x, x.flip(0).softmax(1),
                                                                   label_smoothing=0.2)),
    ("nll_loss unbatched", lambda L, F, x: F.nll_loss(x[1], L.tensor(2))),
    ("cross_entropy positional", lambda L, F, x: F.cross_entropy(
        x, L.tensor([0, 2, 1, 5]), x[0].detach().abs(), None, 2, None, "sum", 0.1)),
    ("nll_loss positional", lambda L, F, x: F.nll_loss(x, L.tensor([0, 2, 1, 5]), None, None, 2,
                                                       None, "none")),
    ("cross_entropy probabilities negative smoothing", lambda L, F, x: F.cross_entropy(
        x, x.flip(0).softmax(1), label_smoothing=-0.2)),
    ("normalize zeros", lambda L, F, x: F.normalize(x * 0)),
    ("normalize a zero row p=3", lambda L, F, x: F.normalize(x * _rows(L, [0, 1, 0, 1]), 3.0)),
    ("normalize zeros p=inf", lambda L, F, x: F.normalize(x * 0, float("inf"), 0)),
    ("pairwise_distance zero", lambda L, F, x: F.pairwise_distance(x, x, eps=0.0)),
    ("pairwise_distance zero p=3", lambda L, F, x: F.pairwise_distance(x, x, 3.0, 0.0)),
    ("pairwise_distance zero p=0.5", lambda L, F, x: F.pairwise_distance(x, x, 0.5, 0.0)),
    ("pairwise_distance zero p=-1", lambda L, F, x: F.pairwise_distance(x, x, -1.0, 0.0)),
    ("pairwise_distance a zero element p=0.5", lambda L, F, x: F.pairwise_distance(
        x, x * _rows(L, [1, 0, 1, 1]), 0.5, 0.0)),
    ("cosine_similarity zero row", lambda L, F, x: F.cosine_similarity(
        x * _rows(L, [0, 1, 1, 1]), x.flip(0))),
    ("cosine_similarity below eps", lambda L, F, x: F.cosine_similarity(x * 1e-9, x.flip(0))),
    ("cosine_similarity some below eps", lambda L, F, x: F.cosine_similarity(
        x * 0.2, x.flip(0), dim=0, eps=0.5)),
    ("pad negative reflect", lambda L, F, x: F.pad(x.reshape(1, 4, 6), (-5, 3), "reflect")),
    ("pad negative replicate", lambda L, F, x: F.pad(x.reshape(1, 4, 6), (3, -7), "replicate")),
    ("pad negative circular", lambda L, F, x: F.pad(x.reshape(1, 4, 6), (2, -3, -1, 1),
                                                    "circular")),
    ("adaptive_max_pool2d None", lambda L, F, x: F.adaptive_max_pool2d(x.reshape(1, 4, 6),
                                                                      (None, 4))),
]


@pytest.mark.parametrize("name,fn,rel", [row + (1e-9,) * (3 - len(row)) for row in FUNCTIONAL],
                         ids=[row[0] for row in FUNCTIONAL])
def test_functional_matches_torch(torch, name, fn, rel):
    assert_functional_as_torch(torch, fn, name, rel)


def test_activations_at_their_edges_as_torch(torch):
    """Inputs exactly at a threshold, a shrink bound and 0, where the strict or non-strict
    comparison decides the value and the gradient."""
    import torch.nn.functional as TF
    edges = [-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, float("nan")]
    for fn in (lambda F, x: F.threshold(x, 0.25, -9.0), lambda F, x: F.hardshrink(x, 0.5),
               lambda F, x: F.softshrink(x, 0.5), lambda F, x: F.logsigmoid(x),
               lambda F, x: F.celu(x, 0.5), lambda F, x: F.softsign(x)):
        x = sinter.tensor(edges, dtype=sinter.float64).requires_grad_(True)
        tx = torch.tensor(edges, dtype=torch.float64, requires_grad=True)
        got, want = fn(F, x), fn(TF, tx)
        got.sum().backward()
        want.sum().backward()
        # NaN in and NaN out; a finite value elsewhere, exactly torch's
        assert [v != v for v in got.tolist()] == [v != v for v in want.tolist()]
        assert got.tolist()[:-1] == pytest.approx(want.tolist()[:-1], rel=1e-12, abs=0)
        assert x.grad.tolist()[:-1] == pytest.approx(tx.grad.tolist()[:-1], rel=1e-12, abs=0)


def test_legacy_size_average_and_reduce_of_the_functional_losses_as_torch(torch):
    """nll_loss and cross_entropy take torch's positional arguments, size_average and reduce
    among them, and map those to reduction with torch's warning."""
    x, tx = _rand(sinter, (4, 3), 2), _rand(torch, (4, 3), 2)
    target = [0, 2, 1, 2]
    for name, legacy in (("nll_loss", (False,)), ("nll_loss", (None, -100, False)),
                         ("cross_entropy", (None, 1, False)), ("cross_entropy", (False, 0))):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            got = getattr(F, name)(x, sinter.tensor(target), None, *legacy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(torch.nn.functional, name)(tx, torch.tensor(target), None, *legacy)
        _assert_same(got, want, f"{name}{legacy}")


def test_integer_inputs_of_the_activations_as_torch(torch):
    """threshold keeps an integer dtype (torch converts threshold and value to it), tanhshrink
    promotes to float32, and the shrinks and celu take floating input alone."""
    import torch.nn.functional as TF
    values = [-3, -2, -1, 0, 1, 2, 3]
    for fn in (lambda F, x: F.threshold(x, 1, 5.5), lambda F, x: F.threshold(x, -1.5, -7.9),
               lambda F, x: F.threshold(x.int(), 0.5, 9), lambda F, x: F.tanhshrink(x)):
        got, want = fn(F, sinter.tensor(values)), fn(TF, torch.tensor(values))
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
        _assert_same(got, want, "integer input", rel=1e-6)
    for lib in (torch, sinter):
        nn = lib.nn
        for module in (nn.Softshrink(), nn.Hardshrink(), nn.CELU(), nn.Threshold(0, 1),
                       nn.Tanhshrink()):
            bad = lib.tensor([True, False]) if isinstance(module, (nn.Threshold, nn.Tanhshrink)) \
                else lib.tensor([0, 1, 2])
            with pytest.raises(NotImplementedError):
                module(bad)


def test_softmin_warns_at_its_caller_as_torch(torch):
    """F.softmin without dim warns at its caller's line, as torch's; the module at the line
    that calls it (torch's module warns inside its own call machinery, module.py)."""
    for lib in (torch, sinter):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            line = sys._getframe().f_lineno + 1
            lib.nn.functional.softmin(lib.ones(2, 3))
            if lib is sinter:
                sinter.nn.Softmin()(sinter.ones(2, 3))
        assert [(w.filename, w.lineno) for w in caught][:1] == [(__file__, line)], lib.__name__
    assert (caught[1].filename, caught[1].lineno) == (__file__, line + 2)


NAN = float("nan")

# (values of a (1, 2, L) input, max_pool1d's arguments after the input): windows reaching into
# the padding, holding -inf, NaN and ties, where the index torch returns is decided.
MAX_POOL_INDICES = [
    ([[-INF, -INF, 1.0], [2.0, -INF, -INF]], (3, 1, 1)),
    ([[-INF, -INF, -INF, -INF], [1.0, 1.0, 1.0, 1.0]], (2, 1, 1)),
    ([[NAN, 1.0, NAN, 2.0], [3.0, NAN, -INF, NAN]], (3, 1, 1)),
    ([[1.0, 3.0, 3.0, 1.0, 3.0], [-INF, NAN, -INF, -INF, 2.0]], (2, 2, 1, 2, True)),
    ([[INF, -INF, INF, 0.0, -1.0, 0.0], [0.5, 0.5, NAN, NAN, 0.5, 0.5]], ((3,), (2,), (1,))),
    ([[2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0], [-INF] * 7], (3, 2, 1, 2)),
]


@pytest.mark.parametrize("values,args", MAX_POOL_INDICES,
                         ids=[str(i) for i in range(len(MAX_POOL_INDICES))])
def test_max_pool1d_indices_as_torch(torch, values, args):
    """MaxPool1d and F.max_pool1d with return_indices: the first input position holding each
    window's maximum (never a padding one), the last NaN of a window that holds one."""
    def pool(lib, functional):
        x = lib.tensor(values, dtype=lib.float64).reshape(1, 2, len(values[0]))
        if functional:
            return lib.nn.functional.max_pool1d(x, *args, return_indices=True)
        kwargs = dict(zip(("stride", "padding", "dilation", "ceil_mode"), args[1:]))
        return lib.nn.MaxPool1d(args[0], return_indices=True, **kwargs)(x)

    for functional in (False, True):
        (got, got_at), (want, want_at) = pool(sinter, functional), pool(torch, functional)
        assert got_at.tolist() == want_at.tolist()
        assert str(got.tolist()) == str(want.tolist())  # NaN where torch has NaN


def test_adaptive_max_pool2d_with_none_and_indices_as_torch(torch):
    def pool(lib, shape, size):
        out, at = lib.nn.functional.adaptive_max_pool2d(_rand(lib, shape, 3), size, True)
        return out.tolist(), at.tolist()

    for shape, size in (((2, 3, 5, 7), (None, 3)), ((3, 5, 7), [4, None])):
        assert pool(sinter, shape, size) == pool(torch, shape, size)
    for lib in (torch, sinter):
        with pytest.raises(ValueError, match="Input dimension should be at least 3"):
            lib.nn.functional.adaptive_max_pool2d(lib.ones(5, 7), (None, 3))


def test_modules_compose_in_a_sequential_as_torch(torch):
    def net(lib):
        nn = lib.nn
        # CELU's alpha a power of 2: torch's gradient uses 1 / alpha rounded to f32.
        return nn.Sequential(nn.ReflectionPad1d(1), nn.Conv1d(2, 4, 3), nn.GLU(dim=1),
                             nn.CELU(0.5), nn.MaxPool1d(2), nn.ZeroPad1d((0, 1)),
                             nn.AvgPool1d(2), nn.Flatten(), nn.Linear(6, 3), nn.Softsign())

    torch.manual_seed(0)
    theirs, mine = net(torch).double(), net(sinter)
    mine.to(sinter.float64)
    assert list(mine.state_dict()) == list(theirs.state_dict()) == [
        "1.weight", "1.bias", "8.weight", "8.bias"]
    mine.load_state_dict({k: sinter.from_dlpack(v.detach().contiguous())
                          for k, v in theirs.state_dict().items()})
    x, tx = _rand(sinter, (5, 2, 10), 1), _rand(torch, (5, 2, 10), 1)
    target = [0, 2, 1, 1, 0]
    got = sinter.nn.CrossEntropyLoss(label_smoothing=0.1)(mine(x), sinter.tensor(target))
    want = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(theirs(tx), torch.tensor(target))
    _assert_same(got, want, "loss")
    got.backward()
    want.backward()
    mine_grads = dict(mine.named_parameters())
    for key, p in theirs.named_parameters():
        _assert_same(mine_grads[key].grad, p.grad, key)


# --- channel dropout: what holds for every draw ---

# (name, input shape, how many leading dimensions index a channel: (N, C) or, unbatched, (C))
DROPOUTS = [("Dropout1d", (3, 1024, 5), 2), ("Dropout1d", (1024, 5), 1),
            ("Dropout2d", (2, 512, 3, 2), 2), ("Dropout3d", (2, 512, 2, 1, 3), 2),
            ("Dropout3d", (1024, 2, 1, 3), 1)]


@pytest.mark.parametrize("name,shape,lead", DROPOUTS,
                         ids=[f"{r[0]}-{len(r[1])}d" for r in DROPOUTS])
def test_channel_dropout_zeroes_whole_channels_and_scales_the_rest(name, shape, lead):
    p = 0.25
    module = getattr(sinter.nn, name)(p)
    x = _rand(sinter, shape, 4, 1.0, 2.0).requires_grad_(True)  # no zeros of its own
    out = module(x)
    out.sum().backward()
    per_channel = 1
    for s in shape[lead:]:
        per_channel *= s
    xs = x.detach().reshape(-1, per_channel).tolist()
    outs = out.detach().reshape(-1, per_channel).tolist()
    grads = x.grad.reshape(-1, per_channel).tolist()
    scale = 1.0 / (1 - p)
    kept = 0
    for xc, oc, gc in zip(xs, outs, grads):
        if oc[0] == 0.0:
            assert oc == [0.0] * per_channel and gc == [0.0] * per_channel
        else:
            assert oc == [v * scale for v in xc] and gc == [scale] * per_channel
            kept += 1
    # Each of >= 1024 channels is kept with probability 3/4: all kept or none kept has
    # probability below 1e-127.
    assert 0 < kept < len(xs)
    module.eval()
    assert module(x) is x
    assert sinter.nn.Sequential(module).train()(x) is not x and module.training


def test_channel_dropout_at_p_0_and_1_and_its_errors(torch):
    x = _rand(sinter, (2, 3, 4), 1)
    assert sinter.nn.Dropout1d(0.0)(x) is x
    assert sinter.nn.Dropout1d(1.0)(x).tolist() == (x * 0.0).tolist()
    assert F.dropout2d(_rand(sinter, (2, 3, 2, 2), 1), 0.7, training=False).tolist() == \
        _rand(sinter, (2, 3, 2, 2), 1).tolist()
    for lib in (torch, sinter):
        for bad in (-0.1, 1.5):
            with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
                lib.nn.Dropout2d(bad)
        with pytest.raises(RuntimeError, match="Expected 2D or 3D input"):
            lib.nn.Dropout1d()(lib.ones(1, 2, 3, 4))
        with pytest.warns(UserWarning, match="dropout2d: Received a 2-D input"):
            assert tuple(lib.nn.Dropout2d()(lib.ones(3, 4)).shape) == (3, 4)
    assert repr(sinter.nn.Dropout3d(0.2, inplace=True)) == repr(torch.nn.Dropout3d(0.2, True))


def test_channel_dropout_checks_in_torch_order(torch):
    """Not training, p = 0 and p = 1 decide before the input's dimensions and dtype do."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lib in (torch, sinter):
            nn = lib.nn
            assert nn.Dropout2d().eval()(lib.ones(3)).tolist() == [1.0, 1.0, 1.0]
            assert nn.Dropout2d(0.0)(lib.ones(3)).tolist() == [1.0, 1.0, 1.0]
            assert nn.Dropout2d(1.0)(lib.ones(3)).tolist() == [0.0, 0.0, 0.0]
            zeros = nn.Dropout2d(1.0)(lib.ones(2, 3, 4, dtype=lib.int64))
            assert zeros.dtype == lib.int64 and zeros.sum().item() == 0
            integer = lib.ones(2, 3, 4, 5, dtype=lib.int64)
            assert nn.Dropout2d().eval()(integer).tolist() == integer.tolist()
            with pytest.raises(RuntimeError):
                nn.Dropout2d()(integer)
            with pytest.raises(RuntimeError, match="Feature dropout requires at least 2"):
                nn.Dropout2d()(lib.ones(3))
            with pytest.raises(ValueError, match="dropout probability has to be between"):
                lib.nn.functional.dropout1d(lib.ones(3), 1.5)


# --- printouts and errors ---

REPRS = [
    ("Softmin", (), {}), ("Softmin", (1,), {}), ("LogSigmoid", (), {}), ("Softsign", (), {}),
    ("Tanhshrink", (), {}), ("Softshrink", (0.3,), {}), ("Hardshrink", (), {}),
    ("Threshold", (0.1, 2.0), {}), ("Threshold", (0.1, 2.0, True), {}), ("GLU", (), {}),
    ("CELU", (), {"alpha": 0.5}), ("CELU", (), {"inplace": True}),
    ("MaxPool1d", (3,), {}), ("MaxPool1d", (3, 2, 1, 2, True, True), {}),
    ("AvgPool1d", (3,), {}), ("AvgPool1d", (3, 2, 1), {}),
    ("AdaptiveMaxPool2d", ((2, None),), {}), ("AdaptiveMaxPool2d", (3, True), {}),
    ("ZeroPad1d", (1,), {}), ("ZeroPad2d", ((1, 0, 2, 3),), {}), ("ZeroPad3d", (2,), {}),
    ("ConstantPad1d", ((1, 2), 3.5), {}), ("ConstantPad2d", (1, 0.0), {}),
    ("ConstantPad3d", (1, -1.0), {}), ("ReflectionPad1d", (2,), {}),
    ("ReflectionPad2d", ((1, 2, 3, 4),), {}), ("ReflectionPad3d", (1,), {}),
    ("ReplicationPad1d", (2,), {}), ("ReplicationPad2d", (1,), {}),
    ("ReplicationPad3d", (1,), {}), ("CircularPad1d", (1,), {}), ("CircularPad2d", (2,), {}),
    ("CircularPad3d", ((1, 2, 3, 4, 5, 6),), {}),
    ("Dropout1d", (), {}), ("Dropout2d", (0.1,), {}),
    ("CosineSimilarity", (), {}), ("PairwiseDistance", (), {}),
    ("UpsamplingNearest2d", (), {"scale_factor": 2}), ("UpsamplingNearest2d", ((4, 5),), {}),
    ("UpsamplingBilinear2d", (), {"scale_factor": (2, 3)}), ("UpsamplingBilinear2d", (3,), {}),
    ("CrossEntropyLoss", (), {"label_smoothing": 0.1}), ("NLLLoss", (), {}), ("MSELoss", (), {}),
    ("L1Loss", (), {}), ("SmoothL1Loss", (), {}), ("HuberLoss", (), {}), ("BCELoss", (), {}),
    ("BCEWithLogitsLoss", (), {}), ("KLDivLoss", (), {}), ("CosineEmbeddingLoss", (), {}),
    ("MarginRankingLoss", (), {}),
]


@pytest.mark.parametrize("name,args,kwargs", REPRS,
                         ids=[f"{row[0]}-{i}" for i, row in enumerate(REPRS)])
def test_modules_print_as_torch(torch, name, args, kwargs):
    assert repr(getattr(sinter.nn, name)(*args, **kwargs)) == repr(
        getattr(torch.nn, name)(*args, **kwargs))


def test_upsampling_modules_keep_torch_attributes(torch):
    names = ("name", "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor")
    for name, kwargs in (("UpsamplingNearest2d", {"scale_factor": 2}),
                         ("UpsamplingBilinear2d", {"size": (3, 4)})):
        mine, theirs = getattr(sinter.nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
        assert {a: getattr(mine, a) for a in names} == {a: getattr(theirs, a) for a in names}


# (what, fn(lib) that fails, exception type, what sinter's message says): torch raises the
# same type for the same misuse.
ERRORS = [
    ("GLU odd", lambda L: L.nn.GLU()(L.ones(2, 5)), RuntimeError,
     "must be even, but dimension 1 is size 5"),
    ("GLU scalar", lambda L: L.nn.GLU()(L.ones(())), RuntimeError, "does not support scalars"),
    ("Softshrink negative", lambda L: L.nn.Softshrink(-0.5)(L.ones(3)), RuntimeError, "lambd"),
    ("CELU alpha 0", lambda L: L.nn.CELU(0.0)(L.ones(3)), RuntimeError, "alpha cannot be 0"),
    ("CircularPad2d on 2-D", lambda L: L.nn.CircularPad2d(1)(L.ones(3, 4)), ValueError,
     r"expected 3D or 4D input \(got 2D input\)"),
    ("CircularPad1d on 4-D", lambda L: L.nn.CircularPad1d(1)(L.ones(1, 2, 3, 4)), ValueError,
     "expected 2D or 3D input"),
    ("ReflectionPad1d too wide", lambda L: L.nn.ReflectionPad1d(3)(L.ones(1, 2, 3)),
     RuntimeError, "must be smaller than its size 3"),
    ("MaxPool1d padding", lambda L: L.nn.MaxPool1d(2, padding=2)(L.ones(1, 2, 6)), RuntimeError,
     "padding"),
    ("CrossEntropyLoss reduction", lambda L: L.nn.CrossEntropyLoss(reduction="avg")(
        L.ones(2, 3), L.tensor([0, 1])), ValueError, "avg is not a valid value for reduction"),
    ("CrossEntropyLoss probability reduction", lambda L: L.nn.CrossEntropyLoss(reduction="avg")(
        L.ones(2, 3), L.ones(2, 3)), ValueError, "avg is not a valid value for reduction"),
    ("CrossEntropyLoss probability shape", lambda L: L.nn.CrossEntropyLoss()(
        L.ones(2, 3), L.ones(2, 4)), RuntimeError, r"input's shape \[2, 3\], got \[2, 4\]"),
    ("CrossEntropyLoss smoothing", lambda L: L.nn.CrossEntropyLoss(label_smoothing=1.5)(
        L.ones(2, 3), L.ones(2, 3)), RuntimeError, r"label_smoothing must be in \[0, 1\]"),
    ("CrossEntropyLoss probability ignore_index", lambda L: L.nn.CrossEntropyLoss(
        ignore_index=0)(L.ones(2, 3), L.ones(2, 3) / 3), RuntimeError,
     "ignore_index is not supported for floating point target"),
    ("CrossEntropyLoss probability 2-d weight", lambda L: L.nn.CrossEntropyLoss(
        weight=L.ones(1, 3))(L.ones(2, 3), L.ones(2, 3) / 3), RuntimeError,
     "weight tensor should be defined either for all 3 classes or no classes"),
    ("CrossEntropyLoss probability weight size", lambda L: L.nn.functional.cross_entropy(
        L.ones(3), L.ones(3) / 3, L.ones(4)), RuntimeError, "for all 3 classes"),
    ("MaxPool1d stride 0", lambda L: L.nn.MaxPool1d(2, 0)(L.ones(1, 2, 6)), RuntimeError,
     "stride must be greater than zero, but got 0"),
    ("AvgPool1d stride 0", lambda L: L.nn.AvgPool1d(2, 0)(L.ones(1, 2, 6)), RuntimeError,
     "stride must be greater than zero, but got 0"),
    ("max_pool1d stride 0", lambda L: L.nn.functional.max_pool1d(L.ones(1, 2, 6), 2, 0),
     RuntimeError, "stride must be greater than zero, but got 0"),
    ("avg_pool1d stride -1", lambda L: L.nn.functional.avg_pool1d(L.ones(1, 2, 6), 2, -1),
     RuntimeError, "stride must be greater than zero, but got -1"),
    ("max_pool1d stride 0 with indices", lambda L: L.nn.functional.max_pool1d(
        L.ones(1, 2, 6), 2, (0,), return_indices=True), RuntimeError, "greater than zero"),
    ("ReplicationPad1d cropped away", lambda L: L.nn.ReplicationPad1d((-3, -2))(L.ones(2, 5)),
     RuntimeError, "leave no element of its size 5"),
    ("ReflectionPad2d cropped away", lambda L: L.nn.ReflectionPad2d((1, 1, -2, -1))(
        L.ones(2, 3, 4)), RuntimeError, "leave no element of its size 3"),
    ("CosineSimilarity shapes", lambda L: L.nn.CosineSimilarity()(L.ones(2, 4), L.ones(3, 4)),
     RuntimeError, r"size of tensor a \(2\) must match the size of tensor b \(3\) at "
     "non-singleton dimension 0"),
    ("ModuleDict dotted key", lambda L: L.nn.ModuleDict({"a.b": L.nn.ReLU()}), KeyError,
     "module name can.+t contain"),
    ("ModuleDict attribute key", lambda L: L.nn.ModuleDict({"keys": L.nn.ReLU()}), KeyError,
     "attribute 'keys' already exists"),
    ("ModuleDict empty key", lambda L: L.nn.ModuleDict({"": L.nn.ReLU()}), KeyError,
     "empty string"),
    ("ModuleDict value", lambda L: L.nn.ModuleDict({"a": 3}), TypeError,
     "int is not a Module subclass"),
    ("ModuleDict update", lambda L: L.nn.ModuleDict(3), TypeError,
     "iterable of key/value pairs, but got int"),
    ("ModuleDict pair", lambda L: L.nn.ModuleDict([("a",)]), ValueError,
     "element #0 has length 1; 2 is required"),
    ("ParameterList index", lambda L: L.nn.ParameterList([L.ones(1)])[1], IndexError,
     "index 1 is out of range"),
    ("ParameterList of a tensor", lambda L: L.nn.ParameterList(L.ones(2)), TypeError,
     "called with an iterable, but got Tensor"),
    ("ParameterList call", lambda L: L.nn.ParameterList()(1), RuntimeError,
     "ParameterList should not be called"),
    ("ParameterList overwrite", lambda L: L.nn.ParameterList([L.ones(1)]).__setitem__(0, 3),
     TypeError, "cannot assign 'int' as parameter '0'"),
    ("ParameterDict key", lambda L: L.nn.ParameterDict({1: L.ones(1)}), TypeError,
     "not a string"),
    ("ParameterDict dotted key", lambda L: L.nn.ParameterDict({"a.b": L.ones(1)}), KeyError,
     "parameter name can.+t contain"),
    ("ParameterDict call", lambda L: L.nn.ParameterDict()(1), RuntimeError,
     "ParameterDict should not be called"),
]


@pytest.mark.parametrize("what,fn,kind,message", ERRORS, ids=[row[0] for row in ERRORS])
def test_errors_as_torch(torch, what, fn, kind, message):
    assert_error_as_torch(torch, fn, kind, message)
