"""Recurrent cells and layers as sequence-model code drives them: states passed as tuples or lists, and the
errors for states of the wrong kind (which name what came)."""
import numpy as np
import pytest

import minifused as mf
from minifused import nn


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _lstm_reference(cell, x, h, c):
    """PyTorch's LSTMCell rule in float64: gates (i, f, g, o) = W_ih x + b_ih + W_hh h + b_hh."""
    w_ih, w_hh, b_ih, b_hh = (getattr(cell, n).detach().numpy().astype(np.float64)
                              for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    i, f, g, o = np.split(x @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c), c


def test_lstm_cell_takes_its_states_as_a_tuple_or_a_list():
    mf.manual_seed(0)
    cell = nn.LSTMCell(3, 4).double()
    rng = np.random.default_rng(0)
    x, h, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    want_h, want_c = _lstm_reference(cell, x, h, c)
    for states in ((mf.from_numpy(h), mf.from_numpy(c)), [mf.from_numpy(h), mf.from_numpy(c)]):
        got_h, got_c = cell(mf.from_numpy(x), states)
        np.testing.assert_allclose(got_h.detach().numpy(), want_h, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got_c.detach().numpy(), want_c, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("hx, came", [
    ((mf.zeros(2, 4), None), r"tuple of \(Tensor, NoneType\)"),  # once taken for a zero cell state
    ((mf.zeros(2, 4), 0.0), r"tuple of \(Tensor, float\)"),
    ((mf.zeros(2, 4),), r"tuple of \(Tensor\)"),
    (mf.zeros(2, 4), "Tensor"),
])
def test_lstm_cell_refuses_states_that_are_not_two_tensors(hx, came):
    with pytest.raises(TypeError, match=r"LSTMCell: hx must be a tuple \(h_0, c_0\) of two tensors, got " + came):
        nn.LSTMCell(3, 4)(mf.zeros(2, 3), hx)


@pytest.mark.parametrize("cell", [nn.GRUCell(3, 4), nn.RNNCell(3, 4)], ids=["GRUCell", "RNNCell"])
def test_single_state_cells_refuse_a_tuple_by_name(cell):
    # an LSTM-style (h,) tuple; PyTorch's fails on hx.dim() with an AttributeError
    name = type(cell).__name__
    with pytest.raises(TypeError, match=rf"{name}: hx must be a Tensor, got tuple of \(Tensor\)"):
        cell(mf.zeros(2, 3), (mf.zeros(2, 4),))


def test_recurrent_layers_name_the_states_that_came():
    h = mf.zeros(1, 2, 4)
    with pytest.raises(TypeError, match=r"LSTM: hx must be a tuple \(h_0, c_0\) of two Tensors, got tuple of "
                                        r"\(Tensor, Tensor, Tensor\)"):
        nn.LSTM(3, 4)(mf.zeros(5, 2, 3), (h, h, h))
    with pytest.raises(TypeError, match=r"GRU: hx must be a Tensor, got list of \(Tensor\)"):
        nn.GRU(3, 4)(mf.zeros(5, 2, 3), [h])
