"""More of torch.nn's layers, written in Python over sinter.nn.functional with torch's
constructors, attributes, parameters and printouts: EmbeddingBag, Bilinear, power-average
pooling, local response normalization, ChannelShuffle, Softmax2d, alpha dropout, RReLU,
adaptive max pooling in 1 and 3 dimensions and max unpooling."""

import math

from .. import _C
from .._grad_mode import no_grad
from . import Module, Parameter, init
from . import functional as F
from .layers import _DropoutNd

__all__ = [
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool3d",
    "AlphaDropout",
    "Bilinear",
    "ChannelShuffle",
    "EmbeddingBag",
    "FeatureAlphaDropout",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "LocalResponseNorm",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "RReLU",
    "Softmax2d",
]


# --- embeddings ---

class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (see F.embedding_bag): weight
    (num_embeddings, embedding_dim) drawn from N(0, 1), its padding_idx row zero, as torch's;
    _weight gives the weight instead."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(_C.empty(num_embeddings, embedding_dim, dtype=dtype,
                                             device=device))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings!r}, {self.embedding_dim!r}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose weight is embeddings (2-d), trainable unless freeze."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
                  include_last_offset, padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag


# --- bilinear ---

class Bilinear(Module):
    """y = x1^T A x2 + b: weight (out_features, in1_features, in2_features) and bias
    uniform in +-1/sqrt(in1_features), as torch's."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(_C.empty(out_features, in1_features, in2_features, dtype=dtype,
                                         device=device))
        if bias:
            self.bias = Parameter(_C.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


# --- pooling ---

class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride,
                              self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """The p-norm over windows of the last dimension (see F.lp_pool1d)."""

    _fn = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """The p-norm over windows of the last two dimensions (see F.lp_pool2d)."""

    _fn = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """The p-norm over windows of the last three dimensions (see F.lp_pool3d)."""

    _fn = staticmethod(F.lp_pool3d)


class _AdaptiveMaxPoolNd(Module):
    _fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        return type(self)._fn(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """The maximum over output_size windows that tile the last dimension; with
    return_indices, also where each sits."""

    _fn = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """The maximum over output_size windows that tile the last three dimensions (a None keeps
    the input's size); with return_indices, also where each sits (d * H * W + h * W + w)."""

    _fn = staticmethod(F.adaptive_max_pool3d)


class _MaxUnpoolNd(Module):
    _dims = 1
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._dims

        def expand(v):
            return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n

        self.kernel_size = expand(kernel_size)
        self.stride = expand(stride if stride is not None else kernel_size)
        self.padding = expand(padding)

    def forward(self, input, indices, output_size=None):
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The inverse of MaxPool1d: zeros but at indices, which take the input's values."""

    _fn = staticmethod(F.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """The inverse of MaxPool2d (see MaxUnpool1d)."""

    _dims, _fn = 2, staticmethod(F.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """The inverse of MaxPool3d (see MaxUnpool1d)."""

    _dims, _fn = 3, staticmethod(F.max_unpool3d)


# --- normalization, shuffles and activations ---

class LocalResponseNorm(Module):
    """Each value divided by (k + alpha * mean of the squares over size neighbouring
    channels)^beta (see F.local_response_norm)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class ChannelShuffle(Module):
    """The channels of (N, C, *) input regrouped as (groups, C / groups) and transposed."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class Softmax2d(Module):
    """softmax over the channels of (N, C, H, W) or (C, H, W) input (dim -3)."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             "instead")
        return F.softmax(input, -3)


class AlphaDropout(_DropoutNd):
    """In training, alpha dropout of each element (see F.alpha_dropout), keeping a SELU
    network's mean and variance; the identity in eval. inplace is taken for torch's callers."""

    _fn = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """AlphaDropout of whole channels input[n, c] (see F.feature_alpha_dropout)."""

    _fn = staticmethod(F.feature_alpha_dropout)


class RReLU(Module):
    """x where x > 0, else a x: a uniform in [lower, upper) per element in training,
    (lower + upper) / 2 in eval (see F.rrelu). inplace as AlphaDropout's."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                              else "")
