"""sinter.nn's MultiheadAttention and transformer modules against torch's: a torch module's
state_dict loaded into the sinter one gives the same outputs, attention weights and gradients
(of the inputs and of every parameter) in f64, for each input layout and mask kind; the same
state_dict keys in the same order, the same printouts, initialisation, warnings and errors.

To add a case: a row in ATTENTION (MultiheadAttention) or LAYERS (the transformer modules)."""

import copy
import math
import random
import warnings

import pytest

import sinter
import sinter.nn.functional as F

E, H, L, S, N = 8, 2, 3, 4, 2  # embed_dim, heads, target and source lengths, batch


def _rand(lib, shape, seed, low=-1.5, high=1.5):
    rng = random.Random(seed)
    values = [rng.uniform(low, high) for _ in range(math.prod(shape))]
    return lib.tensor(values, dtype=lib.float64).reshape(tuple(shape))


class Lib:
    """A value that differs between the libraries: fn(lib) (a mask, an activation)."""

    def __init__(self, fn):
        self.fn = fn


def _resolve(lib, value):
    return value.fn(lib) if isinstance(value, Lib) else value


def _bools(rows):
    return Lib(lambda L_: L_.tensor(rows))


def _floats(shape, seed):
    """An additive mask of finite values."""
    return Lib(lambda L_: _rand(L_, shape, seed, -2.0, 1.0))


def _causal(n, dtype="float64"):
    return Lib(lambda L_: L_.nn.Transformer.generate_square_subsequent_mask(
        n, dtype=getattr(L_, dtype)))


# Masks that leave every query at least one key (a row of -inf only gives NaN in both).
ATTN_BOOL = [[False, True, False, False], [True, False, False, True], [False, False, True, False]]
PAD_BOOL = [[False, False, True, False], [False, True, False, True]]
ATTN_BOOL_3D = [ATTN_BOOL, [[True, False, False, False]] * L, ATTN_BOOL[::-1],
                [[False, False, False, True]] * L]  # (N H, L, S)
HEADS_BOOL = [ATTN_BOOL, ATTN_BOOL[::-1]]  # unbatched (H, L, S)


def _build(lib, name, args, kwargs):
    cls = getattr(lib.nn, name)
    return cls(*[_resolve(lib, a) for a in args], **{k: _resolve(lib, v) for k, v in
                                                     kwargs.items()})


def _pair(torch, name, args=(), kwargs=None):
    """The torch module in f64, in eval mode, and the sinter one with its state_dict."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # enable_nested_tensor's
        theirs = _build(torch, name, args, kwargs or {}).double().eval()
        mine = _build(sinter, name, args, kwargs or {}).to(sinter.float64).eval()
    state = {k: sinter.tensor(v.tolist(), dtype=sinter.float64)
             for k, v in theirs.state_dict().items()}
    mine.load_state_dict(state)
    return theirs, mine


def _close(got, want, what, rel=1e-9):
    assert tuple(got.shape) == tuple(want.shape), what
    assert got.flatten().tolist() == pytest.approx(want.flatten().tolist(), rel=rel,
                                                   abs=1e-11), what


def _run(lib, module, tensors, args, kwargs):
    """module(*args, **kwargs), the args named in tensors ({name: shape}, each its own
    differentiable input: a name given twice is one tensor), then the backward of a fixed
    random weighting of the outputs. Returns (outputs, the inputs by name)."""
    made = {n: _rand(lib, shape, seed).requires_grad_(True)
            for seed, (n, shape) in enumerate(tensors.items())}
    out = module(*[made[n] for n in args], **{k: _resolve(lib, v) for k, v in kwargs.items()})
    outs = list(out) if isinstance(out, tuple) else [out]
    loss = sum((o * _rand(lib, tuple(o.shape), 50 + i)).sum()
               for i, o in enumerate(outs) if o is not None)
    loss.backward()
    return outs, made


def _compare(torch, name, ctor, tensors, args, kwargs):
    theirs, mine = _pair(torch, name, ctor[0], ctor[1])
    want, tin = _run(torch, theirs, tensors, args, kwargs)
    got, sin = _run(sinter, mine, tensors, args, kwargs)
    assert [g is None for g in got] == [w is None for w in want], "outputs given"
    for i, (g, w) in enumerate(zip(got, want)):
        if w is not None:
            _close(g, w, f"output {i}")
    for n in tensors:
        _close(sin[n].grad, tin[n].grad, f"gradient of {n}")
    grads = {k: p.grad for k, p in theirs.named_parameters()}
    mine_params = dict(mine.named_parameters())
    assert list(mine_params) == list(grads)
    for k, g in grads.items():
        if g is None:
            assert mine_params[k].grad is None or mine_params[k].grad.abs().sum().item() == 0, k
        else:
            _close(mine_params[k].grad, g, f"gradient of {k}")


SELF = {"x": (L, N, E)}
CROSS = {"q": (L, N, E), "k": (S, N, E), "v": (S, N, E)}
MEMORY = {"q": (L, N, E), "m": (S, N, E)}
BATCH_FIRST = {"q": (N, L, E), "k": (N, S, E), "v": (N, S, E)}
UNBATCHED = {"q": (L, E), "k": (S, E), "v": (S, E)}

# (constructor args and kwargs, inputs {name: shape}, forward's arguments by name, kwargs)
ATTENTION = [
    (((E, H), {}), SELF, "xxx", {}),
    (((E, H), {}), SELF, "xxx", {"need_weights": False}),
    (((E, H), {}), CROSS, "qkv", {"average_attn_weights": False}),
    (((E, H), {}), MEMORY, "qmm", {}),
    (((E, H), {}), MEMORY, "qmm", {"need_weights": False}),
    (((E, H), {"batch_first": True}), BATCH_FIRST, "qkv", {}),
    (((E, H), {"batch_first": True}), BATCH_FIRST, "qkv", {"need_weights": False}),
    (((E, H), {"batch_first": True}), {"x": (N, L, E)}, "xxx", {"average_attn_weights": False}),
    (((E, H), {}), UNBATCHED, "qkv", {}),
    (((E, H), {"batch_first": True}), UNBATCHED, "qkv", {"need_weights": False}),
    (((E, H), {}), UNBATCHED, "qkv", {"key_padding_mask": _bools(PAD_BOOL[0]),
                                      "attn_mask": _bools(HEADS_BOOL),
                                      "average_attn_weights": False}),
    (((E, H), {}), UNBATCHED, "qkv", {"attn_mask": _floats((L, S), 3), "need_weights": False}),
    (((E, 4), {"kdim": 5, "vdim": 3}), {"q": (L, N, E), "k": (S, N, 5), "v": (S, N, 3)}, "qkv",
     {}),
    (((E, H), {"kdim": 6, "vdim": 6, "batch_first": True}),
     {"q": (N, L, E), "k": (N, S, 6)}, "qkk", {"need_weights": False}),
    (((E, H), {"bias": False}), CROSS, "qkv", {}),
    # masks: bool and float, 2-D and 3-D, key padding, merged, both paths
    (((E, H), {}), CROSS, "qkv", {"attn_mask": _bools(ATTN_BOOL)}),
    (((E, H), {}), CROSS, "qkv", {"attn_mask": _bools(ATTN_BOOL), "need_weights": False}),
    (((E, H), {}), CROSS, "qkv", {"attn_mask": _floats((L, S), 4)}),
    (((E, H), {}), CROSS, "qkv", {"attn_mask": _floats((N * H, L, S), 5),
                                  "need_weights": False}),
    (((E, H), {}), CROSS, "qkv", {"attn_mask": _bools(ATTN_BOOL_3D),
                                  "average_attn_weights": False}),
    (((E, H), {}), CROSS, "qkv", {"key_padding_mask": _bools(PAD_BOOL)}),
    (((E, H), {}), CROSS, "qkv", {"key_padding_mask": _bools(PAD_BOOL), "need_weights": False}),
    (((E, H), {}), CROSS, "qkv", {"key_padding_mask": _floats((N, S), 6)}),
    (((E, H), {}), CROSS, "qkv", {"key_padding_mask": _bools(PAD_BOOL),
                                  "attn_mask": _bools(ATTN_BOOL)}),
    (((E, H), {}), CROSS, "qkv", {"key_padding_mask": _floats((N, S), 7),
                                  "attn_mask": _floats((N * H, L, S), 8),
                                  "need_weights": False}),
    (((E, H), {"batch_first": True}), BATCH_FIRST, "qkv",
     {"key_padding_mask": _bools(PAD_BOOL), "attn_mask": _floats((L, S), 9),
      "need_weights": False}),
    # is_causal: a hint that attn_mask is the causal mask
    (((E, H), {}), SELF, "xxx", {"attn_mask": _causal(L), "is_causal": True,
                                 "need_weights": False}),
    (((E, H), {}), SELF, "xxx", {"attn_mask": _causal(L), "is_causal": True}),
    (((E, H), {"batch_first": True}), {"x": (N, L, E)}, "xxx",
     {"attn_mask": _causal(L), "is_causal": True, "need_weights": False,
      "key_padding_mask": _bools([[False, False, True], [False, True, False]])}),
    # the extra key: bias_k and bias_v, zeros
    (((E, H), {"add_bias_kv": True}), CROSS, "qkv", {}),
    (((E, H), {"add_bias_kv": True}), CROSS, "qkv", {"attn_mask": _bools(ATTN_BOOL),
                                                     "key_padding_mask": _bools(PAD_BOOL),
                                                     "need_weights": False}),
    (((E, H), {"add_zero_attn": True}), CROSS, "qkv", {"attn_mask": _floats((L, S), 10)}),
    (((E, H), {"add_bias_kv": True, "add_zero_attn": True, "kdim": 5, "vdim": 3}),
     {"q": (L, N, E), "k": (S, N, 5), "v": (S, N, 3)}, "qkv",
     {"key_padding_mask": _bools(PAD_BOOL), "attn_mask": _bools(ATTN_BOOL_3D),
      "average_attn_weights": False}),
    (((E, H), {"add_bias_kv": True, "add_zero_attn": True}), UNBATCHED, "qkv",
     {"key_padding_mask": _bools(PAD_BOOL[1]), "need_weights": False}),
    (((E, H), {"add_zero_attn": True}), SELF, "xxx", {"attn_mask": _causal(L),
                                                      "is_causal": True,
                                                      "need_weights": False}),
]


@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("ctor,tensors,args,kwargs", ATTENTION,
                         ids=[f"mha-{i}" for i in range(len(ATTENTION))])
def test_multihead_attention_matches_torch(torch, ctor, tensors, args, kwargs):
    _compare(torch, "MultiheadAttention", ctor, tensors, args, kwargs)


def _swish(lib):
    return lambda x: x * lib.sigmoid(x)


ENC = (E, H, 16, 0.0)  # d_model, nhead, dim_feedforward, dropout
SRC, TGT = {"s": (S, N, E)}, {"t": (L, N, E), "m": (S, N, E)}
SRC_BF, TGT_BF = {"s": (N, S, E)}, {"t": (N, L, E), "m": (N, S, E)}
SRC_PAD = _bools(PAD_BOOL)
TGT_PAD = _bools([[False, False, True], [False, True, False]])

# (module, constructor args and kwargs, inputs, forward's arguments by name, kwargs)
LAYERS = [
    ("TransformerEncoderLayer", (ENC, {}), SRC, "s", {}),
    ("TransformerEncoderLayer", (ENC, {"norm_first": True, "activation": "gelu"}), SRC, "s",
     {"src_mask": _bools([[False, True, True, True], [False, False, True, True],
                          [False, False, False, True], [False] * 4])}),
    ("TransformerEncoderLayer", (ENC, {"batch_first": True, "activation": Lib(_swish)}),
     SRC_BF, "s", {"src_key_padding_mask": SRC_PAD}),
    ("TransformerEncoderLayer", (ENC, {"activation": Lib(lambda L_: L_.nn.GELU()),
                                       "bias": False, "layer_norm_eps": 1e-3}),
     SRC, "s", {"src_mask": _causal(S), "is_causal": True}),
    ("TransformerEncoderLayer", (ENC, {}), {"s": (S, E)}, "s",
     {"src_key_padding_mask": _bools(PAD_BOOL[0])}),
    ("TransformerDecoderLayer", (ENC, {}), TGT, "tm", {}),
    ("TransformerDecoderLayer", (ENC, {"norm_first": True, "batch_first": True,
                                       "activation": Lib(lambda L_: L_.nn.functional.gelu)}),
     TGT_BF, "tm", {"tgt_mask": _causal(L), "tgt_is_causal": True,
                    "memory_key_padding_mask": SRC_PAD, "tgt_key_padding_mask": TGT_PAD}),
    ("TransformerDecoderLayer", (ENC, {"activation": Lib(_swish), "bias": False}), TGT, "tm",
     {"memory_mask": _floats((L, S), 11),
      "tgt_mask": _bools([[False, True, False], [False, False, True], [False, False, False]])}),
    ("TransformerDecoderLayer", (ENC, {}), {"t": (L, E), "m": (S, E)}, "tm",
     {"memory_key_padding_mask": _bools(PAD_BOOL[1])}),
    ("Transformer", ((E, H, 2, 2, 16, 0.0), {}), {"s": (S, N, E), "t": (L, N, E)}, "st",
     {"tgt_mask": _causal(L), "src_key_padding_mask": SRC_PAD,
      "memory_key_padding_mask": SRC_PAD}),
    ("Transformer", ((E, H, 1, 2, 16, 0.0), {"batch_first": True, "norm_first": True,
                                             "activation": "gelu"}),
     {"s": (N, S, E), "t": (N, L, E)}, "st",
     {"tgt_mask": _causal(L), "tgt_is_causal": True, "src_mask": _floats((S, S), 12)}),
    ("Transformer", ((E, H, 1, 1, 16, 0.0), {"bias": False}), {"s": (S, E), "t": (L, E)},
     "st", {"memory_mask": _bools(ATTN_BOOL)}),
]


@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("name,ctor,tensors,args,kwargs", LAYERS,
                         ids=[f"{row[0]}-{i}" for i, row in enumerate(LAYERS)])
def test_transformer_modules_match_torch(torch, name, ctor, tensors, args, kwargs):
    _compare(torch, name, ctor, tensors, args, kwargs)


def _stack(lib, kind, layers, norm, **kwargs):
    layer = getattr(lib.nn, f"Transformer{kind}Layer")(*ENC, **kwargs)
    norm = lib.nn.LayerNorm(E) if norm else None
    stack = getattr(lib.nn, f"Transformer{kind}")
    return stack(layer, layers, norm, enable_nested_tensor=False) if kind == "Encoder" else \
        stack(layer, layers, norm)


STACKS = [
    ("Encoder", 2, False, {}, SRC, "s", {"mask": _causal(S)}),
    ("Encoder", 3, True, {"batch_first": True}, SRC_BF, "s",
     {"src_key_padding_mask": SRC_PAD, "mask": _causal(S), "is_causal": False}),
    ("Encoder", 2, False, {"norm_first": True}, SRC, "s", {"mask": _floats((S, S), 13)}),
    ("Decoder", 2, False, {}, TGT, "tm", {"tgt_mask": _causal(L)}),
    ("Decoder", 2, True, {"batch_first": True}, TGT_BF, "tm",
     {"tgt_mask": _bools([[False, True, True], [False, False, True], [False] * 3]),
      "memory_key_padding_mask": SRC_PAD}),
]


@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("kind,layers,norm,lkw,tensors,args,kwargs", STACKS,
                         ids=[f"{row[0]}-{i}" for i, row in enumerate(STACKS)])
def test_stacks_match_torch(torch, kind, layers, norm, lkw, tensors, args, kwargs):
    """An encoder or decoder of cloned layers (and norm), each layer given its own torch
    values."""
    theirs = _stack(torch, kind, layers, norm, **lkw).double().eval()
    mine = _stack(sinter, kind, layers, norm, **lkw).to(sinter.float64).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, dtype=torch.float64) * 0.5)
    mine.load_state_dict({k: sinter.tensor(v.tolist(), dtype=sinter.float64)
                          for k, v in theirs.state_dict().items()})
    want, tin = _run(torch, theirs, tensors, args, kwargs)
    got, sin = _run(sinter, mine, tensors, args, kwargs)
    _close(got[0], want[0], "output")
    for n in tensors:
        _close(sin[n].grad, tin[n].grad, f"gradient of {n}")
    for (k, p), (_, q) in zip(mine.named_parameters(), theirs.named_parameters()):
        _close(p.grad, q.grad, f"gradient of {k}")



def _is_causal_seen(lib, mask, is_causal):
    """The is_causal that a two-layer encoder gives its layers for this mask."""
    stack = _stack(lib, "Encoder", 2, False).to(lib.float64)
    seen = []
    for layer in stack.layers:
        def record(*args, _forward=layer.forward, **kwargs):
            seen.append(kwargs["is_causal"])
            return _forward(*args, **kwargs)
        layer.forward = record
    stack(_rand(lib, (S, N, E), 1), mask=_resolve(lib, mask), is_causal=is_causal)
    return seen


def test_stacks_read_is_causal_as_torch(torch):
    """None: whether the mask is the causal one, in its dtype (a bool one too)."""
    for mask, is_causal, want in ((_causal(S), None, True), (_causal(S), False, False),
                                  (None, None, False), (_floats((S, S), 3), None, False),
                                  (_causal(S, "bool"), None, True),
                                  (_bools([[False] * S] * S), None, False),
                                  (_causal(S), True, True)):
        assert _is_causal_seen(torch, mask, is_causal) == [want] * 2
        assert _is_causal_seen(sinter, mask, is_causal) == [want] * 2

# --- structure: state_dict keys, printouts, clones, initialisation ---

STRUCTURES = [
    ("MultiheadAttention", (E, H), {}),
    ("MultiheadAttention", (E, H), {"bias": False, "add_bias_kv": True}),
    ("MultiheadAttention", (E, H), {"kdim": 5, "vdim": 3, "add_bias_kv": True}),
    ("MultiheadAttention", (E, H), {"kdim": 5, "bias": False}),
    ("TransformerEncoderLayer", ENC, {"activation": Lib(lambda L_: L_.nn.GELU())}),
    ("TransformerEncoderLayer", ENC, {"bias": False, "layer_norm_eps": 1e-6}),
    ("TransformerDecoderLayer", ENC, {"norm_first": True, "activation": "gelu"}),
    ("Transformer", (E, H, 2, 3, 16), {}),
    ("Transformer", (E, H, 1, 1, 16), {"bias": False, "activation": Lib(lambda L_: L_.nn.ReLU())}),
]


@pytest.mark.parametrize("name,args,kwargs", STRUCTURES,
                         ids=[f"{row[0]}-{i}" for i, row in enumerate(STRUCTURES)])
def test_state_dict_keys_and_printout_are_torch_s(torch, name, args, kwargs):
    theirs, mine = _pair(torch, name, args, kwargs)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    assert [k for k, _ in mine.named_parameters()] == [k for k, _ in theirs.named_parameters()]
    for k, v in theirs.state_dict().items():
        assert tuple(mine.state_dict()[k].shape) == tuple(v.shape), k
    assert repr(mine) == repr(theirs)


def test_stack_printout_groups_equal_layers_as_torch(torch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(*ENC), 3,
                                             torch.nn.LayerNorm(E))
    mine = sinter.nn.TransformerEncoder(sinter.nn.TransformerEncoderLayer(*ENC), 3,
                                        sinter.nn.LayerNorm(E), enable_nested_tensor=False)
    assert "(0-2): 3 x TransformerEncoderLayer(" in repr(theirs)
    assert repr(mine) == repr(theirs)
    assert repr(mine.layers) == repr(theirs.layers)
    assert isinstance(mine.layers, sinter.nn.ModuleList)


def test_cloned_layers_own_their_parameters(torch):
    layer = sinter.nn.TransformerDecoderLayer(*ENC, activation="gelu")
    stack = sinter.nn.TransformerDecoder(layer, 3)
    assert list(stack.state_dict())[:2] == ["layers.0.self_attn.in_proj_weight",
                                           "layers.0.self_attn.in_proj_bias"]
    first = stack.layers[0].self_attn.in_proj_weight
    for i, clone in enumerate(stack.layers):
        assert clone is not layer
        assert clone.activation is F.gelu
        for (k, p), (_, q) in zip(clone.named_parameters(), layer.named_parameters()):
            assert p._impl_id() != q._impl_id(), f"layers.{i}.{k} shares the prototype's"
            assert p.tolist() == q.tolist(), f"layers.{i}.{k} is not a copy"
    assert len(list(stack.parameters())) == 3 * len(list(layer.parameters()))
    with sinter.no_grad():
        first.add_(1.0)
    assert stack.layers[1].self_attn.in_proj_weight.tolist() != first.tolist()
    act = sinter.nn.TransformerEncoder(sinter.nn.TransformerEncoderLayer(
        *ENC, activation=sinter.nn.GELU()), 2, enable_nested_tensor=False)
    assert act.layers[0].activation is not act.layers[1].activation
    assert [k for k, _ in act.layers[0].named_children()][-1] == "activation"


def test_initialisation_is_torch_s():
    """xavier_uniform_ in-projections, zero biases, Linear's out_proj.weight, xavier_normal_
    bias_k and bias_v; Transformer: xavier_uniform_ for every matrix."""
    sinter.manual_seed(0)
    m = sinter.nn.MultiheadAttention(16, 4, add_bias_kv=True, kdim=8)
    for name, (rows, cols) in (("q_proj_weight", (16, 16)), ("k_proj_weight", (16, 8)),
                               ("v_proj_weight", (16, 16))):
        w = getattr(m, name)
        bound = math.sqrt(6 / (rows + cols))
        assert tuple(w.shape) == (rows, cols)
        assert bound * 0.8 < w.abs().max().item() <= bound, name
    assert m.in_proj_weight is None
    assert m.in_proj_bias.abs().sum().item() == 0 and m.out_proj.bias.abs().sum().item() == 0
    out_bound = 1 / math.sqrt(16)  # kaiming_uniform_(a = sqrt(5))
    assert out_bound * 0.8 < m.out_proj.weight.abs().max().item() <= out_bound
    assert tuple(m.bias_k.shape) == (1, 1, 16) and m.bias_k.abs().sum().item() > 0
    assert m.bias_k.tolist() != m.bias_v.tolist()
    t = sinter.nn.Transformer(16, 4, 1, 1, 32, batch_first=True)
    for k, p in t.named_parameters():
        if p.dim() > 1:
            bound = math.sqrt(6 / (p.shape[0] + p.shape[1]))
            assert bound * 0.8 < p.abs().max().item() <= bound, k
        elif k.endswith("norm1.weight") or k.endswith("norm.weight"):
            assert p.tolist() == [1.0] * 16, k
        elif "linear1.bias" in k:
            assert 0 < p.abs().max().item() <= 1 / math.sqrt(16), k


def test_device_and_dtype_of_the_parameters():
    m = sinter.nn.MultiheadAttention(E, H, kdim=5, add_bias_kv=True, dtype=sinter.float64,
                                     device="cpu")
    t = sinter.nn.Transformer(E, H, 1, 1, 16, batch_first=True, dtype=sinter.float64)
    for module in (m, t):
        assert {p.dtype for p in module.parameters()} == {sinter.float64}
        assert {p.device.type for p in module.parameters()} == {"cpu"}


def test_square_subsequent_mask_as_torch(torch):
    got = sinter.nn.Transformer.generate_square_subsequent_mask(4)
    want = torch.nn.Transformer.generate_square_subsequent_mask(4)
    assert got.tolist() == want.tolist()
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    got = sinter.nn.Transformer.generate_square_subsequent_mask(3, dtype=sinter.float64)
    assert got.dtype == sinter.float64


# --- training mode: dropout on the attention weights ---

def test_dropout_drops_attention_weights_in_training():
    sinter.manual_seed(3)
    m = sinter.nn.MultiheadAttention(E, H, dropout=0.5).to(sinter.float64)
    q, k = _rand(sinter, (8, N, E), 1), _rand(sinter, (8, N, E), 2)
    kept = m.eval()(q, k, k, average_attn_weights=False)[1].flatten().tolist()
    dropped = m.train()(q, k, k, average_attn_weights=False)[1].flatten().tolist()
    assert all(d == 0 or d == pytest.approx(2 * w, rel=1e-12) for d, w in zip(dropped, kept))
    assert 0 < sum(d == 0 for d in dropped) < len(dropped)
    fast = m(q, k, k, need_weights=False)[0]
    assert fast.tolist() != m.eval()(q, k, k, need_weights=False)[0].tolist()
    _close(m.eval()(q, k, k)[0], m(q, k, k, need_weights=False)[0], "the two paths")


def test_multi_head_attention_forward_as_torch(torch):
    """The functional form with the module's parameters, static keys and values too."""
    theirs, mine = _pair(torch, "MultiheadAttention", (E, H), {})
    head = E // H
    outs = []
    for lib, m in ((torch, theirs), (sinter, mine)):
        q, k = _rand(lib, (L, N, E), 1), _rand(lib, (S, N, E), 2)
        static = _rand(lib, (N * H, S + 1, head), 3)
        fn = torch.nn.functional.multi_head_attention_forward if lib is torch else \
            F.multi_head_attention_forward
        outs.append(fn(q, k, k, E, H, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0,
                       m.out_proj.weight, m.out_proj.bias, training=False,
                       static_k=static, static_v=static * 2, average_attn_weights=False))
    (want, want_w), (got, got_w) = outs
    _close(got, want.detach(), "output")
    _close(got_w, want_w.detach(), "weights")


def test_encoder_inference_zeroes_padded_positions_as_torch(torch):
    """Where torch's encoder runs on nested tensors (eval, no gradient, batch_first, a
    left-aligned key padding mask, no mask), the padded positions come out as zeros before the
    norm; with a gradient wanted, the computed values, as torch's."""
    layer_kw = {"batch_first": True}
    theirs = _stack(torch, "Encoder", 2, True, **layer_kw)
    mine = _stack(sinter, "Encoder", 2, True, **layer_kw)
    theirs.enable_nested_tensor = theirs.use_nested_tensor = True
    mine.enable_nested_tensor = mine.use_nested_tensor = True
    theirs, mine = theirs.double().eval(), mine.to(sinter.float64).eval()
    mine.load_state_dict({k: sinter.tensor(v.tolist(), dtype=sinter.float64)
                          for k, v in theirs.state_dict().items()})
    pad = [[False, False, True, True], [False, False, False, True]]  # (N, S)
    for grad in (False, True):
        with torch.set_grad_enabled(grad), sinter.set_grad_enabled(grad), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's nested tensors are a prototype
            want = theirs(_rand(torch, (N, S, E), 1), src_key_padding_mask=torch.tensor(pad))
            got = mine(_rand(sinter, (N, S, E), 1), src_key_padding_mask=sinter.tensor(pad))
        _close(got.detach(), want.detach(), f"output, grad={grad}")


def test_float32_mask_of_a_bfloat16_layer_as_torch(torch):
    """A float32 mask (generate_square_subsequent_mask's) works with a layer of another dtype
    where torch's does, and is refused where torch's explicit-weights path refuses it."""
    for lib in (torch, sinter):
        layer = lib.nn.TransformerDecoderLayer(8, 2, 16, 0.0, dtype=lib.bfloat16)
        out = layer(lib.zeros(4, 2, 8, dtype=lib.bfloat16), lib.zeros(5, 2, 8, dtype=lib.bfloat16),
                    tgt_mask=lib.nn.Transformer.generate_square_subsequent_mask(4))
        assert tuple(out.shape) == (4, 2, 8)
        attn = lib.nn.MultiheadAttention(8, 2, dtype=lib.float64)
        x = lib.zeros(3, 2, 8, dtype=lib.float64)
        attn(x, x, x, attn_mask=lib.zeros(3, 3), need_weights=False)
        with pytest.raises(RuntimeError):
            attn(x, x, x, attn_mask=lib.zeros(3, 3))


def test_inner_layers_are_the_package_s(torch):
    """The Linear and LayerNorm inside are sinter.nn's (isinstance holds, as in torch)."""
    counts = []
    for lib in (torch, sinter):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = lib.nn.Transformer(8, 2, 1, 1, 16)
        modules = list(model.modules())
        counts.append((sum(isinstance(m, lib.nn.Linear) for m in modules),
                       sum(isinstance(m, lib.nn.LayerNorm) for m in modules)))
    assert counts[0] == counts[1]


# --- warnings and errors ---

def test_warnings_as_torch(torch):
    for lib in (torch, sinter):
        with pytest.warns(UserWarning, match="self.use_nested_tensor is False because "
                          r"encoder_layer.self_attn.batch_first was not True"):
            lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(*ENC), 1)
        with pytest.warns(UserWarning, match="encoder_layer.norm_first was True"):
            lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(
                *ENC, batch_first=True, norm_first=True), 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(*ENC, batch_first=True), 1)
            lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(*ENC), 1,
                                      enable_nested_tensor=False)
        m = lib.nn.MultiheadAttention(E, H).to(lib.float64)
        x = _rand(lib, (L, N, E), 1)
        with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):
            m(x, x, x, attn_mask=lib.tensor([[False, True, True]] * L),
              key_padding_mask=_floats((N, L), 2).fn(lib))


def _mha(lib, **kwargs):
    return lib.nn.MultiheadAttention(E, H, **kwargs).to(lib.float64)


# (what, call(lib), exception, pieces of sinter's message): torch raises the same type.
ERRORS = [
    ("4-d query", lambda L_: _mha(L_)(*[_rand(L_, (1, L, N, E), 1)] * 3),
     AssertionError, ["MultiheadAttention", "4-D", "(1, 3, 2, 8)"]),
    ("2-d key for a 3-d query", lambda L_: _mha(L_)(_rand(L_, (L, N, E), 1),
                                                     *[_rand(L_, (S, E), 2)] * 2),
     AssertionError, ["MultiheadAttention", "(4, 8)"]),
    ("query's width", lambda L_: _mha(L_)(*[_rand(L_, (L, N, 6), 1)] * 3),
     AssertionError, ["MultiheadAttention", "embedding dimension of 8, but got 6", "(3, 2, 6)"]),
    ("key and value differ", lambda L_: _mha(L_)(_rand(L_, (L, N, E), 1),
                                                  _rand(L_, (S, N, E), 2),
                                                  _rand(L_, (S + 1, N, E), 3)),
     AssertionError, ["MultiheadAttention", "(4, 2, 8)", "(5, 2, 8)"]),
    ("key's width against kdim", lambda L_: _mha(L_, kdim=5, vdim=3)(
        _rand(L_, (L, N, E), 1), _rand(L_, (S, N, 4), 2), _rand(L_, (S, N, 3), 3)),
     AssertionError, ["MultiheadAttention", "key of shape (4, 2, 4)", "takes 5"]),
    ("key's width against embed_dim", lambda L_: _mha(L_)(
        _rand(L_, (L, N, E), 1), *[_rand(L_, (S, N, 6), 2)] * 2),
     RuntimeError, ["MultiheadAttention", "key of shape (4, 2, 6)", "takes 8"]),
    ("batch sizes", lambda L_: _mha(L_)(_rand(L_, (L, N, E), 1), *[_rand(L_, (S, 3, E), 2)] * 2),
     RuntimeError, ["MultiheadAttention", "(3, 2, 8)", "(4, 3, 8)", "batch"]),
    ("2-d attn_mask's shape", lambda L_: _mha(L_)(*[_rand(L_, (L, N, E), 1)] * 3,
                                                  attn_mask=L_.zeros(L, L + 1, dtype=L_.bool)),
     RuntimeError, ["MultiheadAttention", "2D attn_mask", "(3, 4)", "(3, 3)"]),
    ("3-d attn_mask's shape", lambda L_: _mha(L_)(*[_rand(L_, (L, N, E), 1)] * 3,
                                                  attn_mask=L_.zeros(N, L, L, dtype=L_.bool)),
     RuntimeError, ["MultiheadAttention", "3D attn_mask", "(2, 3, 3)", "(4, 3, 3)"]),
    ("key_padding_mask's shape", lambda L_: _mha(L_)(
        *[_rand(L_, (L, N, E), 1)] * 3, key_padding_mask=L_.zeros(N, L + 1, dtype=L_.bool)),
     AssertionError, ["MultiheadAttention", "key_padding_mask", "(2, 4)", "(2, 3)"]),
    ("an integer mask", lambda L_: _mha(L_)(*[_rand(L_, (L, N, E), 1)] * 3,
                                            attn_mask=L_.zeros(L, L, dtype=L_.int64)),
     AssertionError, ["only bool and floating types of attn_mask"]),
    ("is_causal without a mask", lambda L_: _mha(L_)(*[_rand(L_, (L, N, E), 1)] * 3,
                                                     is_causal=True),
     RuntimeError, ["Need attn_mask if specifying the is_causal hint"]),
    ("embed_dim and heads", lambda L_: L_.nn.MultiheadAttention(10, 3),
     AssertionError, ["embed_dim must be divisible by num_heads", "10", "3"]),
    ("no heads", lambda L_: L_.nn.MultiheadAttention(8, 0), ValueError, ["num_heads=0"]),
    ("an unknown activation", lambda L_: L_.nn.TransformerEncoderLayer(*ENC, activation="tanh"),
     RuntimeError, ["activation should be relu/gelu, not tanh"]),
    ("Transformer's batch sizes", lambda L_: _transformer(L_)(
        _rand(L_, (S, N, E), 1), _rand(L_, (L, N + 1, E), 2)),
     RuntimeError, ["batch number of src and tgt must be equal", "(4, 2, 8)", "(3, 3, 8)"]),
    ("Transformer's width", lambda L_: _transformer(L_)(
        _rand(L_, (S, N, E), 1), _rand(L_, (L, N, 6), 2)),
     RuntimeError, ["feature number of src and tgt must be equal to d_model", "(3, 2, 6)"]),
]


def _transformer(lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.nn.Transformer(E, H, 1, 1, 16).to(lib.float64)


@pytest.mark.parametrize("what,call,exc,pieces", ERRORS, ids=[row[0] for row in ERRORS])
def test_errors_as_torch(torch, what, call, exc, pieces):
    with pytest.raises(exc):
        call(torch)
    with pytest.raises(exc) as info:
        call(sinter)
    for piece in pieces:
        assert piece in str(info.value), (what, str(info.value))


def test_copy_of_a_layer_keeps_its_values():
    layer = sinter.nn.TransformerEncoderLayer(*ENC)
    clone = copy.deepcopy(layer)
    assert clone.activation is F.relu and clone.activation_relu_or_gelu == 1
    assert [p.tolist() for p in clone.parameters()] == [p.tolist() for p in layer.parameters()]
