"""Idioms of training scripts written for PyTorch: picking layers by their private base classes (an InstanceNorm is
no ``_BatchNorm``), custom optimizers writing ``optimizer.state[p]``, ``ParameterDict`` key order, a deep copy of a
model (no gradients), and the step count in an optimizer's state dict; each against hand-computed values."""
import collections
import copy

import numpy as np
import pytest

import minifused as mf
from minifused import nn
from minifused.optim import swa_utils
from tolerances import cpu


def _param(values):
    return nn.Parameter(cpu(np.asarray(values, np.float32)))


# ------------------------------------------------------------ norm and convolution base classes
def test_instance_norm_is_no_batch_norm():
    bn_cls, norm_base = nn.modules.batchnorm._BatchNorm, nn.modules.batchnorm._NormBase
    assert nn.modules.instancenorm._NormBase is norm_base
    for cls in (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d, nn.LazyInstanceNorm2d):
        assert not issubclass(cls, bn_cls) and issubclass(cls, norm_base)
        assert issubclass(cls, nn.modules.instancenorm._InstanceNorm)
    for cls in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm, nn.LazyBatchNorm1d):
        assert issubclass(cls, bn_cls) and issubclass(cls, norm_base)
    # the init loop of many scripts: a default InstanceNorm has no weight, and is left alone
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4), nn.BatchNorm2d(4))
    with mf.no_grad():
        m[2].weight.fill_(0.25)
    for mod in m.modules():
        if isinstance(mod, bn_cls):
            nn.init.constant_(mod.weight, 1.0)
            nn.init.constant_(mod.bias, 0.5)
    np.testing.assert_array_equal(m[2].weight.numpy(), np.ones(4, np.float32))
    np.testing.assert_array_equal(m[2].bias.numpy(), np.full(4, 0.5, np.float32))
    assert m[1].weight is None and m[1].bias is None


def test_instance_norm_keeps_its_norm_state():
    """What InstanceNorm takes from _NormBase: its buffers, their reset, the parameters and their reset."""
    m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    assert [name for name, _ in m.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    with mf.no_grad():
        m.running_mean.fill_(0.5)
        m.running_var.fill_(2.0)
        m.weight.fill_(3.0)
    m.reset_running_stats()
    np.testing.assert_array_equal(m.running_mean.numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(m.running_var.numpy(), np.ones(3, np.float32))
    np.testing.assert_array_equal(m.weight.numpy(), np.full(3, 3.0, np.float32))
    m.reset_parameters()
    np.testing.assert_array_equal(m.weight.numpy(), np.ones(3, np.float32))
    assert not hasattr(m, "activation")  # (a BatchNorm's fused ReLU is no InstanceNorm's)


def test_update_bn_leaves_instance_norm_running_stats():
    """update_bn resets and refills the BatchNorm's statistics (the batch's mean and unbiased variance); the
    InstanceNorm after it keeps its own and moves them once by momentum 0.1, as a training forward does."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 4, 4)).astype(np.float32)
    m = nn.Sequential(nn.BatchNorm2d(2), nn.InstanceNorm2d(2, track_running_stats=True))
    with mf.no_grad():
        m[1].running_mean.fill_(0.5)
        m[1].running_var.fill_(2.0)
    m.eval()
    swa_utils.update_bn([cpu(x)], m)
    xd = x.astype(np.float64)
    mean, var = xd.mean((0, 2, 3)), xd.var((0, 2, 3))
    y = (xd - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    np.testing.assert_allclose(m[0].running_mean.numpy(), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m[0].running_var.numpy(), xd.var((0, 2, 3), ddof=1), rtol=1e-5)
    assert int(m[0].num_batches_tracked.item()) == 1 and m[0].momentum == 0.1
    np.testing.assert_allclose(m[1].running_mean.numpy(), 0.9 * 0.5 + 0.1 * y.mean((2, 3)).mean(0), rtol=1e-5)
    np.testing.assert_allclose(m[1].running_var.numpy(), 0.9 * 2.0 + 0.1 * y.var((2, 3), ddof=1).mean(0),
                               rtol=1e-5)
    assert not m.training


def test_conv_nd_base_classes():
    conv, transposed = nn.modules.conv._ConvNd, nn.modules.conv._ConvTransposeNd
    layers = [nn.Conv1d(1, 1, 1), nn.Conv2d(1, 1, 1), nn.Conv3d(1, 1, 1), nn.LazyConv2d(1, 1)]
    transposes = [nn.ConvTranspose1d(1, 1, 1), nn.ConvTranspose2d(1, 1, 1), nn.ConvTranspose3d(1, 1, 1),
                  nn.LazyConvTranspose2d(1, 1)]
    assert [isinstance(m, conv) for m in layers + transposes] == [True] * 8
    assert [isinstance(m, transposed) for m in layers + transposes] == [False] * 4 + [True] * 4
    others = [nn.Linear(1, 1), nn.BatchNorm2d(1), nn.Conv2d]
    assert not any(isinstance(m, conv) for m in others)
    # the script idiom: Kaiming init of every convolution's weight
    m = nn.Sequential(nn.Conv2d(2, 3, 1, bias=False), nn.Linear(3, 3), nn.ConvTranspose2d(3, 2, 1))
    for mod in m.modules():
        if isinstance(mod, conv):
            nn.init.zeros_(mod.weight)
    assert not m[0].weight.numpy().any() and not m[2].weight.numpy().any() and m[1].weight.numpy().any()


# ------------------------------------------------------------ optimizer.state as PyTorch's defaultdict(dict)
def test_optimizer_state_of_a_new_parameter_is_an_empty_dict():
    w, b = _param([1.0, 2.0]), _param([0.0])
    opt = mf.optim.SGD([w, b], lr=0.1)
    assert w not in opt.state and len(opt.state) == 0
    st = opt.state[w]
    assert st == {} and w in opt.state and b not in opt.state and len(opt.state) == 1
    st["buf"] = 7
    assert opt.state[w] is st and opt.state.get(w) == {"buf": 7} and opt.state.get(b) is None
    assert opt.state_dict()["state"] == {0: {"buf": 7}}


def test_optimizer_state_keys_items_iteration_are_the_parameters():
    w, b = _param([1.0, 2.0]), _param([3.0])
    opt = mf.optim.SGD([w, b], lr=0.1, momentum=0.9)
    w.grad, b.grad = cpu(np.array([0.5, -1.0], np.float32)), cpu(np.array([2.0], np.float32))
    opt.step()
    assert [k is p for k, p in zip(opt.state.keys(), (w, b))] == [True, True] and len(opt.state.keys()) == 2
    assert [k is p for k, p in zip(opt.state, (w, b))] == [True, True]
    assert w in opt.state.keys() and _param([1.0]) not in opt.state.keys()
    bufs = {id(p): st["momentum_buffer"].numpy() for p, st in opt.state.items()}
    np.testing.assert_array_equal(bufs[id(w)], [0.5, -1.0])  # the first momentum buffer is the gradient
    np.testing.assert_array_equal(bufs[id(b)], [2.0])
    np.testing.assert_allclose(w.numpy(), [0.95, 2.1], rtol=1e-6)
    st = opt.state[w]
    assert (w, st) in opt.state.items() and (b, {}) not in opt.state.items()
    assert (_param([1.0]), {}) not in opt.state.items() and len(opt.state) == 2  # (asking creates nothing)


def test_optimizer_state_setdefault_update_pop():
    w, b = _param([1.0, 2.0]), _param([3.0])
    opt = mf.optim.SGD([w, b], lr=0.1)
    opt.state.setdefault(w, {})["x"] = 1
    assert w in opt.state and opt.state[w] == {"x": 1} and opt.state.setdefault(w, {"y": 2}) == {"x": 1}
    opt.state.update({b: {"y": 2}})
    assert opt.state[b] == {"y": 2}
    assert opt.state_dict()["state"] == {0: {"x": 1}, 1: {"y": 2}}
    assert opt.state.pop(w) == {"x": 1} and w not in opt.state and [k is b for k in opt.state] == [True]
    key, value = opt.state.popitem()
    assert key is b and value == {"y": 2} and len(opt.state) == 0 and list(opt.state) == []


def test_sam_style_custom_optimizer():
    """SAM (sharpness-aware minimization) stores the weights in ``self.state[p]`` before its ascent step and
    puts them back before the base optimizer's step. On 0.5·|w|² (gradient w) from w0 = (3, 4), rho = 0.5:
    e = rho·g/|g| = (0.3, 0.4), w1 = (3.3, 4.4), and SGD(lr=0.1) with w1's gradient gives w0 - 0.1·w1."""

    class SAM(mf.optim.Optimizer):
        def __init__(self, params, base, rho, **kw):
            super().__init__(params, dict(rho=rho, **kw))
            self.base = base(self.param_groups, **kw)

        @mf.no_grad()
        def first_step(self):
            norm = mf.stack([p.grad.norm() for g in self.param_groups for p in g["params"]]).norm()
            for g in self.param_groups:
                for p in g["params"]:
                    self.state[p]["old_p"] = p.data.clone()
                    p.add_(p.grad * (g["rho"] / norm))

        @mf.no_grad()
        def second_step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    p.data = self.state[p]["old_p"]
            self.base.step()

    w = _param([3.0, 4.0])
    opt = SAM([w], mf.optim.SGD, rho=0.5, lr=0.1)
    for step in (opt.first_step, opt.second_step):
        opt.zero_grad()
        (0.5 * (w * w).sum()).backward()
        step()
    np.testing.assert_allclose(w.numpy(), [3.0 - 0.33, 4.0 - 0.44], rtol=1e-6)
    # ``p.data = old_p`` made the weight share old_p's memory, as in PyTorch: the step moved both
    np.testing.assert_array_equal(opt.state[w]["old_p"].numpy(), w.numpy())
    assert len(opt.state) == 1 and [k is w for k in opt.state] == [True]


def test_adam_steps_after_its_state_was_read():
    """``opt.state[p]`` before the first step leaves an empty dict, which Adam fills as a new parameter's state:
    its first step moves each weight by lr·g/(|g| + eps)."""
    w = _param([1.0, -2.0])
    opt = mf.optim.Adam([w], lr=0.1)
    assert opt.state[w] == {}
    w.grad = cpu(np.array([0.5, -4.0], np.float32))
    opt.step()
    np.testing.assert_allclose(w.numpy(), [1.0 - 0.1 * 0.5 / (0.5 + 1e-8), -2.0 + 0.1 * 4.0 / (4.0 + 1e-8)],
                               rtol=1e-6)
    assert set(opt.state[w]) == {"step", "exp_avg", "exp_avg_sq"}


def test_optimizer_own_state_keys_and_deepcopy():
    """A custom optimizer's own (non-parameter) key travels through its state dict as PyTorch's; a deep copy of
    the optimizer keys its state by the copied parameters."""
    w = _param([1.0, 2.0])
    opt = mf.optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = cpu(np.array([0.5, -1.0], np.float32))
    opt.step()
    opt.state["la_step"] = {"k": 3}
    sd = opt.state_dict()
    assert list(sd["state"]) == [0, "la_step"] and sd["state"]["la_step"] == {"k": 3}
    w2 = _param([1.0, 2.0])
    opt2 = mf.optim.SGD([w2], lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    assert opt2.state["la_step"] == {"k": 3} and [k is w2 for k in opt2.state][0]
    np.testing.assert_array_equal(opt2.state[w2]["momentum_buffer"].numpy(), [0.5, -1.0])
    oc = copy.deepcopy(opt)
    pc = oc.param_groups[0]["params"][0]
    assert pc is not w and pc in oc.state and w not in oc.state and len(oc.state) == 2
    buf = oc.state[pc]["momentum_buffer"]
    assert buf is not opt.state[w]["momentum_buffer"]
    np.testing.assert_array_equal(buf.numpy(), [0.5, -1.0])


# ------------------------------------------------------------ ParameterDict key order
def test_parameter_dict_sorts_a_plain_dicts_keys():
    d = nn.ParameterDict({"b": _param([1.0]), "a": _param([2.0])})
    assert list(d) == ["a", "b"] and list(d.state_dict()) == ["a", "b"]
    assert [float(p.item()) for p in d.values()] == [2.0, 1.0]
    d.update({"d": _param([3.0]), "c": _param([4.0])})
    assert list(d.keys()) == ["a", "b", "c", "d"]
    assert list(nn.ParameterDict(d)) == ["a", "b", "c", "d"]
    ordered = collections.OrderedDict([("y", _param([1.0])), ("x", _param([2.0]))])
    assert list(nn.ParameterDict(ordered)) == ["y", "x"]
    assert list(nn.ParameterDict([("y", _param([1.0])), ("x", _param([2.0]))])) == ["y", "x"]
    with pytest.raises(TypeError, match="ParameterDict: keys must be strings"):
        nn.ParameterDict({"a": _param([1.0]), 1: _param([2.0])})


# ------------------------------------------------------------ deep copies
def test_deepcopy_of_a_model_drops_the_gradients():
    m = nn.Linear(2, 2)
    with mf.no_grad():
        m.weight.copy_(cpu(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)))
    m.weight.grad = cpu(np.ones((2, 2), np.float32))
    m.bias.requires_grad_(False)
    c = copy.deepcopy(m)
    assert c.weight.grad is None and c.bias.grad is None and m.weight.grad is not None
    assert type(c.weight) is nn.Parameter and c.weight.requires_grad and not c.bias.requires_grad
    np.testing.assert_array_equal(c.weight.numpy(), [[1.0, 2.0], [3.0, 4.0]])
    with mf.no_grad():
        c.weight.fill_(0.0)
    np.testing.assert_array_equal(m.weight.numpy(), [[1.0, 2.0], [3.0, 4.0]])  # its own memory
    # a parameter shared by two layers stays one parameter in the copy
    tied = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    tied[1].weight = tied[0].weight
    t = copy.deepcopy(tied)
    assert t[1].weight is t[0].weight and t[0].weight is not tied[0].weight
    # a plain tensor's deep copy keeps its gradient, as PyTorch's
    x = cpu(np.array([1.0, 2.0], np.float32), requires_grad=True)
    x.grad = cpu(np.array([3.0, 4.0], np.float32))
    np.testing.assert_array_equal(copy.deepcopy(x).grad.numpy(), [3.0, 4.0])


# ------------------------------------------------------------ the step count in a state dict
def _adam_reference(w, grads, lr=0.01, b1=0.9, b2=0.999, eps=1e-8):
    w, m, v = np.asarray(w, np.float64), 0.0, 0.0
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return w


def test_state_dict_step_is_a_float32_scalar_tensor_and_resumes():
    grads = [np.array([0.5, -1.0]), np.array([0.25, 2.0]), np.array([-1.0, 0.5])]
    w = _param([1.0, 2.0])
    opt = mf.optim.Adam([w], lr=0.01)
    for g in grads[:2]:
        w.grad = cpu(g.astype(np.float32))
        opt.step()
    step = opt.state_dict()["state"][0]["step"]
    assert isinstance(step, mf.Tensor) and step.dtype == mf.float32 and step.shape == () and step.item() == 2.0
    w2 = _param(w.numpy())
    opt2 = mf.optim.Adam([w2], lr=0.01)
    opt2.load_state_dict(opt.state_dict())
    w2.grad = cpu(grads[2].astype(np.float32))
    opt2.step()
    np.testing.assert_allclose(w2.numpy(), _adam_reference([1.0, 2.0], grads), rtol=1e-6)
    assert opt2.state_dict()["state"][0]["step"].item() == 3.0
    assert opt.state_dict()["state"][0]["step"].item() == 2.0  # (a copy: the saved dict does not move)
    # Adagrad's state exists from its constructor, at step 0; SGD keeps no step
    assert mf.optim.Adagrad([_param([1.0])]).state_dict()["state"][0]["step"].dtype == mf.float32
    sgd = mf.optim.SGD([w], lr=0.1, momentum=0.9)
    sgd.step()
    assert "step" not in sgd.state_dict()["state"][0]
    sgd.state[w]["step"] = 5  # a custom optimizer's own int count is saved as it is, as PyTorch's
    assert type(sgd.state_dict()["state"][0]["step"]) is int
