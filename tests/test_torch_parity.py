"""PyTorch parity on the GPU: every op of the registry (tests/opinfo.py) that has a PyTorch
equivalent, on each of its samples; for identical weights (PyTorch's state_dict loaded by key), every
module's forward and gradients equal PyTorch's, and the MNIST MLP and CNN follow PyTorch's loss
and parameters over training steps with SGD (momentum) and Adam.

PyTorch is an optional test dependency (it is on the GPU machine, never a dependency of
minifused). TF32 is off on both sides, so both compute in float32; what differs is the order of
summation inside cuBLAS / cuDNN and our kernels, hence the tolerances below.
"""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused import optim
from opinfo import call, make_arrays, make_inputs, params, randn, samples, torch_fn

pytestmark = pytest.mark.gpu

RTOL = 2e-4  # relative (norm) error of a single layer's outputs and gradients, float32
STEP_RTOL = 2e-3  # after several optimizer steps (Adam divides by small second moments)


def _np(t):
    if hasattr(t, "detach"):
        return t.detach().cpu().double().numpy()
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t, dtype=np.float64)


def _rel(a, b):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _load(ours, theirs):
    ours.load_state_dict({k: v.detach().cpu().numpy() for k, v in theirs.state_dict().items()})


def _check_module(torch, ours, theirs, x_np, loss_weights=None, target=None):
    """Forward and every gradient (input and parameters) of one module, ours vs PyTorch."""
    _load(ours, theirs)
    x = mf.tensor(x_np, device="cuda", requires_grad=True)
    tx = torch.tensor(x_np, device="cuda", requires_grad=True)
    y = ours(x) if target is None else ours(x, mf.tensor(target, device="cuda"))
    ty = theirs(tx) if target is None else theirs(tx, torch.tensor(target, device="cuda"))
    assert _rel(y._data.get(), ty) < RTOL
    if y.shape == ():
        y.backward()
        ty.backward()
    else:
        g = np.random.default_rng(0).standard_normal(tuple(y.shape)).astype(np.float32)
        y.backward(mf.tensor(g, device="cuda"))
        ty.backward(torch.tensor(g, device="cuda"))
    assert _rel(x.grad._data.get(), tx.grad) < RTOL
    ours_p = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        assert _rel(ours_p[name].grad._data.get(), p.grad) < RTOL, name


@pytest.mark.parametrize("entry,sample", params(p for p in samples(plain=True) if p[0].torch))
def test_op_matches_pytorch(torch, entry, sample):
    """The op's value and the gradient of every differentiable input, ours against PyTorch's, in float32."""
    ours = make_inputs(sample.specs, "cuda", np.float32)
    theirs = [torch.tensor(a if a.dtype.kind == "i" else a.astype(np.float32), device="cuda",
                           requires_grad=o.requires_grad) for a, o in zip(make_arrays(sample.specs), ours)]
    y = call(entry, sample, ours)
    ty = torch_fn(entry)(*theirs, **sample.kwargs)
    assert _rel(y, ty) < RTOL
    if not entry.grad:  # bool or integer results: nothing to differentiate
        return
    # (seed 1: the inputs come from seed 0, and a gradient equal to the input cancels in layer_norm's backward)
    g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32)
    (y * mf.tensor(g, device="cuda")).sum().backward()
    (ty * torch.tensor(g, device="cuda")).sum().backward()
    for i, (o, t) in enumerate(zip(ours, theirs)):
        if o.requires_grad:
            assert (o.grad is None) == (t.grad is None), i
            # (relative, or within 1e-6 where PyTorch's gradient is exactly 0 and ours is its rounding)
            assert o.grad is None or _rel(o.grad, t.grad) < RTOL or np.abs(_np(o.grad) - _np(t.grad)).max() < 1e-6, i


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [None, "relu", "gelu"])
def test_linear(torch, bias, act):
    tnn = torch.nn
    theirs = tnn.Linear(37, 19, bias=bias).cuda()
    ours = nn.Linear(37, 19, bias=bias, activation=act).to("cuda")
    tact = {None: lambda t: t, "relu": torch.relu,
            "gelu": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}[act]
    wrapped = tnn.Module()
    wrapped.forward = lambda t: tact(theirs(t))
    wrapped.state_dict = theirs.state_dict
    wrapped.named_parameters = theirs.named_parameters
    _check_module(torch, ours, wrapped, randn(5, 3, 37, seed=1))


@pytest.mark.parametrize("cfg", [dict(stride=1, padding=0, dilation=1), dict(stride=2, padding=1, dilation=1),
                                 dict(stride=1, padding=2, dilation=2)])
@pytest.mark.parametrize("c", [1, 6])
def test_conv2d(torch, cfg, c):
    theirs = torch.nn.Conv2d(c, 8, 3, **cfg).cuda()
    ours = nn.Conv2d(c, 8, 3, **cfg).to("cuda")
    _check_module(torch, ours, theirs, randn(3, c, 11, 9, seed=1))


def test_conv2d_relu_fused(torch):
    theirs = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU()).cuda()
    ours = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU()).to("cuda")
    _check_module(torch, ours, theirs, randn(2, 4, 9, 9, seed=1))


@pytest.mark.parametrize("make", [
    lambda m: m.LayerNorm(33), lambda m: m.LayerNorm((4, 33), elementwise_affine=False),
    lambda m: m.RMSNorm(33), lambda m: m.Softmax(dim=-1), lambda m: m.LogSoftmax(dim=-1),
    lambda m: m.MaxPool2d(2), lambda m: m.MaxPool2d(3, stride=2, padding=1), lambda m: m.AvgPool2d(2),
    lambda m: m.AvgPool2d(3, stride=2, padding=1), lambda m: m.Dropout(0.0), lambda m: m.GELU(),
], ids=["layernorm", "layernorm_noaffine", "rmsnorm", "softmax", "log_softmax", "maxpool2", "maxpool3s2p1",
        "avgpool2", "avgpool3s2p1", "dropout0", "gelu"])
def test_modules(torch, make):
    theirs, ours = make(torch.nn).cuda(), make(nn).to("cuda")
    shape = (3, 2, 4, 33) if "Pool" not in type(ours).__name__ else (3, 2, 12, 10)
    _check_module(torch, ours, theirs, randn(*shape, seed=1))


@pytest.mark.parametrize("kw", [dict(), dict(ignore_index=2), dict(label_smoothing=0.1), dict(reduction="sum")])
def test_cross_entropy(torch, kw):
    target = np.random.default_rng(3).integers(0, 7, 16)
    _check_module(torch, nn.CrossEntropyLoss(**kw), torch.nn.CrossEntropyLoss(**kw), randn(16, 7, seed=1),
                  target=target)


def test_mse(torch):
    target = randn(6, 5, seed=9)
    ours, theirs = nn.MSELoss(), torch.nn.MSELoss()
    x = mf.tensor(randn(6, 5, seed=1), device="cuda", requires_grad=True)
    tx = torch.tensor(randn(6, 5, seed=1), device="cuda", requires_grad=True)
    loss, tloss = ours(x, mf.tensor(target, device="cuda")), theirs(tx, torch.tensor(target, device="cuda"))
    loss.backward()
    tloss.backward()
    assert _rel(loss._data.get(), tloss) < RTOL and _rel(x.grad._data.get(), tx.grad) < RTOL


# ---------------------------------------------------------------- the MNIST models over steps
def _models(torch, name):
    tnn = torch.nn
    if name == "mlp":
        class TorchMLP(tnn.Module):
            def __init__(self):
                super().__init__()
                self.fc1, self.fc2, self.fc3 = tnn.Linear(784, 1024), tnn.Linear(1024, 1024), tnn.Linear(1024, 10)

            def forward(self, x):
                x = x.flatten(1)
                return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(784, 1024, activation="relu")
                self.fc2 = nn.Linear(1024, 1024, activation="relu")
                self.fc3 = nn.Linear(1024, 10)

            def forward(self, x):
                return self.fc3(self.fc2(self.fc1(x.flatten(1))))

        return MLP().to("cuda"), TorchMLP().cuda()

    class TorchCNN(tnn.Module):  # PyTorch's examples/mnist network, dropout left out (p=0)
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = tnn.Conv2d(1, 32, 3, 1), tnn.Conv2d(32, 64, 3, 1)
            self.fc1, self.fc2 = tnn.Linear(9216, 128), tnn.Linear(128, 10)

        def forward(self, x):
            f = torch.nn.functional
            x = f.max_pool2d(f.relu(self.conv2(f.relu(self.conv1(x)))), 2).flatten(1)
            return self.fc2(f.relu(self.fc1(x)))

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1, activation="relu")
            self.conv2 = nn.Conv2d(32, 64, 3, 1, activation="relu")
            self.fc1 = nn.Linear(9216, 128, activation="relu")
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            return self.fc2(self.fc1(F.max_pool2d(self.conv2(self.conv1(x)), 2).flatten(1)))

    return CNN().to("cuda"), TorchCNN().cuda()


@pytest.mark.parametrize("name", ["mlp", "cnn"])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_mnist_models_follow_pytorch_over_steps(torch, name, opt):
    torch.manual_seed(0)
    ours, theirs = _models(torch, name)
    _load(ours, theirs)
    make = {"sgd": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
            "adam": (lambda p: optim.Adam(p, lr=1e-3), lambda p: torch.optim.Adam(p, lr=1e-3))}[opt]
    o, to = make[0](ours.parameters()), make[1](theirs.parameters())
    rng = np.random.default_rng(5)
    losses = []
    for step in range(5):
        xb = rng.standard_normal((32, 1, 28, 28)).astype(np.float32)
        yb = rng.integers(0, 10, 32)
        o.zero_grad()
        loss = F.cross_entropy(ours(mf.tensor(xb, device="cuda")), mf.tensor(yb, device="cuda"))
        loss.backward()
        o.step()
        to.zero_grad()
        tloss = torch.nn.functional.cross_entropy(theirs(torch.tensor(xb, device="cuda")), torch.tensor(yb, device="cuda"))
        tloss.backward()
        to.step()
        losses.append((float(loss.item()), float(tloss.item())))
        assert abs(losses[-1][0] - losses[-1][1]) <= STEP_RTOL * abs(losses[-1][1]), losses
    ours_p = dict(ours.named_parameters())
    for k, p in theirs.named_parameters():
        assert _rel(ours_p[k]._data.get(), p) < STEP_RTOL, (k, losses)
    print(name, opt, "losses (ours, pytorch):", losses)
