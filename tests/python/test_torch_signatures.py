"""torch's calls, as torch's users write them, through the C++ layers and ops: the constructors'
and functions' positional orders and keywords (inplace=, size_average=, divisor_override=,
return_indices=, recompute_scale_factor=, out_int32=, sorter=, dtype= of the *_like
factories, input= of the package's functions), each giving torch's result, printout or error.

To add a call: a row in CONSTRUCTORS (printout and output), F_CALLS (output and input gradient),
or a test of its own for what a row cannot say."""

import warnings

import pytest

import sinter
import sinter.nn.functional as F
from torch_parity import assert_same, rand as _rand


def _same(ours, theirs, tol=1e-10):
    """ours (a sinter tensor, or a tuple of them) equals theirs (torch's) in shape and values."""
    if isinstance(theirs, tuple):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b, tol)
        return
    assert_same(ours, theirs, rel=tol)


# (constructor call, input shape or None): each made by both libraries prints the same and,
# with an input, gives the same output on the same f64 values.
CONSTRUCTORS = [
    ("ReLU(inplace=True)", (2, 5)),
    ("ReLU(True)", (2, 5)),
    ("ELU(0.5, True)", (2, 5)),
    ("SELU(inplace=True)", (2, 5)),
    ("Hardswish(inplace=True)", (2, 5)),
    ("Hardsigmoid(True)", (2, 5)),
    ("Mish(inplace=True)", (2, 5)),
    ("Dropout(0.1, True)", None),
    ("GELU('tanh')", (2, 5)),
    ("GELU(approximate='none')", (2, 5)),
    ("MaxPool2d(3, 2, 1, ceil_mode=True)", (1, 2, 7, 8)),
    ("MaxPool2d(3, 1, 1, 2, False, True)", (1, 2, 7, 8)),
    ("AvgPool2d(3, 2, 1, True, False)", (1, 2, 7, 8)),
    ("AvgPool2d((2, 3), None, 0, False, True, None)", (1, 2, 7, 8)),
    ("MaxPool3d(2, 2, 1, 1, False, True)", (1, 1, 5, 6, 5)),
    ("AvgPool3d(3, 2, 1, True, False)", (1, 1, 5, 6, 5)),
    ("AdaptiveAvgPool2d(3)", (1, 2, 7, 8)),
    ("Upsample(scale_factor=1.7, mode='nearest', recompute_scale_factor=True)", (1, 1, 5, 6)),
    ("Upsample(size=(3, 4), mode='bilinear')", (1, 1, 5, 6)),
    ("Upsample(scale_factor=2)", None),
    ("Identity(54, unused_argument1=0.1)", (2, 3)),
    ("Conv2d(3, 4, 3, 1, 1, 1, 1, False, 'zeros')", None),
    ("Conv2d(3, 4, 3, padding='same', padding_mode='reflect')", None),
    ("BatchNorm3d(3)", None),
    ("InstanceNorm1d(3, affine=True)", None),
    ("LSTM(3, 4, 2, True, True)", None),
    ("GRU(3, 4, 1, False, False, 0.0, True)", None),
    ("RNN(3, 4, 2, 'relu')", None),
    ("RMSNorm(4)", None),
    ("LayerNorm(4, bias=False)", None),
    ("LayerNorm((2, 3), 1e-3, False)", (2, 2, 3)),
    ("GroupNorm(2, 4, bias=False)", None),
    ("Unfold(2)", None),
    ("Fold((4, 4), 2)", None),
]


@pytest.mark.parametrize("call,shape", CONSTRUCTORS, ids=[c for c, _ in CONSTRUCTORS])
def test_constructor_as_torch(torch, call, shape):
    ours, theirs = eval("sinter.nn." + call), eval("torch.nn." + call)
    assert repr(ours) == repr(theirs)
    if shape is not None:
        ours.eval()
        theirs.eval()
        _same(ours(_rand(sinter, shape, 1)), theirs(_rand(torch, shape, 1)))


def test_max_pool_layers_return_indices(torch):
    for dims, call in ((2, "MaxPool2d(3, 2, 1, return_indices=True)"),
                       (3, "MaxPool3d(2, 1, 0, 2, True, True)")):
        shape = (1, 2) + (6,) * dims
        out, idx = eval("sinter.nn." + call)(_rand(sinter, shape, 2))
        t_out, t_idx = eval("torch.nn." + call)(_rand(torch, shape, 2))
        _same(out, t_out)
        assert idx.dtype == sinter.int64 and idx.tolist() == t_idx.tolist()


def test_layer_refusals(torch):
    with pytest.raises(ValueError, match="BatchNorm2d: bias=False"):
        sinter.nn.BatchNorm2d(4, bias=False)
    with pytest.raises(ValueError, match="AvgPool2d: divisor_override"):
        sinter.nn.AvgPool2d(2, divisor_override=3)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        sinter.nn.GELU("exact")
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        F.gelu(_rand(sinter, (2,), 0), approximate="exact")
    with pytest.raises(TypeError):  # LSTM and GRU have no nonlinearity, as torch's
        sinter.nn.LSTM(3, 4, 1, nonlinearity="relu")


# (call, input shapes): F.<call> on differentiable f64 inputs x0, x1, ... gives torch's output
# and input gradients (an inplace=True call takes a non-leaf, as torch requires).
F_CALLS = [
    ("relu(x0 * 1, inplace=True)", [(2, 5)]),
    ("relu(input=x0)", [(2, 5)]),
    ("silu(x0 * 1, True)", [(2, 5)]),
    ("leaky_relu(x0 * 1, 0.2, True)", [(2, 5)]),
    ("elu(x0 * 1, 0.5, True)", [(2, 5)]),
    ("selu(x0 * 1, True)", [(2, 5)]),
    ("hardtanh(x0 * 1, -0.5, 0.5, True)", [(2, 5)]),
    ("relu6(x0 * 4, True)", [(2, 5)]),
    ("hardswish(x0 * 1, True)", [(2, 5)]),
    ("hardsigmoid(x0 * 1, True)", [(2, 5)]),
    ("mish(x0 * 1, True)", [(2, 5)]),
    ("dropout(x0, 0.5, False, True)", [(2, 5)]),
    ("max_pool2d(x0, 3, 2, 1, 2, True)", [(1, 2, 9, 8)]),
    ("max_pool3d(x0, 3, 2, 1, 1, True)", [(1, 1, 6, 7, 5)]),
    ("avg_pool3d(x0, 3, 2, 1, True, False)", [(1, 1, 6, 7, 5)]),
    ("avg_pool2d(x0, 3, 2, 1, True, True, 5)", [(2, 3, 7, 8)]),
    ("avg_pool2d(x0, (3, 2), (2, 1), (1, 0), False, True, 7)", [(2, 3, 7, 8)]),
    ("avg_pool3d(x0, 3, 2, 1, True, False, 4)", [(1, 2, 5, 6, 7)]),
    ("interpolate(x0, None, 1.7, 'nearest', None, True)", [(1, 1, 5, 7)]),
    ("interpolate(x0, scale_factor=0.6, mode='bilinear', recompute_scale_factor=True)",
     [(1, 1, 5, 7)]),
    ("interpolate(x0, scale_factor=1.5, mode='bilinear', antialias=False)", [(1, 1, 5, 7)]),
    ("mse_loss(x0, x1, reduction='sum', weight=x2.abs())", [(3, 4)] * 3),
    ("mse_loss(x0, x1, weight=x2.abs())", [(3, 4)] * 3),
    ("l1_loss(x0, x1, None, None, 'none', x2)", [(3, 4)] * 3),
    ("l1_loss(x0, x1, weight=x2.abs())", [(3, 4)] * 3),
    ("huber_loss(x0, x1, 'mean', 0.5, x2.abs())", [(3, 4)] * 3),
    ("huber_loss(x0, x1, 'sum', 0.5, x2.abs())", [(3, 4)] * 3),
    ("smooth_l1_loss(x0, x1, None, None, 'sum', 0.5)", [(3, 4)] * 2),
    ("binary_cross_entropy(x0.sigmoid(), x1.sigmoid().detach(), None, None, None, 'sum')",
     [(3, 4)] * 2),
    ("binary_cross_entropy_with_logits(x0, x1.sigmoid().detach(), None, None, None, 'none', "
     "None)", [(3, 4)] * 2),
    ("cosine_embedding_loss(x0, x1, y, 0.1, None, None, 'sum')", [(3, 4)] * 2),
    ("margin_ranking_loss(x0, x1, y, 0.2, None, None, 'none')", [(3,)] * 2),
    ("kl_div(x0.log_softmax(1), x1.softmax(1), None, None, 'batchmean', False)", [(3, 4)] * 2),
]


def _y(lib, n):
    return lib.tensor([1.0, -1.0, 1.0][:n], dtype=lib.float64)


@pytest.mark.parametrize("call,shapes", F_CALLS, ids=[c for c, _ in F_CALLS])
def test_functional_call_as_torch(torch, call, shapes):
    results = []
    for lib, fn in ((sinter, F), (torch, torch.nn.functional)):
        xs = [_rand(lib, s, 10 + i).requires_grad_(True) for i, s in enumerate(shapes)]
        env = {f"x{i}": x for i, x in enumerate(xs)}
        env.update(y=_y(lib, shapes[0][0]), **{n: getattr(fn, n) for n in dir(fn)
                                                if not n.startswith("_")})
        out = eval(call, {}, env)
        grad = _rand(lib, tuple(out.shape), 99)
        out.backward(grad)
        results.append((out, [x.grad for x in xs]))
    (out, grads), (t_out, t_grads) = results
    _same(out, t_out)
    # torch's f64 hardsigmoid gradient multiplies by f32's 1/6 (src/kern/elementwise_ops.h).
    tol = 1e-7 if call.startswith("hardsigmoid") else 1e-10
    for g, tg in zip(grads, t_grads):
        assert (g is None) == (tg is None)
        if g is not None:
            _same(g, tg, tol)


def test_legacy_reduction_arguments_warn_as_torch(torch):
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss"):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            out = getattr(F, name)(_rand(sinter, (3, 4), 1), _rand(sinter, (3, 4), 2), None,
                                   False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_out = getattr(torch.nn.functional, name)(_rand(torch, (3, 4), 1),
                                                       _rand(torch, (3, 4), 2), None, False)
        _same(out, t_out)


def test_weighted_loss_refuses_another_shape():
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        F.mse_loss(_rand(sinter, (3, 4), 1), _rand(sinter, (3, 4), 2),
                   weight=_rand(sinter, (4,), 3))


def test_avg_pool_divisor_zero_is_refused():
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(_rand(sinter, (1, 1, 4, 4), 1), 2, divisor_override=0)


def test_interpolate_argument_errors():
    x = _rand(sinter, (1, 1, 4, 4), 1)
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful"):
        F.interpolate(x, size=(3, 3), recompute_scale_factor=True)
    with pytest.raises(ValueError, match="antialias=True is not supported"):
        F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True)


@pytest.mark.parametrize("args", [(None, 1.0, 2.0, True), (0, 1.5, 1.0, False),
                                  (None, None, 2.0, True)])
def test_embedding_options_as_torch(torch, args):
    padding_idx, max_norm, norm_type, by_freq = args
    results = []
    for lib in (sinter, torch):
        weight = (_rand(lib, (6, 3), 5) * 3).requires_grad_(True)
        idx = lib.tensor([[0, 2, 2], [5, 2, 1]])
        out = lib.nn.functional.embedding(idx, weight, padding_idx, max_norm, norm_type, by_freq)
        out.backward(_rand(lib, (2, 3, 3), 6))
        results.append((out, weight, weight.grad))
    for a, b in zip(*results):
        _same(a, b)


def test_ctc_loss_takes_length_sequences(torch):
    lp = _rand(torch, (6, 2, 4), 3).log_softmax(2)
    targets = [[1, 2], [3, 3]]
    out = F.ctc_loss(sinter.tensor(lp.tolist(), dtype=sinter.float64), sinter.tensor(targets),
                     [6, 5], (2, 2), 0, "sum")
    _same(out, torch.nn.functional.ctc_loss(lp, torch.tensor(targets), [6, 5], (2, 2), 0, "sum"))


def test_cells_as_torch(torch):
    results = []
    for lib in (sinter, torch):
        x, h, c = _rand(lib, (2, 3), 1), _rand(lib, (2, 4), 2), _rand(lib, (2, 4), 3)
        w_ih, w_hh = _rand(lib, (16, 3), 4), _rand(lib, (16, 4), 5)
        b_ih, b_hh = _rand(lib, (16,), 6), _rand(lib, (16,), 7)
        g_ih, g_hh = w_ih[:12], w_hh[:12]
        results.append((lib.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh),
                        lib.gru_cell(x, h, g_ih, g_hh, b_ih[:12], b_hh[:12]),
                        lib.rnn_tanh_cell(x, h, w_ih[:4], w_hh[:4]),
                        lib.rnn_relu_cell(x, h, w_ih[:4], w_hh[:4], b_ih[:4], b_hh[:4])))
    for a, b in zip(*results):
        _same(a, b)
    with pytest.raises(ValueError, match="lstm_cell: hx must hold"):
        sinter.lstm_cell(_rand(sinter, (2, 3), 1), (_rand(sinter, (2, 4), 2),),
                         _rand(sinter, (16, 3), 4), _rand(sinter, (16, 4), 5))


def test_search_options_as_torch(torch):
    seq, values = [[5.0, 1.0, 3.0, 2.0], [0.5, 4.0, 2.5, 1.0]], [[2.0, 4.0], [1.0, 3.0]]
    for kw in ({"side": "right"}, {"side": "left"}, {"right": True}, {"out_int32": True}):
        ours = sinter.searchsorted(sinter.tensor(seq), sinter.tensor(values),
                                   sorter=sinter.tensor(seq).argsort(-1), **kw)
        theirs = torch.searchsorted(torch.tensor(seq), torch.tensor(values),
                                    sorter=torch.tensor(seq).argsort(-1), **kw)
        assert ours.tolist() == theirs.tolist()
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    with pytest.raises(ValueError, match="side and right can't be set to opposites"):
        sinter.searchsorted(sinter.tensor([1.0, 2.0]), sinter.tensor([1.5]), side="left",
                            right=True)
    with pytest.raises(ValueError, match="side can only be 'left' or 'right'"):
        sinter.searchsorted(sinter.tensor([1.0, 2.0]), sinter.tensor([1.5]), side="middle")
    out = sinter.bucketize(sinter.tensor([0.5, 2.5]), sinter.tensor([1.0, 2.0]), out_int32=True)
    assert out.dtype == sinter.int32 and out.tolist() == [0, 2]


def test_factory_and_function_keywords(torch):
    x = _rand(sinter, (2, 3), 1)
    for name in ("zeros_like", "ones_like", "empty_like"):
        out = getattr(sinter, name)(x, dtype=sinter.int64)
        assert out.dtype == sinter.int64 and tuple(out.shape) == (2, 3)
        assert getattr(sinter, name)(input=x, requires_grad=True).requires_grad
        assert getattr(sinter, name)(x, device="cpu").dtype == sinter.float64
    assert sinter.ones_like(x, dtype=sinter.int32).tolist() == [[1, 1, 1], [1, 1, 1]]
    assert sinter.abs(input=x).tolist() == x.abs().tolist()
    assert sinter.clamp(input=x, min=0.0).tolist() == x.clamp(min=0.0).tolist()
    assert sinter.abs.__name__ == "abs" and sinter.abs.__doc__.startswith("abs(input")
    idx = sinter.tensor([[0, 0], [1, 0]])
    assert sinter.gather(x, 1, idx, sparse_grad=True).tolist() == x.gather(1, idx).tolist()
    cat = sinter.concatenate([x, x], axis=1)
    assert tuple(cat.shape) == (2, 6)
    rep = sinter.repeat_interleave(sinter.tensor([1, 2]), sinter.tensor([1, 3]), dim=0,
                                   output_size=4)
    assert rep.tolist() == torch.repeat_interleave(torch.tensor([1, 2]), torch.tensor([1, 3]),
                                                   dim=0, output_size=4).tolist()
    dst = sinter.zeros(2, 3, dtype=sinter.float64)
    assert dst.copy_(x, non_blocking=True) is dst and dst.tolist() == x.tolist()
    with pytest.raises(ValueError, match="output_size=3 but the repeats give 4"):
        sinter.repeat_interleave(sinter.tensor([1, 2]), 2, output_size=3)


@pytest.mark.parametrize("call", [
    "Linear(3, 4, False, device='cpu', dtype=DT)",
    "Conv1d(2, 3, 3, dtype=DT)",
    "Conv2d(2, 3, 3, dtype=DT)",
    "ConvTranspose2d(2, 3, 3, dtype=DT)",
    "BatchNorm2d(3, dtype=DT)",
    "BatchNorm3d(3, dtype=DT)",
    "InstanceNorm2d(3, affine=True, dtype=DT)",
    "LayerNorm(4, dtype=DT)",
    "LayerNorm(4, bias=False, dtype=DT)",
    "GroupNorm(2, 4, bias=False, dtype=DT)",
    "GroupNorm(2, 4, dtype=DT)",
    "RMSNorm(4, dtype=DT)",
    "Embedding(5, 3, dtype=DT)",
    "PReLU(dtype=DT)",
    "LSTM(3, 4, dtype=DT)",
    "RNN(3, 4, 1, 'tanh', dtype=DT)",
])
def test_layer_factory_keywords_as_torch(torch, call):
    ours = eval("sinter.nn." + call, {"sinter": sinter, "DT": sinter.float64})
    theirs = eval("torch.nn." + call, {"torch": torch, "DT": torch.float64})
    ours_sd, theirs_sd = ours.state_dict(), theirs.state_dict()
    assert list(ours_sd) == list(theirs_sd)
    for key, value in theirs_sd.items():
        assert str(ours_sd[key].dtype).split(".")[1] == str(value.dtype).split(".")[1], key


def test_embedding_layer_options_as_torch(torch):
    values = _rand(torch, (4, 3), 7)
    theirs = torch.nn.Embedding.from_pretrained(values, padding_idx=1)
    ours = sinter.nn.Embedding.from_pretrained(_rand(sinter, (4, 3), 7), padding_idx=1)
    assert repr(ours) == repr(theirs)
    assert ours.weight.dtype == sinter.float64 and not ours.weight.requires_grad
    _same(ours.weight, theirs.weight)
    thawed = sinter.nn.Embedding.from_pretrained(_rand(sinter, (4, 3), 7), freeze=False)
    assert thawed.weight.requires_grad
    given = sinter.nn.Embedding(4, 3, None, None, 2.0, False, True, _rand(sinter, (4, 3), 7))
    _same(given.weight, values)
    with pytest.raises(ValueError, match="Embedding: max_norm and scale_grad_by_freq"):
        sinter.nn.Embedding(4, 3, max_norm=1.0)
    with pytest.raises(ValueError, match="Shape of weight does not match"):
        sinter.nn.Embedding(4, 3, _weight=_rand(sinter, (3, 3), 1))
    with pytest.raises(ValueError, match="expected to be 2-dimensional"):
        sinter.nn.Embedding.from_pretrained(_rand(sinter, (4,), 1))


def test_ctc_loss_module_as_torch(torch):
    lp = _rand(torch, (6, 2, 4), 3).log_softmax(2)
    targets, lengths = [[1, 2], [3, 3]], ([6, 5], [2, 1])
    theirs = torch.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    ours = sinter.nn.CTCLoss(0, "sum", True)
    assert repr(ours) == repr(theirs)
    _same(ours(sinter.tensor(lp.tolist(), dtype=sinter.float64), sinter.tensor(targets),
               *lengths),
          theirs(lp, torch.tensor(targets), *lengths))


def test_state_dict_order_as_torch(torch):
    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("scale", lib.ones(2))
                self.bn = lib.nn.BatchNorm2d(3)
                self.conv = lib.nn.Conv2d(3, 4, 3)
                self.head = lib.nn.Sequential(lib.nn.LayerNorm(4), lib.nn.LSTM(4, 5, 2))
                self.gain = lib.nn.Parameter(lib.ones(1))
        return Net()
    assert list(build(sinter).state_dict()) == list(build(torch).state_dict())
    for layer in ("Conv2d(3, 4, 3)", "BatchNorm1d(3)", "LSTM(3, 4, 2, bidirectional=True)",
                  "GroupNorm(2, 4)"):
        assert list(eval("sinter.nn." + layer).state_dict()) == \
            list(eval("torch.nn." + layer).state_dict())
    kept = build(sinter).state_dict(keep_vars=True)
    assert kept["gain"].requires_grad and not build(sinter).state_dict()["gain"].requires_grad


@pytest.mark.parametrize("call", ["relu_(x)", "elu_(x, 0.5)", "leaky_relu_(x, 0.2)",
                                  "hardtanh_(x, -0.5, 0.5)", "celu_(x, 2.0)", "selu_(x)",
                                  "threshold_(x, 0.1, 20.0)"])
def test_functional_in_place_forms_as_torch(torch, call):
    x, t_x = _rand(sinter, (3, 4), 8), _rand(torch, (3, 4), 8)
    out = eval(call, {"x": x, **{n: getattr(F, n) for n in dir(F)}})
    t_out = eval(call, {"x": t_x, **{n: getattr(torch.nn.functional, n)
                                     for n in dir(torch.nn.functional)}})
    assert out is x
    _same(x, t_x)
    _same(out, t_out)
    leaf = _rand(sinter, (3,), 1).requires_grad_(True)
    with pytest.raises(RuntimeError, match="_: a leaf tensor that requires grad"):
        eval(call, {"x": leaf, **{n: getattr(F, n) for n in dir(F)}})


def test_copies_keep_what_layers_hold_in_python(torch):
    import copy
    pool = copy.deepcopy(sinter.nn.MaxPool2d(2, return_indices=True))
    assert isinstance(pool(_rand(sinter, (1, 1, 4, 4), 1)), tuple)
    assert repr(copy.deepcopy(sinter.nn.Dropout(0.3, inplace=True))) == \
        repr(torch.nn.Dropout(0.3, inplace=True))
    layer = sinter.nn.Linear(2, 3)
    kept = layer.state_dict(keep_vars=True)
    assert kept["weight"].requires_grad and not layer.state_dict()["weight"].requires_grad


def test_ties_and_sorter_checks_as_torch(torch):
    grads = []
    for lib in (sinter, torch):
        a = lib.tensor([1.0, 2.0, float("nan")], requires_grad=True)
        b = lib.tensor([1.0, 0.0, 3.0], requires_grad=True)
        (lib.fmax(a, b) + 2 * lib.fmin(a, b)).sum().backward()
        grads.append((a.grad.tolist(), b.grad.tolist()))
    assert grads[0] == grads[1]
    with pytest.raises(RuntimeError, match="boundaries and sorter must have the same size"):
        sinter.searchsorted(sinter.tensor([1.0, 3.0, 5.0]), sinter.tensor([2.0]),
                            sorter=sinter.tensor([0, 1]))


def test_layer_attributes_and_subclasses_as_torch(torch):
    import copy
    for lib in (sinter, torch):
        g = lib.nn.GroupNorm(2, 4, bias=False)
        assert g.bias is None and g.num_groups == 2 and g.eps == 1e-5 and g.affine
        b = lib.nn.BatchNorm2d(3, affine=False)
        assert b.weight is None and tuple(b.running_mean.shape) == (3,) and b.momentum == 0.1
        assert tuple(lib.nn.Embedding(4, 2)(lib.tensor([1, 3], dtype=lib.int32)).shape) == (2, 2)

        class Pool(lib.nn.MaxPool2d):
            def forward(self, x):
                return 7
        assert Pool(2)(lib.zeros(1, 1, 2, 2)) == 7

        class Layers(lib.nn.ModuleList):
            pass
        assert repr(Layers([lib.nn.ReLU()])).startswith("Layers(")
        net = lib.nn.Sequential(lib.nn.Linear(2, 2))
        assert net.state_dict(keep_vars=True)["0.weight"].requires_grad

    class Scaled(sinter.nn.Linear):
        def __init__(self, *args):
            super().__init__(*args)
            self.scale = 2.0
    with pytest.raises(TypeError, match="Python subclass of the C.. layer Linear"):
        copy.deepcopy(Scaled(2, 2))
    F.embedding(sinter.tensor([1, 3], dtype=sinter.int32), _rand(sinter, (4, 2), 1), max_norm=1.0)
