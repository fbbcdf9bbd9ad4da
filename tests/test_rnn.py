"""Recurrent layers (nn.RNN/LSTM/GRU, the cells) and nn.utils.rnn: outputs and every gradient against a float64
NumPy reference written from PyTorch's equations (gradients by central differences of that reference),
gradcheck, PyTorch's state-dict keys, packed sequences against per-sequence runs, errors, and CUDA vs CPU."""
import numpy as np
import pytest

import minifused as mf
from minifused import nn
from minifused.nn.utils import rnn as R
from minifused.testing import gradcheck

F64 = mf.float64


def t(a, rg=False, device="cpu"):
    return mf.tensor(np.array(a, np.float64), requires_grad=rg, device=device)


def arr(x):
    return np.asarray(x._data) if hasattr(x, "_data") else np.asarray(x)


# ---------------------------------------------------------------- the NumPy reference
def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def ref_step(kind, x, state, p):
    """One step of PyTorch's equations; ``kind`` 'tanh', 'relu', 'lstm' or 'gru'; p holds numpy parameters."""
    gi = x @ p["weight_ih"].T + p.get("bias_ih", 0.0)
    gh = state[0] @ p["weight_hh"].T + p.get("bias_hh", 0.0)
    if kind == "tanh":
        return (np.tanh(gi + gh),)
    if kind == "relu":
        return (np.maximum(gi + gh, 0.0),)
    if kind == "lstm":
        i, f, g, o = np.split(gi + gh, 4, axis=-1)
        c = _sig(f) * state[1] + _sig(i) * np.tanh(g)
        h = _sig(o) * np.tanh(c)
        return (h @ p["weight_hr"].T if "weight_hr" in p else h, c)
    ir, iz, in_ = np.split(gi, 3, axis=-1)
    hr, hz, hn = np.split(gh, 3, axis=-1)
    r, z = _sig(ir + hr), _sig(iz + hz)
    n = np.tanh(in_ + r * hn)
    return ((1 - z) * n + z * state[0],)


def ref_layers(kind, params, x, states, num_layers, dirs):
    """x (T, B, I) time-major; states: arrays (L*D, B, size); params: per layer*direction dicts."""
    inp, finals = x, [[] for _ in states]
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            st = tuple(s[k] for s in states)
            ys = [None] * len(inp)
            for step in (reversed(range(len(inp))) if d else range(len(inp))):
                st = ref_step(kind, inp[step], st, params[k])
                ys[step] = st[0]
            outs.append(np.stack(ys))
            for i, s in enumerate(st):
                finals[i].append(s)
        inp = np.concatenate(outs, -1)
    return inp, [np.stack(f) for f in finals]


def kind_of(m):
    if isinstance(m, (nn.LSTM, nn.LSTMCell)):
        return "lstm"
    if isinstance(m, (nn.GRU, nn.GRUCell)):
        return "gru"
    return getattr(m, "nonlinearity", "tanh")


def numeric_grads(f, arrays, eps=1e-6):
    """Central differences of the scalar f() with respect to every element of every array (perturbed in place)."""
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            v = a[i]
            a[i] = v + eps
            up = f()
            a[i] = v - eps
            down = f()
            a[i] = v
            g[i] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def module_params(m):
    """{name: numpy copy} of a module's parameters, and per layer*direction dicts keyed 'weight_ih', ..."""
    named = {n: arr(p).copy() for n, p in m.named_parameters()}
    if not isinstance(m, nn.RNNBase):
        return named, [named]
    return named, [{n.split("_l")[0]: named[n] for n in names} for names in m._all_weights]


def check_against_reference(m, x_np, states_np, run, ref):
    """Compare run()'s outputs and the gradients of a random projection of them with the reference's."""
    x = t(x_np, True)
    states = [t(s, True) for s in states_np]
    outs = run(x, states)
    named, per_layer = module_params(m)
    expect = ref(x_np, states_np, per_layer)
    for o, e in zip(outs, expect):
        assert o.shape == e.shape
        np.testing.assert_allclose(arr(o), e, rtol=1e-10, atol=1e-12)
    rng = np.random.default_rng(7)
    ws = [rng.standard_normal(e.shape) for e in expect]
    loss = None
    for o, w in zip(outs, ws):
        term = (o * t(w)).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    wrt = [x_np] + list(states_np) + list(named.values())
    numeric = numeric_grads(lambda: sum(float((e * w).sum()) for e, w in zip(ref(x_np, states_np, per_layer), ws)),
                            wrt)
    got = [x.grad] + [s.grad for s in states] + [p.grad for p in m.parameters()]
    for g, n in zip(got, numeric):
        np.testing.assert_allclose(arr(g), n, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- cells
CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("LSTMCell", {}), ("GRUCell", {}),
         ("GRUCell", {"bias": False})]


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("name,kw", CELLS)
def test_cell_against_reference(name, kw, batched):
    mf.manual_seed(0)
    cell = getattr(nn, name)(3, 4, dtype=F64, **kw)
    rng = np.random.default_rng(1)
    lead = (2,) if batched else ()
    x = rng.standard_normal(lead + (3,))
    n_states = 2 if name == "LSTMCell" else 1
    states = [rng.standard_normal(lead + (4,)) for _ in range(n_states)]

    def run(x, st):
        out = cell(x, tuple(st)) if n_states == 2 else cell(x, st[0])
        return list(out) if n_states == 2 else [out]

    def ref(x, st, params):
        return list(ref_step(kind_of(cell), x, tuple(st), params[0]))

    check_against_reference(cell, x, states, run, ref)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_default_state_and_init(name):
    cell = getattr(nn, name)(5, 6)
    chunks = {"RNNCell": 1, "LSTMCell": 4, "GRUCell": 3}[name]
    assert [tuple(p.shape) for p in cell.parameters()] == [(6 * chunks, 5), (6 * chunks, 6), (6 * chunks,)] * 1 + \
        [(6 * chunks,)]
    assert list(cell.state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    bound = 1 / np.sqrt(6)
    assert all(np.abs(arr(p)).max() <= bound for p in cell.parameters())
    x = mf.randn(2, 5)
    zero = mf.zeros(2, 6)
    a = cell(x)
    b = cell(x, (zero, zero) if name == "LSTMCell" else zero)
    for u, v in zip(a if name == "LSTMCell" else [a], b if name == "LSTMCell" else [b]):
        np.testing.assert_array_equal(arr(u), arr(v))
    assert list(getattr(nn, name)(5, 6, bias=False).state_dict()) == ["weight_ih", "weight_hh"]


# ---------------------------------------------------------------- multi-layer modules
CONFIGS = [  # (num_layers, bidirectional, batch_first, bias, batched, proj_size)
    (2, True, False, True, True, 0),
    (2, False, True, True, True, 0),
    (1, True, True, False, True, 0),
    (2, True, False, True, False, 0),
]
MODULES = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("GRU", {}), ("LSTM", {})]


def layer_case(name, kw, config, seed=0):
    layers, bi, bf, bias, batched, proj = config
    if proj:
        kw = dict(kw, proj_size=proj)
    mf.manual_seed(seed)
    m = getattr(nn, name)(3, 4, layers, bias=bias, batch_first=bf, bidirectional=bi, dtype=F64, **kw)
    return m, layers, (2 if bi else 1), bf, batched


def run_layer_case(name, kw, config):
    m, layers, dirs, bf, batched = layer_case(name, kw, config)
    T, B = 4, 2
    rng = np.random.default_rng(2)
    shape = ((B, T, 3) if bf else (T, B, 3)) if batched else (T, 3)
    x = rng.standard_normal(shape)
    sizes = m._state_sizes()
    states = [rng.standard_normal((layers * dirs,) + ((B,) if batched else ()) + (s,)) for s in sizes]

    def run(x, st):
        out, h = m(x, tuple(st) if name == "LSTM" else st[0])
        return [out] + (list(h) if name == "LSTM" else [h])

    def ref(x, st, params):
        xt = x if not batched else (x.transpose(1, 0, 2) if bf else x)
        xt = xt if batched else xt[:, None]
        st = [s if batched else s[:, None] for s in st]
        out, finals = ref_layers(kind_of(m), params, xt, st, layers, dirs)
        if not batched:
            return [out[:, 0]] + [f[:, 0] for f in finals]
        return [out.transpose(1, 0, 2) if bf else out] + finals

    check_against_reference(m, x, states, run, ref)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name,kw", MODULES)
def test_layers_against_reference(name, kw, config):
    run_layer_case(name, kw, config)


@pytest.mark.parametrize("config", [(2, True, False, True, True, 2), (1, False, True, False, False, 3)])
def test_lstm_proj_against_reference(config):
    run_layer_case("LSTM", {}, config)


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_default_states_are_zeros(name):
    m = getattr(nn, name)(3, 5, 2, bidirectional=True, **({"proj_size": 2} if name == "LSTM" else {}))
    x = mf.randn(4, 2, 3)
    out, h = m(x)
    sizes = m._state_sizes()
    zeros = [mf.zeros(4, 2, s) for s in sizes]
    out2, h2 = m(x, tuple(zeros) if name == "LSTM" else zeros[0])
    np.testing.assert_array_equal(arr(out), arr(out2))
    assert out.shape == (4, 2, 2 * sizes[0])
    for a, b, s in zip(h if name == "LSTM" else [h], h2 if name == "LSTM" else [h2], sizes):
        assert a.shape == (4, 2, s)
        np.testing.assert_array_equal(arr(a), arr(b))


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell", "RNN", "GRU", "LSTM"])
def test_gradcheck(name):
    mf.manual_seed(3)
    rng = np.random.default_rng(3)
    if name.endswith("Cell"):
        m = getattr(nn, name)(2, 3, dtype=F64)
        x, h = t(rng.standard_normal((2, 2)), True), t(rng.standard_normal((2, 3)), True)
        params = list(m.parameters())
        if name == "LSTMCell":
            c = t(rng.standard_normal((2, 3)), True)
            assert gradcheck(lambda x, h, c, *p: m(x, (h, c)), (x, h, c, *params))
        else:
            assert gradcheck(lambda x, h, *p: m(x, h), (x, h, *params))
        return
    m = getattr(nn, name)(2, 3, 2, bidirectional=True, dtype=F64, **({"proj_size": 2} if name == "LSTM" else {}))
    x = t(rng.standard_normal((3, 2, 2)), True)
    hs = [t(rng.standard_normal((4, 2, s)), True) for s in m._state_sizes()]
    params = list(m.parameters())
    if name == "LSTM":
        assert gradcheck(lambda x, h, c, *p: (lambda o: (o[0], *o[1]))(m(x, (h, c))), (x, *hs, *params))
    else:
        assert gradcheck(lambda x, h, *p: m(x, h), (x, hs[0], *params))


# Keys read from torch 2.x CPU: list(torch.nn.LSTM(4, 3, 2, bidirectional=True, proj_size=2).state_dict()),
# list(torch.nn.GRU(4, 3, 2, bias=False).state_dict()), list(torch.nn.RNN(4, 3).state_dict())
TORCH_KEYS = {
    "LSTM": ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0", "weight_ih_l0_reverse",
             "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse", "weight_hr_l0_reverse",
             "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1", "weight_hr_l1", "weight_ih_l1_reverse",
             "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse", "weight_hr_l1_reverse"],
    "GRU": ["weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"],
    "RNN": ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"],
}


def test_state_dict_keys_and_shapes_match_pytorch():
    lstm = nn.LSTM(4, 3, 2, bidirectional=True, proj_size=2)
    assert list(lstm.state_dict()) == TORCH_KEYS["LSTM"]
    assert list(nn.GRU(4, 3, 2, bias=False).state_dict()) == TORCH_KEYS["GRU"]
    assert list(nn.RNN(4, 3).state_dict()) == TORCH_KEYS["RNN"]
    sd = lstm.state_dict()
    assert sd["weight_ih_l0"].shape == (12, 4) and sd["weight_hh_l0"].shape == (12, 2)
    assert sd["weight_ih_l1"].shape == (12, 4) and sd["weight_hr_l1_reverse"].shape == (2, 3)
    assert [len(w) for w in lstm.all_weights] == [5] * 4 and lstm.all_weights[1][0] is lstm.weight_ih_l0_reverse
    assert lstm.flatten_parameters() is None
    assert repr(lstm) == "LSTM(4, 3, proj_size=2, num_layers=2, bidirectional=True)"
    bound = 1 / np.sqrt(3)
    assert all(np.abs(arr(p)).max() <= bound for p in lstm.parameters())
    clone = nn.LSTM(4, 3, 2, bidirectional=True, proj_size=2)
    clone.load_state_dict(lstm.state_dict())
    x = mf.randn(3, 2, 4)
    np.testing.assert_array_equal(arr(clone(x)[0]), arr(lstm(x)[0]))


def test_dropout_between_layers():
    mf.manual_seed(0)
    m = nn.GRU(3, 8, 2, dropout=0.5)
    x = mf.randn(5, 2, 3)
    m.eval()
    a, b = m(x)[0], m(x)[0]
    np.testing.assert_array_equal(arr(a), arr(b))
    m.train()
    c = m(x)[0]
    assert not np.allclose(arr(a), arr(c))
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.LSTM(3, 4, 1, dropout=0.3)


# ---------------------------------------------------------------- packed sequences
def test_pad_sequence():
    seqs = [t([[1.0], [2.0]]), t([[3.0], [4.0], [5.0]]), t([[6.0]])]
    out = R.pad_sequence(seqs, padding_value=-1.0)
    assert out.shape == (3, 3, 1)
    np.testing.assert_array_equal(arr(out)[..., 0], [[1, 3, 6], [2, 4, -1], [-1, 5, -1]])
    left = R.pad_sequence(seqs, batch_first=True, padding_side="left")
    np.testing.assert_array_equal(arr(left)[..., 0], [[0, 1, 2], [3, 4, 5], [0, 0, 6]])
    with pytest.raises(RuntimeError, match="empty list"):
        R.pad_sequence([])
    with pytest.raises(RuntimeError, match="padding_side"):
        R.pad_sequence(seqs, padding_side="middle")


@pytest.mark.gpu
def test_packed_batch_sizes_and_padded_lengths_stay_on_the_cpu_for_a_cuda_input():
    """PyTorch keeps batch_sizes and pad_packed_sequence's lengths on the CPU whatever the data's device (an LSTM
    reads them on the host); the default device must not move them."""
    x = mf.arange(4 * 3 * 2, dtype=mf.float32, device="cuda").reshape(4, 3, 2)
    with mf.device("cuda"):  # (the default device, whatever MINIFUSED_DEVICE says)
        packed = R.pack_padded_sequence(x, mf.tensor([2, 4, 1]), enforce_sorted=False)
        out, lens = R.pad_packed_sequence(packed)
    assert packed.batch_sizes.device.type == "cpu" and packed.batch_sizes.tolist() == [3, 2, 1, 1]
    assert packed.data.device.type == "cuda" and packed.sorted_indices.device.type == "cuda"
    assert lens.device.type == "cpu" and lens.tolist() == [2, 4, 1] and out.device.type == "cuda"


def test_pack_and_pad_roundtrip():
    x = t(np.arange(4 * 5 * 2).reshape(4, 5, 2), True)
    lengths = [2, 4, 3, 1, 2]
    packed = R.pack_padded_sequence(x, lengths, enforce_sorted=False)
    # values read from torch: pack_padded_sequence(x, [2, 4, 3, 1, 2], enforce_sorted=False)
    assert arr(packed.batch_sizes).tolist() == [5, 4, 2, 1]
    assert arr(packed.sorted_indices).tolist() == [1, 2, 0, 4, 3]
    assert arr(packed.unsorted_indices).tolist() == [2, 0, 1, 4, 3]
    out, lens = R.pad_packed_sequence(packed, total_length=6)
    assert arr(lens).tolist() == lengths and out.shape == (6, 5, 2)
    mask = (np.arange(6)[:, None] < np.array(lengths)[None, :])[..., None]
    np.testing.assert_array_equal(arr(out), np.where(mask, np.pad(arr(x), ((0, 2), (0, 0), (0, 0))), 0))
    out.sum().backward()
    np.testing.assert_array_equal(arr(x.grad), np.broadcast_to(mask[:4], x.shape).astype(float))
    seqs = [t(np.ones((n, 2)) * n) for n in (3, 1, 2)]
    for a, b in zip(R.unpack_sequence(R.pack_sequence(seqs, enforce_sorted=False)), seqs):
        np.testing.assert_array_equal(arr(a), arr(b))
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        R.pack_padded_sequence(x, lengths)
    with pytest.raises(RuntimeError, match="greater than 0"):
        R.pack_padded_sequence(x, [2, 4, 3, 0, 2], enforce_sorted=False)


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_packed_equals_per_sequence_runs(name, batch_first):
    mf.manual_seed(4)
    kw = {"proj_size": 2} if name == "LSTM" else {}
    m = getattr(nn, name)(3, 4, 2, bidirectional=True, batch_first=batch_first, dtype=F64, **kw)
    rng = np.random.default_rng(5)
    lengths = [3, 5, 1, 4]
    seqs = [rng.standard_normal((n, 3)) for n in lengths]
    hs = [rng.standard_normal((4, len(lengths), s)) for s in m._state_sizes()]
    padded = R.pad_sequence([t(s) for s in seqs], batch_first=batch_first)
    packed = R.pack_padded_sequence(padded, lengths, batch_first=batch_first, enforce_sorted=False)
    h_in = [t(h) for h in hs]
    out, h = m(packed, tuple(h_in) if name == "LSTM" else h_in[0])
    assert isinstance(out, R.PackedSequence)
    out_pad, out_len = R.pad_packed_sequence(out, batch_first=batch_first)
    assert arr(out_len).tolist() == lengths
    finals = list(h) if name == "LSTM" else [h]
    for b, n in enumerate(lengths):
        state = [t(hh[:, b]) for hh in hs]
        ref_out, ref_h = m(t(seqs[b]), tuple(state) if name == "LSTM" else state[0])
        got = arr(out_pad)[b, :n] if batch_first else arr(out_pad)[:n, b]
        np.testing.assert_allclose(got, arr(ref_out), rtol=1e-12, atol=1e-12)
        assert not arr(out_pad)[b, n:].any() if batch_first else not arr(out_pad)[n:, b].any()
        for f, r in zip(finals, list(ref_h) if name == "LSTM" else [ref_h]):
            np.testing.assert_allclose(arr(f)[:, b], arr(r), rtol=1e-12, atol=1e-12)


def test_packed_gradients_flow_to_input_and_states():
    mf.manual_seed(6)
    m = nn.LSTM(2, 3, dtype=F64)
    x = t(np.random.default_rng(0).standard_normal((4, 3, 2)), True)
    h0, c0 = t(np.zeros((1, 3, 3)), True), t(np.zeros((1, 3, 3)), True)
    packed = R.pack_padded_sequence(x, [4, 2, 1])
    assert packed.sorted_indices is None
    out, (h, c) = m(packed, (h0, c0))
    (out.data.sum() + h.sum() + c.sum()).backward()
    assert not arr(x.grad)[2:, 1].any() and not arr(x.grad)[1:, 2].any() and arr(x.grad)[:, 0].all()
    assert arr(h0.grad).all() and arr(c0.grad).all()


# ---------------------------------------------------------------- errors (PyTorch's exception types)
def test_errors():
    lstm = nn.LSTM(4, 3, 2)
    with pytest.raises(RuntimeError, match="input_size. Expected 4, got 5"):
        lstm(mf.randn(3, 2, 5))
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D"):
        lstm(mf.randn(1, 3, 2, 4))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 2, 3\), got \[1, 2, 3\]"):
        lstm(mf.randn(3, 2, 4), (mf.zeros(1, 2, 3), mf.zeros(2, 2, 3)))
    with pytest.raises(RuntimeError, match="hx and cx should also be 3-D"):
        lstm(mf.randn(3, 2, 4), (mf.zeros(2, 3), mf.zeros(2, 3)))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 3\), got \[1, 3, 3\]"):
        nn.GRU(4, 3)(mf.randn(3, 2, 4), mf.zeros(1, 3, 3))
    with pytest.raises(RuntimeError, match="unbatched 2-D input, hx should also be 2-D"):
        nn.RNN(4, 3)(mf.randn(3, 4), mf.zeros(1, 1, 3))
    with pytest.raises(ValueError, match="dtype"):
        nn.GRU(4, 3)(mf.randn(3, 2, 4, dtype=F64))
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNN(4, 3, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="only supported for LSTM"):
        nn.GRU(4, 3, proj_size=1)
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        nn.LSTM(4, 3, proj_size=3)
    with pytest.raises(ValueError, match="dropout should be a number"):
        nn.LSTM(4, 3, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.GRU(4, 0)
    cell = nn.LSTMCell(4, 3)
    with pytest.raises(RuntimeError, match="inconsistent input_size: got 5 expected 4"):
        cell(mf.randn(2, 5))
    with pytest.raises(RuntimeError, match="batch size 2 doesn't match hidden0 batch size 3"):
        cell(mf.randn(2, 4), (mf.zeros(3, 3), mf.zeros(3, 3)))
    with pytest.raises(RuntimeError, match="hidden1 has inconsistent hidden_size: got 4, expected 3"):
        cell(mf.randn(2, 4), (mf.zeros(2, 3), mf.zeros(2, 4)))
    with pytest.raises(ValueError, match="GRUCell: Expected input to be 1D or 2D, got 3D"):
        nn.GRUCell(4, 3)(mf.randn(1, 2, 4))


# ---------------------------------------------------------------- CUDA vs CPU
@pytest.mark.gpu
@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_cuda_matches_cpu(name):
    mf.manual_seed(8)
    kw = {"proj_size": 3} if name == "LSTM" else {}
    cpu = getattr(nn, name)(5, 6, 2, bidirectional=True, batch_first=True, device="cpu", **kw)
    gpu = getattr(nn, name)(5, 6, 2, bidirectional=True, batch_first=True, device="cuda", **kw)
    gpu.load_state_dict({k: v.to("cuda") for k, v in cpu.state_dict().items()})
    x_np = np.random.default_rng(9).standard_normal((3, 7, 5)).astype(np.float32)
    outs = {}
    for dev, m in (("cpu", cpu), ("cuda", gpu)):
        x = mf.tensor(x_np, device=dev, requires_grad=True)
        out, h = m(x)
        finals = list(h) if name == "LSTM" else [h]
        loss = out.sum() + sum((f * f).sum() for f in finals)
        loss.backward()
        outs[dev] = [out, *finals, x.grad, *[p.grad for p in m.parameters()]]
    for a, b in zip(outs["cpu"], outs["cuda"]):
        np.testing.assert_allclose(arr(b.to("cpu")), arr(a), rtol=1e-4, atol=1e-5)


def test_pad_and_unpad_sequence_dtype_and_lengths():
    from minifused.nn.utils import rnn as R

    assert R.pad_sequence([mf.ones(2), mf.ones(3, dtype=mf.float64)]).dtype == mf.float32
    with pytest.raises(ValueError, match="2 lengths for a batch of 3"):
        R.unpad_sequence(mf.zeros(3, 3, 2), mf.tensor([3, 2]))
    parts = R.unpad_sequence(mf.zeros(3, 3, 2), mf.tensor([3, 2, 1]))
    assert [p.shape[0] for p in parts] == [3, 2, 1]
