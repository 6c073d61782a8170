"""The C++ layers and functional ops bound for Python, each against torch's: a torch layer's
state_dict loads into the sinter layer of the same arguments (the same keys and shapes), and both
give the same output for the same f64 input."""

import random

import pytest

import sinter
import sinter.nn.functional as F


def _rand(lib, *shape, seed=0, low=-1.0, high=1.0):
    rng = random.Random(seed)
    n = 1
    for s in shape:
        n *= s
    flat = lib.tensor([rng.uniform(low, high) for _ in range(n)], dtype=lib.float64)
    return flat.reshape(*shape)


def _first(out):
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _flat(o)]
    return out.flatten().tolist()


# (sinter/torch layer name, args, kwargs, input shape)
LAYERS = [
    ("Conv1d", (3, 4, 3), {"stride": 2, "padding": 1}, (2, 3, 9)),
    ("Conv1d", (4, 4, 3), {"padding": "same", "groups": 2, "padding_mode": "reflect"}, (2, 4, 7)),
    ("Conv3d", (2, 3, (2, 3, 2)), {"padding": (1, 0, 1)}, (1, 2, 4, 5, 4)),
    ("ConvTranspose1d", (3, 2, 3), {"stride": 2, "output_padding": 1}, (2, 3, 5)),
    ("ConvTranspose2d", (3, 4, 3), {"stride": 2, "padding": 1, "dilation": 2}, (1, 3, 4, 5)),
    ("ConvTranspose3d", (2, 2, 2), {"stride": 2}, (1, 2, 2, 3, 2)),
    ("BatchNorm3d", (3,), {}, (2, 3, 2, 2, 2)),
    ("InstanceNorm1d", (3,), {"affine": True}, (2, 3, 6)),
    ("InstanceNorm2d", (3,), {}, (2, 3, 4, 4)),
    ("RMSNorm", (6,), {"eps": 1e-6}, (2, 3, 6)),
    ("PReLU", (3,), {"init": 0.1}, (2, 3, 4)),
    ("Softmax", (1,), {}, (2, 5)),
    ("LogSoftmax", (-1,), {}, (2, 5)),
    ("SELU", (), {}, (3, 4)),
    ("Mish", (), {}, (3, 4)),
    ("Hardswish", (), {}, (3, 4)),
    ("Hardsigmoid", (), {}, (3, 4)),
    ("Unflatten", (1, (2, 3)), {}, (4, 6)),
    ("PixelShuffle", (2,), {}, (1, 8, 2, 3)),
    ("PixelUnshuffle", (2,), {}, (1, 2, 4, 6)),
    ("Upsample", (), {"scale_factor": 2, "mode": "bilinear", "align_corners": False},
     (1, 2, 3, 4)),
    ("Upsample", (), {"size": (5, 7), "mode": "nearest"}, (1, 2, 3, 4)),
    ("Unfold", ((2, 3),), {"padding": 1, "stride": 2}, (1, 2, 5, 6)),
    ("Fold", ((4, 5), (2, 2)), {}, (1, 8, 12)),
    ("MaxPool3d", (2,), {"stride": 1, "padding": 1}, (1, 2, 3, 4, 3)),
    ("AvgPool3d", (2,), {"ceil_mode": True, "count_include_pad": False}, (1, 2, 3, 5, 3)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 7)),
    ("AdaptiveAvgPool3d", ((2, 3, 2),), {}, (1, 2, 5, 4, 3)),
    ("Upsample", (), {"scale_factor": 0.5, "mode": "area"}, (1, 2, 5, 6)),
    ("RNN", (4, 5), {"num_layers": 2, "nonlinearity": "relu"}, (6, 2, 4)),
    ("LSTM", (4, 5), {"batch_first": True, "bidirectional": True}, (2, 6, 4)),
    ("LSTM", (4, 5), {"proj_size": 3}, (6, 4)),
    ("GRU", (4, 5), {"num_layers": 2, "bidirectional": True}, (6, 2, 4)),
    ("SiLU", (), {}, (3, 4)),
    ("LeakyReLU", (0.2,), {}, (3, 4)),
    ("Hardtanh", (-0.5, 0.5), {}, (3, 4)),
    ("Softplus", (2.0, 1.0), {}, (3, 4)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", LAYERS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYERS)])
def test_layer_matches_torch(torch, name, args, kwargs, shape):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    mine = getattr(sinter.nn, name)(*args, **kwargs)
    if hasattr(mine, "to"):
        mine.to(sinter.float64)
    state = {k: sinter.from_dlpack(v.detach().contiguous()) for k, v in
             theirs.state_dict().items()}
    if state:
        mine.load_state_dict(state)
        assert sorted(k for k, _ in mine.named_parameters()) == sorted(
            k for k, _ in theirs.named_parameters())
    x = _rand(sinter, *shape, seed=1)
    tx = _rand(torch, *shape, seed=1)
    got, want = mine(x), theirs(tx)
    assert _first(got).shape == tuple(_first(want).shape)
    assert _flat(got) == pytest.approx(_flat(want), rel=1e-9, abs=1e-12)


def test_recurrent_layers_take_initial_states(torch):
    torch.manual_seed(1)
    theirs = torch.nn.LSTM(3, 4, num_layers=2).double()
    mine = sinter.nn.LSTM(3, 4, num_layers=2)
    mine.to(sinter.float64)
    mine.load_state_dict({k: sinter.from_dlpack(v.detach()) for k, v in
                          theirs.state_dict().items()})
    h0, c0 = _rand(sinter, 2, 1, 4, seed=2), _rand(sinter, 2, 1, 4, seed=3)
    th0, tc0 = _rand(torch, 2, 1, 4, seed=2), _rand(torch, 2, 1, 4, seed=3)
    out, (h, c) = mine(_rand(sinter, 5, 1, 3, seed=4), (h0, c0))
    tout, (th, tc) = theirs(_rand(torch, 5, 1, 3, seed=4), (th0, tc0))
    for a, b in ((out, tout), (h, th), (c, tc)):
        assert a.flatten().tolist() == pytest.approx(b.flatten().tolist(), rel=1e-9)


# (name, fn(lib, F)) over f64 inputs, both libraries.
FUNCTIONAL = [
    ("activations", lambda L, F, x: [F.leaky_relu(x, 0.1), F.elu(x, 0.5), F.hardtanh(x, -0.3, 0.4),
                                     F.relu6(x * 8), F.softplus(x, 2.0, 1.0), F.selu(x),
                                     F.mish(x), F.hardswish(x), F.hardsigmoid(x),
                                     F.sigmoid(x), F.tanh(x)]),
    ("prelu", lambda L, F, x: F.prelu(x.reshape(2, 3, 2), L.tensor([0.1, 0.2, 0.3],
                                                                   dtype=L.float64))),
    ("conv1d", lambda L, F, x: F.conv1d(x.reshape(1, 2, 6), x[:8].reshape(2, 2, 2), stride=2,
                                        padding=1)),
    ("conv1d same", lambda L, F, x: F.conv1d(x.reshape(1, 2, 6), x[:12].reshape(2, 2, 3),
                                             padding="same")),
    ("conv3d", lambda L, F, x: F.conv3d(x.reshape(1, 1, 2, 2, 3), x[:8].reshape(2, 1, 1, 2, 2),
                                        x[:2], padding=(0, 1, 0))),
    ("conv_transpose1d", lambda L, F, x: F.conv_transpose1d(x.reshape(1, 2, 6),
                                                            x[:12].reshape(2, 3, 2), stride=2)),
    ("conv_transpose2d", lambda L, F, x: F.conv_transpose2d(x.reshape(1, 1, 3, 4),
                                                            x[:8].reshape(1, 2, 2, 2), x[:2],
                                                            stride=2, padding=1,
                                                            output_padding=1)),
    ("conv_transpose3d", lambda L, F, x: F.conv_transpose3d(x.reshape(1, 1, 2, 2, 3),
                                                            x[:8].reshape(1, 1, 2, 2, 2))),
    ("pools", lambda L, F, x: [F.avg_pool2d(x.reshape(1, 1, 3, 4), 2, 1, ceil_mode=True),
                               F.max_pool1d(x.reshape(1, 2, 6), 3, 2, padding=1),
                               F.avg_pool1d(x.reshape(1, 2, 6), 2, count_include_pad=False),
                               F.adaptive_avg_pool2d(x.reshape(1, 1, 3, 4), (2, 3)),
                               F.adaptive_max_pool2d(x.reshape(1, 1, 3, 4), 2),
                               F.adaptive_avg_pool1d(x.reshape(2, 1, 6), 4),
                               F.adaptive_avg_pool3d(x.reshape(1, 1, 2, 2, 3), (3, 1, 2))]),
    ("pad", lambda L, F, x: [F.pad(x.reshape(1, 3, 4), (1, 2), mode="reflect"),
                             F.pad(x.reshape(1, 3, 4), (1, 1, 2, 0), value=3.0),
                             F.pad(x.reshape(1, 3, 4), (1, 1), mode="circular"),
                             F.pad(x.reshape(1, 3, 4), (2, 1), mode="replicate")]),
    ("interpolate", lambda L, F, x: [F.interpolate(x.reshape(1, 1, 3, 4), scale_factor=2,
                                                   mode="bicubic", align_corners=True),
                                     F.interpolate(x.reshape(1, 2, 6), size=9, mode="linear"),
                                     F.interpolate(x.reshape(1, 1, 3, 4), size=(5, 5)),
                                     F.interpolate(x.reshape(1, 2, 6), size=4, mode="area"),
                                     F.interpolate(x.reshape(1, 1, 3, 4), scale_factor=0.7,
                                                   mode="area"),
                                     F.interpolate(x.reshape(1, 1, 2, 2, 3), size=(3, 1, 2),
                                                   mode="area")]),
    ("pixel fold", lambda L, F, x: [F.pixel_shuffle(x.reshape(1, 4, 1, 3), 2),
                                    F.pixel_unshuffle(x.reshape(1, 1, 2, 6), 2),
                                    F.unfold(x.reshape(1, 1, 3, 4), 2),
                                    F.fold(x.reshape(1, 4, 3), (2, 4), 2, stride=(1, 1))]),
    ("norms", lambda L, F, x: [
        F.batch_norm(x.reshape(4, 3), L.zeros(3, dtype=L.float64), L.ones(3, dtype=L.float64),
                     training=True),
        F.group_norm(x.reshape(2, 6), 3, eps=1e-3),
        F.instance_norm(x.reshape(1, 3, 4)),
        F.rms_norm(x.reshape(3, 4), (4,), x[:4], eps=1e-6),
        F.normalize(x.reshape(3, 4)), F.normalize(x.reshape(3, 4), p=1.0, dim=0),
        F.cosine_similarity(x.reshape(3, 4), x.flip(0).reshape(3, 4))]),
    ("embedding one_hot", lambda L, F, x: [F.embedding(L.tensor([[0, 2], [1, 0]]),
                                                       x.reshape(3, 4), padding_idx=0),
                                           F.one_hot(L.tensor([0, 3, 1]))]),
    ("sdpa", lambda L, F, x: [F.scaled_dot_product_attention(x.reshape(1, 1, 3, 4),
                                                             x.flip(0).reshape(1, 1, 3, 4),
                                                             x.reshape(1, 1, 3, 4), is_causal=True),
                              F.scaled_dot_product_attention(x.reshape(1, 3, 4), x.reshape(1, 3, 4),
                                                             x.reshape(1, 3, 4), scale=0.3,
                                                             attn_mask=x[:9].reshape(3, 3))]),
    ("losses", lambda L, F, x: [
        F.nll_loss(F.log_softmax(x.reshape(3, 4), 1), L.tensor([0, 3, -100])),
        F.binary_cross_entropy(x.sigmoid(), (x > 0).double(), weight=x.abs()),
        F.binary_cross_entropy_with_logits(x, (x > 0.2).double(), weight=x.abs(),
                                           pos_weight=L.tensor([2.0], dtype=L.float64)),
        F.binary_cross_entropy_with_logits(x, (x > 0.2).double(), reduction="sum"),
        F.kl_div(F.log_softmax(x.reshape(3, 4), 1), F.softmax(x.flip(0).reshape(3, 4), 1),
                 reduction="batchmean"),
        F.l1_loss(x, x.flip(0)), F.smooth_l1_loss(x, x.flip(0) * 3, beta=0.5),
        F.huber_loss(x, x.flip(0) * 3, reduction="none", delta=0.7),
        F.cosine_embedding_loss(x.reshape(3, 4), x.flip(0).reshape(3, 4),
                                L.tensor([1.0, -1.0, 1.0], dtype=L.float64), margin=0.1),
        F.margin_ranking_loss(x, x.flip(0), (x > 0).double() * 2 - 1, margin=0.2)]),
]


@pytest.mark.parametrize("name,fn", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_matches_torch(torch, name, fn):
    import torch.nn.functional as TF
    got = fn(sinter, F, _rand(sinter, 12, seed=5))
    want = fn(torch, TF, _rand(torch, 12, seed=5))
    got, want = (got if isinstance(got, list) else [got]), (want if isinstance(want, list)
                                                            else [want])
    for g, w in zip(got, want):
        g, w = _first(g), _first(w)
        assert g.shape == tuple(w.shape)
        assert g.flatten().tolist() == pytest.approx(w.flatten().tolist(), rel=1e-9, abs=1e-12)


def test_argument_errors():
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        sinter.nn.Conv1d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        F.conv1d(sinter.ones(1, 1, 4), sinter.ones(1, 1, 2), padding="full")
    with pytest.raises(ValueError, match="Unrecognised padding mode"):
        F.pad(sinter.ones(1, 4), (1, 1), mode="edge")
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.l1_loss(sinter.ones(2), sinter.ones(2), reduction="avg")


def test_gqa_attention_and_activation_keywords(torch):
    import torch.nn.functional as TF
    q, k = _rand(sinter, 2, 4, 3, 8, seed=1), _rand(sinter, 2, 2, 5, 8, seed=2)
    tq, tk = _rand(torch, 2, 4, 3, 8, seed=1), _rand(torch, 2, 2, 5, 8, seed=2)
    got = F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    want = TF.scaled_dot_product_attention(tq, tk, tk, enable_gqa=True)
    assert got.flatten().tolist() == pytest.approx(want.flatten().tolist(), rel=1e-9)
    x, tx = _rand(sinter, 3, 4, seed=3), _rand(torch, 3, 4, seed=3)
    for name, kwargs in (("LeakyReLU", {"negative_slope": 0.2, "inplace": True}),
                         ("ReLU6", {"inplace": True}), ("Softplus", {"beta": 2.0})):
        got = getattr(sinter.nn, name)(**kwargs)(x * 8)
        want = getattr(torch.nn, name)(**kwargs)(tx * 8)
        assert got.flatten().tolist() == pytest.approx(want.flatten().tolist(), rel=1e-9)
    with pytest.raises(TypeError, match="unexpected keyword argument 'slope'"):
        sinter.nn.LeakyReLU(slope=0.1)


REPRS = [
    ("Conv2d", (1, 16, 3), {"padding": 1}),
    ("Conv1d", (4, 4, 3), {"padding": "same", "groups": 2, "bias": False,
                           "padding_mode": "reflect"}),
    ("Conv3d", (2, 3, (1, 2, 3)), {"dilation": 2}),
    ("ConvTranspose2d", (3, 4, 3), {"stride": 2, "output_padding": 1}),
    ("BatchNorm2d", (16,), {}), ("BatchNorm1d", (4,), {"affine": False}),
    ("InstanceNorm1d", (3,), {"affine": True}), ("LayerNorm", (64,), {}),
    ("GroupNorm", (2, 8), {}), ("Embedding", (256, 64), {"padding_idx": 0}),
    ("Dropout", (0.1,), {}), ("MaxPool2d", (2,), {}), ("AvgPool2d", (3,), {"stride": 2}),
    ("Flatten", (), {}), ("GELU", (), {}), ("ELU", (), {}), ("PReLU", (), {}),
    ("Softmax", (1,), {}), ("LSTM", (4, 5), {"num_layers": 2, "batch_first": True,
                                             "bidirectional": True}),
    ("GRU", (4, 5), {"dropout": 0.5, "num_layers": 2}), ("Unflatten", (1, (2, 3)), {}),
    ("PixelShuffle", (2,), {}), ("Linear", (3, 4), {}), ("ReLU", (), {}),
]


@pytest.mark.parametrize("name,args,kwargs", REPRS, ids=[r[0] for r in REPRS])
def test_layers_print_as_torch(torch, name, args, kwargs):
    assert repr(getattr(sinter.nn, name)(*args, **kwargs)) == repr(
        getattr(torch.nn, name)(*args, **kwargs))


def test_a_cpp_container_prints_its_children(torch):
    mine = sinter.models.mlp()
    theirs = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                                 torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                 torch.nn.Linear(1024, 10))
    assert repr(mine) == repr(theirs)
