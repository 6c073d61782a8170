"""sinter.nn's layers written in Python over sinter.nn.functional, with torch.nn's constructors,
attributes and printouts: activations, 1-d max and average pooling, adaptive max pooling,
padding, channel dropout, distances and the fixed-mode upsampling layers."""

from .. import _C
from . import Module
from . import functional as F


# --- activations ---

class Softmin(Module):
    """softmax(-input) along dim."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        # The warning points at the module's caller: F.softmin's helper, F.softmin, forward,
        # Module.__call__, the caller.
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSigmoid(Module):
    """log(sigmoid(x)), computed stably."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    """x / (1 + |x|)."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """x - tanh(x)."""

    def forward(self, input):
        return F.tanhshrink(input)


class Softshrink(Module):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Module):
    """x where |x| > lambd, else 0."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Threshold(Module):
    """x where x > threshold, else value. inplace is taken for torch's callers: the result is a
    new tensor either way."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + \
            (", inplace=True" if self.inplace else "")


class GLU(Module):
    """a * sigmoid(b), a and b the halves of the input along dim."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class CELU(Module):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)). inplace as Threshold's."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.celu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


# --- pooling ---
# The modules keep torch's attributes as given and pass them to sinter.nn.functional, which
# takes torch's forms of each argument (an int or a sequence of one) and checks them.

class MaxPool1d(Module):
    """The maximum over windows of the last dimension (stride None: kernel_size); with
    return_indices, also where each maximum sits along that dimension: the first input
    position (never a padding one) holding it, or the window's last NaN, as torch's."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


def _single(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class AvgPool1d(Module):
    """The mean over windows of the last dimension (stride None: kernel_size; padding counted
    unless count_include_pad=False)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveMaxPool2d(Module):
    """The maximum over output_size windows that tile the last two dimensions (a None in
    output_size keeps the input's size); with return_indices, also where each sits (h * W + w)."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


# --- padding ---

class _PadNd(Module):
    """F.pad of the last _dims dimensions in _mode; padding an int (all sides) or a tuple
    (left, right, top, bottom, front, back), a negative pad cropping (as F.pad's)."""

    _mode = "constant"
    _dims = 1

    def __init__(self, padding):
        super().__init__()
        n = 2 * self._dims
        self.padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * n

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input):
        if input.dim() not in (self._dims + 1, self._dims + 2):
            raise ValueError(f"expected {self._dims + 1}D or {self._dims + 2}D input (got "
                             f"{input.dim()}D input)")
        return super().forward(input)


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dimension with value."""


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dimensions with value."""

    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three dimensions with value."""

    _dims = 3


class _ZeroPad:
    """ConstantPadNd with value 0, printed by its padding alone (torch's ZeroPadNd)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    """Pads the last dimension with zeros."""


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    """Pads the last two dimensions with zeros."""


class ZeroPad3d(_ZeroPad, ConstantPad3d):
    """Pads the last three dimensions with zeros."""


class ReflectionPad1d(_PadNd):
    """Pads the last dimension with the input's reflection at its edges (the edge not
    repeated)."""

    _mode = "reflect"


class ReflectionPad2d(_PadNd):
    """Pads the last two dimensions with the input's reflection at its edges."""

    _mode, _dims = "reflect", 2


class ReflectionPad3d(_PadNd):
    """Pads the last three dimensions with the input's reflection at its edges."""

    _mode, _dims = "reflect", 3


class ReplicationPad1d(_PadNd):
    """Pads the last dimension by repeating the input's edge values."""

    _mode = "replicate"


class ReplicationPad2d(_PadNd):
    """Pads the last two dimensions by repeating the input's edge values."""

    _mode, _dims = "replicate", 2


class ReplicationPad3d(_PadNd):
    """Pads the last three dimensions by repeating the input's edge values."""

    _mode, _dims = "replicate", 3


class CircularPad1d(_CircularPadNd):
    """Pads the last dimension of a (C, W) or (N, C, W) input by wrapping it around."""


class CircularPad2d(_CircularPadNd):
    """Pads the last two dimensions of a 3-D or 4-D input by wrapping them around."""

    _dims = 2


class CircularPad3d(_CircularPadNd):
    """Pads the last three dimensions of a 4-D or 5-D input by wrapping them around."""

    _dims = 3


# --- channel dropout ---

class _DropoutNd(Module):
    _fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """In training, zeroes each channel of an (N, C, L) or (C, L) input whole with probability
    p and scales the others by 1 / (1 - p); the identity in eval. inplace as Threshold's."""

    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Dropout1d's channel dropout for (N, C, H, W) input (3-D input taken as (N, C, L), as
    torch's)."""

    _fn = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Dropout1d's channel dropout for (N, C, D, H, W) or (C, D, H, W) input."""

    _fn = staticmethod(F.dropout3d)


# --- distances ---

class CosineSimilarity(Module):
    """The cosine of the angle between x1 and x2 along dim, the norms kept at least eps."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """||x1 - x2 + eps||_p along the last dimension."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# --- upsampling ---

class _Upsampling(Module):
    _mode = "nearest"
    _align_corners = None

    def __init__(self, size=None, scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = self._mode
        self.align_corners = self._align_corners
        self.recompute_scale_factor = None  # torch's attribute; always None for these layers

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners)

    def extra_repr(self):
        info = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                else f"size={self.size!r}")
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(_Upsampling):
    """Nearest-neighbour upsampling of (N, C, H, W) input to size or by scale_factor."""


class UpsamplingBilinear2d(_Upsampling):
    """Bilinear upsampling of (N, C, H, W) input to size or by scale_factor, the corners
    aligned (align_corners=True)."""

    _mode, _align_corners = "bilinear", True


def _embedding_from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                               norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """An Embedding holding these (num_embeddings, embedding_dim) values, as torch's
    Embedding.from_pretrained: frozen unless freeze=False."""
    if embeddings.dim() != 2:
        raise ValueError("Embeddings parameter is expected to be 2-dimensional")
    rows, cols = embeddings.shape
    return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
               _weight=embeddings, _freeze=freeze)


_C.nn.Embedding.from_pretrained = classmethod(_embedding_from_pretrained)
