"""sinter.nn's attention and transformer modules in Python, as torch.nn's: MultiheadAttention
(torch's parameters, masks and weights), the encoder and decoder layers and stacks, and
Transformer, with torch's constructors, initialisation, state_dict keys and printouts, so that a
torch state_dict loads into them and gives the same outputs."""

import copy
import math
import warnings

from .. import _C
from .._grad_mode import no_grad as _no_grad
from . import GELU, CModule, Dropout, Module, ModuleList, Parameter, ReLU
from . import functional as F
from . import init

__all__ = [
    "MultiheadAttention",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]


def _empty(shape, device, dtype):
    return _C.empty(*shape, dtype=dtype, device=device)


# --- the layers inside: the package's Linear and LayerNorm, and torch's name for one ---

class NonDynamicallyQuantizableLinear(_C.nn.Linear):
    """MultiheadAttention's output projection: the package's Linear under torch's name for it
    (and its printout)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)

    def __repr__(self):
        return "NonDynamicallyQuantizableLinear" + super().__repr__()[len("Linear"):]

    def __deepcopy__(self, memo):
        # A copy of this class (a C++ layer's own copy would be a plain Linear).
        weight = self.weight
        out = type(self)(self.in_features, self.out_features, self.bias is not None,
                         device=weight.device, dtype=weight.dtype)
        with _no_grad():
            for mine, theirs in ((out.weight, weight), (out.bias, self.bias)):
                if theirs is not None:
                    mine.copy_(theirs)
                    mine.requires_grad_(theirs.requires_grad)
        memo[id(self)] = out
        return out


def _linear(in_features, out_features, bias, device, dtype):
    return _C.nn.Linear(in_features, out_features, bias, device=device, dtype=dtype)


def _layer_norm(d_model, eps, elementwise_affine, bias, device, dtype):
    return _C.nn.LayerNorm(d_model, eps, elementwise_affine, bias, device=device, dtype=dtype)


# --- attention ---

def _canonical_mask(mask, name, other, other_name, dtype, check_other=True):
    """A mask as torch's attention takes it: a bool one (True: left out) becomes additive, of
    dtype, -inf where True; a floating one is kept. A dtype other than that of the mask `other`
    gives torch's deprecation warning."""
    if mask is None:
        return None
    if mask.dtype != _C.bool and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if check_other and other is not None and mask.dtype != other.dtype:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same "
                      "type for both instead.", stacklevel=2)
    if mask.dtype == _C.bool:
        zeros = _C.zeros(mask.shape, dtype=dtype, device=mask.device)
        return zeros.masked_fill(mask, float("-inf"))
    return mask


def _check_ranks(op, query, key, value, key_padding_mask, attn_mask, num_heads):
    """torch's checks of the inputs' ranks (_mha_shape_check); True when batched."""
    batched = query.dim() == 3
    if query.dim() not in (2, 3):
        raise AssertionError(f"{op}: query should be unbatched 2D or batched 3D tensor but "
                             f"received {query.dim()}-D query tensor (shape {query.shape})")
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.dim() != query.dim() or value.dim() != query.dim():
        raise AssertionError(f"{op}: for {kind} `query`, expected `key` and `value` to be "
                             f"{query.dim()}-D but found {key.dim()}-D and {value.dim()}-D "
                             f"tensors respectively (shapes {key.shape} and {value.shape})")
    if key_padding_mask is not None and key_padding_mask.dim() != query.dim() - 1:
        raise AssertionError(f"{op}: for {kind} `query`, expected `key_padding_mask` to be "
                             f"`None` or {query.dim() - 1}-D but found "
                             f"{key_padding_mask.dim()}-D tensor instead")
    if attn_mask is not None and attn_mask.dim() not in (2, 3):
        raise AssertionError(f"{op}: for {kind} `query`, expected `attn_mask` to be `None`, 2-D "
                             f"or 3-D but found {attn_mask.dim()}-D tensor instead")
    if not batched and attn_mask is not None and attn_mask.dim() == 3:
        expected = (num_heads, query.shape[0], key.shape[0])
        if tuple(attn_mask.shape) != expected:
            raise AssertionError(f"{op}: expected `attn_mask` shape to be {expected} but got "
                                 f"{attn_mask.shape}")
    return batched


def _check_inputs(op, query, key, value, key_padding_mask, attn_mask, num_heads, dims,
                  separate, batch_first=False):
    """The checks of torch's multi_head_attention_forward, and those of the projections'
    widths and of the batch sizes, on the inputs as given (batch_first or not), so that each
    error names op and the shapes. dims: (embed_dim, kdim, vdim)."""
    batched = _check_ranks(op, query, key, value, key_padding_mask, attn_mask, num_heads)
    if query.shape[-1] != dims[0]:
        raise AssertionError(f"{op}: was expecting embedding dimension of {dims[0]}, but got "
                             f"{query.shape[-1]} (query of shape {query.shape})")
    if separate and key.shape[:-1] != value.shape[:-1]:
        raise AssertionError(f"{op}: key's sequence and batch dims {key.shape[:-1]} do not "
                             f"match value's {value.shape[:-1]}")
    if not separate and key.shape != value.shape:
        raise AssertionError(f"{op}: key shape {key.shape} does not match value shape "
                             f"{value.shape}")
    for name, t, width in (("key", key, dims[1]), ("value", value, dims[2])):
        if t.shape[-1] != width:  # torch: an assertion on separate weights, else matmul's error
            raise (AssertionError if separate else RuntimeError)(
                f"{op}: {name} of shape {t.shape} has {t.shape[-1]} features, its projection "
                f"takes {width}")
    seq, batch = (1, 0) if batch_first else (0, 1)
    if batched and query.shape[batch] != key.shape[batch]:
        raise RuntimeError(f"{op}: query of shape {query.shape} and key of shape {key.shape} "
                           "have different batch sizes")
    bsz = query.shape[batch] if batched else 1
    tgt_len = query.shape[seq] if batched else query.shape[0]
    src_len = key.shape[seq] if batched else key.shape[0]
    if attn_mask is not None:
        want = (tgt_len, src_len) if attn_mask.dim() == 2 else (bsz * num_heads, tgt_len,
                                                                 src_len)
        if tuple(attn_mask.shape) != want:
            raise RuntimeError(f"{op}: the shape of the {attn_mask.dim()}D attn_mask is "
                               f"{attn_mask.shape}, but should be {want}.")
    if key_padding_mask is not None:
        want = (bsz, src_len) if batched else (src_len,)
        if tuple(key_padding_mask.shape) != want:
            raise AssertionError(f"{op}: expected key_padding_mask of shape {want}, got "
                                 f"{key_padding_mask.shape}")


def _in_projection(query, key, value, in_proj_weight, in_proj_bias, separate):
    """q, k and v: the inputs times in_proj_weight's rows (q; k; v), in one product for
    self-attention and in one for key and value when they are one tensor, as torch packs them;
    separate: (q_proj_weight, k_proj_weight, v_proj_weight) instead."""
    e = separate[0].shape[0] if separate is not None else in_proj_weight.shape[0] // 3
    biases = (None, None, None) if in_proj_bias is None else in_proj_bias.split([e, e, e])
    if separate is not None:
        return [F.linear(x, w, b) for x, w, b in zip((query, key, value), separate, biases)]
    if query is key and key is value:
        return F.linear(query, in_proj_weight, in_proj_bias).chunk(3, -1)
    w_q, w_kv = in_proj_weight.split([e, 2 * e])
    q = F.linear(query, w_q, biases[0])
    if key is value:
        b_kv = None if in_proj_bias is None else in_proj_bias.split([e, 2 * e])[1]
        return [q, *F.linear(key, w_kv, b_kv).chunk(2, -1)]
    w_k, w_v = w_kv.chunk(2)
    return [q, F.linear(key, w_k, biases[1]), F.linear(value, w_v, biases[2])]


def _merged_mask(attn_mask, key_padding_mask, bsz, num_heads, src_len):
    """One additive mask broadcasting to (N H, L, S): attn_mask (1 or N H, L, S) plus the key
    padding mask (N, S) repeated for each head."""
    if key_padding_mask is None:
        return attn_mask
    padding = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
    padding = padding.reshape(bsz * num_heads, 1, src_len)
    return padding if attn_mask is None else attn_mask + padding


def _attend(q, k, v, mask, dropout_p, is_causal, need_weights, bsz, num_heads):
    """softmax(q k^T / sqrt(D) + mask) v for q (N H, L, D), k and v (N H, S, D): explicitly,
    with the weights (N, H, L, S), when they are needed, else by scaled_dot_product_attention.
    Returns the output (L, N, H D) and the weights or None."""
    tgt_len, head_dim, src_len = q.shape[1], q.shape[2], k.shape[1]
    if need_weights:
        scores = (q * math.sqrt(1.0 / head_dim)).matmul(k.transpose(-2, -1))
        if mask is not None:
            if mask.dtype != scores.dtype:  # torch's baddbmm takes one dtype
                raise RuntimeError(f"multi_head_attention_forward: a float mask must have the "
                                   f"query's dtype {q.dtype}, got {mask.dtype}")
            scores = mask + scores
        weights = F.softmax(scores, -1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, dropout_p)
        out = weights.matmul(v)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
    else:
        if mask is not None:
            mask = mask.reshape(bsz, num_heads, -1, src_len) if mask.shape[0] != 1 else \
                mask.unsqueeze(0)
            if mask.dtype != q.dtype:  # a float mask of another dtype, as torch's SDPA takes
                mask = mask.to(q.dtype)
        shape = (bsz, num_heads, -1, head_dim)
        out = F.scaled_dot_product_attention(
            q.reshape(shape), k.reshape(shape), v.reshape(bsz, num_heads, -1, v.shape[-1]),
            mask, dropout_p, is_causal)
        out = out.reshape(bsz * num_heads, tgt_len, v.shape[-1])
        weights = None
    out = out.transpose(0, 1).reshape(tgt_len, bsz, num_heads * v.shape[-1])
    return out, weights


def _causal_hint(is_causal, attn_mask, key_padding_mask, need_weights):
    """torch's reading of is_causal: a hint that attn_mask is the causal mask, which is then
    left to the attention's own causal form where nothing else needs the mask. Returns
    (attn_mask, is_causal)."""
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        return None, True
    return attn_mask, is_causal and key_padding_mask is None


def _append_bias_kv(k, v, bias_k, bias_v, masks, bsz):
    """k and v (S, N, E) with bias_k and bias_v (1, 1, E) appended as one more key for each
    batch entry; each mask (..., S) padded with a 0 column for it."""
    if (bias_k is None) != (bias_v is None):
        given, missing = ("k", "v") if bias_k is not None else ("v", "k")
        raise AssertionError(f"bias_{given} is set but bias_{missing} is None")
    if bias_k is None:
        return k, v, masks
    k = _C.cat([k, bias_k.repeat(1, bsz, 1)])
    v = _C.cat([v, bias_v.repeat(1, bsz, 1)])
    return k, v, [m if m is None else F.pad(m, (0, 1)) for m in masks]


def _split_heads(t, static, bsz, num_heads, head_dim, name):
    """t (S, N, H D) as (N H, S, D), or static (N H, S, D) in its place."""
    if static is None:
        return t.reshape(t.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if static.dim() != 3 or static.shape[0] != bsz * num_heads or static.shape[2] != head_dim:
        raise AssertionError(f"multi_head_attention_forward: expecting {name} of shape "
                             f"({bsz * num_heads}, S, {head_dim}), but got {static.shape}")
    return static


def _zero_key(k, v, masks):
    """add_zero_attn: a key and a value of zeros appended to k and v (N H, S, D); each mask
    padded with a 0 column for it."""
    k = _C.cat([k, _C.zeros((k.shape[0], 1, k.shape[2]), dtype=k.dtype, device=k.device)], 1)
    v = _C.cat([v, _C.zeros((v.shape[0], 1, v.shape[2]), dtype=v.dtype, device=v.device)], 1)
    return k, v, [m if m is None else F.pad(m, (0, 1)) for m in masks]


def _mha_forward(query, key, value, num_heads, in_proj, bias_kv, add_zero_attn, dropout_p,
                 out_proj, key_padding_mask, attn_mask, static_kv, options):
    """multi_head_attention_forward on checked inputs, (L, N, E) or unbatched (L, E), with
    masks in canonical (additive) form. in_proj: (in_proj_weight, in_proj_bias, the separate
    weights or None); options: (need_weights, average_attn_weights, is_causal)."""
    need_weights, average_attn_weights, is_causal = options
    batched = query.dim() == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    head_dim = embed_dim // num_heads
    attn_mask, is_causal = _causal_hint(is_causal, attn_mask, key_padding_mask, need_weights)
    q, k, v = _in_projection(query, key, value, *in_proj)
    if attn_mask is not None and attn_mask.dim() == 2:
        attn_mask = attn_mask.unsqueeze(0)
    if bias_kv[0] is not None and (static_kv[0] is not None or static_kv[1] is not None):
        raise AssertionError("multi_head_attention_forward: bias cannot be added to a static "
                             "key or value.")
    masks = (attn_mask, key_padding_mask)
    k, v, masks = _append_bias_kv(k, v, *bias_kv, masks, bsz)
    q = _split_heads(q, None, bsz, num_heads, head_dim, "q")
    k = _split_heads(k, static_kv[0], bsz, num_heads, head_dim, "static_k")
    v = _split_heads(v, static_kv[1], bsz, num_heads, head_dim, "static_v")
    if add_zero_attn:
        k, v, masks = _zero_key(k, v, masks)
    mask = _merged_mask(*masks, bsz, num_heads, k.shape[1])
    out, weights = _attend(q, k, v, mask, dropout_p, is_causal, need_weights, bsz, num_heads)
    out = F.linear(out, *out_proj)
    if weights is not None and average_attn_weights:
        weights = weights.mean(dim=1)
    if not batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention of query (L, N, E) or (L, E) over key and value (S, N, ...), as
    torch.nn.functional.multi_head_attention_forward: (output, weights or None)."""
    op = "multi_head_attention_forward"
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", attn_mask,
                                       "attn_mask", query.dtype)
    attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, False)
    separate = None
    if use_separate_proj_weight:
        separate = (q_proj_weight, k_proj_weight, v_proj_weight)
        if any(w is None for w in separate):
            raise AssertionError(f"{op}: use_separate_proj_weight is True but a projection "
                                 "weight is None")
        dims = (embed_dim_to_check, k_proj_weight.shape[-1], v_proj_weight.shape[-1])
    elif in_proj_weight is None:
        raise AssertionError(f"{op}: use_separate_proj_weight is False but in_proj_weight is "
                             "None")
    else:
        dims = (embed_dim_to_check, in_proj_weight.shape[-1], in_proj_weight.shape[-1])
    if embed_dim_to_check % num_heads != 0:
        raise AssertionError(f"{op}: embed_dim {embed_dim_to_check} not divisible by "
                             f"num_heads {num_heads}")
    _check_inputs(op, query, key, value, key_padding_mask, attn_mask, num_heads, dims,
                  use_separate_proj_weight)
    return _mha_forward(query, key, value, num_heads, (in_proj_weight, in_proj_bias, separate),
                        (bias_k, bias_v), add_zero_attn, dropout_p if training else 0.0,
                        (out_proj_weight, out_proj_bias), key_padding_mask, attn_mask,
                        (static_k, static_v), (need_weights, average_attn_weights, is_causal))


class MultiheadAttention(Module):
    """Attention of num_heads heads from query over key and value, as torch.nn.MultiheadAttention:
    its parameters (in_proj_weight, or q/k/v_proj_weight when kdim or vdim differ from embed_dim;
    in_proj_bias, bias_k, bias_v, out_proj), initialisation, masks and weights."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError("embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError(f"embed_dim must be divisible by num_heads, got embed_dim="
                                 f"{embed_dim} and num_heads={num_heads}")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_empty((3 * embed_dim, embed_dim), device, dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            for name, width in (("q", embed_dim), ("k", self.kdim), ("v", self.vdim)):
                setattr(self, f"{name}_proj_weight",
                        Parameter(_empty((embed_dim, width), device, dtype)))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_empty((3 * embed_dim,), device, dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias, device,
                                                        dtype)
        if add_bias_kv:
            self.bias_k = Parameter(_empty((1, 1, embed_dim), device, dtype))
            self.bias_v = Parameter(_empty((1, 1, embed_dim), device, dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        """torch's initialisation: xavier_uniform_ projections, zero biases, xavier_normal_
        bias_k and bias_v (out_proj.weight keeps Linear's)."""
        for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"):
            if getattr(self, name) is not None:
                init.xavier_uniform_(getattr(self, name))
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for p in (self.bias_k, self.bias_v):
            if p is not None:
                init.xavier_normal_(p)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """(output, weights or None), as torch's: output (L, N, E) ((N, L, E) batch_first, (L, E)
        unbatched); weights (N, L, S) averaged over the heads, else (N, H, L, S)."""
        op = type(self).__name__
        key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", attn_mask,
                                           "attn_mask", query.dtype)
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, False)
        _check_inputs(op, query, key, value, key_padding_mask, attn_mask, self.num_heads,
                      (self.embed_dim, self.kdim, self.vdim), not self._qkv_same_embed_dim,
                      self.batch_first)
        flip = self.batch_first and query.dim() == 3
        if flip:
            query, key, value = _seq_first(query, key, value)
        separate = None if self._qkv_same_embed_dim else (
            self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        out, weights = _mha_forward(
            query, key, value, self.num_heads, (self.in_proj_weight, self.in_proj_bias, separate),
            (self.bias_k, self.bias_v), self.add_zero_attn,
            self.dropout if self.training else 0.0, (self.out_proj.weight, self.out_proj.bias),
            key_padding_mask, attn_mask, (None, None),
            (need_weights, average_attn_weights, is_causal))
        return (out.transpose(1, 0) if flip else out), weights


def _seq_first(query, key, value):
    """(N, L, E) inputs as (L, N, E), a tensor passed twice still one tensor (self-attention's
    single projection)."""
    q = query.transpose(1, 0)
    k = q if key is query else key.transpose(1, 0)
    v = k if value is key else (q if value is query else value.transpose(1, 0))
    return q, k, v


# --- transformer layers and stacks ---

def _activation_fn(activation):
    """An activation given by name ("relu" or "gelu") as its function, else as given."""
    if not isinstance(activation, str):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _copy_sharing_functions(module, memo):
    """copy.deepcopy of a layer whose attributes may hold a function (its activation): the
    function is shared, as Python's deepcopy shares plain functions (a C++ one, F.relu, cannot
    be copied); parameters, buffers and submodules are copied."""
    for value in module.__dict__.values():
        if callable(value) and not isinstance(value, (Module, CModule)):
            memo.setdefault(id(value), value)
    out = object.__new__(type(module))
    memo[id(module)] = out
    for name, value in module.__dict__.items():
        out.__dict__[name] = copy.deepcopy(value, memo)
    return out


class _Layer(Module):
    """What the encoder and decoder layers share: the feed-forward block and the copy."""

    def _init_feed_forward(self, d_model, dim_feedforward, dropout, bias, factory):
        self.linear1 = _linear(d_model, dim_feedforward, bias, *factory)
        self.dropout = Dropout(dropout)
        self.linear2 = _linear(dim_feedforward, d_model, bias, *factory)

    def _ff_block(self, x, out_dropout):
        return out_dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def __deepcopy__(self, memo):
        return _copy_sharing_functions(self, memo)


class TransformerEncoderLayer(_Layer):
    """Self-attention then a feed-forward block, each added to its input with dropout, layer
    normalisation after each (before, with norm_first), as torch.nn.TransformerEncoderLayer."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        factory = (device, dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, device=device, dtype=dtype)
        self._init_feed_forward(d_model, dim_feedforward, dropout, bias, factory)
        self.norm_first = norm_first
        self.norm1 = _layer_norm(d_model, layer_norm_eps, True, bias, *factory)
        self.norm2 = _layer_norm(d_model, layer_norm_eps, True, bias, *factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        activation = _activation_fn(activation)
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """src (S, N, E) ((N, S, E) batch_first, (S, E) unbatched) -> the same shape."""
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               src_mask, "src_mask", src.dtype)
        src_mask = _canonical_mask(src_mask, "src_mask", None, "", src.dtype, False)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x), self.dropout2)
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x, self.dropout2))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)


class TransformerDecoderLayer(_Layer):
    """Self-attention, attention over the encoder's memory, then a feed-forward block, each
    added to its input with dropout and layer normalisation after (before, with norm_first), as
    torch.nn.TransformerDecoderLayer."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        factory = (device, dtype)
        for name in ("self_attn", "multihead_attn"):
            setattr(self, name, MultiheadAttention(d_model, nhead, dropout=dropout,
                                                   batch_first=batch_first, bias=bias,
                                                   device=device, dtype=dtype))
        self._init_feed_forward(d_model, dim_feedforward, dropout, bias, factory)
        self.norm_first = norm_first
        self.norm1 = _layer_norm(d_model, layer_norm_eps, True, bias, *factory)
        self.norm2 = _layer_norm(d_model, layer_norm_eps, True, bias, *factory)
        self.norm3 = _layer_norm(d_model, layer_norm_eps, True, bias, *factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation_fn(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        """tgt (T, N, E) over memory (S, N, E) ((N, ., E) batch_first, unbatched (., E)) -> tgt's
        shape."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            return x + self._ff_block(self.norm3(x), self.dropout3)
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x, self.dropout3))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, memory, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, memory, memory, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)


def _clones(layer, n):
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


def _seq_len(x, batch_first):
    """The sequence length of x: (S, E), (S, N, E) or (N, S, E) batch_first."""
    if x.dim() == 2:
        return x.shape[0]
    return x.shape[1 if batch_first else 0]


def _is_causal_mask(mask, is_causal, size):
    """torch's reading of is_causal for a stack: True or False as given; None: whether mask
    equals the causal mask of size (mask's if None) in mask's dtype (a bool one: True above the
    diagonal)."""
    if is_causal is not None or mask is None:
        return is_causal is True
    n = size if size is not None else mask.shape[-2]
    causal = _generate_square_subsequent_mask(n, device=mask.device, dtype=mask.dtype)
    return tuple(mask.shape) == tuple(causal.shape) and bool((mask == causal).all())


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    return _C.triu(_C.full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _nested_tensor_refusal(layer):
    """Why torch's TransformerEncoder would not use nested tensors with this layer ("" when it
    would), for its warning."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    attn = layer.self_attn
    for refused, why in (
            (layer.norm_first, "norm_first was True"),
            (not attn.batch_first, "self_attn.batch_first was not True(use batch_first for "
                                   "better inference performance)"),
            (not attn._qkv_same_embed_dim, "self_attn._qkv_same_embed_dim was not True"),
            (attn.in_proj_bias is None, "self_attn was passed bias=False"),
            (not layer.activation_relu_or_gelu, "activation_relu_or_gelu was not True"),
            (layer.norm1.eps != layer.norm2.eps, f"norm1.eps was not equal to {name}.norm2.eps"),
            (attn.num_heads % 2 == 1, "self_attn.num_heads is odd")):
        if refused:
            return f"{name}.{why}"
    return ""


def _left_aligned(padded):
    """Whether each row of the (N, S) bool padding mask pads only at its end."""
    return not bool((padded[:, :-1] & ~padded[:, 1:]).any()) if padded.shape[1] > 1 else True


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer (each its own parameters) run in turn, then norm, as
    torch.nn.TransformerEncoder. Where torch would run the layers on nested tensors (inference
    with a key padding mask, _padded_positions), the layers run on the padded tensors and the
    padded positions come out as zeros (before norm), as torch's."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = _nested_tensor_refusal(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn("enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why_not}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """src through the layers (mask, src_key_padding_mask and is_causal given to each;
        is_causal None: whether mask is the causal mask), then norm."""
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               mask, "mask", src.dtype)
        mask = _canonical_mask(mask, "mask", None, "", src.dtype, False)
        batch_first = self.layers[0].self_attn.batch_first
        is_causal = _is_causal_mask(mask, is_causal, _seq_len(src, batch_first))
        padded = self._padded_positions(src, mask, src_key_padding_mask)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=is_causal,
                           src_key_padding_mask=src_key_padding_mask)
        if padded is not None:
            output = output.masked_fill(padded.unsqueeze(-1), 0.0)
        return output if self.norm is None else self.norm(output)

    def _padded_positions(self, src, mask, src_key_padding_mask):
        """The (N, S) padded positions where torch's encoder takes its nested-tensor path
        (the layers fit it, inference, batched src with a left-aligned key padding mask and no
        mask, no gradient wanted), else None."""
        first = self.layers[0]
        if (not getattr(self, "use_nested_tensor", False) or first.training or src.dim() != 3
                or src_key_padding_mask is None or mask is not None):
            return None
        padded = src_key_padding_mask != 0
        if getattr(self, "mask_check", True) and not _left_aligned(padded):
            return None
        attn = first.self_attn
        tensors = (src, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight,
                   attn.out_proj.bias, first.norm1.weight, first.norm1.bias, first.norm2.weight,
                   first.norm2.bias, first.linear1.weight, first.linear1.bias,
                   first.linear2.weight, first.linear2.bias)
        if _C.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
            return None
        return padded


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer run in turn over the memory, then norm, as
    torch.nn.TransformerDecoder."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        """tgt through the layers (tgt_is_causal None: whether tgt_mask is the causal mask),
        then norm."""
        batch_first = self.layers[0].self_attn.batch_first
        tgt_is_causal = _is_causal_mask(tgt_mask, tgt_is_causal, _seq_len(tgt, batch_first))
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """An encoder and a decoder stack, as torch.nn.Transformer: the parameters of more than
    one dimension re-initialised by xavier_uniform_ (custom_encoder and custom_decoder's
    too)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                      batch_first, norm_first, bias, device, dtype)
        norm_args = (d_model, layer_norm_eps, True, bias, device, dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args),
                                              num_encoder_layers, _layer_norm(*norm_args))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args),
                                              num_decoder_layers, _layer_norm(*norm_args))
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        """The decoder's output for tgt over the encoder's memory of src."""
        batch = 0 if self.batch_first else 1
        if src.dim() == 3 and src.shape[batch] != tgt.shape[batch]:
            raise RuntimeError(f"the batch number of src and tgt must be equal (Transformer: src "
                               f"of shape {src.shape}, tgt of shape {tgt.shape}, batch_first="
                               f"{self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"the feature number of src and tgt must be equal to d_model "
                               f"(Transformer: d_model={self.d_model}, src of shape {src.shape}, "
                               f"tgt of shape {tgt.shape})")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) causal mask: -inf above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)
