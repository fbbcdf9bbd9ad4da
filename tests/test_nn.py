"""nn.init, Dropout (fused mask on the tape), MSELoss, a custom Module that trains, state dicts."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import nn, optim
from minifused.kernels import dropout as KD
from minifused import backend


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    """Tests without an explicit device run the NumPy path, also on a GPU machine."""
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


# ---------------------------------------------------------------- init
def test_fans_and_gains():
    fan = nn.init._calculate_fan_in_and_fan_out
    assert fan(mf.empty(5, 3)) == (3, 5)
    assert fan(mf.empty(64, 32, 3, 3)) == (32 * 9, 64 * 9)
    with pytest.raises(ValueError, match="fewer than 2"):
        fan(mf.empty(4))
    assert nn.init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert nn.init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert nn.init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert nn.init.calculate_gain("conv2d") == 1
    with pytest.raises(ValueError, match="Unsupported nonlinearity swish"):
        nn.init.calculate_gain("swish")
    # PyTorch's private helpers, which code imports: the mode in any case, as PyTorch lower-cases it
    assert nn.init._calculate_correct_fan(mf.empty(64, 32, 3, 3), "FAN_OUT") == 64 * 9
    bound = math.sqrt(3) * math.sqrt(2 / (64 * 9))  # kaiming's relu gain over the fan_out
    w = nn.init.kaiming_uniform_(mf.empty(64, 32, 3, 3), mode="Fan_Out", nonlinearity="relu").numpy()
    assert bound * 0.99 <= np.abs(w).max() <= bound
    with pytest.raises(ValueError, match="not supported"):
        nn.init._calculate_correct_fan(mf.empty(2, 2), "fan")
    t = nn.init._no_grad_trunc_normal_(mf.empty(1000), 0.5, 1.0, 0.0, 1.0)
    assert 0.0 <= t.numpy().min() and t.numpy().max() <= 1.0


@pytest.mark.parametrize("fn,kw,bound,std", [
    (nn.init.kaiming_uniform_, dict(a=math.sqrt(5)), 1 / math.sqrt(400), None),
    (nn.init.kaiming_uniform_, dict(nonlinearity="relu"), math.sqrt(6 / 400), None),
    (nn.init.xavier_uniform_, dict(), math.sqrt(6 / 700), None),
    (nn.init.kaiming_normal_, dict(nonlinearity="relu", mode="fan_out"), None, math.sqrt(2 / 300)),
    (nn.init.xavier_normal_, dict(gain=2.0), None, 2 * math.sqrt(2 / 700)),
])
def test_init_scales(fn, kw, bound, std):
    mf.manual_seed(0)
    w = nn.Parameter(mf.empty(300, 400))
    assert fn(w, **kw) is w
    x = w.numpy()
    if bound is not None:
        assert np.abs(x).max() <= bound
        assert np.abs(x).max() > 0.99 * bound
        assert x.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    else:
        assert x.std() == pytest.approx(std, rel=0.02)
        assert abs(x.mean()) < 0.02 * std * 10


def test_constant_inits_and_default_linear_scale():
    w = nn.Parameter(mf.empty(3, 4))
    nn.init.zeros_(w)
    assert not w.numpy().any()
    nn.init.ones_(w)
    assert (w.numpy() == 1).all()
    nn.init.normal_(w, 3.0, 0.0)
    assert (w.numpy() == 3).all()
    nn.init.uniform_(w, -1, 1)
    assert np.abs(w.numpy()).max() <= 1
    lin = nn.Linear(256, 64)  # PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias
    assert np.abs(lin.weight.numpy()).max() <= 1 / 16 and np.abs(lin.bias.numpy()).max() <= 1 / 16


# ---------------------------------------------------------------- dropout
def test_dropout_train_eval_and_scale():
    mf.manual_seed(0)
    x = mf.ones(200, 500)
    d = nn.Dropout(0.3)
    y = d(x).numpy()
    kept = y != 0
    assert kept.mean() == pytest.approx(0.7, abs=0.01)
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    d.eval()
    assert d(x) is x
    assert F.dropout(x, 0.0) is x
    assert not F.dropout(x, 1.0).numpy().any()
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, -0.1)
    assert repr(nn.Dropout(0.25)) == "Dropout(p=0.25, inplace=False)"


def test_dropout_gradient_uses_the_forward_mask():
    mf.manual_seed(1)
    x = mf.randn(50, 40, requires_grad=True)
    y = F.dropout(x, 0.5)
    (y * 3.0).sum().backward()
    keep = y.numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(keep, 6.0, 0.0), rtol=1e-6)


def test_dropout_reproducible_with_seed():
    mf.manual_seed(7)
    a = F.dropout(mf.ones(1000), 0.5).numpy()
    mf.manual_seed(7)
    b = F.dropout(mf.ones(1000), 0.5).numpy()
    c = F.dropout(mf.ones(1000), 0.5).numpy()
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()


def test_kernel_seed_is_the_generators_bounded_draw():
    # dropout's seed: the value integers(0, 2**63) gives, one draw of the stream, for any state of the generator
    from minifused import backend

    for seed in (0, 1, 7, 2 ** 40 + 3):
        mf.manual_seed(seed)
        twin = np.random.Generator(np.random.PCG64(seed))
        got = [backend.kernel_seed() for _ in range(200)]
        want = [int(twin.integers(0, 2 ** 63, dtype=np.int64)) for _ in range(200)]
        assert got == want
        assert backend.generator(backend.CPU).integers(0, 2 ** 40) == twin.integers(0, 2 ** 40)


def test_dropout_mask_hash_reference():
    # the mask is a function of (seed, flat index) only
    y, mask = KD.dropout_forward_ref(np.ones((4, 8), np.float32), 12345, 0.5)
    y2, mask2 = KD.dropout_forward_ref(np.ones(32, np.float32), 12345, 0.5)
    np.testing.assert_array_equal(mask.ravel(), mask2)
    assert mask.dtype == np.uint32 and mask.shape == (1,) and y.dtype == np.float32  # bit-packed


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_dropout_gpu_matches_cpu(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 129)).astype(dtype)
    import cupy

    for p in (0.1, 0.5, 0.9):
        yr, mr = KD.dropout_forward_ref(x, 987654321, p)
        yg, mg = KD.dropout_forward(cupy.asarray(x), 987654321, p)
        np.testing.assert_array_equal(cupy.asnumpy(mg), mr)
        np.testing.assert_allclose(cupy.asnumpy(yg), yr, rtol=1e-3 if dtype == "float16" else 1e-6)
        g = rng.standard_normal(x.shape).astype(dtype)
        np.testing.assert_allclose(cupy.asnumpy(KD.dropout_backward(cupy.asarray(g), mg, p)),
                                   KD.dropout_backward_ref(g, mr, p), rtol=1e-3 if dtype == "float16" else 1e-6)
    # the same seed state gives the same mask through the public API on both devices
    mf.manual_seed(3)
    a = F.dropout(mf.ones(300), 0.5).numpy()
    mf.manual_seed(3)
    b = F.dropout(mf.ones(300, device="cuda"), 0.5).cpu().numpy()
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- losses
def test_mse_loss():
    a = mf.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = mf.tensor([[0.0, 2.0], [5.0, 4.0]])
    loss = nn.MSELoss()(a, b)
    assert float(loss) == pytest.approx(5 / 4)
    loss.backward()
    np.testing.assert_allclose(a.grad.numpy(), [[0.5, 0], [-1, 0]])
    assert float(F.mse_loss(a, b, reduction="sum")) == pytest.approx(5)
    assert F.mse_loss(a, b, reduction="none").shape == (2, 2)
    with pytest.warns(UserWarning, match="target size"):  # it broadcasts, as PyTorch's does
        assert F.mse_loss(a, mf.zeros(2)).shape == ()
    with pytest.raises(ValueError, match="mse_loss: shapes"):
        F.mse_loss(a, mf.zeros(3))
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")



def test_every_loss_module_is_a_loss_as_pytorchs():
    """PyTorch's _Loss is the base of every loss module, _WeightedLoss of those with a weight argument
    (BCEWithLogitsLoss keeps its own weight buffer): code tells a criterion by isinstance(m, _Loss)."""
    from minifused.nn.modules.loss import _Loss, _WeightedLoss

    weighted = (nn.CrossEntropyLoss(), nn.NLLLoss(), nn.BCELoss(), nn.MultiMarginLoss(), nn.MultiLabelSoftMarginLoss())
    for loss in weighted + (nn.MSELoss(), nn.L1Loss(), nn.BCEWithLogitsLoss(), nn.KLDivLoss(), nn.CTCLoss()):
        assert isinstance(loss, _Loss), loss
    assert all(isinstance(loss, _WeightedLoss) for loss in weighted)
    assert not isinstance(nn.BCEWithLogitsLoss(), _WeightedLoss) and not isinstance(nn.MSELoss(), _WeightedLoss)
    assert list(nn.BCEWithLogitsLoss(weight=mf.ones(2), pos_weight=mf.ones(2)).state_dict()) == ["weight",
                                                                                                "pos_weight"]
    with pytest.warns(UserWarning, match="reduction='sum'"):  # (the legacy arguments, as before)
        assert nn.CrossEntropyLoss(size_average=False).reduction == "sum"
    with pytest.raises(ValueError, match="CrossEntropyLoss: reduction must be one of"):
        nn.CrossEntropyLoss(reduction="avg")

# ---------------------------------------------------------------- custom modules
class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 32)
        self.out = nn.Linear(32, 3)
        self.scale = nn.Parameter(mf.ones(1))

    def forward(self, x):
        h = F.dropout(F.relu(self.hidden(x)), 0.1, self.training)
        return self.out(h) * self.scale


def test_custom_module_trains():
    mf.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5)
    xt, yt = mf.tensor(x), mf.tensor(y)
    model = TwoLayer()
    assert [n for n, _ in model.named_parameters()] == ["scale", "hidden.weight", "hidden.bias", "out.weight",
                                                        "out.bias"]
    opt = optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(150):
        loss = F.cross_entropy(model(xt), yt)
        first = float(loss) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss) < 0.3 * first
    model.eval()
    acc = (model(xt).argmax(1) == yt).float().mean()
    assert float(acc) > 0.9


def test_state_dict_round_trip_through_save(tmp_path):
    mf.manual_seed(0)
    a = TwoLayer()
    mf.save(a.state_dict(), tmp_path / "m.ckpt")
    mf.manual_seed(1)
    b = TwoLayer()
    b.load_state_dict(mf.load(tmp_path / "m.ckpt"))
    for (n1, p1), (n2, p2) in zip(a.named_parameters(), b.named_parameters()):
        assert n1 == n2
        np.testing.assert_array_equal(p1.numpy(), p2.numpy())


def test_load_state_dict_from_another_model_lists_problems():
    sd = TwoLayer().state_dict()
    other = nn.Sequential(nn.Linear(4, 32), nn.Linear(32, 3))
    with pytest.raises(RuntimeError) as e:
        other.load_state_dict(sd)
    msg = str(e.value)
    # PyTorch's wording
    assert 'Missing key(s) in state_dict: "0.weight", "0.bias"' in msg and 'Unexpected key(s) in state_dict: "' in msg
    assert '"scale"' in msg and msg.startswith("Error(s) in loading state_dict for Sequential:\n\t")
    sd["out.weight"] = mf.zeros(3, 31)
    with pytest.raises(RuntimeError, match=r"size mismatch for out.weight: copying a param with shape \(3, 31\) "
                                           r"from checkpoint, the shape in current model is \(3, 32\)"):
        TwoLayer().load_state_dict(sd)


def test_exports():
    for name in ("Dropout", "MSELoss", "Linear", "CrossEntropyLoss"):
        assert hasattr(nn, name)
    assert callable(nn.utils.clip_grad_norm_) and callable(nn.init.kaiming_uniform_)
    assert callable(mf.save) and callable(mf.load)


def _sequential_pair(device, conv):
    mf.manual_seed(3)
    if conv:
        layers = [nn.Conv2d(2, 4, 3, padding=1, device=device), nn.ReLU(), nn.Flatten(),
                  nn.Linear(4 * 5 * 5, 3, device=device)]
        x = mf.randn(2, 2, 5, 5, device=device)
    else:
        layers = [nn.Linear(6, 8, device=device), nn.ReLU(), nn.Linear(8, 5, device=device), nn.ReLU(),
                  nn.Linear(5, 3, device=device)]
        x = mf.randn(4, 6, device=device)
    return nn.Sequential(*layers), x


@pytest.mark.parametrize("conv", [False, True])
def test_sequential_fuses_relu_into_the_layer_before(device, conv):
    from minifused.ops import linear as linear_ops

    model, x = _sequential_pair(device, conv)
    fused = model(x)
    # the same modules called one by one (no fusion) give the same numbers
    unfused = x
    for m in model:
        unfused = m(unfused)
    np.testing.assert_allclose(fused.detach().cpu().numpy(), unfused.detach().cpu().numpy(),
                               rtol=1e-5, atol=1e-6)
    # the ReLU ran inside the layer: no standalone Relu node in the graph
    kinds, stack = set(), [fused._ctx]
    while stack:
        ctx = stack.pop()
        kinds.add(ctx.fn.__name__)
        stack.extend(t._ctx for t in ctx.inputs if t is not None and t._ctx is not None)
    assert "Relu" not in kinds
    linear_ops.reset_stats()
    grads_fused = [g.cpu().numpy() for g in _grads(model, fused)]
    if not conv:
        assert linear_ops.stats["dgrad_fused_relu"] == 2
    grads_plain = [g.cpu().numpy() for g in _grads(model, unfused)]
    for a, b in zip(grads_fused, grads_plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _grads(model, out):
    model.zero_grad()
    out.sum().backward()
    return [p.grad for p in model.parameters()]


# ---------------------------------------------------------------- Linear(inplace=True)
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_inplace_overwrites_input_in_no_grad(activation, bias):
    mf.manual_seed(0)
    lin = nn.Linear(16, 16, bias=bias, activation=activation, inplace=True)
    ref = nn.Linear(16, 16, bias=bias, activation=activation)
    ref.load_state_dict(lin.state_dict())
    x = mf.randn(3, 5, 16)
    want = ref(x).detach().numpy()
    with mf.no_grad():
        arr, v0 = x._data, x._version
        y = lin(x)
    assert y is x and y._data is arr and x._version > v0
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)


def test_linear_inplace_falls_back_and_validates():
    mf.manual_seed(0)
    lin = nn.Linear(8, 8, inplace=True)
    x = mf.randn(4, 8)
    before = x.numpy().copy()
    y = lin(x)  # grad mode on: the ordinary forward, x untouched, differentiable
    assert y is not x and y.requires_grad
    np.testing.assert_array_equal(x.numpy(), before)
    with mf.no_grad():
        xt = mf.randn(8, 4).transpose(0, 1)  # not contiguous: ordinary forward
        assert lin(xt) is not xt
    assert "inplace=True" in repr(lin)
    with pytest.raises(ValueError, match="in_features == out_features.*in_features=8, out_features=4"):
        nn.Linear(8, 4, inplace=True)


def test_sequential_inplace_mlp_matches_out_of_place():
    mf.manual_seed(0)
    layers = [m for _ in range(3) for m in (nn.Linear(32, 32, inplace=True), nn.ReLU())]
    model = nn.Sequential(*layers)
    plain = nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(32, 32), nn.ReLU())])
    plain.load_state_dict(model.state_dict())
    x = mf.randn(64, 32)
    want = plain(x).detach().numpy()
    with mf.no_grad():
        y = model(x)
    assert y is x
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)


def test_sequential_runs_a_forward_given_to_an_instance():
    """``module.forward = f`` (wrappers, LoRA-style patches): PyTorch's call runs f, so a Sequential neither fuses
    that module with a neighbour nor runs it in place."""
    lin = nn.Linear(2, 2)
    lin.forward = lambda x: x * 0 - 1  # then ReLU gives zeros
    relu = nn.ReLU()
    relu.forward = lambda x: x * 0 + 5
    conv, bn = nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1)
    bn.forward = lambda x: x * 0 - 1
    drop = nn.Dropout(0.5)
    drop.forward = lambda x: x * 0 + 7
    x = mf.ones(1, 2)
    assert nn.Sequential(lin, nn.ReLU())(x).tolist() == [[0.0, 0.0]]
    assert nn.Sequential(nn.Linear(2, 2), relu)(x).tolist() == [[5.0, 5.0]]
    assert float(nn.Sequential(conv, bn, nn.ReLU())(mf.ones(2, 1, 2, 2)).sum()) == 0.0
    with mf.no_grad():
        assert nn.Sequential(nn.Linear(2, 2), nn.ReLU(), drop)(x).tolist() == [[7.0, 7.0]]

def test_assigning_to_a_registered_name_keeps_its_kind():
    """PyTorch's Module.__setattr__: a buffer assigned a tensor stays a buffer (``count += 1``, ``self.avg = ...``:
    still in the state dict), None clears a registered name, and a value of the wrong kind for a parameter,
    buffer or child module is refused; a new Parameter or Module registers as one, anything else is an
    attribute."""
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.register_buffer("count", mf.zeros((), dtype=mf.int64))
            self.register_buffer("avg", mf.zeros(2))

        def forward(self, x):
            self.count += 1
            self.avg = 0.5 * self.avg + 0.5 * x.mean(0)
            return self.lin(x)

    m = Counter()
    with mf.no_grad():
        m(mf.ones(3, 2))
        m(mf.ones(3, 2))
    sd = m.state_dict()
    assert list(sd) == ["count", "avg", "lin.weight", "lin.bias"]  # PyTorch's order: own tensors, then children
    assert int(sd["count"].item()) == 2 and np.allclose(sd["avg"].numpy(), 0.75)
    m.avg = None
    assert "avg" not in m.state_dict() and m.avg is None and "avg" in m._buffers
    for name, value, words in [("count", 3, r"cannot assign int as buffer 'count' \(Tensor or None expected\)"),
                               ("lin", mf.ones(2), r"cannot assign Tensor as child module 'lin'"),
                               ("scale", None, None)]:
        if words is None:
            setattr(m, name, value)
            continue
        with pytest.raises(TypeError, match=words):
            setattr(m, name, value)
    with pytest.raises(TypeError, match=r"as parameter 'weight' \(minifused.nn.Parameter or None expected\)"):
        m.lin.weight = mf.ones(2, 2)
    m.lin.bias = None
    assert [n for n, _ in m.named_parameters()] == ["lin.weight"]
    m.extra = nn.Parameter(mf.ones(1))
    m.sub = nn.Linear(1, 1)
    assert "extra" in dict(m.named_parameters()) and "sub.weight" in m.state_dict() and m.scale is None


def test_trunc_normal_and_orthogonal_inits():
    """trunc_normal_ draws N(mean, std^2) inside [a, b] (absolute bounds): the truncated normal's moments, for a
    wide interval (values redrawn), a narrow one and one in a tail (the inverse CDF, as PyTorch's); infinite
    bounds; a generator repeats its draw. orthogonal_ gives orthonormal rows (or columns) times gain, for
    conv-shaped tensors too (flattened after the first dimension)."""
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    mf.manual_seed(3)
    for mu, sd, a, b in ((1.0, 2.0, -1.0, 5.0), (0.0, 1.0, -0.1, 0.1), (0.0, 1.0, 2.0, 3.0)):
        w = nn.init.trunc_normal_(mf.empty(200_000), mean=mu, std=sd, a=a, b=b)
        x = w.numpy().astype(np.float64)
        assert x.min() >= a and x.max() <= b and w._version == 1
        lo, hi = (a - mu) / sd, (b - mu) / sd  # the bounds in standard units
        mass = cdf(hi) - cdf(lo)
        mean = mu + sd * (phi(lo) - phi(hi)) / mass
        var = sd * sd * (1 + (lo * phi(lo) - hi * phi(hi)) / mass - ((phi(lo) - phi(hi)) / mass) ** 2)
        assert abs(x.mean() - mean) < 0.01 * sd and abs(x.var() / var - 1) < 0.02, (a, b, x.mean(), x.var())
    far = nn.init.trunc_normal_(mf.empty(50), a=30.0, b=31.0).numpy()
    assert far.min() >= 30.0 and far.max() <= 31.0
    half = nn.init.trunc_normal_(mf.empty(10_000), a=0.0, b=float("inf")).numpy()
    assert half.min() >= 0.0 and abs(half.mean() - math.sqrt(2 / math.pi)) < 0.03
    draws = [nn.init.trunc_normal_(mf.empty(5), a=-0.5, b=0.5, generator=mf.Generator().manual_seed(7)).numpy()
             for _ in range(2)]
    np.testing.assert_array_equal(*draws)
    with pytest.raises(ValueError, match="a <= b"):
        nn.init.trunc_normal_(mf.empty(4), a=1.0, b=-1.0)
    for shape, gain in [((3, 5), 1.0), ((6, 2, 2), 2.0), ((4, 4), 0.5)]:
        q = nn.init.orthogonal_(mf.empty(*shape), gain=gain).numpy().astype(np.float64).reshape(shape[0], -1)
        small = q @ q.T if q.shape[0] <= q.shape[1] else q.T @ q
        np.testing.assert_allclose(small, gain * gain * np.eye(small.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        nn.init.orthogonal_(mf.empty(4))


def test_trunc_normal_far_in_one_tail():
    """trunc_normal_ on an interval far in one tail (8 to 10 std, either side; beyond the mean with an infinite
    bound): the truncated normal's mean and spread, none of the values stuck at a bound (the inverse CDF through
    erfinv(2p - 1) rounded p to 1e-16 there, leaving about one value in eleven at the far bound)."""
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    mf.manual_seed(5)
    for a, b in ((-10.0, -8.0), (8.0, 10.0), (7.0, math.inf), (-math.inf, -7.0)):
        s = 1.0 if a > 0 else -1.0  # the mirrored interval [lo, hi] lies in the upper tail
        lo, hi = sorted((s * a, s * b))
        mass = 0.5 * (math.erfc(lo / math.sqrt(2)) - math.erfc(hi / math.sqrt(2)))
        ph = phi(hi) if math.isfinite(hi) else 0.0
        mean = (phi(lo) - ph) / mass
        var = 1 + (lo * phi(lo) - (hi * ph if math.isfinite(hi) else 0.0)) / mass - mean * mean
        x = s * nn.init.trunc_normal_(mf.empty(100_000, dtype=mf.float64), a=a, b=b).numpy()
        assert x.min() >= lo and x.max() <= hi and (x == lo).sum() + (x == hi).sum() <= 1, (a, b)
        assert abs(x.mean() - mean) < 0.005 and abs(x.var() / var - 1) < 0.03, (a, b, x.mean(), mean, x.var(), var)


def test_orthogonal_on_integers_and_kaiming_on_empty_tensors():
    """orthogonal_ of an integer tensor raises, as PyTorch's normal_ draw does (it filled it with the truncated
    floats: zeros), its state unchanged; kaiming_* of a zero-element tensor warns that it is a no-op, as PyTorch's."""
    t = mf.full((3, 3), 7, dtype=mf.int64)
    with pytest.raises(TypeError, match="floating-point"):
        nn.init.orthogonal_(t)
    assert t._version == 0 and (t.numpy() == 7).all()
    assert nn.init.orthogonal_(mf.empty(0, 3, dtype=mf.int64)).shape == (0, 3)  # nothing to draw: as PyTorch's
    for init in (nn.init.kaiming_uniform_, nn.init.kaiming_normal_):
        with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
            assert init(mf.empty(0, 3)).shape == (0, 3)


def test_spectral_norm_and_weight_norm():
    """nn.utils.spectral_norm: one power iteration per training forward from the stored vectors (checked
    against NumPy), the weight divided by u . W v, converging to the largest singular value; gradients reach
    weight_orig; none in evaluation; remove_ leaves a plain parameter. weight_norm: g * v / ||v|| (per output
    row), gradients by finite differences, and its remove_."""
    from minifused.testing import gradcheck

    mf.manual_seed(0)
    m = nn.utils.spectral_norm(nn.Linear(5, 4, dtype=mf.float64))
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    x = mf.tensor(np.random.default_rng(1).standard_normal((3, 5)))
    w, u = m.weight_orig.detach().numpy(), m.weight_u.numpy().copy()
    y = m(x)
    v = w.T @ u
    v /= np.linalg.norm(v)
    u = w @ v
    u /= np.linalg.norm(u)
    np.testing.assert_allclose(m.weight.detach().numpy(), w / (u @ w @ v), rtol=1e-12)
    np.testing.assert_allclose(y.detach().numpy(), x.numpy() @ (w / (u @ w @ v)).T + m.bias.detach().numpy(),
                               rtol=1e-12)
    y.sum().backward()
    assert m.weight_orig.grad.shape == (4, 5)
    for _ in range(30):
        m(x)
    np.testing.assert_allclose(np.abs(w).max() / np.abs(m.weight.detach().numpy()).max(),
                               np.linalg.svd(w, compute_uv=False)[0], rtol=1e-6)
    m.eval()
    u_before = m.weight_u.numpy().copy()
    m(x)
    np.testing.assert_array_equal(m.weight_u.numpy(), u_before)
    nn.utils.remove_spectral_norm(m)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"]
    assert nn.utils.spectral_norm(nn.ConvTranspose2d(3, 4, 3)).weight_u.shape == (4,)
    with pytest.raises(ValueError, match="has no parameter 'kernel'"):
        nn.utils.spectral_norm(nn.Linear(2, 2), name="kernel")
    wn = nn.utils.weight_norm(nn.Linear(5, 4, dtype=mf.float64))
    g, vv = wn.weight_g.detach().numpy(), wn.weight_v.detach().numpy()
    np.testing.assert_allclose(wn(x).detach().numpy(),
                               x.numpy() @ (g * vv / np.linalg.norm(vv, axis=1, keepdims=True)).T + wn.bias.numpy(),
                               rtol=1e-12)
    (wn(x) ** 2).sum().backward()  # the hook routes the gradients to weight_g and weight_v: as the formula's
    gg, v2 = mf.tensor(g, requires_grad=True), mf.tensor(vv, requires_grad=True)
    (F.linear(x, gg * v2 / (v2 * v2).sum(1, keepdim=True).sqrt(), wn.bias.detach()) ** 2).sum().backward()
    np.testing.assert_allclose(wn.weight_g.grad.numpy(), gg.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(wn.weight_v.grad.numpy(), v2.grad.numpy(), rtol=1e-12)
    assert gradcheck(lambda a, b: F.linear(x, a * b / (b * b).sum(1, keepdim=True).sqrt()),
                     [mf.tensor(g, requires_grad=True), mf.tensor(vv, requires_grad=True)])
    nn.utils.remove_weight_norm(wn)
    assert [n for n, _ in wn.named_parameters()] == ["bias", "weight"]


def test_get_submodule_parameter_and_buffer_by_dotted_path():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Sequential(nn.BatchNorm2d(4), nn.ReLU()))
    assert m.get_submodule("") is m and m.get_submodule("1.0") is m[1][0]
    assert m.get_parameter("0.weight") is m[0].weight and m.get_buffer("1.0.running_mean") is m[1][0].running_mean
    for get, target, words in [(m.get_submodule, "1.5", "Sequential has no attribute `5`"),
                               (m.get_submodule, "0.weight", "`weight` is not an nn.Module"),
                               (m.get_parameter, "1.0.running_mean", "`running_mean` is not an nn.Parameter"),
                               (m.get_buffer, "0.weight", "`weight` is not a buffer"),
                               (m.get_parameter, "0.nope", "Conv2d has no attribute `nope`")]:
        with pytest.raises(AttributeError, match=words):
            get(target)


def test_shrink_gate_shuffle_and_distance_layers_follow_their_functions():
    x = mf.tensor(np.random.default_rng(0).standard_normal((2, 4, 3, 3)).astype(np.float32))
    cases = [(nn.Threshold(0.1, 2.0), F.threshold(x, 0.1, 2.0), "Threshold(threshold=0.1, value=2.0)"),
             (nn.Hardshrink(0.3), F.hardshrink(x, 0.3), "Hardshrink(0.3)"),
             (nn.Softshrink(), F.softshrink(x), "Softshrink(0.5)"), (nn.GLU(1), F.glu(x, 1), "GLU(dim=1)"),
             (nn.Softmin(1), F.softmin(x, 1), "Softmin(dim=1)"), (nn.Softmax2d(), F.softmax(x, 1), "Softmax2d()"),
             (nn.ChannelShuffle(2), F.channel_shuffle(x, 2), "ChannelShuffle(groups=2)")]
    for layer, want, text in cases:
        assert repr(layer) == text
        np.testing.assert_array_equal(layer(x).numpy(), want.numpy())
    np.testing.assert_array_equal(nn.Softmax2d()(x[0]).numpy(), F.softmax(x[0], 0).numpy())
    np.testing.assert_array_equal(nn.CosineSimilarity(dim=2)(x, x * 2).numpy(), F.cosine_similarity(x, x * 2, 2).numpy())
    np.testing.assert_array_equal(nn.PairwiseDistance(p=1.0, keepdim=True)(x, -x).numpy(),
                                  F.pairwise_distance(x, -x, 1.0, keepdim=True).numpy())
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D"):
        nn.Softmax2d()(x[0, 0])


def test_conv_transpose1d_layer():
    """PyTorch's weight shape, initialisation bound and repr; forward is F.conv_transpose1d, output_size picks
    the length (and refuses one out of reach)."""
    mf.manual_seed(0)
    m = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    assert repr(m) == "ConvTranspose1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), output_padding=(1,), groups=2)"
    assert m.weight.shape == (4, 3, 3) and np.abs(m.weight.numpy()).max() <= 1 / np.sqrt(9)
    x = mf.randn(2, 4, 5)
    np.testing.assert_array_equal(m(x).numpy(), F.conv_transpose1d(x, m.weight, m.bias, 2, 1, 1, 2).numpy())
    assert m(x).shape == (2, 6, 10) and m(x, output_size=[9]).shape == (2, 6, 9) and m(x[0]).shape == (6, 10)
    with pytest.raises(ValueError, match=r"valid sizes range from \[9\] to \[10\]"):
        m(x, output_size=(2, 6, 12))


def test_local_response_norm_layer():
    x = mf.randn(2, 6, 3, 3)
    m = nn.LocalResponseNorm(3, alpha=0.2, beta=0.5, k=1.5)
    assert repr(m) == "LocalResponseNorm(3, alpha=0.2, beta=0.5, k=1.5)"
    np.testing.assert_array_equal(m(x).numpy(), F.local_response_norm(x, 3, 0.2, 0.5, 1.5).numpy())


def test_margin_loss_layers_follow_their_functions():
    rng = np.random.default_rng(2)
    a, b, c = (mf.tensor(rng.standard_normal((4, 3)).astype(np.float32)) for _ in range(3))
    y = mf.tensor(np.array([1.0, -1.0, 1.0, -1.0], np.float32))
    pairs = [(nn.MarginRankingLoss(0.2)(a[:, 0], b[:, 0], y), F.margin_ranking_loss(a[:, 0], b[:, 0], y, 0.2)),
             (nn.HingeEmbeddingLoss(reduction="sum")(a[:, 0], y), F.hinge_embedding_loss(a[:, 0], y, 1.0,
                                                                                         reduction="sum")),
             (nn.SoftMarginLoss()(a, b.sign()), F.soft_margin_loss(a, b.sign())),
             (nn.CosineEmbeddingLoss(0.1)(a, b, y), F.cosine_embedding_loss(a, b, y, 0.1)),
             (nn.MultiLabelSoftMarginLoss(weight=mf.tensor([1.0, 2.0, 0.5]))(a, (b > 0).float()),
              F.multilabel_soft_margin_loss(a, (b > 0).float(), weight=mf.tensor([1.0, 2.0, 0.5]))),
             (nn.TripletMarginLoss(margin=0.5, p=1.0, swap=True)(a, b, c),
              F.triplet_margin_loss(a, b, c, margin=0.5, p=1.0, swap=True))]
    for got, want in pairs:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert nn.HingeEmbeddingLoss().margin == 1.0 and nn.MarginRankingLoss().margin == 0.0
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        assert nn.TripletMarginLoss(size_average=False).reduction == "sum"  # PyTorch's legacy rule


def test_unfold_and_fold_layers():
    x = mf.randn(2, 3, 5, 6)
    u = nn.Unfold((2, 3), padding=1, stride=(2, 1))
    f = nn.Fold((5, 6), (2, 3), padding=1, stride=(2, 1))
    assert repr(u) == "Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=(2, 1))"
    assert repr(f) == "Fold(output_size=(5, 6), kernel_size=(2, 3), dilation=1, padding=1, stride=(2, 1))"
    np.testing.assert_array_equal(u(x).numpy(), F.unfold(x, (2, 3), 1, 1, (2, 1)).numpy())
    cover = f(u(mf.ones(2, 3, 5, 6)))  # how many blocks cover each pixel
    np.testing.assert_allclose(f(u(x)).numpy(), x.numpy() * cover.numpy(), rtol=1e-6)


def test_multi_margin_and_likelihood_loss_layers():
    rng = np.random.default_rng(4)
    x = mf.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    y, w = mf.tensor([0, 3, 1, 4]), mf.tensor(rng.uniform(0.5, 2, 5).astype(np.float32))
    rate, var = mf.tensor(rng.uniform(0, 3, (4, 5)).astype(np.float32)), mf.tensor(rng.uniform(0.1, 1, (4, 1)))
    pairs = [(nn.MultiMarginLoss(p=2, margin=0.5, weight=w)(x, y), F.multi_margin_loss(x, y, 2, 0.5, w)),
             (nn.PoissonNLLLoss(full=True)(x, rate), F.poisson_nll_loss(x, rate, full=True)),
             (nn.GaussianNLLLoss(full=True, reduction="sum")(x, rate, var),
              F.gaussian_nll_loss(x, rate, var, full=True, reduction="sum"))]
    for got, want in pairs:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert "weight" in nn.MultiMarginLoss(weight=w).state_dict()
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        nn.MultiMarginLoss(p=3)


def test_rrelu_and_dropout3d():
    """RReLU: in training each negative element is scaled by its own slope in [lower, upper] (the gradient is
    that slope), positives pass; in evaluation the mean slope. Dropout3d zeroes whole channels."""
    mf.manual_seed(0)
    x = mf.tensor(np.linspace(-2, 2, 60, dtype=np.float32).reshape(3, 4, 5), requires_grad=True)
    m = nn.RReLU(0.1, 0.3)
    assert repr(m) == "RReLU(lower=0.1, upper=0.3)"
    y = m(x)
    y.sum().backward()
    xv, yv, g = x.detach().numpy(), y.detach().numpy(), x.grad.numpy()
    neg = xv < 0
    slopes = yv[neg] / xv[neg]
    assert (slopes >= 0.1 - 1e-6).all() and (slopes <= 0.3 + 1e-6).all() and len(np.unique(slopes)) > 10
    np.testing.assert_allclose(g[neg], slopes, rtol=1e-5)
    np.testing.assert_array_equal(yv[~neg], xv[~neg])
    assert (g[~neg] == 1).all()
    np.testing.assert_allclose(m.eval()(x).detach().numpy(), np.where(neg, 0.2 * xv, xv), rtol=1e-6)
    with pytest.raises(ValueError, match="Lower bound should be less than or equal to the upper bound"):
        F.rrelu(x, 0.5, 0.1, training=True)
    d = nn.Dropout3d(0.5)(mf.ones(3, 8, 2, 3, 4)).numpy().reshape(24, -1)
    assert set(np.unique(d)) <= {0.0, 2.0} and all(len(set(row)) == 1 for row in d)
    assert nn.Dropout3d().eval()(x[None]).shape == (1, 3, 4, 5)
    with pytest.raises(ValueError, match="dropout3d: Feature dropout requires at least 2 dimensions"):
        F.dropout3d(mf.ones(()), 0.5)  # (other ranks are unbatched, with a warning, as PyTorch's)


def test_init_eye_and_dirac():
    """eye_ is the rectangle's identity; dirac_ makes a convolution copy its first input channels (per group),
    so conv2d with it returns them unchanged; bad dimensions refused, as PyTorch's."""
    e = nn.init.eye_(mf.empty(3, 5))
    np.testing.assert_array_equal(e.numpy(), np.eye(3, 5))
    for shape, groups in (((6, 4, 3, 3), 2), ((5, 5, 1, 3), 1)):
        w = nn.init.dirac_(mf.empty(*shape), groups)
        x = mf.randn(2, shape[1], 4, 6)
        y = F.conv2d(x, w, padding=(shape[2] // 2, shape[3] // 2))
        per = shape[0] // groups
        for g in range(groups):
            k = min(per, shape[1])
            np.testing.assert_allclose(y.numpy()[:, g * per:g * per + k], x.numpy()[:, :k], rtol=1e-6)
    with pytest.raises(ValueError, match="eye_: Only tensors with 2 dimensions"):
        nn.init.eye_(mf.empty(2, 2, 2))
    with pytest.raises(ValueError, match="dirac_: dim 0 must be divisible by groups.*dim 0 of 5 and groups=2"):
        nn.init.dirac_(mf.empty(5, 2, 3, 3), groups=2)
    assert nn.utils.fuse_conv_bn_eval is nn.fusion.fuse_conv_bn_eval


def test_module_compile_is_accepted_in_place():
    model = nn.Linear(2, 2)
    x = mf.randn(3, 2)
    before = model(x).detach().numpy()
    assert model.compile(mode="max-autotune") is None  # PyTorch compiles in place and returns None
    np.testing.assert_array_equal(model(x).detach().numpy(), before)


def test_gumbel_softmax_samples_the_softmax_and_passes_the_soft_gradient():
    """The hard samples' argmax frequencies are softmax(logits) (the Gumbel-max trick; 20000 draws, within 4
    standard deviations); soft samples are distributions; the hard one-hot's gradient is the soft sample's."""
    mf.manual_seed(3)
    p = np.array([0.1, 0.2, 0.7])
    logits = mf.tensor(np.log(np.tile(p, (20000, 1))).astype(np.float32), requires_grad=True)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    h = hard.detach().numpy()
    assert set(np.unique(h)) == {0.0, 1.0} and (h.sum(1) == 1).all()
    freq = np.bincount(h.argmax(1), minlength=3) / len(h)
    assert (np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / len(h))).all(), freq
    w = mf.tensor(np.array([1.0, 2.0, 3.0], np.float32))
    (hard * w).sum().backward()
    mf.manual_seed(3)
    logits2 = mf.tensor(logits.detach().numpy(), requires_grad=True)
    (F.gumbel_softmax(logits2, tau=0.5) * w).sum().backward()  # the same noise: the soft sample
    np.testing.assert_allclose(logits.grad.numpy(), logits2.grad.numpy(), rtol=1e-5, atol=1e-6)
    soft = F.gumbel_softmax(logits[:5], tau=2.0, dim=1)
    np.testing.assert_allclose(soft.detach().numpy().sum(1), 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="tau must be > 0"):
        F.gumbel_softmax(logits, tau=0.0)


def test_container_constructions_and_operators_as_pytorch():
    """ModuleDict of (name, module) pairs, ModuleList(None), ModuleList + any iterable of modules, Sequential
    times an int (the same modules again, as PyTorch's); a module assigned over a parameter's name is a
    TypeError that leaves the parameter in place."""
    a, b = nn.Linear(2, 2), nn.ReLU()
    assert list(nn.ModuleDict([("a", a), ("b", b)]).keys()) == ["a", "b"]
    assert len(nn.ModuleList(None)) == 0
    both = nn.ModuleList([a]) + [b]
    assert isinstance(both, nn.ModuleList) and list(both) == [a, b]
    seq = nn.Sequential(a, b)
    for twice in (seq * 2, 2 * seq):
        assert list(twice) == [a, b, a, b] and len(twice) == 4 and twice[3] is b
    x = mf.tensor(np.ones((1, 2), np.float32))
    np.testing.assert_array_equal((seq * 2)(x).numpy(), seq(seq(x)).numpy())
    seq *= 3
    assert len(seq) == 6
    with pytest.raises(TypeError, match="multiplied by an int"):
        seq * 1.5
    with pytest.raises(ValueError, match="positive int"):
        seq * 0
    weight = a.weight
    with pytest.raises(TypeError, match="cannot assign Linear as parameter 'weight'"):
        a.weight = nn.Linear(1, 1)
    assert a.weight is weight and list(a.state_dict()) == ["weight", "bias"]
    for fn in (mf.randn, mf.rand):
        with pytest.raises(TypeError, match="expected a floating-point dtype"):
            fn(2, dtype=mf.int64)


@pytest.mark.parametrize("cls", [nn.Sequential, nn.ModuleList])
def test_containers_set_and_delete_by_index(cls):
    """``c[i] = module`` replaces in place (names kept; negative indices from the end), ``del c[i]``,
    ``del c[a:b]``, ``insert`` and ``pop`` renumber the modules after, ``+`` / ``+=`` / ``extend`` concatenate,
    as PyTorch's Sequential and ModuleList; bad indices and non-modules are refused, changing nothing."""
    a, b, c, d = nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 3), nn.Tanh()
    box = cls([a, b, c]) if cls is nn.ModuleList else cls(a, b, c)
    box[-1] = d
    box[0] = c
    assert [m for m in box] == [c, b, d] and list(box._modules) == ["0", "1", "2"]
    del box[1]
    assert [m for m in box] == [c, d] and list(box._modules) == ["0", "1"]
    box.append(b)
    del box[0:2]
    assert [m for m in box] == [b] and list(box._modules) == ["0"]
    with pytest.raises(IndexError, match="index 1 is out of range for 1 modules"):
        box[1] = a
    with pytest.raises(IndexError, match="index -2 is out of range"):
        del box[-2]
    with pytest.raises(TypeError, match="indices must be integers or slices, got str"):
        box["0"] = a
    with pytest.raises(TypeError):
        box[0] = 3
    assert [m for m in box] == [b]
    box.insert(0, a).insert(-1, c).insert(3, d)
    assert [m for m in box] == [a, c, b, d] and list(box._modules) == ["0", "1", "2", "3"]
    assert box.pop(1) is c and box.pop() is d and [m for m in box] == [a, b]
    with pytest.raises(IndexError, match="insert: index 3 is out of range for 2 modules"):
        box.insert(3, c)
    with pytest.raises(TypeError, match="int is not a Module"):
        box.insert(0, 3)
    both = box + type(box)([c]) if cls is nn.ModuleList else box + cls(c)
    assert type(both) is cls and [m for m in both] == [a, b, c] and [m for m in box] == [a, b]
    box += both[2:]
    assert [m for m in box] == [a, b, c] and isinstance(both[1:], cls)
    box.extend([d])
    assert len(box) == 4 and box[-1] is d


def test_shared_modules_and_tensors_traverse_as_pytorch():
    """A module or parameter reached along several paths: named_modules / named_parameters / named_buffers give
    it once (the first path) unless remove_duplicate=False; the state dict has it under every name, module by
    module (own parameters, own buffers, then the children), as PyTorch's (these lists are PyTorch 2.14's); a
    parameter re-assigned keeps its place."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 3)
            self.register_buffer("steps", mf.zeros(()))
            self.b = nn.Linear(3, 2)
            self.b.weight = nn.Parameter(mf.zeros(2, 3))
            self.c = self.a
            self.bn = nn.BatchNorm1d(3)
            self.seq = nn.Sequential(nn.Linear(3, 3), self.bn)

    net = Net()
    bn = ["running_mean", "running_var", "num_batches_tracked"]
    assert [k for k, _ in net.named_modules()] == ["", "a", "b", "bn", "seq", "seq.0"]
    assert [k for k, _ in net.named_modules(remove_duplicate=False)] == ["", "a", "b", "c", "bn", "seq", "seq.0",
                                                                          "seq.1"]
    assert len(list(net.modules())) == 6
    assert [k for k, _ in net.named_parameters()] == ["a.weight", "a.bias", "b.weight", "b.bias", "bn.weight",
                                                      "bn.bias", "seq.0.weight", "seq.0.bias"]
    assert [k for k, _ in net.named_parameters(remove_duplicate=False)] == [
        "a.weight", "a.bias", "b.weight", "b.bias", "c.weight", "c.bias", "bn.weight", "bn.bias", "seq.0.weight",
        "seq.0.bias", "seq.1.weight", "seq.1.bias"]
    assert [k for k, _ in net.named_buffers()] == ["steps"] + [f"bn.{n}" for n in bn]
    assert [k for k, _ in net.named_buffers(remove_duplicate=False)] == (["steps"] + [f"bn.{n}" for n in bn]
                                                                          + [f"seq.1.{n}" for n in bn])
    assert list(net.state_dict()) == (["steps", "a.weight", "a.bias", "b.weight", "b.bias", "c.weight", "c.bias",
                                       "bn.weight", "bn.bias"] + [f"bn.{n}" for n in bn]
                                      + ["seq.0.weight", "seq.0.bias", "seq.1.weight", "seq.1.bias"]
                                      + [f"seq.1.{n}" for n in bn])
    assert net.state_dict()["c.weight"].data_ptr() == net.a.weight.data_ptr()
    other = Net()
    other.load_state_dict(net.state_dict())  # strict: every name present
    np.testing.assert_array_equal(other.a.weight.numpy(), net.a.weight.numpy())
    assert other.c is other.a


def test_linear_and_conv_take_pytorchs_positional_order():
    """nn.Linear(in, out, bias, device, dtype) and nn.Conv2d(..., bias, padding_mode, device, dtype) positionally,
    as PyTorch's; the fused activation is a keyword after them."""
    lin = nn.Linear(3, 4, False, "cpu", mf.float64)
    assert lin.bias is None and lin.weight.dtype == mf.float64 and lin.weight.device.type == "cpu"
    conv = nn.Conv2d(1, 2, 3, 1, 0, 1, 1, True, "zeros", "cpu", mf.float64)
    assert conv.weight.dtype == conv.bias.dtype == mf.float64
    x = mf.randn(2, 3, dtype=mf.float64)
    fused = nn.Linear(3, 4, True, None, mf.float64, "relu")
    np.testing.assert_allclose(fused(x).detach().numpy(),
                               np.maximum(x.numpy() @ fused.weight.detach().numpy().T + fused.bias.detach().numpy(),
                                          0))


def test_train_eval_call_each_childs_own_train():
    """train()/eval() reach the children through their own train(), as PyTorch's: a block that keeps its
    BatchNorm in evaluation (the fine-tuning idiom) keeps it so when its parent is put in training."""
    class FrozenNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn, self.fc = nn.BatchNorm1d(3), nn.Linear(3, 3)

        def train(self, mode=True):
            super().train(mode)
            self.bn.eval()
            return self

    outer = nn.Sequential(FrozenNorm(), nn.ReLU())
    assert outer.train() is outer
    assert outer.training and outer[0].training and outer[0].fc.training and not outer[0].bn.training
    outer.eval()
    assert not any(m.training for m in outer.modules())
    with pytest.raises(ValueError, match="train: the training mode is expected to be a bool, got str"):
        outer.train("no")


def test_registration_checks_names_and_values_as_pytorch():
    m = nn.Module()
    with pytest.raises(TypeError, match=r"cannot assign 'Tensor' object to parameter 'a' \(minifused.nn.Parameter"):
        m.register_parameter("a", mf.ones(2))
    with pytest.raises(TypeError, match=r"cannot assign 'int' object to buffer 'b' \(Tensor or None required\)"):
        m.register_buffer("b", 3)
    with pytest.raises(KeyError, match="buffer name can.{1,2}t contain"):
        m.register_buffer("a.b", mf.ones(1))
    with pytest.raises(KeyError, match="module name can.{1,2}t be empty"):
        m.add_module("", nn.ReLU())
    with pytest.raises(KeyError, match="attribute 'forward' already exists"):
        m.register_buffer("forward", mf.ones(1))
    with pytest.raises(TypeError, match="parameter name should be a string, got int"):
        m.register_parameter(3, None)
    assert list(m.named_parameters()) == [] and list(m.named_buffers()) == []
    m.register_buffer("b", mf.ones(1))
    m.register_buffer("b", mf.zeros(2))  # (a name of its own kind may be registered again)
    assert m.b.shape == (2,)


def test_sequential_takes_an_ordered_dict_not_a_plain_one():
    s = nn.Sequential(OrderedDict([("b", nn.ReLU()), ("a", nn.Tanh())]))
    assert list(s._modules) == ["b", "a"]
    with pytest.raises(TypeError, match="dict"):  # PyTorch's "dict is not a Module subclass"
        nn.Sequential({"b": nn.ReLU(), "a": nn.Tanh()})


def test_sequential_slice_keeps_its_modules_names():
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 4))
    assert list(s[1:].state_dict()) == ["2.weight", "2.bias"]
    assert list(s[::2]._modules) == ["0", "2"] and s[::2][1] is s[2]
    assert list(nn.ModuleList(list(s))[1:]._modules) == ["0", "1"]  # a ModuleList renumbers, as PyTorch's



def test_a_modulelist_subclass_prints_its_own_name():
    """PyTorch's ModuleList repr names the module's class, as Sequential's and ModuleDict's do."""
    class Blocks(nn.ModuleList):
        pass

    assert repr(Blocks([nn.ReLU(), nn.ReLU(), nn.Tanh()])) == "Blocks(\n  (0-1): 2 x ReLU()\n  (2): Tanh()\n)"
    assert repr(Blocks()) == "Blocks()"
    wn = nn.utils.parametrizations.weight_norm(nn.Linear(2, 2))
    assert "(weight): ParametrizationList(" in repr(wn)


def test_module_zero_grad_keeping_the_tensors_cuts_a_create_graph_gradient_from_its_graph():
    """Module.zero_grad(set_to_none=False) as the optimizers' (PyTorch's): the gradient zeroed in place (its version
    bumped) after it leaves the graph backward(create_graph=True) built, so the next backward adds into plain zeros."""
    m = nn.Linear(2, 1).double()
    (m.weight ** 3).sum().backward(create_graph=True)
    grad = m.weight.grad
    assert grad.requires_grad and grad.grad_fn is not None
    version = grad._version
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is grad and not grad.requires_grad and grad.grad_fn is None
    assert grad._version > version
    np.testing.assert_array_equal(grad.numpy(), [[0.0, 0.0]])
    (m.weight * 2).sum().backward()
    np.testing.assert_array_equal(m.weight.grad.numpy(), [[2.0, 2.0]])


def test_no_layer_is_a_subclass_of_another_kind_as_pytorchs():
    """isinstance as in PyTorch's hierarchy (init loops and model surgery test it): a 1-d or 3-d layer is no 2-d
    one, an EmbeddingBag no Embedding, a Fold no Unfold; ZeroPad<n>d is a ConstantPad<n>d; the private bases
    under PyTorch's module paths."""
    from minifused.nn.modules.padding import _ConstantPadNd, _ReflectionPadNd
    from minifused.nn.modules.pooling import (_AdaptiveAvgPoolNd, _AdaptiveMaxPoolNd, _AvgPoolNd, _LPPoolNd,
                                              _MaxPoolNd, _MaxUnpoolNd)

    for layer, other in ((nn.MaxPool1d(2), nn.MaxPool2d), (nn.LPPool1d(2, 2), nn.LPPool2d),
                         (nn.FractionalMaxPool3d(2, output_ratio=0.5), nn.FractionalMaxPool2d),
                         (nn.AdaptiveMaxPool3d(1), nn.AdaptiveAvgPool3d), (nn.EmbeddingBag(3, 2), nn.Embedding),
                         (nn.Fold(4, 2), nn.Unfold), (nn.ZeroPad2d(1), nn.ZeroPad1d),
                         (nn.ZeroPad3d(1), nn.ConstantPad1d), (nn.ConstantPad2d(1, 0.5), nn.ConstantPad1d),
                         (nn.ReflectionPad2d(1), nn.ReflectionPad1d), (nn.ReplicationPad3d(1), nn.ReplicationPad1d),
                         (nn.CircularPad2d(1), nn.CircularPad1d)):
        assert not isinstance(layer, other), (layer, other)
    assert isinstance(nn.ZeroPad2d(1), nn.ConstantPad2d) and isinstance(nn.ZeroPad3d(1), nn.ConstantPad3d)
    assert nn.ZeroPad2d(1).value == 0.0 and repr(nn.ZeroPad2d(1)) == "ZeroPad2d((1, 1, 1, 1))"
    assert all(isinstance(m, _MaxPoolNd) for m in (nn.MaxPool1d(2), nn.MaxPool2d(2), nn.MaxPool3d(2)))
    assert all(isinstance(m, _LPPoolNd) for m in (nn.LPPool1d(2, 2), nn.LPPool2d(2, 2), nn.LPPool3d(2, 2)))
    assert isinstance(nn.ZeroPad1d(1), _ConstantPadNd) and isinstance(nn.ReflectionPad3d(1), _ReflectionPadNd)
    assert all(isinstance(m, _AvgPoolNd) for m in (nn.AvgPool1d(2), nn.AvgPool2d(2), nn.AvgPool3d(2)))
    assert all(isinstance(m, _MaxUnpoolNd) for m in (nn.MaxUnpool1d(2), nn.MaxUnpool2d(2), nn.MaxUnpool3d(2)))
    avg = (nn.AdaptiveAvgPool1d(2), nn.AdaptiveAvgPool2d(2), nn.AdaptiveAvgPool3d(2))
    top = (nn.AdaptiveMaxPool1d(2), nn.AdaptiveMaxPool2d(2), nn.AdaptiveMaxPool3d(2, return_indices=True))
    assert all(isinstance(m, _AdaptiveAvgPoolNd) and not isinstance(m, _AdaptiveMaxPoolNd) for m in avg)
    assert all(isinstance(m, _AdaptiveMaxPoolNd) and not isinstance(m, _AdaptiveAvgPoolNd) for m in top)
    assert repr(top[2]) == "AdaptiveMaxPool3d(output_size=2)" and top[2].return_indices


def test_every_dropout_layer_is_a_dropoutnd():
    """PyTorch's _DropoutNd is the base of every dropout layer (code toggling dropout alone, as MC dropout, tests
    it); p and inplace are kept as given."""
    from minifused.nn.modules.dropout import _DropoutNd

    layers = (nn.Dropout(), nn.Dropout1d(), nn.Dropout2d(), nn.Dropout3d(), nn.AlphaDropout(), nn.FeatureAlphaDropout())
    assert all(isinstance(m, _DropoutNd) for m in layers)
    assert not isinstance(nn.ReLU(), _DropoutNd)
    assert repr(nn.Dropout2d(1, inplace=1)) == "Dropout2d(p=1, inplace=1)"
    with pytest.raises(ValueError, match="Dropout2d: dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout2d(1.5)

def test_an_int_device_is_that_gpus_index_as_pytorchs():
    """model.cuda(args.gpu), model.to(local_rank), x.cuda(rank), x.to(rank): an int is the GPU of that index (it
    was taken for a dtype: "Cannot interpret '0' as a data type")."""
    assert mf.device(0) == mf.device("cuda:0") and str(mf.device(2)) == "cuda:2"
    with pytest.raises(ValueError, match="must not be negative"):
        mf.device(-1)
    moves = (lambda: nn.Linear(2, 2).cuda(0).weight, lambda: nn.Linear(2, 2).to(0).weight,
             lambda: mf.ones(2).cuda(0), lambda: mf.ones(2).to(0, non_blocking=True))
    for move in moves:
        if backend.cuda_available():
            assert move().device == mf.device("cuda:0")
        else:
            with pytest.raises(RuntimeError, match="cuda:0 requested but no usable CUDA device"):
                move()
    assert nn.Linear(2, 2).to(mf.float64).weight.dtype == mf.float64  # (a dtype is still one)

def test_a_module_under_two_names_is_one_child():
    """children() / named_children() list a module registered twice once (under its first name), so apply() and
    train() reach it once, as PyTorch's; a Sequential holding it twice still runs it twice."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 3)
            self.b = nn.ReLU()
            self.shared = self.a

    m = Net()
    assert [n for n, _ in m.named_children()] == ["a", "b"] and len(list(m.children())) == 2
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "ReLU", "Net"]
    double = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    twice = nn.Sequential(double[0], double[0])
    x = mf.ones(1, 2)
    np.testing.assert_allclose(twice(x).numpy(), double[0](double[0](x)).numpy())


def test_random_inits_take_a_generator_and_refuse_what_pytorch_refuses():
    for init in (nn.init.uniform_, nn.init.normal_, nn.init.xavier_uniform_, nn.init.xavier_normal_,
                 nn.init.kaiming_uniform_, nn.init.kaiming_normal_, nn.init.orthogonal_):
        a, b = (init(mf.empty(3, 4), generator=mf.Generator().manual_seed(5)).numpy() for _ in range(2))
        np.testing.assert_array_equal(a, b)
    with pytest.raises(RuntimeError, match="from=1"):
        nn.init.uniform_(mf.empty(3), 1.0, 0.0)
    with pytest.raises(TypeError):
        nn.init.normal_(mf.zeros(3, dtype=mf.int64))
    np.testing.assert_allclose(np.abs(nn.init.xavier_uniform_(mf.empty(30, 30), gain=mf.tensor(0.001)).numpy())
                               .max(), 0.001 * math.sqrt(3.0) * math.sqrt(2 / 60), rtol=0.1)


def test_clip_grads_checks_before_it_changes_and_rounds_once():
    p = nn.Parameter(mf.ones(2))
    p.grad = mf.tensor([1.0, 1.0])
    with pytest.raises(RuntimeError, match="one value"):
        nn.utils.clip_grads_with_norm_([p], 1.0, mf.tensor([1.0, 4.0]))
    np.testing.assert_array_equal(p.grad.numpy(), [1.0, 1.0])
    with pytest.raises(RuntimeError, match="floating"):
        nn.utils.get_total_norm([mf.tensor([3, 4])])
    h, f = nn.Parameter(mf.zeros(1, dtype=mf.float16)), nn.Parameter(mf.zeros(1))
    h.grad, f.grad = mf.tensor([-7.66016], dtype=mf.float16), mf.tensor([1.0])
    nn.utils.clip_grad_norm_([h, f], 1.0, norm_type="inf")  # the coefficient applied in float32, rounded once
    assert float(h.grad.item()) == -1.0  # (the coefficient rounded to float16 first gave -0.99951)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, "inf"])
def test_clip_grad_norm_returns_a_0d_tensor_that_stacks_and_updates_in_place(norm_type):
    """The total norm is logged as a tensor (``torch.stack(norms).mean()``, ``norm.add_``): on the CPU it held
    NumPy's scalar, not a 0-d array, and both failed."""
    g = np.array([[3.0, -4.0], [1.0, 2.0]])
    ref = np.linalg.norm(g.ravel(), ord=float(norm_type))
    p = nn.Parameter(mf.zeros(2, 2))
    p.grad = mf.tensor(g, dtype=mf.float32)
    total = nn.utils.clip_grad_norm_([p], 1.0, norm_type=norm_type)
    assert total.shape == () and total.dtype == mf.float32
    np.testing.assert_allclose(mf.stack([total, total]).numpy(), [ref, ref], rtol=1e-6)
    np.testing.assert_allclose(total.add_(1.0).item(), ref + 1.0, rtol=1e-6)
    np.testing.assert_allclose(p.grad.numpy(), g / (ref + 1e-6), rtol=1e-6)


def test_containers_take_numpy_and_tensor_integer_indices_and_add_as_plain_containers():
    """As PyTorch's (operator.index): a NumPy integer or a one-element integer tensor indexes, sets, deletes, pops and
    inserts; ``+`` and ``*`` of a subclass give a plain Sequential / ModuleList (the subclass's __init__ may take
    other arguments), and a Sequential adds only a Sequential (ValueError otherwise)."""
    a, b, c = nn.ReLU(), nn.Tanh(), nn.Sigmoid()
    seq = nn.Sequential(a, b)
    seq[np.int64(1)] = c
    assert seq[mf.tensor(1)] is c
    seq.insert(np.int64(0), b)
    assert list(seq) == [b, a, c]
    del seq[np.int64(0)]
    assert seq.pop(np.int64(-1)) is c and list(seq) == [a]
    lst = nn.ModuleList([a, b])
    lst[np.int64(0)] = c
    del lst[np.int64(1)]
    assert list(lst) == [c]
    with pytest.raises(TypeError, match="got str"):
        seq["0"] = b

    class Block(nn.Sequential):
        def __init__(self, width):
            super().__init__(nn.Linear(width, width), nn.ReLU())

    class Blocks(nn.ModuleList):
        def __init__(self, n):
            super().__init__([nn.ReLU() for _ in range(n)])

    block = Block(2)
    assert type(block + nn.Sequential(c)) is nn.Sequential and len(block + nn.Sequential(c)) == 3
    assert type(block * 2) is nn.Sequential and list(block * 2) == [*block, *block]
    assert type(Blocks(1) + [c]) is nn.ModuleList
    with pytest.raises(ValueError, match="only objects of Sequential class"):
        block + [c]
