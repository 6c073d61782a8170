"""The torch.nn modules and functions of sinter/nn/cells.py, layers_extra.py and
_functional_extra.py against torch's: the same constructor arguments (and, for the modules with
parameters, torch's state_dict loaded) on the same f64 inputs give the same outputs and
gradients of inputs and parameters, printouts, state_dict keys and errors; gradcheck on f64;
the random layers by what holds for every draw.

To add a module: a row in MODULES (and REPRS), its misuse in ERRORS, a row in GRADCHECK."""

import math
import random
import warnings

import pytest

import sinter
import sinter.nn.functional as F
from sinter.autograd import gradcheck
from torch_parity import (
    assert_functional_as_torch,
    assert_same as _assert_same,
    C,
    G,
    rand as _rand,
)


class Pair:
    """A tuple of inputs (an LSTM state)."""

    def __init__(self, *specs):
        self.specs = specs

    def make(self, lib, seed):
        return tuple(s.make(lib, seed * 10 + i) for i, s in enumerate(self.specs))


def _long(values):
    return C(lambda L: L.tensor(values))


def _window_indices(planes, in_size, kernel, out_size, seed):
    """Flat output positions, one inside each (stride = kernel) window, as max_pool's indices
    for a (planes..., *in_size) input; none repeated."""
    rng = random.Random(seed)
    rows = []
    for _ in range(math.prod(planes)):
        plane = []
        for pos in _grid(in_size):
            where = [p * k + rng.randrange(k) for p, k in zip(pos, kernel)]
            flat = 0
            for w, o in zip(where, out_size):
                flat = flat * o + w
            plane.append(flat)
        rows.append(plane)
    return C(lambda L: L.tensor(rows).reshape(*planes, *in_size))


def _grid(sizes):
    if not sizes:
        yield ()
        return
    for i in range(sizes[0]):
        for rest in _grid(sizes[1:]):
            yield (i,) + rest


def _outputs(out):
    return list(out) if isinstance(out, tuple) else [out]


def _to_sinter(t):
    return sinter.from_dlpack(t.detach().contiguous())


EVAL = {"eval": True}

# (name, args, kwargs, inputs, options): torch.nn.<name> and sinter.nn.<name> of these
# arguments (torch's parameters loaded into sinter's) called on these inputs; options: eval
# (the module in eval mode), call (keyword arguments of forward).
MODULES = [
    # recurrent cells
    ("RNNCell", (3, 4), {}, [G((2, 3)), G((2, 4))], {}),
    ("RNNCell", (3, 4), {"nonlinearity": "relu"}, [G((5, 3)), G((5, 4))], {}),
    ("RNNCell", (3, 4, False), {}, [G((2, 3))], {}),
    ("RNNCell", (3, 4), {}, [G((3,)), G((4,))], {}),
    ("LSTMCell", (3, 4), {}, [G((2, 3)), Pair(G((2, 4)), G((2, 4)))], {}),
    ("LSTMCell", (3, 4), {"bias": False}, [G((2, 3))], {}),
    ("LSTMCell", (3, 2), {}, [G((3,)), Pair(G((2,)), G((2,)))], {}),
    ("GRUCell", (3, 4), {}, [G((2, 3)), G((2, 4))], {}),
    ("GRUCell", (3, 4), {"bias": False}, [G((2, 3)), G((2, 4))], {}),
    ("GRUCell", (2, 3), {}, [G((2,))], {}),
    # embedding bags: input, offsets, per_sample_weights
    ("EmbeddingBag", (6, 3), {}, [_long([[0, 2, 5], [1, 1, 4]])], {}),
    ("EmbeddingBag", (6, 3), {"mode": "sum"}, [_long([0, 2, 5, 1, 1, 4, 3]),
                                                _long([0, 2, 2, 5])], {}),
    ("EmbeddingBag", (6, 3), {"mode": "max"}, [_long([0, 2, 5, 1, 1, 4, 3]),
                                                _long([0, 2, 2, 5])], {}),
    ("EmbeddingBag", (6, 3), {"mode": "sum"}, [_long([0, 2, 5, 1, 1, 4]), _long([0, 3]),
                                                G((6,))], {}),
    ("EmbeddingBag", (6, 3), {"mode": "sum"}, [_long([[0, 2], [5, 1]]), None, G((2, 2))], {}),
    ("EmbeddingBag", (6, 3), {"padding_idx": 1}, [_long([0, 1, 5, 1, 1, 4]),
                                                   _long([0, 2, 4, 5])], {}),
    ("EmbeddingBag", (6, 3), {"mode": "max", "padding_idx": -2},
     [_long([0, 4, 5, 4, 4, 2]), _long([0, 2, 3, 5])], {}),
    ("EmbeddingBag", (6, 3), {"mode": "sum", "padding_idx": 0},
     [_long([0, 3, 0, 2]), _long([0, 1, 2])], {}),
    ("EmbeddingBag", (6, 3), {"include_last_offset": True},
     [_long([0, 2, 5, 1, 1, 4]), _long([0, 2, 2, 6])], {}),
    ("EmbeddingBag", (6, 3), {"include_last_offset": True, "mode": "max"},
     [_long([0, 2, 5, 1, 1, 4]), _long([0, 3, 5])], {}),
    ("EmbeddingBag", (6, 3), {"scale_grad_by_freq": True, "mode": "sum"},
     [_long([1, 2, 1, 1, 3]), _long([0, 2])], {}),
    ("EmbeddingBag", (6, 3), {"scale_grad_by_freq": True, "padding_idx": 2},
     [_long([1, 2, 1, 1, 3]), _long([0, 2])], {}),
    ("EmbeddingBag", (6, 3), {"mode": "mean"}, [C(lambda L: L.tensor([3, 0, 5], dtype=L.int32)),
                                                 C(lambda L: L.tensor([0, 1], dtype=L.int32))], {}),
    # bilinear
    ("Bilinear", (2, 3, 4), {}, [G((5, 2)), G((5, 3))], {}),
    ("Bilinear", (2, 3, 4), {"bias": False}, [G((2, 3, 2)), G((2, 3, 3))], {}),
    ("Bilinear", (3, 2, 2), {}, [G((3,)), G((2,))], {}),
    # power-average pooling
    ("LPPool1d", (2, 3), {}, [G((2, 3, 10))], {}),
    ("LPPool1d", (1.5, 3, 2), {"ceil_mode": True}, [G((2, 3, 10), 0.1, 2.0)], {}),
    ("LPPool1d", (3, 2), {}, [G((3, 9))], {}),
    ("LPPool1d", (float("inf"), 3, 2), {"ceil_mode": True}, [G((2, 3, 10))], {}),
    ("LPPool2d", (2, 2), {}, [G((2, 3, 6, 5))], {}),
    ("LPPool2d", (1.5, (2, 3), (1, 2)), {"ceil_mode": True}, [G((2, 2, 5, 6), 0.1, 2.0)], {}),
    ("LPPool2d", (3, 2), {}, [G((3, 5, 5))], {}),
    ("LPPool2d", (float("-inf"), 2), {"ceil_mode": True}, [G((2, 2, 5, 5))], {}),
    ("LPPool3d", (2, 2), {}, [G((1, 2, 4, 4, 5))], {}),
    ("LPPool3d", (1.5, (2, 1, 2), 2), {"ceil_mode": True}, [G((2, 3, 5, 4), 0.1, 2.0)], {}),
    ("LPPool3d", (float("inf"), 2), {"ceil_mode": True}, [G((1, 2, 3, 5, 4))], {}),
    # normalization, shuffles, softmax
    ("LocalResponseNorm", (3,), {}, [G((2, 5, 4))], {}),
    ("LocalResponseNorm", (2, 0.1, 0.5, 2.0), {}, [G((2, 5, 3, 2))], {}),
    ("LocalResponseNorm", (4,), {"alpha": 0.5, "k": 1.5}, [G((1, 3, 2, 2, 2))], {}),
    ("ChannelShuffle", (2,), {}, [G((2, 6, 3))], {}),
    ("ChannelShuffle", (3,), {}, [G((1, 6, 2, 2))], {}),
    ("Softmax2d", (), {}, [G((2, 3, 4, 5))], {}),
    ("Softmax2d", (), {}, [G((3, 4, 5))], {}),
    # the random layers where they are deterministic
    ("AlphaDropout", (), {}, [G((3, 4))], EVAL),
    ("AlphaDropout", (0.0,), {}, [G((3, 4))], {}),
    ("FeatureAlphaDropout", (0.3,), {}, [G((2, 3, 4))], EVAL),
    ("RReLU", (), {}, [G((3, 5))], EVAL),
    ("RReLU", (0.1, 0.6), {}, [G((2, 3, 4))], EVAL),
    # adaptive max pooling
    ("AdaptiveMaxPool1d", (3,), {}, [G((2, 3, 8))], {}),
    ("AdaptiveMaxPool1d", ((5,),), {"return_indices": True}, [G((3, 7))], {}),
    ("AdaptiveMaxPool1d", (9,), {"return_indices": True}, [G((1, 2, 4))], {}),
    ("AdaptiveMaxPool3d", ((2, 3, 2),), {}, [G((2, 2, 5, 7, 4))], {}),
    ("AdaptiveMaxPool3d", (2,), {"return_indices": True}, [G((3, 5, 4, 6))], {}),
    ("AdaptiveMaxPool3d", ((None, 2, None),), {"return_indices": True}, [G((1, 2, 3, 5, 4))], {}),
    ("AdaptiveMaxPool3d", ((4, 1, 3),), {"return_indices": True}, [G((1, 1, 3, 2, 2))], {}),
    # max unpooling: indices inside each window, as max pooling's
    ("MaxUnpool1d", (2,), {}, [G((2, 3, 4)), _window_indices((2, 3), (4,), (2,), (8,), 1)], {}),
    ("MaxUnpool1d", (3,), {}, [G((3, 4)), _window_indices((3,), (4,), (3,), (13,), 2)],
     {"call": {"output_size": (13,)}}),
    ("MaxUnpool2d", (2,), {}, [G((1, 2, 3, 2)), _window_indices((1, 2), (3, 2), (2, 2), (6, 4),
                                                                  3)], {}),
    ("MaxUnpool2d", ((2, 3),), {}, [G((2, 2, 2)), _window_indices((2,), (2, 2), (2, 3), (5, 7),
                                                                  4)],
     {"call": {"output_size": (1, 2, 5, 7)}}),
    ("MaxUnpool3d", (2,), {}, [G((1, 1, 2, 2, 2)),
                               _window_indices((1, 1), (2, 2, 2), (2, 2, 2), (4, 4, 4), 5)], {}),
    ("MaxUnpool3d", ((1, 2, 2),), {}, [G((2, 2, 1, 2)),
                                       _window_indices((2,), (2, 1, 2), (1, 2, 2), (2, 2, 4), 6)],
     {}),
]


def _build(lib, name, args, kwargs, inputs, options):
    module = getattr(lib.nn, name)(*args, **kwargs)
    if options.get("eval"):
        module.eval()
    tensors = [None if spec is None else spec.make(lib, seed) for seed, spec in enumerate(inputs)]
    return module, tensors


@pytest.mark.parametrize("name,args,kwargs,inputs,options", MODULES,
                         ids=[f"{row[0]}-{i}" for i, row in enumerate(MODULES)])
def test_module_matches_torch(torch, name, args, kwargs, inputs, options):
    torch.manual_seed(0)
    theirs, tin = _build(torch, name, args, kwargs, inputs, options)
    mine, sin = _build(sinter, name, args, kwargs, inputs, options)
    theirs.double()
    mine.to(sinter.float64)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    mine.load_state_dict({k: _to_sinter(v) for k, v in theirs.state_dict().items()})
    call = options.get("call", {})
    want, got = _outputs(theirs(*tin, **call)), _outputs(mine(*sin, **call))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _assert_same(g, w, "output")
    # Gradients for the same random output gradients, of every floating output.
    floating = [k for k, w in enumerate(want) if w.is_floating_point()]
    sum(((want[k] * _rand(torch, tuple(want[k].shape), 99 + k)).sum() for k in floating)
        ).backward()
    sum(((got[k] * _rand(sinter, tuple(want[k].shape), 99 + k)).sum() for k in floating)
        ).backward()
    flat_t = [t for x in tin for t in (x if isinstance(x, tuple) else (x,))]
    flat_s = [t for x in sin for t in (x if isinstance(x, tuple) else (x,))]
    for i, (s, t) in enumerate(zip(flat_s, flat_t)):
        if t is not None and t.requires_grad:
            _assert_same(s.grad, t.grad, f"gradient of input {i}")
    params = dict(mine.named_parameters())
    for key, p in theirs.named_parameters():
        _assert_same(params[key].grad, p.grad, f"gradient of {key}")


# (name, fn(lib, F, x) over x f64 (4, 6) uniform in [-2, 2), rel): the functions called as
# torch's, their values and gradients of x.
FUNCTIONAL = [
    ("bilinear", lambda L, F, x: F.bilinear(x[:, :2], x[:, 2:5], x[:2, :].reshape(2, 2, 3),
                                            x[3, :2])),
    ("bilinear 3-d", lambda L, F, x: F.bilinear(x.reshape(2, 2, 6), x.flip(0).reshape(2, 2, 6),
                                                x[:2, :].reshape(2, 1, 6).expand(2, 6, 6))),
    ("lp_pool1d", lambda L, F, x: F.lp_pool1d(x.unsqueeze(0), 2, 3, 2, True)),
    ("lp_pool1d p=1", lambda L, F, x: F.lp_pool1d(x, 1, 2)),
    ("lp_pool2d", lambda L, F, x: F.lp_pool2d(x.reshape(1, 1, 4, 6), 3.0, (2, 3))),
    ("lp_pool2d inf", lambda L, F, x: F.lp_pool2d(x.reshape(1, 4, 6), float("inf"), 2, 1)),
    ("lp_pool3d", lambda L, F, x: F.lp_pool3d(x.reshape(1, 2, 2, 6).abs(), 1.5, (1, 2, 2),
                                              ceil_mode=True)),
    ("local_response_norm", lambda L, F, x: F.local_response_norm(x.reshape(2, 4, 3), 5, 0.3,
                                                                  0.9, 0.5)),
    ("channel_shuffle", lambda L, F, x: F.channel_shuffle(x.reshape(1, 4, 6), 4)),
    ("alpha_dropout eval", lambda L, F, x: F.alpha_dropout(x, 0.4)),
    ("feature_alpha_dropout p=0", lambda L, F, x: F.feature_alpha_dropout(x, 0.0, True)),
    ("rrelu eval", lambda L, F, x: F.rrelu(x, 0.2, 0.7)),
    ("rrelu default", lambda L, F, x: F.rrelu(x)),
    ("adaptive_max_pool1d", lambda L, F, x: F.adaptive_max_pool1d(x, 4)),
    ("adaptive_max_pool3d", lambda L, F, x: F.adaptive_max_pool3d(x.reshape(1, 2, 2, 6),
                                                                  (1, None, 4))),
    ("pdist", lambda L, F, x: F.pdist(x)),
    ("pdist p=1", lambda L, F, x: F.pdist(x.reshape(6, 4), 1)),
    ("pdist p=0.5", lambda L, F, x: F.pdist(x.t(), 0.5)),
    ("pdist p=3", lambda L, F, x: F.pdist(x.reshape(3, 8), 3.0)),
    ("pdist p=inf", lambda L, F, x: F.pdist(x, float("inf"))),
    ("pdist p=0", lambda L, F, x: F.pdist(x, 0)),
    ("pdist equal rows", lambda L, F, x: F.pdist(L.cat([x, x[:2]]))),
    ("pdist one row", lambda L, F, x: F.pdist(x[:1])),
    ("embedding_bag", lambda L, F, x: F.embedding_bag(L.tensor([3, 0, 1, 1]), x,
                                                      L.tensor([0, 1]))),
    ("embedding_bag positional", lambda L, F, x: F.embedding_bag(
        L.tensor([3, 0, 1, 1, 2]), x, L.tensor([0, 1, 1, 5]), None, 2, False, "sum", False,
        None, True, 1)),
    ("embedding_bag max 2-d", lambda L, F, x: F.embedding_bag(L.tensor([[3, 0], [1, 1]]), x,
                                                              mode="max")),
    ("embedding_bag per_sample_weights", lambda L, F, x: F.embedding_bag(
        L.tensor([3, 0, 2]), x, L.tensor([0, 2]), mode="sum",
        per_sample_weights=x[0, :3].detach())),
    ("embedding_bag all padding", lambda L, F, x: F.embedding_bag(
        L.tensor([2, 2, 0]), x, L.tensor([0, 2]), padding_idx=2)),
    ("embedding_bag all padding max", lambda L, F, x: F.embedding_bag(
        L.tensor([2, 2, 2, 0]), x, L.tensor([0, 3]), mode="max", padding_idx=2)),
    ("softmax over channels", lambda L, F, x: L.nn.Softmax2d()(x.reshape(2, 3, 4))),
]


@pytest.mark.parametrize("name,fn,rel", [row + (1e-9,) * (3 - len(row)) for row in FUNCTIONAL],
                         ids=[row[0] for row in FUNCTIONAL])
def test_functional_matches_torch(torch, name, fn, rel):
    assert_functional_as_torch(torch, fn, name, rel)


def test_functions_with_indices_match_torch(torch):
    """The index outputs of the adaptive max pools and max_unpool's round trip through torch's
    max_pool2d indices, overlapping windows naming one position twice."""
    import torch.nn.functional as TF
    for shape, size in (((2, 3, 9), 4), ((3, 5), (2,))):
        got = F.adaptive_max_pool1d(_rand(sinter, shape, 1), size, True)
        want = TF.adaptive_max_pool1d(_rand(torch, shape, 1), size, True)
        assert got[1].tolist() == want[1].tolist() and got[1].dtype == sinter.int64
    for shape, size in (((1, 2, 5, 4, 6), (3, 2, 4)), ((2, 3, 3, 3), (3, 3, 2))):
        got = F.adaptive_max_pool3d(_rand(sinter, shape, 2), size, return_indices=True)
        want = TF.adaptive_max_pool3d(_rand(torch, shape, 2), size, return_indices=True)
        assert got[1].tolist() == want[1].tolist()
    pooled, at = TF.max_pool2d(_rand(torch, (2, 2, 7, 7), 3), 3, 2, return_indices=True)
    pooled.requires_grad_(True)
    values = _to_sinter(pooled).requires_grad_(True)
    got = F.max_unpool2d(values, _to_sinter(at), 3, 2, output_size=(7, 7))
    want = TF.max_unpool2d(pooled, at, 3, 2, output_size=(7, 7))
    _assert_same(got, want, "unpool of overlapping windows")
    got.backward(_rand(sinter, (2, 2, 7, 7), 4))
    want.backward(_rand(torch, (2, 2, 7, 7), 4))
    _assert_same(values.grad, pooled.grad, "unpool gradient")


def test_embedding_bag_max_norm_renorms_the_rows_used_as_torch(torch):
    import torch.nn.functional as TF
    for norm_type, mode in ((2.0, "sum"), (1.0, "max"), (3.5, "mean")):
        w, tw = _rand(sinter, (5, 3), 1, -3.0, 3.0), _rand(torch, (5, 3), 1, -3.0, 3.0)
        index = [1, 2, 4, 1]
        got = F.embedding_bag(sinter.tensor(index), w, sinter.tensor([0, 2]), max_norm=1.5,
                              norm_type=norm_type, mode=mode)
        want = TF.embedding_bag(torch.tensor(index), tw, torch.tensor([0, 2]), max_norm=1.5,
                                norm_type=norm_type, mode=mode)
        _assert_same(got, want, "output")
        _assert_same(w, tw, "renormed weight")  # rows 1, 2 and 4 scaled, 0 and 3 untouched
    bag = sinter.nn.EmbeddingBag(4, 2, max_norm=0.5)
    bag(sinter.tensor([[0, 3]]))
    norms = bag.weight.detach().pow(2).sum(1).sqrt().tolist()
    assert norms[0] <= 0.5 + 1e-6 and norms[3] <= 0.5 + 1e-6


def test_embedding_bag_from_pretrained_and_init_as_torch(torch):
    w = _rand(sinter, (4, 3), 1)
    frozen = sinter.nn.EmbeddingBag.from_pretrained(w, padding_idx=1, mode="sum")
    theirs = torch.nn.EmbeddingBag.from_pretrained(_rand(torch, (4, 3), 1), padding_idx=1,
                                                   mode="sum")
    assert repr(frozen) == repr(theirs)
    assert not frozen.weight.requires_grad and theirs.weight.requires_grad is False
    assert frozen.weight.tolist() == w.tolist()  # the padding row kept, as torch's
    out = frozen(sinter.tensor([[0, 1, 2]]))
    _assert_same(out, theirs(torch.tensor([[0, 1, 2]])), "pretrained output")
    trainable = sinter.nn.EmbeddingBag.from_pretrained(w, freeze=False)
    assert trainable.weight.requires_grad and trainable.mode == "mean"
    fresh = sinter.nn.EmbeddingBag(50, 40, padding_idx=-3)
    assert fresh.padding_idx == 47 and fresh.weight[47].abs().sum().item() == 0
    values = fresh.weight.detach().flatten().tolist()
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    assert abs(mean) < 0.1 and abs(std - 1) < 0.1  # N(0, 1), 2000 draws
    bag = sinter.nn.EmbeddingBag(3, 2, mode="max", dtype=sinter.float64)
    assert bag.weight.dtype == sinter.float64
    assert F.embedding_bag(sinter.tensor([0]), bag.weight, sinter.tensor([0, 1, 1])).tolist()[1:] \
        == [[0.0, 0.0], [0.0, 0.0]]


def test_embedding_bag_deprecated_argument_order_as_torch(torch):
    w = _rand(sinter, (4, 3), 1)
    with pytest.warns(UserWarning, match="Argument order of nn.functional.embedding_bag"):
        swapped = F.embedding_bag(w, sinter.tensor([[0, 2]]))
    assert swapped.tolist() == F.embedding_bag(sinter.tensor([[0, 2]]), w).tolist()


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_init_and_hidden_default_as_torch(torch, name):
    """Parameters uniform in +-1/sqrt(hidden_size), of the gates' stacked shapes; hx None is
    zeros; a sequence unrolled with the cell matches torch's."""
    cell = getattr(sinter.nn, name)(5, 16)
    theirs = getattr(torch.nn, name)(5, 16)
    bound, values = 1 / 4, []
    for (key, p), (tkey, tp) in zip(cell.named_parameters(), theirs.named_parameters()):
        assert key == tkey and tuple(p.shape) == tuple(tp.shape) and p.requires_grad
        values += p.detach().flatten().tolist()
    # >= 368 draws: none beyond the bound, some within 5% of either end
    assert max(values) <= bound and min(values) >= -bound
    assert max(values) > 0.9 * bound and min(values) < -0.9 * bound
    theirs.double()
    cell.to(sinter.float64)
    cell.load_state_dict({k: _to_sinter(v) for k, v in theirs.state_dict().items()})
    x, tx = _rand(sinter, (4, 3, 5), 1), _rand(torch, (4, 3, 5), 1)
    h, th = None, None
    for t in range(4):
        h, th = cell(x[t], h), theirs(tx[t], th)
    for g, w in zip(_outputs(h), _outputs(th)):
        _assert_same(g, w, "unrolled state")
    assert cell.weight_ih.dtype == sinter.float64
    assert getattr(sinter.nn, name)(2, 3, dtype=sinter.float64).weight_hh.dtype == sinter.float64


# --- the random layers: what holds for every draw ---

_ALPHA = 1.7580993408473766


def test_alpha_dropout_formula_and_statistics():
    """Kept units a x + a alpha p, dropped ones -a alpha (1 - p), a = 1 / sqrt((alpha^2 p + 1)
    (1 - p)) (torch's formula); on N(0, 1) input the output keeps mean 0 and variance 1."""
    sinter.manual_seed(1)
    p = 0.2
    a = 1 / math.sqrt((_ALPHA ** 2 * p + 1) * (1 - p))
    x = sinter.randn(20000, dtype=sinter.float64).requires_grad_(True)
    out = sinter.nn.AlphaDropout(p)(x)
    out.sum().backward()
    xs, outs, grads = x.tolist(), out.tolist(), x.grad.tolist()
    dropped = 0
    for xv, ov, gv in zip(xs, outs, grads):
        if gv == 0.0:
            dropped += 1
            assert ov == pytest.approx(-a * _ALPHA * (1 - p), rel=1e-12)
        else:
            assert gv == pytest.approx(a, rel=1e-12)
            assert ov == pytest.approx(a * xv + a * _ALPHA * p, rel=1e-12, abs=1e-12)
    assert abs(dropped / len(xs) - p) < 0.02  # 20000 draws: std 0.003
    mean = sum(outs) / len(outs)
    var = sum((v - mean) ** 2 for v in outs) / len(outs)
    assert abs(mean) < 0.05 and abs(var - 1) < 0.06
    assert F.alpha_dropout(x, 0.5) is x  # torch's default training=False


def test_feature_alpha_dropout_drops_whole_channels():
    sinter.manual_seed(2)
    p = 0.4
    module = sinter.nn.FeatureAlphaDropout(p)
    x = _rand(sinter, (4, 256, 3), 1)
    out = module(x).reshape(-1, 3).tolist()
    low = -1 / math.sqrt((_ALPHA ** 2 * p + 1) * (1 - p)) * _ALPHA * (1 - p)
    dropped = [row for row in out if row == pytest.approx([low] * 3, rel=1e-12)]
    assert 0 < len(dropped) < len(out)  # 1024 channels, each dropped with probability 0.4
    assert module.eval()(x) is x
    for lib_p, expect in ((0.0, x.tolist()), (1.0, (x * 0).tolist())):
        assert sinter.nn.FeatureAlphaDropout(lib_p)(x).tolist() == expect


def test_rrelu_training_slopes_in_bounds_and_eval_exact(torch):
    sinter.manual_seed(3)
    lower, upper = 0.1, 0.4
    x = _rand(sinter, (2000,), 1).requires_grad_(True)
    x.detach()[0] = 0.0
    out = F.rrelu(x, lower, upper, training=True)
    out.sum().backward()
    slopes = []
    for xv, ov, gv in zip(x.tolist(), out.tolist(), x.grad.tolist()):
        if xv > 0:
            assert ov == xv and gv == 1.0
        else:
            assert lower <= gv < upper and ov == pytest.approx(gv * xv, rel=1e-15)
            slopes.append(gv)
    assert x.grad.tolist()[0] != 0.0  # x = 0 gets a drawn slope, as torch's
    assert len(set(slopes)) > len(slopes) // 2 and \
        abs(sum(slopes) / len(slopes) - (lower + upper) / 2) < 0.02
    module = sinter.nn.RReLU(lower, upper)
    assert module.training and module(x).tolist() != F.rrelu(x, lower, upper).tolist()
    edges = [-1.0, 0.0, 1.0]
    got = sinter.nn.RReLU(lower, upper).eval()(sinter.tensor(edges, dtype=sinter.float64))
    want = torch.nn.RReLU(lower, upper).eval()(torch.tensor(edges, dtype=torch.float64))
    assert got.tolist() == want.tolist()


def test_gumbel_softmax_structure_and_distribution():
    sinter.manual_seed(4)
    probs = [0.1, 0.2, 0.3, 0.4]
    logits = sinter.tensor([probs] * 4000, dtype=sinter.float64).log().requires_grad_(True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    assert all(v > 0 for v in soft.flatten().tolist())
    assert soft.sum(1).tolist() == pytest.approx([1.0] * 4000, rel=1e-12)
    hard = F.gumbel_softmax(logits, hard=True)
    rows = hard.tolist()
    counts = [0] * 4
    for row in rows:
        assert sorted(row) == pytest.approx([0.0, 0.0, 0.0, 1.0], abs=1e-15)
        counts[row.index(max(row))] += 1
    # The Gumbel-max trick: argmax frequencies follow softmax(logits); 4000 draws, std <= 0.008.
    assert [c / 4000 for c in counts] == pytest.approx(probs, abs=0.04)
    # Straight through: the one-hot's gradient is the soft sample's, non-zero off the argmax.
    hard.select(1, 0).sum().backward()
    assert logits.grad.abs().sum().item() > 0
    column = F.gumbel_softmax(logits.detach()[:6].t(), hard=True, dim=0)
    assert column.sum(0).tolist() == pytest.approx([1.0] * 6)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        F.gumbel_softmax(logits, eps=1e-3)


# --- finite differences ---

def _f64(*shape, low=-2.0, high=2.0, seed=3):
    return _rand(sinter, shape, seed, low, high).requires_grad_(True)


# (name, fn, inputs): gradcheck(fn, inputs) in f64.
GRADCHECK = [
    ("rnn cell", lambda x, h, w, u, b, c: sinter.nn.cells._rnn_cell(x, h, w, u, b, c, "tanh"),
     lambda: (_f64(2, 3), _f64(2, 2, seed=4), _f64(2, 3, seed=5), _f64(2, 2, seed=6),
              _f64(2, seed=7), _f64(2, seed=8))),
    ("rnn cell relu", lambda x, h, w, u: sinter.nn.cells._rnn_cell(x, h, w, u, None, None,
                                                                  "relu"),
     lambda: (_f64(2, 3), _f64(2, 2, seed=4), _f64(2, 3, seed=5), _f64(2, 2, seed=6))),
    ("lstm cell", lambda x, h, c, w, u, b: sinter.nn.cells._lstm_cell(x, h, c, w, u, b, None),
     lambda: (_f64(1, 2), _f64(1, 2, seed=4), _f64(1, 2, seed=5), _f64(8, 2, seed=6),
              _f64(8, 2, seed=7), _f64(8, seed=8))),
    ("gru cell", lambda x, h, w, u, b, c: sinter.nn.cells._gru_cell(x, h, w, u, b, c),
     lambda: (_f64(1, 2), _f64(1, 2, seed=4), _f64(6, 2, seed=6), _f64(6, 2, seed=7),
              _f64(6, seed=8), _f64(6, seed=9))),
    ("embedding_bag mean", lambda w: F.embedding_bag(sinter.tensor([0, 2, 2, 1]), w,
                                                    sinter.tensor([0, 1, 1]), padding_idx=1),
     lambda: (_f64(3, 2),)),
    ("embedding_bag max", lambda w: F.embedding_bag(sinter.tensor([[0, 2], [1, 1]]), w,
                                                   mode="max"), lambda: (_f64(3, 2),)),
    ("embedding_bag weights", lambda w, s: F.embedding_bag(sinter.tensor([0, 2, 1]), w,
                                                          sinter.tensor([0, 2]), mode="sum",
                                                          per_sample_weights=s),
     lambda: (_f64(3, 2), _f64(3, seed=4))),
    ("bilinear", F.bilinear, lambda: (_f64(2, 2), _f64(2, 3, seed=4), _f64(2, 2, 3, seed=5),
                                      _f64(2, seed=6))),
    ("lp_pool1d", lambda x: F.lp_pool1d(x, 1.5, 2, ceil_mode=True),
     lambda: (_f64(1, 2, 5, low=0.2),)),
    ("lp_pool2d", lambda x: F.lp_pool2d(x, 2, 2), lambda: (_f64(1, 4, 4),)),
    ("lp_pool3d", lambda x: F.lp_pool3d(x, 3, (2, 1, 2)), lambda: (_f64(1, 2, 2, 4),)),
    ("local_response_norm", lambda x: F.local_response_norm(x, 3, 0.5, 0.75, 1.0),
     lambda: (_f64(1, 4, 3),)),
    ("channel_shuffle", lambda x: F.channel_shuffle(x, 2), lambda: (_f64(1, 4, 2),)),
    ("softmax2d", lambda x: sinter.nn.Softmax2d()(x), lambda: (_f64(3, 2, 2),)),
    ("rrelu eval", lambda x: F.rrelu(x), lambda: (_f64(6),)),
    ("alpha_dropout p=0", lambda x: F.alpha_dropout(x, 0.0, True), lambda: (_f64(4),)),
    ("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 3), lambda: (_f64(2, 5),)),
    ("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (2, 1, 2)),
     lambda: (_f64(1, 3, 2, 3),)),
    ("max_unpool2d", lambda x: F.max_unpool2d(x, sinter.tensor([[[0, 3], [9, 14]]]), 2),
     lambda: (_f64(1, 2, 2),)),
    ("pdist", F.pdist, lambda: (_f64(3, 2),)),
    ("pdist p=1.5", lambda x: F.pdist(x, 1.5), lambda: (_f64(3, 2),)),
]


@pytest.mark.parametrize("name,fn,inputs", GRADCHECK, ids=[row[0] for row in GRADCHECK])
def test_gradcheck(name, fn, inputs):
    assert gradcheck(fn, inputs())


# --- printouts, state and errors ---

REPRS = [
    ("RNNCell", (3, 4), {}), ("RNNCell", (3, 4, False, "relu"), {}), ("LSTMCell", (2, 5), {}),
    ("LSTMCell", (2, 5), {"bias": False}), ("GRUCell", (1, 2), {}),
    ("EmbeddingBag", (5, 3), {}),
    ("EmbeddingBag", (5, 3, 1.0, 1.0, True, "sum"), {"padding_idx": -1}),
    ("EmbeddingBag", (5, 3), {"mode": "max", "include_last_offset": True, "padding_idx": 0}),
    ("Bilinear", (2, 3, 4), {}), ("Bilinear", (2, 3, 4, False), {}),
    ("LPPool1d", (2, 3), {}), ("LPPool2d", (1.5, (2, 3), 1, True), {}),
    ("LPPool3d", (2, 2), {}), ("LocalResponseNorm", (3,), {}),
    ("LocalResponseNorm", (2, 1e-3, 0.5, 2.0), {}), ("ChannelShuffle", (2,), {}),
    ("Softmax2d", (), {}), ("AlphaDropout", (), {}), ("AlphaDropout", (0.2, True), {}),
    ("FeatureAlphaDropout", (0.3,), {}), ("RReLU", (), {}), ("RReLU", (0.1, 0.3, True), {}),
    ("AdaptiveMaxPool1d", (3,), {}), ("AdaptiveMaxPool1d", (3, True), {}),
    ("AdaptiveMaxPool3d", ((2, None, 3),), {}), ("MaxUnpool1d", (2,), {}),
    ("MaxUnpool2d", (2, 1, 1), {}), ("MaxUnpool3d", ((2, 2, 1),), {}),
]


@pytest.mark.parametrize("name,args,kwargs", REPRS,
                         ids=[f"{row[0]}-{i}" for i, row in enumerate(REPRS)])
def test_modules_print_and_keep_attributes_as_torch(torch, name, args, kwargs):
    mine, theirs = getattr(sinter.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args,
                                                                                      **kwargs)
    assert repr(mine) == repr(theirs)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    attrs = {k: v for k, v in vars(theirs).items() if not k.startswith("_")}
    assert {k: getattr(mine, k) for k in attrs} == attrs


def _t(L, *shape):
    return L.ones(*shape)


# (what, fn(lib) that fails, exception type, what sinter's message says): torch raises the
# same type for the same misuse.
ERRORS = [
    ("RNNCell 3-d input", lambda L: L.nn.RNNCell(4, 3)(_t(L, 2, 4, 1)), ValueError,
     "RNNCell: Expected input to be 1D or 2D, got 3D instead"),
    ("RNNCell 3-d hidden", lambda L: L.nn.RNNCell(4, 3)(_t(L, 2, 4), _t(L, 1, 2, 3)),
     ValueError, "Expected hidden to be 1D or 2D, got 3D"),
    ("RNNCell input_size", lambda L: L.nn.RNNCell(4, 3)(_t(L, 2, 5)), RuntimeError,
     "input has inconsistent input_size: got 5 expected 4"),
    ("RNNCell batch", lambda L: L.nn.RNNCell(4, 3)(_t(L, 2, 4), _t(L, 3, 3)), RuntimeError,
     "Input batch size 2 doesn't match hidden0 batch size 3"),
    ("RNNCell hidden_size", lambda L: L.nn.RNNCell(4, 3)(_t(L, 2, 4), _t(L, 2, 5)),
     RuntimeError, "hidden0 has inconsistent hidden_size: got 5, expected 3"),
    ("RNNCell unbatched with a batch of states", lambda L: L.nn.RNNCell(4, 3)(
        _t(L, 4), _t(L, 2, 3)), RuntimeError, r"Expected 2D hidden0 \(batch x hidden_size\), "
     "but got 3D tensor"),
    ("RNNCell nonlinearity", lambda L: L.nn.RNNCell(4, 3, nonlinearity="gelu")(_t(L, 2, 4)),
     RuntimeError, "Unknown nonlinearity: gelu"),
    ("RNNCell dtype", lambda L: L.nn.RNNCell(4, 3)(_t(L, 2, 4).double()), RuntimeError,
     "linear"),
    ("LSTMCell one state", lambda L: L.nn.LSTMCell(4, 3)(_t(L, 2, 4), (_t(L, 2, 3),)),
     RuntimeError, "expects two hidden states"),
    ("LSTMCell 3-d state", lambda L: L.nn.LSTMCell(4, 3)(_t(L, 2, 4), (_t(L, 2, 3),
                                                                      _t(L, 1, 2, 3))),
     ValueError, r"Expected hx\[1\] to be 1D or 2D, got 3D instead"),
    ("LSTMCell cell size", lambda L: L.nn.LSTMCell(4, 3)(_t(L, 2, 4), (_t(L, 2, 3),
                                                                      _t(L, 2, 4))),
     RuntimeError, "hidden1 has inconsistent hidden_size: got 4, expected 3"),
    ("GRUCell hidden_size", lambda L: L.nn.GRUCell(4, 3)(_t(L, 2, 4), _t(L, 2, 4)),
     RuntimeError, "hidden0 has inconsistent hidden_size: got 4, expected 3"),
    ("embedding_bag offsets[0]", lambda L: L.nn.functional.embedding_bag(
        L.tensor([0, 1]), _t(L, 3, 2), L.tensor([1])), RuntimeError,
     "offsets\\[0\\] has to be 0.+However, got 1"),
    ("embedding_bag offsets[-1]", lambda L: L.nn.functional.embedding_bag(
        L.tensor([0, 1]), _t(L, 3, 2), L.tensor([0, 3])), RuntimeError,
     "offsets\\[-1\\] can not be greater than input's length 2 but got offsets\\[-1\\] of 3"),
    ("embedding_bag index", lambda L: L.nn.functional.embedding_bag(
        L.tensor([0, 3]), _t(L, 3, 2), L.tensor([0])), RuntimeError,
     "Expected idx >= 0 && idx < num_embeddings but found idx to be 3"),
    ("embedding_bag negative index", lambda L: L.nn.functional.embedding_bag(
        L.tensor([-1, 2]), _t(L, 3, 2), L.tensor([0])), RuntimeError, "found idx to be -1"),
    ("embedding_bag padding_idx", lambda L: L.nn.functional.embedding_bag(
        L.tensor([0, 1]), _t(L, 3, 2), L.tensor([0]), padding_idx=3), RuntimeError,
     "padding_idx must be within the number of embeddings, -3 through 2, but got 3"),
    ("embedding_bag weights in mean", lambda L: L.nn.functional.embedding_bag(
        L.tensor([0, 1]), _t(L, 3, 2), L.tensor([0]), per_sample_weights=_t(L, 2)),
     NotImplementedError, "per_sample_weights is only supported for mode='sum' "
     "\\(got mode='mean'\\)"),
    ("embedding_bag weights shape", lambda L: L.nn.functional.embedding_bag(
        L.tensor([0, 1]), _t(L, 3, 2), L.tensor([0]), mode="sum", per_sample_weights=_t(L, 3)),
     ValueError, "must have the same shape as the input"),
    ("embedding_bag weights dtype", lambda L: L.nn.functional.embedding_bag(
        L.tensor([0, 1]), _t(L, 3, 2), L.tensor([0]), mode="sum",
        per_sample_weights=_t(L, 2).double()), RuntimeError, "per_sample_weights"),
    ("embedding_bag mode", lambda L: L.nn.EmbeddingBag(3, 2, mode="prod")(L.tensor([[0, 1]])),
     ValueError, "mode has to be one of sum, mean or max"),
    ("embedding_bag 2-d with offsets", lambda L: L.nn.EmbeddingBag(3, 2)(
        L.tensor([[0, 1]]), L.tensor([0])), ValueError, "if input is 2D, then offsets has to be "
     "None"),
    ("embedding_bag 1-d without offsets", lambda L: L.nn.EmbeddingBag(3, 2)(L.tensor([0, 1])),
     ValueError, "offsets has to be a 1D Tensor but got None"),
    ("embedding_bag 2-d offsets", lambda L: L.nn.EmbeddingBag(3, 2)(
        L.tensor([0, 1]), L.tensor([[0]])), ValueError, "offsets has to be a 1D Tensor"),
    ("embedding_bag 3-d input", lambda L: L.nn.EmbeddingBag(3, 2)(L.tensor([[[0, 1]]])),
     ValueError, "input has to be 1D or 2D Tensor, but got Tensor of dimension 3"),
    ("embedding_bag 1-d weight", lambda L: L.nn.functional.embedding_bag(
        L.tensor([[0, 1]]), _t(L, 3)), ValueError, "weight has to be a 2D Tensor"),
    ("embedding_bag float indices", lambda L: L.nn.EmbeddingBag(3, 2)(_t(L, 1, 2)),
     RuntimeError, "indices"),
    ("embedding_bag integer weight", lambda L: L.nn.functional.embedding_bag(
        L.tensor([[0, 1]]), L.tensor([[1, 2], [3, 4]])), RuntimeError, "weight"),
    ("embedding_bag max frequency", lambda L: L.nn.EmbeddingBag(
        3, 2, mode="max", scale_grad_by_freq=True)(L.tensor([[0, 1]])), ValueError,
     "max mode does not support scaling the gradient by the frequency"),
    ("embedding_bag max sparse", lambda L: L.nn.EmbeddingBag(3, 2, mode="max", sparse=True)(
        L.tensor([[0, 1]])), ValueError, "max mode does not support sparse weights"),
    ("EmbeddingBag padding_idx", lambda L: L.nn.EmbeddingBag(3, 2, padding_idx=3),
     AssertionError, "padding_idx must be within num_embeddings"),
    ("EmbeddingBag negative padding_idx", lambda L: L.nn.EmbeddingBag(3, 2, padding_idx=-4),
     AssertionError, "padding_idx must be within num_embeddings"),
    ("EmbeddingBag _weight", lambda L: L.nn.EmbeddingBag(3, 2, _weight=_t(L, 2, 2)),
     AssertionError, "Shape of weight does not match"),
    ("EmbeddingBag from 1-d", lambda L: L.nn.EmbeddingBag.from_pretrained(_t(L, 3)),
     AssertionError, "expected to be 2-dimensional"),
    ("bilinear dims", lambda L: L.nn.functional.bilinear(_t(L, 5, 3, 2), _t(L, 3, 3),
                                                         _t(L, 4, 2, 3)), RuntimeError,
     "bilinear\\(\\): input dimensions do not match: got 3 and 2"),
    ("bilinear dtype", lambda L: L.nn.functional.bilinear(_t(L, 2, 2).double(), _t(L, 2, 3),
                                                          _t(L, 4, 2, 3)), RuntimeError,
     "bilinear\\(\\): All tensors must have the same dtype"),
    ("bilinear batch", lambda L: L.nn.Bilinear(2, 3, 4)(_t(L, 3, 2), _t(L, 2, 3)),
     RuntimeError, "input batch dimensions do not match at dim 0: got 3 and 2"),
    ("bilinear input1", lambda L: L.nn.Bilinear(2, 3, 4)(_t(L, 3, 5), _t(L, 3, 3)),
     RuntimeError, "input1 size does not match weight size: got 5 but expected 2"),
    ("bilinear input2", lambda L: L.nn.Bilinear(2, 3, 4)(_t(L, 3, 2), _t(L, 3, 5)),
     RuntimeError, "input2 size does not match weight size: got 5 but expected 3"),
    ("bilinear bias", lambda L: L.nn.functional.bilinear(_t(L, 3, 2), _t(L, 3, 3),
                                                         _t(L, 4, 2, 3), _t(L, 5)),
     RuntimeError, "bias size does not match weight size: got 5 but expected 4"),
    ("LPPool1d norm 0", lambda L: L.nn.LPPool1d(0, 2)(_t(L, 1, 2, 4)), ValueError,
     "norm_type must be a non-zero value, but got 0"),
    ("lp_pool2d norm 0", lambda L: L.nn.functional.lp_pool2d(_t(L, 1, 4, 4), 0, 2), ValueError,
     "norm_type must be a non-zero value"),
    ("LPPool1d kernel", lambda L: L.nn.LPPool1d(2, 7)(_t(L, 1, 2, 5)), RuntimeError,
     "kernel_size"),
    ("local_response_norm 2-d", lambda L: L.nn.LocalResponseNorm(2)(_t(L, 2, 3)), ValueError,
     "Expected 3D or higher dimensionality input \\(got 2 dimensions\\)"),
    ("local_response_norm size 0", lambda L: L.nn.functional.local_response_norm(
        _t(L, 2, 3, 2), 0), RuntimeError, "size must be greater than zero, but got 0"),
    ("ChannelShuffle 2-d", lambda L: L.nn.ChannelShuffle(2)(_t(L, 2, 4)), RuntimeError,
     "channel_shuffle expects input with > 2 dims, but got input with sizes \\[2, 4\\]"),
    ("channel_shuffle groups 0", lambda L: L.nn.functional.channel_shuffle(_t(L, 2, 4, 3), 0),
     RuntimeError, "must be positive. Value of groups:0"),
    ("channel_shuffle groups 3", lambda L: L.nn.functional.channel_shuffle(_t(L, 2, 4, 3), 3),
     RuntimeError, "Got 4 channels and 3 groups"),
    ("Softmax2d 2-d", lambda L: L.nn.Softmax2d()(_t(L, 2, 4)), ValueError,
     "Softmax2d: expected input to be 3D or 4D, got 2D instead"),
    ("Softmax2d 5-d", lambda L: L.nn.Softmax2d()(_t(L, 1, 2, 4, 1, 1)), ValueError, "got 5D"),
    ("AlphaDropout p", lambda L: L.nn.AlphaDropout(1.5), ValueError,
     "dropout probability has to be between 0 and 1, but got 1.5"),
    ("alpha_dropout p", lambda L: L.nn.functional.alpha_dropout(_t(L, 3), -0.1), ValueError,
     "dropout probability has to be between 0 and 1, but got -0.1"),
    ("feature_alpha_dropout 1-d", lambda L: L.nn.FeatureAlphaDropout(0.5)(_t(L, 3)),
     RuntimeError, "Feature dropout requires at least 2 dimensions in the input"),
    ("alpha_dropout integer", lambda L: L.nn.functional.alpha_dropout(
        L.tensor([1, 2, 3]), 0.5, True), RuntimeError, "int64"),
    ("RReLU bounds", lambda L: L.nn.RReLU(0.5, 0.1)(_t(L, 3)), RuntimeError,
     "Lower bound should be less than or equal to the upper bound"),
    ("rrelu bounds in training", lambda L: L.nn.functional.rrelu(_t(L, 3), 0.5, 0.1, True),
     RuntimeError, "Lower bound should be less than or equal to the upper bound"),
    ("rrelu integer", lambda L: L.nn.functional.rrelu(L.tensor([1, -2])), NotImplementedError,
     "rrelu"),
    ("adaptive_max_pool1d 1-d", lambda L: L.nn.AdaptiveMaxPool1d(2)(_t(L, 5)), RuntimeError,
     "Expected 2 to 3 dimensions, but got 1-dimensional tensor"),
    ("adaptive_max_pool1d 4-d", lambda L: L.nn.functional.adaptive_max_pool1d(
        _t(L, 1, 3, 5, 5), 2), RuntimeError, "got 4-dimensional tensor"),
    ("adaptive_max_pool1d two sizes", lambda L: L.nn.functional.adaptive_max_pool1d(
        _t(L, 1, 3, 5), (2, 2)), RuntimeError, "should contain one int \\(got 2\\)"),
    ("adaptive_max_pool1d None", lambda L: L.nn.functional.adaptive_max_pool1d(
        _t(L, 1, 3, 5), None), TypeError, "output_size"),
    ("adaptive_max_pool1d empty", lambda L: L.nn.functional.adaptive_max_pool1d(
        _t(L, 1, 3, 0), 2), RuntimeError, "dimension 2 being empty"),
    ("adaptive_max_pool1d integer", lambda L: L.nn.functional.adaptive_max_pool1d(
        L.tensor([[1, 2]]), 1), NotImplementedError, "int64"),
    ("adaptive_max_pool3d 3-d", lambda L: L.nn.AdaptiveMaxPool3d(2)(_t(L, 3, 5, 5)),
     RuntimeError, "Expected 4D or 5D tensor, but got: \\[3, 5, 5\\]"),
    ("adaptive_max_pool3d two sizes", lambda L: L.nn.functional.adaptive_max_pool3d(
        _t(L, 1, 3, 5, 5, 5), (2, 2)), RuntimeError, "output_size"),
    ("adaptive_max_pool3d integer", lambda L: L.nn.functional.adaptive_max_pool3d(
        L.ones(1, 2, 2, 2, dtype=L.int64), 1), NotImplementedError, "int64"),
    ("max_unpool2d index", lambda L: L.nn.MaxUnpool2d(2)(_t(L, 1, 1, 2, 2), L.tensor(
        [[[[0, 1], [21, 3]]]])), RuntimeError, "Found an invalid max index: 21 \\(output "
     "volumes are of size 4x4"),
    ("max_unpool2d negative index", lambda L: L.nn.functional.max_unpool2d(
        _t(L, 1, 2, 2), L.tensor([[[0, -7], [2, 3]]]), 2), RuntimeError,
     "invalid max index: -7"),
    ("max_unpool2d float indices", lambda L: L.nn.MaxUnpool2d(2)(_t(L, 1, 1, 2, 2),
                                                                 _t(L, 1, 1, 2, 2)),
     RuntimeError, "elements in indices should be type int64"),
    ("max_unpool2d index shape", lambda L: L.nn.MaxUnpool2d(2)(
        _t(L, 1, 1, 2, 2), L.tensor([[[[0], [1]]]])), RuntimeError,
     "Expected shape of indices to be same as that of the input tensor"),
    ("max_unpool2d 2-d", lambda L: L.nn.MaxUnpool2d(2)(_t(L, 2, 2), L.tensor([[0, 1], [2, 3]])),
     RuntimeError, "3d or 4d Tensor, but got a tensor with 2 dimensions"),
    ("max_unpool3d 3-d", lambda L: L.nn.MaxUnpool3d(2)(_t(L, 1, 2, 2), L.tensor(
        [[[0, 1], [2, 3]]])), RuntimeError, "4d or 5d Tensor, but got a tensor with 3"),
    ("max_unpool2d output_size", lambda L: L.nn.MaxUnpool2d(2)(
        _t(L, 1, 1, 2, 2), L.tensor([[[[0, 1], [2, 3]]]]), output_size=(7, 5)), ValueError,
     'invalid output_size "\\(7, 5\\)" \\(dim 0 must be between 2 and 6\\)'),
    ("max_unpool2d output_size length", lambda L: L.nn.MaxUnpool2d(2)(
        _t(L, 1, 1, 2, 2), L.tensor([[[[0, 1], [2, 3]]]]), output_size=(5,)), ValueError,
     "output_size should be a sequence containing 2 or 4 elements, but it has a length of "
     "'1'"),
    ("max_unpool1d integer", lambda L: L.nn.MaxUnpool1d(2)(
        L.tensor([[[1, 2]]]), L.tensor([[[0, 2]]])), NotImplementedError, "int64"),
    ("pdist 3-d", lambda L: L.nn.functional.pdist(_t(L, 2, 2, 2)), RuntimeError,
     "pdist only supports 2D tensors, got: 3D"),
    ("pdist integer", lambda L: L.nn.functional.pdist(L.tensor([[1, 2], [3, 4]])),
     RuntimeError, "pdist only supports floating-point dtypes"),
    ("pdist negative p", lambda L: L.nn.functional.pdist(_t(L, 2, 2), -1), RuntimeError,
     "pdist only supports non-negative p values"),
]


@pytest.mark.parametrize("what,fn,kind,message", ERRORS, ids=[row[0] for row in ERRORS])
def test_errors_as_torch(torch, what, fn, kind, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(kind):
            fn(torch)
        with pytest.raises(kind, match=message):
            fn(sinter)


@pytest.mark.parametrize("mode,dtype", [("sum", "float32"), ("mean", "float32"),
                                        ("max", "float32"), ("mean", "float64")])
def test_embedding_bag_last_offset_before_the_end_as_torch(torch, mode, dtype):
    """include_last_offset with a last offset before input's end: torch's fast path (f32 sum
    and mean) ends the last bag there (a mean still divides by the entries after it); its
    other path runs the bag to the end."""
    outs = []
    for lib in (sinter, torch):
        weight = lib.arange(10.0).unsqueeze(1).repeat(1, 2).to(getattr(lib, dtype))
        inp, offsets = lib.tensor([1, 2, 4, 5, 4, 3, 2, 9]), lib.tensor([0, 2, 4])
        outs.append(F.embedding_bag(inp, weight, offsets, mode=mode, include_last_offset=True)
                    if lib is sinter else
                    torch.nn.functional.embedding_bag(inp, weight, offsets, mode=mode,
                                                      include_last_offset=True))
    assert outs[0].tolist() == outs[1].tolist()
