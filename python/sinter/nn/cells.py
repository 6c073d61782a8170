"""One step of a recurrent network: RNNCell, LSTMCell and GRUCell with torch.nn's constructors,
parameters (weight_ih, weight_hh, bias_ih, bias_hh, the gates stacked in torch's order), init,
checks and printouts, each step one of the fused cell ops (sinter.lstm_cell, gru_cell,
rnn_tanh_cell, rnn_relu_cell)."""

import math

from .. import _C
from . import Module, Parameter, init

__all__ = ["GRUCell", "LSTMCell", "RNNCell"]


def _rnn_cell(input, hx, w_ih, w_hh, b_ih, b_hh, nonlinearity):
    """h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act tanh or relu: the fused cell ops."""
    cell = _C.rnn_tanh_cell if nonlinearity == "tanh" else _C.rnn_relu_cell
    return cell(input, hx, w_ih, w_hh, b_ih, b_hh)


def _lstm_cell(input, hx, cx, w_ih, w_hh, b_ih, b_hh):
    """(h', c'): gates i, f, g, o stacked in that order; c' = f c + i g, h' = o tanh(c')."""
    return _C.lstm_cell(input, (hx, cx), w_ih, w_hh, b_ih, b_hh)


def _gru_cell(input, hx, w_ih, w_hh, b_ih, b_hh):
    """h': gates r, z, n stacked in that order, r applied to the hidden part of n after its
    bias: n = tanh(x_n + r (h W_hn^T + b_hn)), h' = (1 - z) n + z h."""
    return _C.gru_cell(input, hx, w_ih, w_hh, b_ih, b_hh)


class _RNNCellBase(Module):
    """Parameters of num_chunks stacked gates, uniform in +-1/sqrt(hidden_size) as torch's."""

    _chunks = 1

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        rows = self._chunks * hidden_size
        self.weight_ih = Parameter(_C.empty(rows, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(_C.empty(rows, hidden_size, dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(_C.empty(rows, dtype=dtype, device=device))
            self.bias_hh = Parameter(_C.empty(rows, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _check_input(self, input):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")

    def _check_hidden(self, input, hx, k):
        """Batched input and its state hx, checked as torch's cells check input and
        hidden{k}."""
        name = type(self).__name__
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got "
                               f"{input.shape[1]} expected {self.input_size}")
        if hx.dim() != 2:
            raise RuntimeError(f"{name}: Expected 2D hidden{k} (batch x hidden_size), but got "
                               f"{hx.dim()}D tensor")
        if hx.shape[0] != input.shape[0]:
            raise RuntimeError(f"{name}: Input batch size {input.shape[0]} doesn't match "
                               f"hidden{k} batch size {hx.shape[0]}")
        if hx.shape[1] != self.hidden_size:
            raise RuntimeError(f"{name}: hidden{k} has inconsistent hidden_size: got "
                               f"{hx.shape[1]}, expected {self.hidden_size}")

    def _zeros(self, input):
        return _C.zeros(input.shape[0], self.hidden_size, dtype=input.dtype,
                        device=input.device)

    def _step(self, input, hx):
        """The cell on batched input and hidden state."""
        raise NotImplementedError

    def forward(self, input, hx=None):
        """The next hidden state of (N, input_size) or unbatched (input_size) input; hx None
        means zeros."""
        name = type(self).__name__
        self._check_input(input)
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        hx = self._zeros(input) if hx is None else hx if batched else hx.unsqueeze(0)
        self._check_hidden(input, hx, 0)
        out = self._step(input, hx)
        return out if batched else out.squeeze(0)


class RNNCell(_RNNCellBase):
    """An Elman cell: h' = tanh (or relu) of x W_ih^T + b_ih + h W_hh^T + b_hh."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def _step(self, input, hx):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return _rnn_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                         self.nonlinearity)


class LSTMCell(_RNNCellBase):
    """An LSTM cell, its gates i, f, g, o; forward(input, (h, c)) returns (h', c')."""

    _chunks = 4

    def forward(self, input, hx=None):
        """(h', c') of (N, input_size) or unbatched (input_size) input; hx None means zeros."""
        self._check_input(input)
        if hx is not None:
            for k, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{k}] to be 1D or 2D, got "
                                     f"{value.dim()}D instead")
            if len(hx) != 2:
                raise RuntimeError("LSTMCell: lstm_cell expects two hidden states")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = (self._zeros(input), self._zeros(input))
        elif not batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        for k, value in enumerate(hx):
            self._check_hidden(input, value, k)
        h, c = _lstm_cell(input, hx[0], hx[1], self.weight_ih, self.weight_hh, self.bias_ih,
                          self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(_RNNCellBase):
    """A GRU cell, its gates r, z, n; forward(input, h) returns h'."""

    _chunks = 3

    def _step(self, input, hx):
        return _gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
