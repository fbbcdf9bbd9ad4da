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


@pytest.mark.parametrize("lengths", [[5, 3, 2], (5, 3, 2), mf.tensor([5, 3, 2]), mf.tensor([5.0, 3.0, 2.0]),
                                     [mf.tensor(5), mf.tensor(3), mf.tensor(2)]],
                         ids=["list", "tuple", "int64", "float", "0-d tensors"])
def test_pack_padded_sequence_takes_lengths_in_any_1d_form(lengths):
    packed = nn.utils.rnn.pack_padded_sequence(mf.zeros(5, 3, 2), lengths)
    # batch_sizes[t] = how many sequences are longer than t
    np.testing.assert_array_equal(packed.batch_sizes.numpy(), [(np.array([5, 3, 2]) > t).sum() for t in range(5)])


@pytest.mark.parametrize("lengths, dims", [([[5, 3, 2]], 2), (mf.tensor([[5, 3, 2]]), 2), (5, 0)])
def test_pack_padded_sequence_refuses_lengths_that_are_not_1d(lengths, dims):
    # they were flattened, so a batch of lengths one level too deep went through
    with pytest.raises(RuntimeError, match=f"pack_padded_sequence: 'lengths' argument should be a 1D CPU int64 "
                                           f"tensor, but got {dims}D"):
        nn.utils.rnn.pack_padded_sequence(mf.zeros(5, 3, 2), lengths)


def test_pack_sequence_of_nothing_names_itself():
    with pytest.raises(RuntimeError, match="pack_sequence: received an empty list of sequences"):
        nn.utils.rnn.pack_sequence([])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_last_offset_ends_the_last_bag(mode):
    # include_last_offset: offsets are CSR row pointers, bag i = [offsets[i], offsets[i + 1]); the entries past
    # offsets[-1] belong to no bag (PyTorch's sum mode, forward and backward; the last bag once ran to the end)
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((10, 4))
    text = np.array([1, 4, 2, 7, 7, 0, 3, 9, 5, 1, 2])
    offsets = [0, 3, 3, 8]
    bag = nn.EmbeddingBag.from_pretrained(mf.from_numpy(weight), freeze=False, mode=mode, include_last_offset=True)
    out = bag(mf.from_numpy(text), mf.tensor(offsets))
    reduce = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode]
    want = [reduce(weight[text[lo:hi]], 0) if hi > lo else np.zeros(4) for lo, hi in zip(offsets, offsets[1:])]
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-12)
    out.sum().backward()
    outside = sorted(set(text[8:]) - set(text[:8]))  # rows met only past the last offset
    assert np.all(bag.weight.grad.numpy()[outside] == 0), outside
