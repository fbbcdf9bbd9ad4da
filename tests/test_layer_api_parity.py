"""Layer and optimizer API details PyTorch code relies on: each layer's ``forward`` argument names (``model(input=x)``),
the reprs of loss modules and optimizers, the entries of scheduler state dicts (so PyTorch's load here and this
package's load in PyTorch), and the margins the triplet losses refuse. Expected values: NumPy float64 or by hand."""
import inspect
import math

import numpy as np
import pytest

import minifused as mf
from minifused import functional as F, nn, optim
from minifused.optim import lr_scheduler as S
from minifused.optim.swa_utils import SWALR
from tolerances import cpu


def _a(t):
    return np.asarray(t.detach().numpy(), np.float64)


# ---------------------------------------------------------------- forward argument names
#: every layer whose PyTorch forward takes its tensor as ``input`` (PyTorch 2.x's signatures)
INPUT_NAMED = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d", "AlphaDropout", "AvgPool1d", "AvgPool2d", "AvgPool3d", "BCELoss", "BCEWithLogitsLoss",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "CELU", "ChannelShuffle", "CircularPad1d", "CircularPad2d",
    "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "Conv1d", "Conv2d", "Conv3d",
    "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "CrossEntropyLoss", "CrossMapLRN2d", "Dropout",
    "Dropout1d", "Dropout2d", "Dropout3d", "ELU", "Embedding", "EmbeddingBag", "FeatureAlphaDropout", "Flatten",
    "Fold", "FractionalMaxPool2d", "FractionalMaxPool3d", "GELU", "GLU", "GRU", "GRUCell", "GaussianNLLLoss",
    "GroupNorm", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "HingeEmbeddingLoss", "HuberLoss", "Identity",
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "KLDivLoss", "L1Loss", "LPPool1d", "LPPool2d", "LPPool3d",
    "LSTM", "LSTMCell", "LayerNorm", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d",
    "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
    "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyLinear", "LeakyReLU", "Linear",
    "LocalResponseNorm", "LogSigmoid", "LogSoftmax", "MSELoss", "MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d",
    "MaxUnpool2d", "MaxUnpool3d", "Mish", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss",
    "NLLLoss", "NLLLoss2d", "PReLU", "PixelShuffle", "PixelUnshuffle", "RNN", "RNNCell", "RReLU", "ReLU", "ReLU6",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "SELU", "Sequential", "SiLU", "Sigmoid", "SmoothL1Loss", "SoftMarginLoss", "Softmax",
    "Softmax2d", "Softmin", "Softplus", "Softshrink", "Softsign", "SyncBatchNorm", "Tanh", "Tanhshrink", "Threshold",
    "Unflatten", "Unfold", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d", "ZeroPad1d", "ZeroPad2d",
    "ZeroPad3d"]


@pytest.mark.parametrize("name", INPUT_NAMED)
def test_forward_takes_input_by_pytorchs_name(name):
    params = list(inspect.signature(getattr(nn, name).forward).parameters)
    assert params[1] == "input", f"{name}.forward{inspect.signature(getattr(nn, name).forward)}"


def test_rmsnorm_forward_names_its_input_x_as_pytorch():
    m = nn.RMSNorm(3, eps=0.0, dtype=mf.float64)
    x = np.array([[1.0, 2.0, 2.0]])
    y = m(x=cpu(x, dtype=mf.float64))
    np.testing.assert_allclose(_a(y), x / np.sqrt(3.0), rtol=1e-12)  # rms of (1, 2, 2) is sqrt(3)


def _gelu(x):
    return x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


X4 = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4) - 7.5
X3 = np.arange(8, dtype=np.float64).reshape(1, 2, 4) - 3.5
KEYWORD_CASES = {
    "Identity": (lambda: nn.Identity(), X3, lambda x: x),
    "ReLU": (lambda: nn.ReLU(), X3, lambda x: np.maximum(x, 0)),
    "GELU": (lambda: nn.GELU(), X3, _gelu),
    "Sigmoid": (lambda: nn.Sigmoid(), X3, lambda x: 1 / (1 + np.exp(-x))),
    "Tanh": (lambda: nn.Tanh(), X3, np.tanh),
    "Flatten": (lambda: nn.Flatten(), X3, lambda x: x.reshape(1, 8)),
    "Unflatten": (lambda: nn.Unflatten(2, (2, 2)), X3, lambda x: x.reshape(1, 2, 2, 2)),
    "Dropout(eval)": (lambda: nn.Dropout(0.5).eval(), X3, lambda x: x),
    "Dropout2d(eval)": (lambda: nn.Dropout2d(0.5).eval(), X4, lambda x: x),
    "MaxPool2d": (lambda: nn.MaxPool2d(2), X4, lambda x: x.reshape(1, 1, 2, 2, 2, 2).max(axis=(3, 5))),
    "AvgPool2d": (lambda: nn.AvgPool2d(2), X4, lambda x: x.reshape(1, 1, 2, 2, 2, 2).mean(axis=(3, 5))),
    "AvgPool1d": (lambda: nn.AvgPool1d(2), X3, lambda x: x.reshape(1, 2, 2, 2).mean(axis=3)),
    "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d(1), X4, lambda x: x.mean(axis=(2, 3), keepdims=True)),
    "AdaptiveMaxPool1d": (lambda: nn.AdaptiveMaxPool1d(1), X3, lambda x: x.max(axis=2, keepdims=True)),
    "ZeroPad2d": (lambda: nn.ZeroPad2d(1), X4, lambda x: np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))),
    "ReflectionPad1d": (lambda: nn.ReflectionPad1d(1), X3, lambda x: np.pad(x, ((0, 0), (0, 0), (1, 1)), "reflect")),
    "Upsample": (lambda: nn.Upsample(scale_factor=2), X3, lambda x: np.repeat(x, 2, axis=2)),
    "MaxPool3d": (lambda: nn.MaxPool3d(2), X4.reshape(1, 1, 2, 2, 4),
                  lambda x: x.reshape(1, 1, 1, 2, 1, 2, 2, 2).max(axis=(3, 5, 7))),
}


@pytest.mark.parametrize("case", list(KEYWORD_CASES))
def test_layer_called_with_input_keyword(case):
    make, x, ref = KEYWORD_CASES[case]
    y = make()(input=cpu(x, dtype=mf.float64))
    np.testing.assert_allclose(_a(y), ref(x), rtol=1e-12, atol=1e-15)


def _set(p, values):
    with mf.no_grad():
        p.copy_(cpu(np.asarray(values, np.float64), dtype=mf.float64))


def test_weighted_layers_called_with_input_keyword():
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    lin = nn.Linear(2, 1, dtype=mf.float64)
    _set(lin.weight, [[0.25, -1.0]])
    _set(lin.bias, [0.5])
    np.testing.assert_allclose(_a(lin(input=cpu(x, dtype=mf.float64))), x @ [[0.25], [-1.0]] + 0.5, rtol=1e-12)
    # a 1x1 convolution: a matrix product over the channels
    conv = nn.Conv2d(2, 1, 1, dtype=mf.float64)
    _set(conv.weight, [[[[2.0]], [[-1.0]]]])
    _set(conv.bias, [0.25])
    img = X4.reshape(1, 2, 2, 4)
    np.testing.assert_allclose(_a(conv(input=cpu(img, dtype=mf.float64))), 2 * img[:, :1] - img[:, 1:] + 0.25,
                               rtol=1e-12)
    c1 = nn.Conv1d(2, 1, 1, bias=False, dtype=mf.float64)
    _set(c1.weight, [[[1.0], [3.0]]])
    np.testing.assert_allclose(_a(c1(input=cpu(X3, dtype=mf.float64))), X3[:, :1] + 3 * X3[:, 1:], rtol=1e-12)
    # stride 2 admits lengths 7 and 8; output_size picks 8 (a kernel of ones, stride 2: each input twice)
    ct = nn.ConvTranspose1d(1, 1, 2, stride=2, padding=0, bias=False, dtype=mf.float64)
    _set(ct.weight, [[[1.0, 1.0]]])
    y = ct(input=cpu(X3[:, :1], dtype=mf.float64), output_size=[8])
    np.testing.assert_allclose(_a(y), np.repeat(X3[:, :1], 2, axis=2), rtol=1e-12)
    emb = nn.Embedding(3, 2, dtype=mf.float64)
    _set(emb.weight, [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    np.testing.assert_allclose(_a(emb(input=mf.tensor([2, 0], device="cpu"))), [[4.0, 5.0], [0.0, 1.0]])


def test_lazy_layer_and_sequential_take_input_keyword():
    x = np.array([[1.0, -2.0, 0.5]])
    lazy = nn.LazyLinear(1, dtype=mf.float64)
    y = lazy(input=cpu(x, dtype=mf.float64))
    assert lazy.in_features == 3
    np.testing.assert_allclose(_a(y), x @ _a(lazy.weight).T + _a(lazy.bias), rtol=1e-12)
    lin = nn.Linear(3, 2, dtype=mf.float64)
    seq = nn.Sequential(lin, nn.ReLU())
    with mf.no_grad():  # the fused Linear+ReLU path
        out = seq(input=cpu(x, dtype=mf.float64))
    np.testing.assert_allclose(_a(out), np.maximum(x @ _a(lin.weight).T + _a(lin.bias), 0), rtol=1e-12)


def test_pre_hook_with_kwargs_sees_input_by_name():
    seen = []

    def hook(module, args, kwargs):
        seen.append(sorted(kwargs))
        return args, {"input": kwargs["input"] * 2}

    m = nn.Tanh()
    m.register_forward_pre_hook(hook, with_kwargs=True)
    y = m(input=cpu([0.25, -0.5], dtype=mf.float64))
    assert seen == [["input"]]
    np.testing.assert_allclose(_a(y), np.tanh([0.5, -1.0]), rtol=1e-12)


# ---------------------------------------------------------------- loss reprs
@pytest.mark.parametrize("make", [
    lambda: nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=3, reduction="sum"),
    lambda: nn.NLLLoss(reduction="none", ignore_index=1), lambda: nn.MSELoss(reduction="sum"),
    lambda: nn.L1Loss(reduction="sum"), lambda: nn.SmoothL1Loss(beta=0.5, reduction="sum"),
    lambda: nn.HuberLoss(delta=2.0), lambda: nn.KLDivLoss(reduction="batchmean", log_target=True),
    lambda: nn.BCELoss(reduction="sum"), lambda: nn.BCEWithLogitsLoss(reduction="sum"),
    lambda: nn.SoftMarginLoss(reduction="sum"), lambda: nn.MultiLabelMarginLoss(reduction="sum"),
    lambda: nn.CTCLoss(blank=1, reduction="sum", zero_infinity=True),
    lambda: nn.TripletMarginLoss(margin=0.5, swap=True)])
def test_loss_modules_print_no_settings(make):
    m = make()
    assert repr(m) == f"{type(m).__name__}()"


# ---------------------------------------------------------------- optimizer reprs
def test_optimizer_repr_matches_pytorchs_layout():
    p, q = nn.Parameter(mf.ones(2, device="cpu")), nn.Parameter(mf.ones(1, device="cpu"))
    sgd = optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=0.1, momentum=0.9, dampening=0,
                    weight_decay=0)
    group = ("    dampening: 0\n    differentiable: False\n    foreach: None\n    fused: None\n    lr: {}\n"
             "    maximize: False\n    momentum: 0.9\n    nesterov: False\n    weight_decay: 0\n")
    assert repr(sgd) == ("SGD (\nParameter Group 0\n" + group.format(0.1) + "\nParameter Group 1\n"
                         + group.format(0.5) + ")")
    adam = optim.Adam([{"params": [p]}, {"params": [q], "weight_decay": 0}], lr=0.01, weight_decay=0.1)
    group = ("    amsgrad: False\n    betas: (0.9, 0.999)\n    capturable: False\n    decoupled_weight_decay: False\n"
             "    differentiable: False\n    eps: 1e-08\n    foreach: None\n    fused: None\n    lr: 0.01\n"
             "    maximize: False\n    weight_decay: {}\n")
    assert repr(adam) == ("Adam (\nParameter Group 0\n" + group.format(0.1) + "\nParameter Group 1\n"
                          + group.format(0) + ")")
    rms = optim.RMSprop([p], lr=0.01, momentum=0, weight_decay=0)  # no fused in PyTorch's RMSprop
    assert repr(rms) == ("RMSprop (\nParameter Group 0\n    alpha: 0.99\n    capturable: False\n    centered: False\n"
                         "    differentiable: False\n    eps: 1e-08\n    foreach: None\n    lr: 0.01\n"
                         "    maximize: False\n    momentum: 0\n    weight_decay: 0\n)")

    class MyAdamW(optim.AdamW):  # a user's subclass: its base's switches
        pass

    assert repr(MyAdamW([p], lr=0.01)) == (
        "MyAdamW (\nParameter Group 0\n    amsgrad: False\n    betas: (0.9, 0.999)\n    capturable: False\n"
        "    decoupled_weight_decay: True\n    differentiable: False\n    eps: 1e-08\n    foreach: None\n"
        "    fused: None\n    lr: 0.01\n    maximize: False\n    weight_decay: 0.01\n)")

    class Plain(optim.Optimizer):  # a user's optimizer from scratch: its own entries only
        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

    assert repr(Plain([p])) == "Plain (\nParameter Group 0\n    lr: 0.1\n)"


# ---------------------------------------------------------------- scheduler state dicts
def _sgd(lr=0.1, momentum=0.0):
    return optim.SGD([nn.Parameter(mf.ones(1, device="cpu"))], lr=lr, momentum=momentum)


def test_scheduler_state_dicts_hold_pytorchs_entries():
    sched = S.LambdaLR(_sgd(), lambda e: 0.5 ** e)
    sched.step()
    sd = sched.state_dict()
    assert sorted(sd) == ["_get_lr_called_within_step", "_is_initial", "_last_lr", "_step_count", "base_lrs",
                          "last_epoch", "lr_lambdas"]
    assert sd["_get_lr_called_within_step"] is False and sd["_last_lr"] == [0.05]
    sd["_get_lr_called_within_step"] = False
    fresh = S.LambdaLR(_sgd(), lambda e: 0.5 ** e)
    fresh.load_state_dict(sd)
    fresh.step()
    assert fresh.get_last_lr() == [0.1 * 0.5 ** 2]
    sd = S.StepLR(_sgd(), 2).state_dict()
    assert sd["_get_lr_called_within_step"] is False
    warm = S.CosineAnnealingWarmRestarts(_sgd(), 4)
    warm.step()
    assert warm.state_dict()["_get_lr_called_within_step"] is False
    assert "_get_lr_called_within_step" not in S.ReduceLROnPlateau(_sgd()).state_dict()  # as PyTorch's


def test_get_lr_flag_is_set_within_step_only():
    class Probe(S.StepLR):
        def get_lr(self):
            self.flags.append(self._get_lr_called_within_step)
            return super().get_lr()

    Probe.flags = []
    sched = Probe(_sgd(), 2)
    sched.step()
    sched.step(5)  # the closed form: StepLR has one, get_lr is not called
    assert Probe.flags == [True, True] and sched._get_lr_called_within_step is False
    sched.get_lr()
    assert Probe.flags[-1] is False


def test_one_cycle_state_dict_uses_pytorchs_names():
    sched = S.OneCycleLR(_sgd(momentum=0.9), 1.0, total_steps=10)
    assert sorted(sched.state_dict()) == ["_anneal_func_type", "_get_lr_called_within_step", "_is_initial",
                                          "_last_lr", "_schedule_phases", "_step_count", "base_lrs",
                                          "cycle_momentum", "last_epoch", "total_steps", "use_beta1"]
    plain = S.OneCycleLR(_sgd(), 1.0, total_steps=10, cycle_momentum=False, anneal_strategy="linear")
    assert plain.state_dict()["_anneal_func_type"] == "linear" and "use_beta1" not in plain.state_dict()
    # linear warm-up over pct_start * 10 - 1 = 2 steps from 1/25 to 1: step 1 is halfway
    plain.step()
    np.testing.assert_allclose(plain.get_last_lr(), [(0.04 + 1.0) / 2], rtol=1e-12)
    # a state dict saved under the earlier names still loads
    old = S.OneCycleLR(_sgd(momentum=0.9), 1.0, total_steps=10, anneal_strategy="linear").state_dict()
    old["anneal_strategy"] = old.pop("_anneal_func_type")
    old["_use_beta1"] = old.pop("use_beta1")
    resumed = S.OneCycleLR(_sgd(momentum=0.9), 1.0, total_steps=10)
    resumed.load_state_dict(old)
    assert resumed._anneal_func_type == "linear" and resumed.use_beta1 is False
    resumed.step()
    np.testing.assert_allclose(resumed.get_last_lr(), [0.52], rtol=1e-12)


class _Halving:
    """A callable scale function with state (PyTorch saves its ``__dict__``)."""

    def __init__(self):
        self.base = 0.5

    def __call__(self, cycle):
        return self.base ** (cycle - 1)


def test_cyclic_lr_saves_its_scale_function_as_pytorch():
    sched = S.CyclicLR(_sgd(momentum=0.9), 0.1, 0.5, step_size_up=2, scale_fn=lambda c: 1.0)
    assert sched.state_dict()["_scale_fn_custom"] is None
    assert S.CyclicLR(_sgd(momentum=0.9), 0.1, 0.5).state_dict()["_scale_fn_custom"] is None
    fn = _Halving()
    sched = S.CyclicLR(_sgd(momentum=0.9), 0.1, 0.5, step_size_up=2, scale_fn=fn)
    sd = sched.state_dict()
    assert sd["_scale_fn_custom"] == {"base": 0.5}
    sd["_scale_fn_custom"] = {"base": 0.25}
    other = _Halving()
    resumed = S.CyclicLR(_sgd(momentum=0.9), 0.1, 0.5, step_size_up=2, scale_fn=other)
    resumed.load_state_dict(sd)
    assert other.base == 0.25 and resumed._scale_fn_custom is other
    for _ in range(5):  # into the second cycle: amplitude 0.4 * 0.25 at its first step up (halfway)
        resumed.step()
    np.testing.assert_allclose(resumed.get_last_lr(), [0.1 + 0.4 * 0.25 * 0.5], rtol=1e-12)
    with pytest.raises(ValueError, match="has no scale_fn"):
        S.CyclicLR(_sgd(momentum=0.9), 0.1, 0.5).load_state_dict(sd)


def test_swalr_state_dict_uses_pytorchs_name():
    sched = SWALR(_sgd(), swa_lr=0.05, anneal_epochs=2, anneal_strategy="linear")
    sd = sched.state_dict()
    assert sd["_anneal_strategy"] == "linear" and "anneal_strategy" not in sd
    sd["anneal_strategy"] = sd.pop("_anneal_strategy")  # a state dict saved under the earlier name
    resumed = SWALR(_sgd(), swa_lr=0.05, anneal_epochs=2)
    resumed.load_state_dict(sd)
    assert resumed._anneal_strategy == "linear"
    resumed.step()  # halfway along a line from 0.1 to 0.05
    np.testing.assert_allclose(resumed.get_last_lr(), [0.075], rtol=1e-12)


# ---------------------------------------------------------------- triplet margins
@pytest.mark.parametrize("cls", [nn.TripletMarginLoss, nn.TripletMarginWithDistanceLoss])
def test_triplet_losses_refuse_a_margin_not_above_zero(cls):
    for margin in (0.0, -1.0):
        with pytest.raises(ValueError, match=f"{cls.__name__}: expected margin to be greater than 0, got "
                                             f"{margin} instead"):
            cls(margin=margin)
    with pytest.raises(TypeError, match="expected margin to be a number, got str"):
        cls(margin="1")
    a = cpu([[0.0, 0.0]], dtype=mf.float64)
    p = cpu([[3.0, 4.0]], dtype=mf.float64)
    n = cpu([[1.0, 0.0]], dtype=mf.float64)
    # d(a, p) = 5, d(a, n) = 1 (PairwiseDistance's eps 1e-6 added to each difference)
    d_ap = math.hypot(3.0 - 1e-6, 4.0 - 1e-6)
    d_an = math.hypot(1.0 - 1e-6, -1e-6)
    np.testing.assert_allclose(float(cls(margin=0.5)(a, p, n)), d_ap - d_an + 0.5, rtol=1e-12)


def test_functional_triplet_margin_loss_refuses_a_margin_not_above_zero():
    a = mf.ones(2, 3, device="cpu")
    for margin in (0.0, -1.0):
        with pytest.raises(ValueError, match="margin must be greater than 0"):
            F.triplet_margin_loss(a, a, a, margin=margin)
    assert F.triplet_margin_loss(a, a, a + 1, margin=0.5).item() == 0.0  # (d_neg = sqrt(3) > 0.5: no loss)
