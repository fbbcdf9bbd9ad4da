"""Recurrent cells (``RNNCell``, ``LSTMCell``, ``GRUCell``) and the one-step equations that the multi-layer
``RNN``/``LSTM``/``GRU`` modules reuse. Each step is a composition of differentiable ops (``F.linear``,
``sigmoid``, ``tanh``, ``relu``), so autograd derives the backward; gate orders are PyTorch's."""
from __future__ import annotations

import math
import numbers

from .. import backend
from .. import functional as F
from ..autograd import no_grad
from ..ops import relu, sigmoid, tanh, zeros
from ..tensor import Tensor
from .module import Module, Parameter
from ..backend import InputError, InputTypeError

NONLINEARITIES = {"tanh": tanh, "relu": relu}


# ---------------------------------------------------------------- one time step
# ``gi`` is the input's projection W_ih x + b_ih, computed for all time steps at once by the layers (one GEMM
# instead of T); the cells pass it per call. Only the recurrent GEMM has to stay inside the time loop.
def rnn_step(gi, state, w_hh, b_hh, act):
    """Elman step: ``h' = act(gi + W_hh h + b_hh)``; ``state`` and the result are ``(h,)``."""
    return (act(gi + F.linear(state[0], w_hh, b_hh)),)


def lstm_step(gi, state, w_hh, b_hh, w_hr=None):
    """LSTM step, gates (i, f, g, o): ``c' = f*c + i*g``, ``h' = o*tanh(c')`` (then ``W_hr h'`` with a projection);
    ``state`` and the result are ``(h, c)``."""
    h, c = state
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, 1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h = sigmoid(o) * tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr), c)


def gru_step(gi, state, w_hh, b_hh):
    """GRU step, gates (r, z, n): ``n = tanh(W_in x + b_in + r*(W_hn h + b_hn))``, ``h' = (1-z)*n + z*h``."""
    h = state[0]
    ir, iz, in_ = gi.chunk(3, 1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, 1)
    r, z = sigmoid(ir + hr), sigmoid(iz + hz)
    n = tanh(in_ + r * hn)
    return (n + z * (h - n),)  # = (1 - z) * n + z * h, one op fewer


# ---------------------------------------------------------------- shared checks and init
def check_sizes(name, input_size, hidden_size):
    for what, v in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise InputTypeError(f"{name}: {what} should be of type int, got: {type(v).__name__}")
    if input_size < 0 or hidden_size < 0:
        raise InputError(f"{name}: input_size and hidden_size must be >= 0, got {input_size} and {hidden_size}")


def new_parameter(shape, dtype, xp):
    return Parameter(xp.empty(shape, dtype=dtype))


def uniform_init(module):
    """PyTorch's recurrent init: every parameter U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
    stdv = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0.0
    with no_grad():
        for p in module.parameters():
            p.uniform_(-stdv, stdv)


def describe(value):
    """What came where states were expected, for an error message: a type's name, or a sequence's with its items'."""
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__} of ({', '.join(type(v).__name__ for v in value)})"
    return type(value).__name__


def check_dtype(name, x, weight):
    if x.dtype != weight.dtype:
        raise InputError(f"{name}: input dtype ({x.dtype}) does not match weight dtype ({weight.dtype}). Convert "
                         f"the input: input.to({weight.dtype}), or the model: model.to({x.dtype})")


# ---------------------------------------------------------------- cells
class RNNCellBase(Module):
    """Parameters ``weight_ih`` (chunks*hidden, input), ``weight_hh`` (chunks*hidden, hidden), ``bias_ih``,
    ``bias_hh`` (chunks*hidden,), registered in PyTorch's order; the forward handles 1-D (unbatched) inputs."""

    num_chunks = 1

    def __init__(self, input_size, hidden_size, bias=True, num_chunks=None, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        check_sizes(name, input_size, hidden_size)
        num_chunks = self.num_chunks if num_chunks is None else num_chunks
        self.input_size, self.hidden_size, self.bias = int(input_size), int(hidden_size), bool(bias)
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp, gates = backend.xp(dev), num_chunks * self.hidden_size
        with backend.on_device(dev):
            self.weight_ih = new_parameter((gates, self.input_size), dtype, xp)
            self.weight_hh = new_parameter((gates, self.hidden_size), dtype, xp)
            if bias:
                self.bias_ih = new_parameter((gates,), dtype, xp)
                self.bias_hh = new_parameter((gates,), dtype, xp)
            else:
                self.register_parameter("bias_ih", None)
                self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        uniform_init(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, input, states):
        """Validate; return the batched input, the batched states (zeros where None) and whether it was batched."""
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise InputTypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
        if input.dim() not in (1, 2):
            raise InputError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if len(states) == 1 and not isinstance(states[0], (Tensor, type(None))):
            raise InputTypeError(f"{name}: hx must be a Tensor, got {describe(states[0])}")
        for idx, s in enumerate(states):
            if s is not None and s.dim() not in (1, 2):
                what = "hidden" if len(states) == 1 else f"hx[{idx}]"
                raise InputError(f"{name}: Expected {what} to be 1D or 2D, got {s.dim()}D instead")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got {x.shape[1]} expected "
                               f"{self.input_size}")
        check_dtype(name, x, self.weight_ih)
        out = []
        for idx, s in enumerate(states):
            if s is None:
                s = zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
            elif not batched:
                s = s.unsqueeze(0)
            if s.dim() != 2 or s.shape[0] != x.shape[0]:
                raise RuntimeError(f"{name}: Input batch size {x.shape[0]} doesn't match hidden{idx} batch size "
                                   f"{s.shape[0] if s.dim() == 2 else tuple(s.shape)}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"{name}: hidden{idx} has inconsistent hidden_size: got {s.shape[1]}, expected "
                                   f"{self.hidden_size}")
            out.append(s)
        return x, tuple(out), batched

    def _gi(self, x):
        return F.linear(x, self.weight_ih, self.bias_ih)


class RNNCell(RNNCellBase):
    """``h' = nonlinearity(W_ih x + b_ih + W_hh h + b_hh)``, nonlinearity ``'tanh'`` or ``'relu'`` (PyTorch's)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in NONLINEARITIES:
            raise InputError(f"RNNCell: Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, (hx,))
        (h,) = rnn_step(self._gi(x), (h,), self.weight_hh, self.bias_hh, NONLINEARITIES[self.nonlinearity])
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step (gates i, f, g, o as PyTorch's); ``forward(input, (h, c))`` returns ``(h', c')``."""

    num_chunks = 4

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        # both states or neither: a None among them is not taken for zeros
        if hx is not None and not (isinstance(hx, (tuple, list)) and len(hx) == 2
                                   and all(isinstance(h, Tensor) for h in hx)):
            raise InputTypeError(f"LSTMCell: hx must be a tuple (h_0, c_0) of two tensors, got {describe(hx)}")
        x, state, batched = self._prepare(input, (None, None) if hx is None else tuple(hx))
        h, c = lstm_step(self._gi(x), state, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (gates r, z, n; PyTorch's ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``)."""

    num_chunks = 3

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, (hx,))
        (h,) = gru_step(self._gi(x), (h,), self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
