"""Multi-layer recurrent modules ``RNN``, ``LSTM`` and ``GRU`` with PyTorch's signatures, parameter names and
shapes: a Python loop over time steps of the one-step equations in ``rnn_cells`` (autograd derives the backward).
Inputs may be padded tensors (batched or not, ``batch_first`` or not) or ``nn.utils.rnn.PackedSequence``."""
from __future__ import annotations

import numbers
import warnings

from .. import backend
from .. import functional as F
from ..ops import cat, split, stack, zeros
from ..ops._common import autocast_off
from ..tensor import Tensor
from .module import Module
from .rnn_cells import (NONLINEARITIES, check_dtype, describe, gru_step, lstm_step, new_parameter, rnn_step,
                        uniform_init)
from .utils_rnn import PackedSequence
from ..backend import InputError, InputTypeError

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _run_direction(step, gi, batch_sizes, state0, reverse):
    """One layer in one direction over ``gi`` (the input projections of all steps, rows grouped by time step as
    in a packed sequence: ``batch_sizes[t]`` rows at step t, the longest sequences first). Returns the outputs
    (same row layout) and the state after each sequence's own last step."""
    chunks = split(gi, list(batch_sizes), 0) if len(batch_sizes) > 1 else [gi]
    outs = [None] * len(batch_sizes)
    full = state0[0].shape[0]
    if not reverse:
        state, tails = state0, []
        for t, bs in enumerate(batch_sizes):
            if bs < state[0].shape[0]:  # the shortest sequences ended: their state is final, set it aside
                tails.append(tuple(s[bs:] for s in state))
                state = tuple(s[:bs] for s in state)
            state = step(chunks[t], state)
            outs[t] = state[0]
        if tails:  # rows set aside later belong before those set aside earlier
            state = tuple(cat([s] + [tail[i] for tail in reversed(tails)], 0) for i, s in enumerate(state))
    else:
        # backwards in time a sequence starts at its own last step, from its initial state
        state = state0 if batch_sizes[-1] == full else tuple(s[:batch_sizes[-1]] for s in state0)
        for t in reversed(range(len(batch_sizes))):
            bs, cur = batch_sizes[t], state[0].shape[0]
            if bs > cur:
                state = tuple(cat([s, s0[cur:bs]], 0) for s, s0 in zip(state, state0))
            state = step(chunks[t], state)
            outs[t] = state[0]
    return (outs[0] if len(outs) == 1 else cat(outs, 0)), state


def _autocast_half(x):
    """Whether ``x`` runs as PyTorch's cuDNN RNN runs it under autocast: cast to float16 (input, states and
    weights), whatever the region's dtype."""
    return (x.device.type == "cuda" and backend.autocast_dtypes().get("cuda") is not None
            and x.dtype in (backend.float32, backend.float16, backend.bfloat16))


class RNNBase(Module):
    """Shared parts of ``RNN``, ``LSTM`` and ``GRU``: parameters ``weight_ih_l{k}``, ``weight_hh_l{k}``,
    ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``weight_hr_l{k}`` (LSTM projection), ``_reverse`` for the backward
    direction, registered in PyTorch's order; all U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(mode, mode)
        if mode not in _GATES:
            raise InputError(f"{name}: Unrecognized RNN mode: {mode}")
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise InputError(f"{name}: dropout should be a number in range [0, 1] representing the probability of "
                             f"an element being zeroed, got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=3)
        for what, v, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                              ("input_size", input_size, int), ("hidden_size", hidden_size, int),
                              ("num_layers", num_layers, int), ("proj_size", proj_size, int)):
            if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
                raise InputTypeError(f"{name}: {what} should be of type {kind.__name__}, got: {type(v).__name__}")
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if v <= 0:
                raise InputError(f"{name}: {what} must be greater than zero, got {v}")
        if proj_size < 0:
            raise InputError(f"{name}: proj_size should be a positive integer or zero to disable projections, "
                             f"got {proj_size}")
        if proj_size >= hidden_size:
            raise InputError(f"{name}: proj_size has to be smaller than hidden_size, got proj_size={proj_size} "
                             f"and hidden_size={hidden_size}")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bool(bidirectional), proj_size
        dirs, gates, real_hidden = self._dirs, _GATES[mode] * hidden_size, proj_size or hidden_size
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp = backend.xp(dev)
        self._flat_weights_names, self._all_weights = [], []
        with backend.on_device(dev):
            for layer in range(num_layers):
                for direction in range(dirs):
                    layer_in = input_size if layer == 0 else real_hidden * dirs
                    shapes = [("weight_ih", (gates, layer_in)), ("weight_hh", (gates, real_hidden))]
                    if bias:
                        shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                    if proj_size:
                        shapes += [("weight_hr", (proj_size, hidden_size))]
                    suffix = f"_l{layer}" + ("_reverse" if direction else "")
                    names = [kind + suffix for kind, _ in shapes]
                    for pname, (_, shape) in zip(names, shapes):
                        setattr(self, pname, new_parameter(shape, dtype, xp))
                    self._flat_weights_names.extend(names)
                    self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _dirs(self):
        return 2 if self.bidirectional else 1

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters as PyTorch lists them: one list per layer and direction."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """A no-op: PyTorch uses it to pack weights for cuDNN; here each step reads the parameters as they are."""

    def reset_parameters(self):
        uniform_init(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        for key, default in (("num_layers", 1), ("bias", True), ("batch_first", False), ("dropout", 0.0),
                             ("bidirectional", False)):
            if getattr(self, key) != default:
                s += f", {key}={getattr(self, key)}"
        return s

    # ------------------------------------------------------------ the forward
    def _state_sizes(self):
        return (self.hidden_size,)

    def _step(self, params):
        w_hh, b_hh = params["weight_hh"], params.get("bias_hh")
        if self.mode == "GRU":
            return lambda gi, state: gru_step(gi, state, w_hh, b_hh)
        act = NONLINEARITIES["relu" if self.mode == "RNN_RELU" else "tanh"]
        return lambda gi, state: rnn_step(gi, state, w_hh, b_hh, act)

    def _layer_params(self, index):
        names = self._all_weights[index]
        return {n.split("_l")[0]: getattr(self, n) for n in names}

    def _hidden_list(self, hx):
        """``hx`` as a list of its state tensors (None: no states given)."""
        if hx is None:
            return None
        if not isinstance(hx, Tensor):
            raise InputTypeError(f"{type(self).__name__}: hx must be a Tensor, got {describe(hx)}")
        return [hx]

    def _hidden_result(self, states):
        return states[0]

    def _check_hidden_dims(self, hs, batched):
        want = 3 if batched else 2
        if hs[0].dim() != want:
            raise RuntimeError(f"{type(self).__name__}: For {'batched 3-D' if batched else 'unbatched 2-D'} input, "
                               f"hx should also be {want}-D but got {hs[0].dim()}-D tensor")

    def _check_hidden_shapes(self, hs, batch):
        rows = self.num_layers * self._dirs
        for i, (h, size) in enumerate(zip(hs, self._state_sizes())):
            expected = (rows, batch, size)
            if tuple(h.shape) != expected:
                what = "hidden" if len(hs) == 1 else f"hidden[{i}]"
                raise RuntimeError(f"{type(self).__name__}: Expected {what} size {expected}, got {list(h.shape)}")

    def forward(self, input, hx=None):
        name = type(self).__name__
        packed = isinstance(input, PackedSequence)
        hs = self._hidden_list(hx)
        if packed:
            x, batch_sizes_t, sorted_indices, unsorted_indices = input
            batch_sizes = [int(b) for b in backend.to_device(batch_sizes_t._data, backend.CPU).tolist()]
            if x.dim() != 2:
                raise RuntimeError(f"{name}: packed input data must have 2 dimensions, got {x.dim()}")
            batch, batched = batch_sizes[0], True
            if hs is not None and sorted_indices is not None:  # hx is in the caller's (unsorted) batch order
                hs = [h.index_select(1, sorted_indices) for h in hs]
        else:
            if not isinstance(input, Tensor):
                raise InputTypeError(f"{name}: input must be a Tensor or a PackedSequence, got {type(input).__name__}")
            if input.dim() not in (2, 3):
                raise InputError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D tensor instead")
            batched, batch_dim = input.dim() == 3, (0 if self.batch_first else 1)
            x = input if batched else input.unsqueeze(batch_dim)
            if hs is not None:
                self._check_hidden_dims(hs, batched)
                if not batched:
                    hs = [h.unsqueeze(1) for h in hs]
            if self.batch_first:
                x = x.transpose(0, 1)
            steps, batch = x.shape[0], x.shape[1]
            batch_sizes = [batch] * steps
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {x.shape[-1]}")
        if not _autocast_half(x):
            check_dtype(name, x, self.weight_ih_l0)
        if not batch_sizes:
            raise RuntimeError(f"{name}: expected a sequence of at least one time step, got 0")
        if hs is None:
            rows = self.num_layers * self._dirs
            hs = [zeros(rows, batch, size, dtype=x.dtype, device=x.device) for size in self._state_sizes()]
        self._check_hidden_shapes(hs, batch)
        y, finals = self._layers(x if packed else x.reshape(len(batch_sizes) * batch, self.input_size),
                                 batch_sizes, hs)
        if packed:
            if unsorted_indices is not None:
                finals = [f.index_select(1, unsorted_indices) for f in finals]
            return PackedSequence(y, batch_sizes_t, sorted_indices, unsorted_indices), self._hidden_result(finals)
        y = y.reshape(len(batch_sizes), batch, y.shape[-1])
        if self.batch_first:
            y = y.transpose(0, 1)
        if not batched:
            y, finals = y.squeeze(batch_dim), [f.squeeze(1) for f in finals]
        return y, self._hidden_result(finals)

    def _layers(self, x, batch_sizes, hs):
        """All layers over the rows ``x`` (grouped by time step); returns the last layer's outputs and the final
        states, each stacked (num_layers * directions, batch, size)."""
        cuda = x.device.type == "cuda"
        if _autocast_half(x):
            with autocast_off():
                return self._run_layers(x, batch_sizes, hs, backend.float16, cuda)
        return self._run_layers(x, batch_sizes, hs, x.dtype, cuda)

    def _run_layers(self, x, batch_sizes, hs, dtype, cuda):
        finals = [[] for _ in hs]
        # PyTorch's cuda RNNs (cuDNN) compute 16-bit layers in float32 and round only the results (the last layer's
        # outputs and the final states): rounding a pre-activation's parts (its two GEMMs, their sum, the layer
        # below's outputs) to 16 bits can flip a ReLU where they nearly cancel
        wide = dtype in (backend.float16, backend.bfloat16) and cuda
        if wide:  # (under autocast: rounded to float16 first, as PyTorch casts them)
            x, hs = x.to(dtype).float(), [h.to(dtype).float() for h in hs]
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:  # between layers only, as PyTorch
                x = F.dropout(x, self.dropout, True)
            outs = []
            for direction in range(self._dirs):
                k = layer * self._dirs + direction
                params = self._layer_params(k)
                state0 = tuple(h[k] for h in hs)
                if wide:
                    params = {n: p.to(dtype).float() for n, p in params.items()}
                gi = F.linear(x, params["weight_ih"], params.get("bias_ih"))  # all time steps in one GEMM
                y, state = _run_direction(self._step(params), gi, batch_sizes, state0, direction)
                outs.append(y)
                for i, s in enumerate(state):
                    finals[i].append(s.to(dtype))
            x = outs[0] if len(outs) == 1 else cat(outs, 1)
        return x.to(dtype), [stack(f, 0) for f in finals]


class RNN(RNNBase):
    """Multi-layer Elman RNN, ``h_t = nonlinearity(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)`` (PyTorch's ``nn.RNN``);
    returns ``(output, h_n)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, **kwargs):
        if "proj_size" in kwargs:
            raise InputError("RNN: proj_size argument is only supported for LSTM, not RNN or GRU")
        if kwargs:
            raise InputTypeError(f"RNN: unexpected arguments {sorted(kwargs)}")
        if nonlinearity not in NONLINEARITIES:
            raise InputError(f"RNN: Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class GRU(RNNBase):
    """Multi-layer GRU (gates r, z, n as PyTorch's ``nn.GRU``); returns ``(output, h_n)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, **kwargs):
        if "proj_size" in kwargs:
            raise InputError("GRU: proj_size argument is only supported for LSTM, not RNN or GRU")
        if kwargs:
            raise InputTypeError(f"GRU: unexpected arguments {sorted(kwargs)}")
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


class LSTM(RNNBase):
    """Multi-layer LSTM (gates i, f, g, o; optional projection ``proj_size``, as PyTorch's ``nn.LSTM``);
    ``forward(input, (h_0, c_0))`` returns ``(output, (h_n, c_n))``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)

    def _state_sizes(self):
        return (self.proj_size or self.hidden_size, self.hidden_size)

    def _step(self, params):
        w_hh, b_hh, w_hr = params["weight_hh"], params.get("bias_hh"), params.get("weight_hr")
        return lambda gi, state: lstm_step(gi, state, w_hh, b_hh, w_hr)

    def _hidden_list(self, hx):
        if hx is None:
            return None
        if not (isinstance(hx, (tuple, list)) and len(hx) == 2 and all(isinstance(h, Tensor) for h in hx)):
            raise InputTypeError(f"LSTM: hx must be a tuple (h_0, c_0) of two Tensors, got {describe(hx)}")
        return list(hx)

    def _hidden_result(self, states):
        return tuple(states)

    def _check_hidden_dims(self, hs, batched):
        want = 3 if batched else 2
        if hs[0].dim() != want or hs[1].dim() != want:
            raise RuntimeError(f"LSTM: For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx and cx should "
                               f"also be {want}-D but got ({hs[0].dim()}-D, {hs[1].dim()}-D) tensors")
