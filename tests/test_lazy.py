"""Lazy modules (``nn.LazyLinear``, ``nn.LazyConv*``, ``nn.LazyBatchNorm*``, ``nn.LazyInstanceNorm*``) and the
markers ``nn.UninitializedParameter``, ``nn.UninitializedBuffer``, ``nn.Buffer``, against PyTorch's semantics."""
import copy

import numpy as np
import pytest

import minifused as mf
from minifused import nn, optim

CPU = "cpu"


def _x(*shape, seed=0, dtype=np.float32):
    return mf.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), device=CPU)


# (lazy factory, non-lazy factory given the inferred size, input shape, the size's attribute, its expected value)
CASES = [
    (lambda: nn.LazyLinear(5, device=CPU), lambda n: nn.Linear(n, 5, device=CPU), (3, 7), "in_features", 7),
    (lambda: nn.LazyConv1d(4, 3, padding=1, device=CPU), lambda n: nn.Conv1d(n, 4, 3, padding=1, device=CPU),
     (2, 6, 9), "in_channels", 6),
    (lambda: nn.LazyConv2d(4, 3, stride=2, groups=2, device=CPU),
     lambda n: nn.Conv2d(n, 4, 3, stride=2, groups=2, device=CPU), (2, 6, 8, 8), "in_channels", 6),
    (lambda: nn.LazyConvTranspose1d(4, 3, stride=2, device=CPU), lambda n: nn.ConvTranspose1d(n, 4, 3, stride=2,
                                                                                               device=CPU),
     (2, 5, 7), "in_channels", 5),
    (lambda: nn.LazyConvTranspose2d(6, 2, groups=3, bias=False, device=CPU),
     lambda n: nn.ConvTranspose2d(n, 6, 2, groups=3, bias=False, device=CPU), (2, 3, 4, 4), "in_channels", 3),
    (lambda: nn.LazyBatchNorm1d(device=CPU), lambda n: nn.BatchNorm1d(n, device=CPU), (4, 3, 5), "num_features", 3),
    (lambda: nn.LazyBatchNorm2d(device=CPU), lambda n: nn.BatchNorm2d(n, device=CPU), (4, 3, 5, 5), "num_features",
     3),
    (lambda: nn.LazyBatchNorm3d(device=CPU), lambda n: nn.BatchNorm3d(n, device=CPU), (2, 3, 2, 3, 3),
     "num_features", 3),
    (lambda: nn.LazyInstanceNorm1d(device=CPU),
     lambda n: nn.InstanceNorm1d(n, affine=True, track_running_stats=True, device=CPU), (2, 4, 6), "num_features", 4),
    (lambda: nn.LazyInstanceNorm2d(device=CPU),
     lambda n: nn.InstanceNorm2d(n, affine=True, track_running_stats=True, device=CPU), (4, 5, 5), "num_features", 4),
    (lambda: nn.LazyInstanceNorm3d(device=CPU),
     lambda n: nn.InstanceNorm3d(n, affine=True, track_running_stats=True, device=CPU), (2, 4, 2, 3, 3),
     "num_features", 4),
    (lambda: nn.LazyConv3d(4, (2, 3, 2), stride=(1, 2, 1), padding=1, groups=2, device=CPU),
     lambda n: nn.Conv3d(n, 4, (2, 3, 2), stride=(1, 2, 1), padding=1, groups=2, device=CPU), (2, 6, 3, 5, 4),
     "in_channels", 6),
    (lambda: nn.LazyConvTranspose3d(6, 2, stride=2, groups=3, bias=False, device=CPU),
     lambda n: nn.ConvTranspose3d(n, 6, 2, stride=2, groups=3, bias=False, device=CPU), (3, 2, 3, 2),
     "in_channels", 3),
]
IDS = [c[0]().__class__.__name__ for c in CASES]


@pytest.mark.parametrize("lazy, eager, shape, attr, size", CASES, ids=IDS)
def test_first_forward_infers_size_and_becomes_the_non_lazy_module(lazy, eager, shape, attr, size):
    m = lazy()
    assert getattr(m, attr) == 0 and m.has_uninitialized_params()
    assert all(isinstance(p, nn.UninitializedParameter) for p in m.parameters())
    mf.manual_seed(3)
    x = _x(*shape)
    y = m(x)
    ref_cls = type(eager(size))
    assert type(m) is ref_cls and getattr(m, attr) == size and not hasattr(m, "has_uninitialized_params")
    assert not any(isinstance(v, (nn.UninitializedParameter, nn.UninitializedBuffer))
                   for v in [*m.parameters(), *m.buffers()])
    ref = eager(size)
    for (n, p), (rn, rp) in zip(m.state_dict().items(), ref.state_dict().items()):
        assert n == rn and p.shape == rp.shape and p.dtype == rp.dtype
    # forward values equal the non-lazy module's for the same parameters and state
    ref.load_state_dict(m.state_dict())
    np.testing.assert_allclose(m(x).numpy(), ref(x).numpy(), rtol=1e-6, atol=1e-6)
    assert y.shape == ref(x).shape


@pytest.mark.parametrize("lazy, eager, shape, attr, size", CASES[:5] + CASES[-2:], ids=IDS[:5] + IDS[-2:])
def test_parameters_equal_non_lazy_at_same_seed(lazy, eager, shape, attr, size):
    m = lazy()
    mf.manual_seed(11)
    m(_x(*shape))
    mf.manual_seed(11)
    ref = eager(size)
    for p, r in zip(m.parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.numpy(), r.numpy())


def test_norm_initial_state_is_the_non_lazy_one():
    m = nn.LazyBatchNorm2d(momentum=None, device=CPU)
    m.eval()  # eval before the first forward: running statistics stay as initialized
    m(_x(2, 3, 4, 4))
    np.testing.assert_array_equal(m.weight.numpy(), np.ones(3, np.float32))
    np.testing.assert_array_equal(m.bias.numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(m.running_mean.numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(m.running_var.numpy(), np.ones(3, np.float32))
    assert m.num_batches_tracked.item() == 0 and m.momentum is None
    plain = nn.LazyInstanceNorm2d(affine=False, track_running_stats=False, device=CPU)
    assert not plain.has_uninitialized_params()
    plain(_x(2, 5, 3, 3))
    assert type(plain) is nn.InstanceNorm2d and plain.num_features == 5



def test_norm_reset_parameters_before_and_after_the_first_forward():
    """Before the first forward there is nothing to reset (a no-op, as PyTorch's); after it, the module's own
    ``reset_parameters``: weight ones, bias zeros, running statistics reset, the same objects."""
    m = nn.LazyBatchNorm2d(device=CPU)
    m.reset_parameters()
    assert m.has_uninitialized_params()
    m(_x(4, 3, 2, 2) * 2 + 1)
    with mf.no_grad():
        m.weight.fill_(2.0), m.bias.fill_(-1.0)
    held = [m.weight, m.bias, m.running_mean]
    m.reset_parameters()
    assert all(a is b for a, b in zip(held, [m.weight, m.bias, m.running_mean]))
    np.testing.assert_array_equal(m.weight.numpy(), np.ones(3, np.float32))
    np.testing.assert_array_equal(m.bias.numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(m.running_mean.numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(m.running_var.numpy(), np.ones(3, np.float32))
    assert m.num_batches_tracked.item() == 0

def test_initialize_parameters_keeps_the_lazy_class_until_forward():
    m = nn.LazyLinear(3, device=CPU)
    m.initialize_parameters(_x(2, 7))
    assert type(m) is nn.LazyLinear and not m.has_uninitialized_params() and m.weight.shape == (3, 7)
    w = m.weight.numpy().copy()
    m(_x(2, 7))
    assert type(m) is nn.Linear
    np.testing.assert_array_equal(m.weight.numpy(), w)  # the forward does not draw them again


def test_uninitialized_markers():
    p = nn.UninitializedParameter(device=CPU)
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.dtype == np.float32 and repr(p) == \
        "<UninitializedParameter>"
    with pytest.raises(RuntimeError, match="uninitialized parameter"):
        p.shape
    with pytest.raises(ValueError, match="uninitialized parameter"):
        p.numel()
    p.materialize((2, 3))
    assert type(p) is nn.Parameter and p.shape == (2, 3)
    b = nn.UninitializedBuffer(device=CPU, dtype="float64")
    assert isinstance(b, nn.Buffer) and not b.requires_grad and b.dtype == np.float64
    b.materialize((4,))
    assert b.shape == (4,) and b.dtype == np.float64


def test_parameters_and_optimizer_before_initialization():
    m = nn.LazyLinear(2, device=CPU)
    params = list(m.parameters())
    assert [type(p) for p in params] == [nn.UninitializedParameter] * 2
    opt = optim.SGD(m.parameters(), lr=0.1)  # accepted, as PyTorch's: the same objects materialize in place
    x = _x(3, 4)
    m(x)
    assert all(type(p) is nn.Parameter for p in params) and params[0] is m.weight
    before = m.weight.numpy().copy()
    m(x).sum().backward()
    opt.step()
    assert not np.array_equal(before, m.weight.numpy())


def test_state_dict_of_uninitialized_and_round_trip():
    lazy = nn.Sequential(nn.LazyConv2d(4, 3, device=CPU), nn.LazyBatchNorm2d(device=CPU), nn.Flatten(),
                         nn.LazyLinear(2, device=CPU))
    sd = lazy.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                        "1.num_batches_tracked", "3.weight", "3.bias"]
    assert isinstance(sd["0.weight"], nn.UninitializedParameter)
    assert isinstance(sd["1.running_mean"], nn.UninitializedBuffer)
    copy.deepcopy(lazy).load_state_dict(sd)  # uninitialized into uninitialized: stays so
    trained = copy.deepcopy(lazy)
    x = _x(2, 3, 6, 6)
    trained(x)
    target = copy.deepcopy(lazy)
    target.load_state_dict(trained.state_dict())
    assert target[0].in_channels == 3 and target[3].in_features == 64 and target[0].weight.shape == (4, 3, 3, 3)
    for (k, a), b in zip(target.state_dict().items(), trained.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    trained.eval(), target.eval()
    np.testing.assert_allclose(target(x).numpy(), trained(x).numpy(), rtol=1e-6, atol=1e-6)
    assert type(target[0]) is nn.Conv2d and type(target[3]) is nn.Linear


def test_state_dict_load_errors():
    with pytest.raises(RuntimeError, match=r"weight: shape \(3, 3\) in the state dict does not fit LazyLinear"):
        nn.LazyLinear(4, device=CPU).load_state_dict(nn.Linear(3, 3, device=CPU).state_dict())
    with pytest.raises(RuntimeError, match="weight: uninitialized in the state dict"):
        nn.Linear(3, 3, device=CPU).load_state_dict(nn.LazyLinear(3, device=CPU).state_dict())


def test_to_dtype_before_first_forward():
    m = nn.Sequential(nn.LazyLinear(3, device=CPU), nn.LazyBatchNorm1d(device=CPU)).to(mf.float64)
    m(_x(4, 5, dtype=np.float64))
    assert m[0].weight.dtype == np.float64 and m[1].running_mean.dtype == np.float64
    assert m[1].num_batches_tracked.dtype == np.int64


def test_errors_name_the_module():
    with pytest.raises(ValueError, match="LazyConv2d: in_channels=3 .* not divisible by groups=2"):
        nn.LazyConv2d(4, 3, groups=2, device=CPU)(_x(1, 3, 5, 5))
    with pytest.raises(RuntimeError, match=r"LazyConv1d: expected a 2-D \(unbatched\) or 3-D"):
        nn.LazyConv1d(4, 3, device=CPU)(_x(5))
    with pytest.raises(ValueError, match="LazyBatchNorm2d: expected 4-D input"):
        nn.LazyBatchNorm2d(device=CPU)(_x(3, 4))
    with pytest.raises(TypeError, match="LazyLinear: expected a tensor"):
        nn.LazyLinear(2, device=CPU)([1.0, 2.0])
    m = nn.LazyLinear(2, device=CPU)
    with pytest.raises(IndexError, match="LazyLinear"):
        m(mf.tensor(1.0, device=CPU))
    assert type(m) is nn.LazyLinear and m.has_uninitialized_params()  # a refused input changes nothing


def test_lazy_linear_after_flatten_trains():
    mf.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, device=CPU), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.LazyLinear(10, device=CPU))
    x, y = _x(8, 1, 10, 10), mf.tensor(np.arange(8) % 10, device=CPU)
    model(x)  # the dry run, then the optimizer sees real parameters
    assert type(model[4]) is nn.Linear and model[4].in_features == 4 * 4 * 4
    opt = optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        loss = nn.CrossEntropyLoss()(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[1] < losses[0]


def test_buffer_assignment_registers():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.kept = nn.Buffer(mf.ones(2, device=CPU))
            self.scratch = nn.Buffer(mf.zeros(3, device=CPU), persistent=False)
            self.w = nn.Parameter(mf.ones(1, device=CPU))

    m = M()
    assert [n for n, _ in m.named_buffers()] == ["kept", "scratch"] and list(m.state_dict()) == ["w", "kept"]
    assert isinstance(m.kept, nn.Buffer) and not m.kept.requires_grad
    m.scratch = nn.Buffer(mf.zeros(3, device=CPU), persistent=True)  # re-assigned: persistent now
    assert list(m.state_dict()) == ["w", "kept", "scratch"]
    m.kept = mf.ones(2, device=CPU) * 3  # a plain tensor keeps a buffer's place
    assert m._buffers["kept"] is m.kept and "doubled" not in m._buffers
    m.doubled = m.kept * 2  # an op's result is a plain tensor: an attribute, no buffer
    assert "doubled" not in m._buffers
    t = mf.ones(2, device=CPU)
    assert nn.Buffer(t)._version == t._version and np.shares_memory(nn.Buffer(t).numpy(), t.numpy())
    with pytest.raises(TypeError, match="cannot assign Buffer as parameter 'w'"):
        m.w = nn.Buffer(mf.ones(1, device=CPU))
    m.plain = 1
    with pytest.raises(KeyError, match="'plain' already exists"):
        m.plain = nn.Buffer(mf.ones(1, device=CPU))


@pytest.mark.gpu
def test_lazy_conv_bn_materializes_on_cuda_and_matches_cpu():
    def model(device):
        return nn.Sequential(nn.LazyConv2d(4, 3, padding=1, device=device), nn.LazyBatchNorm2d(device=device),
                             nn.ReLU())

    gpu, cpu = model("cuda"), model(CPU)
    x = _x(2, 3, 6, 6)
    gpu(x.to("cuda"))
    assert gpu[0].weight.is_cuda and gpu[1].running_mean.is_cuda and type(gpu[0]) is nn.Conv2d
    cpu.load_state_dict({k: v.to(CPU) for k, v in gpu.state_dict().items()})
    gpu.eval(), cpu.eval()
    np.testing.assert_allclose(gpu(x.to("cuda")).cpu().numpy(), cpu(x).numpy(), rtol=1e-4, atol=1e-4)
    moved = model(CPU).to("cuda")  # .to before the first forward: materialized there
    moved(x.to("cuda"))
    assert moved[0].weight.is_cuda


def test_lazy_conv3d_loads_a_state_dict():
    m = nn.LazyConv3d(4, 2, device=CPU)
    m.load_state_dict(nn.Conv3d(3, 4, 2, device=CPU).state_dict())
    assert m.weight.shape == (4, 3, 2, 2, 2)
    m(mf.randn(1, 3, 3, 3, 3, device=CPU))
    assert type(m) is nn.Conv3d and m.in_channels == 3
    t = nn.LazyConvTranspose3d(4, 2, groups=2, device=CPU)
    t.load_state_dict(nn.ConvTranspose3d(6, 4, 2, groups=2, device=CPU).state_dict())
    t(mf.randn(1, 6, 2, 2, 2, device=CPU))
    assert type(t) is nn.ConvTranspose3d and t.in_channels == 6 and t.weight.shape == (6, 2, 2, 2, 2)
