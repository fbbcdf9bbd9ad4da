"""nn.init and nn.utils against PyTorch's rules: trunc_normal_ far in a tail, the older weight_norm /
spectral_norm, the parametrizations, parametrize's helpers, the flat parameter vector and the fused layers.
Every expectation is a float64 NumPy reference, a finite difference or the PyTorch rule named in the test."""
import math
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.nn as nn
from test_parametrize import Scaled as _Scale


def _tail_moments(lo, hi):
    """Mean and variance of the standard normal truncated to [lo, hi], lo > 0 far in the upper tail, as
    lo + e with e's density proportional to exp(-lo e - e^2 / 2) on [0, hi - lo] (integrated on a fine grid;
    the normal's own CDF underflows there)."""
    e = np.linspace(0.0, min(hi - lo, 50.0 / lo), 200_001)
    w = np.exp(-lo * e - 0.5 * e * e)
    m = np.trapezoid(e * w, e) / np.trapezoid(w, e)
    return lo + m, np.trapezoid((e - m) ** 2 * w, e) / np.trapezoid(w, e)


@pytest.mark.parametrize("a, b", [(-100.0, -99.0), (40.0, 40.5), (50.0, math.inf), (-math.inf, -45.0)])
def test_trunc_normal_beyond_the_normal_cdf_range(a, b):
    """trunc_normal_ on [a, b] more than 37 std from the mean (where the normal CDF underflows to 0): the
    truncated normal's mean and variance, as PyTorch's rejection draw gives (it gave a for every value)."""
    mf.manual_seed(11)
    s = 1.0 if a > 0 else -1.0  # mirrored into the upper tail
    lo, hi = sorted((s * a, s * b))
    mean, var = _tail_moments(lo, hi)
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        x = s * nn.init.trunc_normal_(mf.empty(20_000, dtype=mf.float64), a=a, b=b).numpy()
    assert x.min() >= lo and x.max() <= hi and len(np.unique(x)) == x.size
    assert abs(x.mean() - mean) < 0.05 * math.sqrt(var) and abs(x.var() / var - 1) < 0.05, (x.mean(), mean)


def test_trunc_normal_warns_only_for_a_mean_far_from_the_interval():
    """PyTorch warns where mean < a - 2 std or mean > b + 2 std, not otherwise."""
    with pytest.warns(UserWarning, match="more than 2 std"):
        nn.init.trunc_normal_(mf.empty(10), mean=0.0, std=1.0, a=2.5, b=4.0)
    with pytest.warns(UserWarning, match="more than 2 std"):
        nn.init.trunc_normal_(mf.empty(10), mean=5.0, std=0.5, a=-1.0, b=3.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.init.trunc_normal_(mf.empty(10), mean=0.0, std=1.0, a=1.5, b=4.0)
        nn.init.trunc_normal_(mf.empty(10), mean=5.0, std=0.5, a=-1.0, b=4.1)


def test_vector_to_parameters_refuses_an_integer_vector_for_trainable_parameters():
    """PyTorch's ``param.data = vec[...]`` refuses an integer tensor for a parameter that requires grad
    (RuntimeError); here before any parameter changes. An integer vector into plain tensors is fine."""
    ps = [nn.Parameter(mf.zeros(2, 3)), nn.Parameter(mf.zeros(4))]
    with pytest.raises(RuntimeError, match="floating point"):
        nn.utils.vector_to_parameters(mf.arange(10), ps)
    assert all(p.dtype == mf.float32 and p.requires_grad and not p.detach().numpy().any() for p in ps)
    plain = [mf.zeros(2, dtype=mf.int64), mf.zeros(3, dtype=mf.int64)]
    nn.utils.vector_to_parameters(mf.arange(5), plain)
    assert plain[0].tolist() == [0, 1] and plain[1].tolist() == [2, 3, 4]


def test_hook_weight_norm_warns_checks_dim_and_refuses_a_second_registration():
    """The hook-based nn.utils.weight_norm: PyTorch's FutureWarning (parametrizations.weight_norm replaces it),
    IndexError for a dim outside [-ndim, ndim) (-1 and None: the whole tensor), RuntimeError for a second
    registration on the same parameter, and a missing parameter caught as AttributeError (PyTorch's getattr)."""
    lin = nn.Linear(4, 3)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        nn.utils.weight_norm(lin)
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks on the same parameter weight"), \
            pytest.warns(FutureWarning):
        nn.utils.weight_norm(lin)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for dim in (2, -3):
            m = nn.Linear(4, 3)
            with pytest.raises(IndexError, match=r"weight_norm: dim out of range.*\[-2, 1\]"):
                nn.utils.weight_norm(m, dim=dim)
            assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
        w = np.random.RandomState(0).randn(3, 4)
        for dim, keep in ((-2, (3, 1)), (1, (1, 4)), (-1, ())):
            m = nn.Linear(4, 3)
            with mf.no_grad():
                m.weight.copy_(mf.tensor(w, dtype=mf.float32))
            nn.utils.weight_norm(m, dim=dim)
            axis = None if dim == -1 else (1 if dim % 2 == 0 else 0)
            want = np.sqrt((w * w).sum(axis=axis, keepdims=axis is not None))
            np.testing.assert_allclose(m.weight_g.detach().numpy().astype(np.float64), want.reshape(keep), rtol=1e-6)
    with pytest.raises(AttributeError, match="has no parameter 'kernel'"), pytest.warns(FutureWarning):
        nn.utils.weight_norm(nn.Linear(2, 2), name="kernel")


def test_hook_spectral_norm_refuses_a_second_registration_and_a_missing_name():
    """nn.utils.spectral_norm twice on one parameter: PyTorch's RuntimeError; a missing parameter: its KeyError
    (``module._parameters[name]``); a dim outside the weight's: IndexError. The module is left as it was."""
    lin = nn.utils.spectral_norm(nn.Linear(4, 3))
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks on the same parameter weight"):
        nn.utils.spectral_norm(lin)
    m = nn.Linear(4, 3)
    with pytest.raises(KeyError, match="has no parameter 'kernel'"):
        nn.utils.spectral_norm(m, name="kernel")
    with pytest.raises(IndexError, match="dim out of range"):
        nn.utils.spectral_norm(m, dim=2)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"] and not list(m.named_buffers())


def test_parametrized_weight_norm_dim_range_and_loading_the_hook_forms_state_dict():
    """parametrizations.weight_norm: a dim outside [-ndim, ndim) raises IndexError (-1 / None: the whole
    tensor), the module untouched; a state dict of the hook form (weight_g, weight_v) loads into
    original0 / original1, as PyTorch's compatibility pre-hook, giving weight = g * v / ||v|| (rows)."""
    m = nn.Linear(4, 3)
    with pytest.raises(IndexError, match="dim out of range"):
        nn.utils.parametrizations.weight_norm(m, dim=2)
    assert not nn.utils.parametrize.is_parametrized(m) and type(m) is nn.Linear
    rng = np.random.RandomState(4)
    g, v = rng.rand(3, 1) + 0.5, rng.randn(3, 4)
    old_keys = {"weight_g": mf.tensor(g, dtype=mf.float32), "weight_v": mf.tensor(v, dtype=mf.float32),
                "bias": mf.zeros(3)}
    new = nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))
    new.load_state_dict(old_keys)
    assert sorted(new.state_dict()) == ["bias", "parametrizations.weight.original0",
                                        "parametrizations.weight.original1"]
    want = g * v / np.sqrt((v * v).sum(1, keepdims=True))
    np.testing.assert_allclose(new.weight.detach().numpy().astype(np.float64), want, rtol=1e-6)


class _Split(nn.Module):
    def forward(self, a, b):
        return a + b

    def right_inverse(self, x):
        return x * 0.25, x * 0.75


def test_type_before_parametrizations_and_transfer_parametrizations_and_params():
    """PyTorch's parametrize helpers: type_before_parametrizations gives the class the module had (its own when
    none); transfer_parametrizations_and_params registers the same parametrization modules on the target, whose
    originals become the source's tensors (so the two compute the same weight, trained together), making a
    missing tensor first; only ``tensor_name`` where given; a name the source does not parametrize: KeyError."""
    P = nn.utils.parametrize
    src = nn.Linear(4, 4)
    w = src.weight.detach().numpy().astype(np.float64)
    assert P.type_before_parametrizations(src) is nn.Linear
    P.register_parametrization(src, "weight", _Scale(3.0))
    P.register_parametrization(src, "bias", _Split())
    assert P.type_before_parametrizations(src) is nn.Linear and type(src) is not nn.Linear
    dst = nn.Linear(4, 4)
    assert P.transfer_parametrizations_and_params(src, dst) is dst
    assert dst.parametrizations.weight.original is src.parametrizations.weight.original
    assert dst.parametrizations.weight[0] is src.parametrizations.weight[0]
    assert dst.parametrizations.bias.original1 is src.parametrizations.bias.original1
    assert sorted(dst.state_dict()) == sorted(src.state_dict())
    np.testing.assert_allclose(dst.weight.detach().numpy(), w, rtol=1e-6)  # (the original holds w / 3)
    empty = nn.Module()
    P.transfer_parametrizations_and_params(src, empty, "weight")
    assert sorted(empty.state_dict()) == ["parametrizations.weight.original"]
    np.testing.assert_allclose(empty.weight.detach().numpy(), w, rtol=1e-6)
    with pytest.raises(KeyError, match="no parametrization on 'running_mean'"):
        P.transfer_parametrizations_and_params(src, nn.Linear(4, 4), "running_mean")
    plain = nn.Linear(2, 2)
    assert P.transfer_parametrizations_and_params(nn.Linear(2, 2), plain) is plain and type(plain) is nn.Linear


def test_a_parametrization_returning_no_tensor_is_refused_by_name():
    """PyTorch's check: 'A parametrization must return a tensor. Got int.' (ValueError); the module unchanged."""
    class Three(nn.Module):
        def forward(self, x):
            return 3

    m = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="A parametrization must return a tensor. Got int."):
        nn.utils.parametrize.register_parametrization(m, "weight", Three())
    assert type(m) is nn.Linear and "weight" in m._parameters


def test_unfusable_modules_raise_pytorchs_assertion_error():
    """fuse_conv_bn_eval / fuse_linear_bn_eval assert (AssertionError) in PyTorch that both modules are in eval
    mode, that the BatchNorm tracks running statistics and (Linear) that bn.num_features is out_features or 1;
    here the same type (a ValueError too), naming the op."""
    conv, bn = nn.Conv2d(3, 4, 3).eval(), nn.BatchNorm2d(4).eval()
    with pytest.raises(AssertionError, match="fuse_conv_bn_eval: both modules must be in evaluation mode"):
        nn.utils.fuse_conv_bn_eval(conv, bn.train())
    with pytest.raises(AssertionError, match="fuse_conv_bn_eval: the BatchNorm has no running statistics"):
        nn.utils.fuse_conv_bn_eval(conv, nn.BatchNorm2d(4, track_running_stats=False).eval())
    lin = nn.Linear(5, 4).eval()
    with pytest.raises(AssertionError, match="fuse_linear_bn_eval: both modules must be in evaluation mode"):
        nn.utils.fuse_linear_bn_eval(lin.train(), nn.BatchNorm1d(4).eval())
    with pytest.raises(ValueError, match="out_features == bn.num_features or bn.num_features == 1; got 4 and 3"):
        nn.utils.fuse_linear_bn_eval(lin.eval(), nn.BatchNorm1d(3).eval())
    assert bn.training and lin.weight.shape == (4, 5)


def test_functional_call_takes_none_for_a_tensor_and_lists_strict_keys_sorted():
    """functional_call with {'bias': None} runs the layer without its bias for the call (PyTorch's: the
    attribute is None meanwhile), the module's own bias back afterwards; strict=True lists the missing and
    unexpected keys sorted, as PyTorch's check_keys."""
    rng = np.random.RandomState(0)
    lin = nn.Linear(3, 2)
    w, x = rng.randn(2, 3), rng.randn(4, 3)
    bias = lin.bias
    y = nn.utils.stateless.functional_call(lin, {"weight": mf.tensor(w), "bias": None}, (mf.tensor(x),))
    np.testing.assert_allclose(y.numpy(), x @ w.T, rtol=1e-12)
    assert lin.bias is bias
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    with pytest.raises(RuntimeError) as info:
        nn.utils.stateless.functional_call(net, {"zz": mf.ones(1), "a": mf.ones(1), "1.weight": mf.ones(4)},
                                           (mf.ones(2, 3),), strict=True)
    assert str(info.value) == ("Error(s) in reparametrizing for Sequential:\n\tUnexpected key(s): 'a', 'zz'.\n"
                               "\tMissing key(s): '0.bias', '0.weight', '1.bias', '1.num_batches_tracked', "
                               "'1.running_mean', '1.running_var'.")


def test_parametrize_checks_right_inverse_as_pytorch_and_leaves_a_refused_module_as_it_was():
    """register_parametrization (PyTorch's checks): right_inverse's one tensor may not change the dtype, and
    must be a tensor or a sequence of them; unless unsafe, the parametrized tensor keeps the original's shape,
    also where right_inverse changed it (checked against the shape before, not the stored one). A refused
    registration leaves the parameter's values and shape as they were. Assigning through right_inverse: a
    dtype other than the original's is refused (ValueError), another shape replaces the storage (set_); the
    originals of a split keep the original's requires_grad."""
    P = nn.utils.parametrize

    class Half(nn.Module):
        def forward(self, x):
            return x

        def right_inverse(self, x):
            return x[:2]

    class ToDouble(nn.Module):
        def forward(self, x):
            return x

        def right_inverse(self, x):
            return x.double()

    class NoTensor(nn.Module):
        def forward(self, x):
            return x

        def right_inverse(self, x):
            return 3

    for par, match in ((Half(), "may not change the shape"), (ToDouble(), "may not change the dtype"),
                       (NoTensor(), "must return a Tensor or a Sequence of tensors")):
        m = nn.Linear(4, 4)
        w = m.weight.detach().numpy().copy()
        with pytest.raises(ValueError, match=match):
            P.register_parametrization(m, "weight", par)
        assert type(m) is nn.Linear and m.weight.shape == (4, 4)
        np.testing.assert_array_equal(m.weight.detach().numpy(), w)
    m = P.register_parametrization(nn.Linear(4, 4), "weight", _Scale(2.0))
    with pytest.raises(ValueError, match="`right_inverse` has dtype float64 while `original` has dtype float32"):
        m.weight = mf.ones(4, 4, dtype=mf.float64)
    m.weight = mf.full((3, 4), 6.0)
    assert m.parametrizations.weight.original.shape == (3, 4) and m.weight.tolist() == [[6.0] * 4] * 3
    frozen = nn.Linear(2, 2)
    frozen.weight.requires_grad_(False)
    P.register_parametrization(frozen, "weight", _Split())
    assert [p.requires_grad for p in frozen.parametrizations.weight.originals()] == [False, False]


# ---------------------------------------------------------------- nn.init: PyTorch's rules, checked by hand


def test_calculate_gain_table_and_its_errors():
    """PyTorch's table: 1 for linear / conv* / conv_transpose* / sigmoid, 5/3 tanh, sqrt(2) relu, 3/4 selu,
    sqrt(2 / (1 + slope^2)) leaky_relu (slope 0.01 by default; an int or float, not a bool nor a NumPy float32 /
    int64; ignored for the others); anything else is a ValueError with PyTorch's message."""
    for name in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid"):
        assert nn.init.calculate_gain(name) == 1
    assert nn.init.calculate_gain("tanh") == 5.0 / 3 and nn.init.calculate_gain("selu") == 0.75
    assert nn.init.calculate_gain("relu") == math.sqrt(2.0)
    assert nn.init.calculate_gain("leaky_relu") == math.sqrt(2.0 / (1 + 0.01 ** 2))
    assert nn.init.calculate_gain("leaky_relu", 1) == 1.0 and nn.init.calculate_gain("leaky_relu", 0) == math.sqrt(2)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2.0 / 1.04)
    assert nn.init.calculate_gain("leaky_relu", np.float64(0.2)) == math.sqrt(2.0 / 1.04)  # a float subclass
    assert nn.init.calculate_gain("relu", "x") == math.sqrt(2) and nn.init.calculate_gain("tanh", True) == 5.0 / 3
    for bad, shown in ((True, "True"), ("0.2", "0.2"), ([0.2], r"\[0.2\]"), (np.float32(0.5), "0.5"),
                       (np.int64(2), "2")):
        with pytest.raises(ValueError, match=f"negative_slope {shown} not a valid number"):
            nn.init.calculate_gain("leaky_relu", bad)
    for bad in ("gelu", "ReLU", None, "identity"):
        with pytest.raises(ValueError, match=f"Unsupported nonlinearity {bad} "):
            nn.init.calculate_gain(bad)


def test_fan_in_and_fan_out_rules():
    """fan_in = size(1) * prod(size[2:]), fan_out = size(0) * prod(size[2:]); fewer than 2 dimensions is a
    ValueError; _calculate_correct_fan takes 'fan_in' / 'fan_out' in any case, else ValueError (PyTorch's
    messages). Transposed convolutions' (in, out / groups, *k) weights count the same dims (PyTorch's numbers)."""
    fans = nn.init._calculate_fan_in_and_fan_out
    assert fans(mf.empty(3, 4)) == (4, 3) and fans(mf.empty(2, 3, 4, 5)) == (60, 40)
    assert fans(mf.empty(0, 3)) == (3, 0) and fans(mf.empty(5, 2, 0)) == (0, 0)
    for shape in ((), (7,)):
        with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2 dim"):
            fans(mf.empty(shape))
    assert nn.init._calculate_correct_fan(mf.empty(6, 2, 3), "FAN_OUT") == 18
    with pytest.raises(ValueError, match=r"Mode fan_avg not supported, please use one of \['fan_in', 'fan_out'\]"):
        nn.init._calculate_correct_fan(mf.empty(3, 4), "Fan_Avg")
    assert fans(nn.ConvTranspose2d(4, 6, 3).weight) == (54, 36)
    assert fans(nn.ConvTranspose1d(4, 6, 3, groups=2).weight) == (9, 12)
    assert fans(nn.ConvTranspose3d(2, 4, (2, 1, 3)).weight) == (24, 12)
    assert fans(nn.Conv3d(4, 6, (1, 2, 3), groups=2).weight) == (12, 36)


def test_eye_and_dirac_exact_values_groups_and_errors():
    """eye_: ones on the leading diagonal of any rectangle, for any dtype. dirac_(w, groups): within each group
    of out/groups output channels, channel d passes input channel d (d < min(out/groups, in)) through the
    kernel's centre (index k // 2); all else 0. Errors: eye_ not 2-D, dirac_ not 3- to 5-D or groups not
    dividing dim 0 (ValueError); the tensor untouched."""
    for shape in ((3, 3), (2, 4), (4, 2)):
        np.testing.assert_array_equal(nn.init.eye_(mf.full(shape, 5.0)).numpy(), np.eye(*shape))
    assert nn.init.eye_(mf.full((2, 3), 5, dtype=mf.int64)).tolist() == [[1, 0, 0], [0, 1, 0]]
    for shape, groups in (((4, 2, 3), 1), ((4, 2, 3), 2), ((6, 4, 3, 3), 3), ((2, 5, 3), 1), ((2, 2, 2, 4, 3), 2)):
        want = np.zeros(shape)
        per = shape[0] // groups
        for g in range(groups):
            for d in range(min(per, shape[1])):
                want[(g * per + d, d) + tuple(k // 2 for k in shape[2:])] = 1
        w = mf.full(shape, 5.0, dtype=mf.float16)
        assert nn.init.dirac_(w, groups) is w and w.dtype == mf.float16
        np.testing.assert_array_equal(w.numpy(), want)
    x = np.random.RandomState(0).randn(2, 3, 7, 7)  # an identity convolution: the input back
    same = nn.functional.conv2d(mf.tensor(x), nn.init.dirac_(mf.empty(3, 3, 3, 3, dtype=mf.float64)), padding=1)
    np.testing.assert_array_equal(same.numpy(), x)
    t = mf.full((4, 2, 3), 5.0)
    with pytest.raises(ValueError, match="must be divisible by groups"):
        nn.init.dirac_(t, 3)
    with pytest.raises(ValueError, match="3, 4, or 5 dimensions"):
        nn.init.dirac_(mf.empty(2, 2))
    with pytest.raises(ValueError, match="2 dimensions"):
        nn.init.eye_(mf.empty(2, 2, 2))
    assert (t.numpy() == 5).all()


@pytest.mark.parametrize("init, kwargs, bound_or_std", [
    ("kaiming_uniform_", {}, math.sqrt(2) * math.sqrt(3 / 600)),  # a=0: leaky_relu's gain with slope 0
    ("kaiming_uniform_", {"a": math.sqrt(5)}, math.sqrt(1 / 600)),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}, math.sqrt(2) * math.sqrt(3 / 1200)),
    ("kaiming_normal_", {"nonlinearity": "tanh"}, 5 / 3 / math.sqrt(600)),
    ("kaiming_normal_", {"mode": "fan_out", "a": 0.3}, math.sqrt(2 / 1.09) / math.sqrt(1200)),
    ("xavier_uniform_", {"gain": 2.0}, 2.0 * math.sqrt(6 / 1800)),
    ("xavier_normal_", {"gain": 0.5}, 0.5 * math.sqrt(2 / 1800)),
])
def test_fan_based_inits_bounds_and_spread(init, kwargs, bound_or_std):
    """A (400, 200, 3) weight (fan_in 600, fan_out 1200): the uniform ones within +-bound and reaching near
    it, with variance bound^2 / 3; the normal ones with that std (PyTorch's formulas, 3 % here)."""
    mf.manual_seed(1)
    w = mf.empty(400, 200, 3)
    assert getattr(nn.init, init)(w, **kwargs) is w
    x = w.numpy().astype(np.float64)
    if "uniform" in init:
        assert np.abs(x).max() <= bound_or_std * (1 + 2 ** -23) and np.abs(x).max() > 0.999 * bound_or_std
        assert abs(x.var() / (bound_or_std ** 2 / 3) - 1) < 0.03
    else:
        assert abs(x.std() / bound_or_std - 1) < 0.03
    assert abs(x.mean()) < 0.01 * x.std()


def test_inits_with_a_generator_16_bit_tensors_and_parameters():
    """The generator argument: the same seed gives the same values and the default generator is left alone;
    16-bit tensors keep their dtype (values within bounds); a Parameter is filled without autograd history and
    returned as itself."""
    for init in ("uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
                 "kaiming_normal_", "orthogonal_"):
        mf.manual_seed(0)
        expected_next = mf.rand(3).tolist()
        mf.manual_seed(0)
        a = getattr(nn.init, init)(mf.empty(5, 7), generator=mf.Generator().manual_seed(3))
        b = getattr(nn.init, init)(mf.empty(5, 7), generator=mf.Generator().manual_seed(3))
        assert a.tolist() == b.tolist() and a.abs().sum().item() > 0, init
        assert mf.rand(3).tolist() == expected_next, init
    for dt in (mf.float16, mf.bfloat16):
        w = nn.init.kaiming_uniform_(mf.empty(64, 32, dtype=dt), a=math.sqrt(5))
        assert w.dtype == dt and w.float().abs().max().item() <= 1 / math.sqrt(32) * (1 + 2 ** -7)
        t = nn.init.trunc_normal_(mf.empty(1000, dtype=dt), std=1.0, a=-0.5, b=0.5)
        assert t.dtype == dt and t.float().abs().max().item() <= 0.5 * (1 + 2 ** -7)
    for init, args in (("uniform_", ()), ("normal_", ()), ("constant_", (0.5,)), ("ones_", ()), ("zeros_", ()),
                       ("eye_", ()), ("xavier_normal_", ()), ("kaiming_uniform_", ()), ("orthogonal_", ()),
                       ("sparse_", (0.5,)), ("trunc_normal_", ())):
        p = nn.Parameter(mf.ones(6, 4))
        assert getattr(nn.init, init)(p, *args) is p
        assert p.requires_grad and p.is_leaf and p.grad_fn is None, init


def test_sparse_zero_count_per_column_and_orthogonal_shapes():
    """sparse_(w, s): in each column exactly ceil(s * rows) zeros (PyTorch's randperm(rows)[:ceil(s * rows)],
    so all rows for s >= 1), the rest N(0, std^2); not 2-D: ValueError. orthogonal_: rows (or columns, when
    taller than wide) orthonormal times gain."""
    mf.manual_seed(2)
    for s, zeros in ((0.0, 0), (0.1, 1), (0.35, 4), (0.99, 10), (1.0, 10), (1.5, 10)):
        w = nn.init.sparse_(mf.empty(10, 6), s)
        assert ((w.numpy() == 0).sum(0) == zeros).all(), s
    w = nn.init.sparse_(mf.empty(2000, 50), 0.2, std=0.5).numpy()
    assert abs(w[w != 0].std() / 0.5 - 1) < 0.03
    with pytest.raises(ValueError, match="2 dimensions"):
        nn.init.sparse_(mf.empty(2, 3, 4), 0.5)
    for shape in ((3, 8), (8, 3), (4, 2, 2)):
        q = nn.init.orthogonal_(mf.empty(*shape, dtype=mf.float64), gain=3.0).numpy().reshape(shape[0], -1)
        small = q @ q.T if q.shape[0] <= q.shape[1] else q.T @ q
        np.testing.assert_allclose(small, 9.0 * np.eye(min(q.shape)), atol=1e-12)


@pytest.mark.parametrize("init, kwargs, kind, value", [
    ("uniform_", {"a": -0.3, "b": 0.3}, "bound", 0.3),
    ("normal_", {"std": 0.02}, "std", 0.02),
    ("xavier_uniform_", {"gain": 1.5}, "bound", 1.5 * math.sqrt(6 / 2500)),
    ("xavier_normal_", {"gain": 1.5}, "std", 1.5 * math.sqrt(2 / 2500)),
    ("kaiming_uniform_", {}, "bound", math.sqrt(2) * math.sqrt(3 / 2000)),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, "bound", math.sqrt(1 / 2000)),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}, "bound", math.sqrt(6 / 500)),
    ("kaiming_normal_", {"nonlinearity": "selu"}, "std", 0.75 / math.sqrt(2000)),
    ("kaiming_normal_", {"a": 0.2, "mode": "fan_out"}, "std", math.sqrt(2 / 1.04) / math.sqrt(500)),
    ("kaiming_normal_", {"nonlinearity": "conv_transpose2d"}, "std", 1 / math.sqrt(2000)),
])
def test_inits_of_a_million_values_keep_pytorchs_bounds_and_std(init, kwargs, kind, value):
    """A (500, 2000) weight (fan_in 2000, fan_out 500, so a swapped fan shows): uniform draws within +-bound and
    reaching within 1e-4 of both ends, normal draws with PyTorch's std to 1 % (the sample std's own error is
    0.07 %), the mean within 5 standard errors of 0."""
    mf.manual_seed(5)
    x = getattr(nn.init, init)(mf.empty(500, 2000), **kwargs).numpy().astype(np.float64)
    std = value / math.sqrt(3) if kind == "bound" else value
    if kind == "bound":
        assert x.max() <= value * (1 + 2 ** -23) and x.min() >= -value * (1 + 2 ** -23)
        assert x.max() > 0.9999 * value and x.min() < -0.9999 * value
    assert abs(x.std() / std - 1) < 0.01 and abs(x.mean()) < 5 * std / 1000


def test_trunc_normal_and_sparse_of_a_million_values():
    """trunc_normal_ stays in [a, b] with the truncated normal's mean and std (closed form) to 1 %; sparse_ zeroes
    exactly ceil(sparsity * rows) per column, the rest with std to 1 %."""
    mf.manual_seed(6)
    for mean, std, a, b in ((0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -2.0, 2.0), (1.0, 2.0, 0.0, 3.0)):
        x = nn.init.trunc_normal_(mf.empty(1_000_000), mean, std, a, b).numpy().astype(np.float64)
        al, be = (a - mean) / std, (b - mean) / std
        pdf = [math.exp(-z * z / 2) / math.sqrt(2 * math.pi) for z in (al, be)]
        mass = 0.5 * (math.erf(be / math.sqrt(2)) - math.erf(al / math.sqrt(2)))
        want_mean = mean + std * (pdf[0] - pdf[1]) / mass
        want_std = std * math.sqrt(1 + (al * pdf[0] - be * pdf[1]) / mass - ((pdf[0] - pdf[1]) / mass) ** 2)
        assert x.min() >= a and x.max() <= b
        assert abs(x.std() / want_std - 1) < 0.01 and abs(x.mean() - want_mean) < 0.01 * want_std, (mean, std, a, b)
    w = nn.init.sparse_(mf.empty(1000, 1000), 0.3, std=0.05).numpy()
    assert ((w == 0).sum(0) == 300).all() and abs(w[w != 0].std() / 0.05 - 1) < 0.01


def test_trunc_normal_of_a_point_interval_and_inits_of_zero_element_tensors():
    """trunc_normal_ with a == b gives a everywhere (PyTorch's draw does); kaiming_* of a zero-element tensor warn
    'Initializing zero-element tensors is a no-op' at the caller's line, as PyTorch's stacklevel makes it, and so
    does trunc_normal_'s warning of a mean far from [a, b]; xavier_* of a (0, 3) tensor do nothing."""
    assert nn.init.trunc_normal_(mf.zeros(4), mean=3.0, a=1.0, b=1.0).tolist() == [1.0] * 4
    for init in (nn.init.kaiming_uniform_, nn.init.kaiming_normal_):
        t = mf.empty(0, 3)
        with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op") as got:
            assert init(t, mode="fan_out") is t
        assert got[0].filename == __file__
    with pytest.warns(UserWarning, match="mean is more than 2 std") as got:
        nn.init.trunc_normal_(mf.empty(3), mean=9.0)
    assert got[0].filename == __file__
    for init in (nn.init.xavier_uniform_, nn.init.xavier_normal_):
        assert init(mf.empty(0, 3)).shape == (0, 3)


def test_pytorchs_private_no_grad_helpers_fill_as_the_public_inits():
    """_no_grad_uniform_ / _normal_ / _fill_ / _zero_ (PyTorch's helpers, imported by some code): the same fill
    with the same generator, in place on a Parameter without autograd history."""
    p = nn.Parameter(mf.ones(200, 50))
    assert nn.init._no_grad_uniform_(p, -0.5, 0.25, mf.Generator().manual_seed(4)) is p and p.grad_fn is None
    want = nn.init.uniform_(mf.empty(200, 50), -0.5, 0.25, mf.Generator().manual_seed(4))
    assert p.tolist() == want.tolist() and p.min().item() >= -0.5 and p.max().item() < 0.25
    got = nn.init._no_grad_normal_(mf.empty(200, 50), 1.0, 0.5, mf.Generator().manual_seed(4))
    assert got.tolist() == nn.init.normal_(mf.empty(200, 50), 1.0, 0.5, mf.Generator().manual_seed(4)).tolist()
    assert nn.init._no_grad_fill_(p, 2.5) is p and (p.numpy() == 2.5).all()
    assert nn.init._no_grad_zero_(p) is p and (p.numpy() == 0).all() and p.requires_grad


def test_inits_refuse_what_is_no_tensor_and_a_gain_that_is_no_number():
    """Every init given a list / ndarray / None / float: a TypeError naming it (PyTorch's fails on a missing
    attribute); a gain that is no real number: a TypeError naming the init (a 0-d tensor reads as its number);
    dirac_'s groups of another type than int: TypeError; groups < 1: ValueError; the tensor untouched."""
    for name, args in (("uniform_", ()), ("normal_", ()), ("trunc_normal_", ()), ("constant_", (0.5,)),
                       ("zeros_", ()), ("ones_", ()), ("eye_", ()), ("dirac_", ()), ("xavier_uniform_", ()),
                       ("xavier_normal_", ()), ("kaiming_uniform_", ()), ("kaiming_normal_", ()), ("orthogonal_", ()),
                       ("sparse_", (0.5,))):
        for bad in ([1.0, 2.0], np.zeros((3, 3, 3)), None, 3.0):
            with pytest.raises(TypeError, match=f"nn.init.{name}: expected a Tensor, got {type(bad).__name__}"):
                getattr(nn.init, name)(bad, *args)
    for name in ("xavier_uniform_", "xavier_normal_", "orthogonal_"):
        t = mf.full((3, 4), 7.0)
        for bad in ("2.0", None, [2.0]):
            with pytest.raises(TypeError, match=f"{name}: gain must be a real number, got {type(bad).__name__}"):
                getattr(nn.init, name)(t, gain=bad)
        assert (t.numpy() == 7).all()
    q = nn.init.orthogonal_(mf.empty(3, 4, dtype=mf.float64), gain=mf.tensor(2.0)).numpy()
    np.testing.assert_allclose(q @ q.T, 4 * np.eye(3), atol=1e-12)
    t = mf.full((4, 2, 3), 5.0)
    with pytest.raises(TypeError, match="dirac_: groups must be an int, got float"):
        nn.init.dirac_(t, 2.0)
    for groups in (0, -2):
        with pytest.raises(ValueError, match=f"dim 0 must be divisible by groups.*groups={groups}"):
            nn.init.dirac_(t, groups)
    with pytest.raises(TypeError, match="trunc_normal_: a must be a real number, got str"):
        nn.init.trunc_normal_(t, a="x")
    assert (t.numpy() == 5).all()


def test_default_initialization_of_modules_as_pytorch():
    """PyTorch's reset_parameters: Linear / Conv* / ConvTranspose* weights kaiming_uniform_(a=sqrt(5)), so
    U(+-1/sqrt(fan_in)), and their biases U(+-1/sqrt(fan_in)) (fan_in of the weight: for ConvTranspose its
    size(1) * kernel); Embedding N(0, 1) with the padding_idx row 0; norms' weights 1 and biases 0 (BatchNorm's
    running stats 0 / 1); RNN / LSTM / GRU everything U(+-1/sqrt(hidden)); MultiheadAttention's in_proj
    xavier_uniform_, its biases 0 and out_proj's weight Linear's."""
    mf.manual_seed(7)

    def within(t, bound):
        x = t.detach().numpy().astype(np.float64)
        assert np.abs(x).max() <= bound * (1 + 2 ** -23), bound
        if x.size >= 100_000:  # reaching the bound, with the uniform's std (1 % on >= 1e5 values is > 7 errors)
            assert np.abs(x).max() > 0.999 * bound and abs(x.std() / (bound / math.sqrt(3)) - 1) < 0.01

    for m, fan_in in ((nn.Linear(500, 400), 500), (nn.Conv1d(40, 500, 5), 200), (nn.Conv2d(16, 256, 3, groups=2), 72),
                      (nn.Conv3d(8, 64, 3), 216), (nn.ConvTranspose2d(256, 16, 3), 144),
                      (nn.ConvTranspose2d(64, 32, 3, groups=4), 72)):
        within(m.weight, 1 / math.sqrt(fan_in))
        within(m.bias, 1 / math.sqrt(fan_in))
    e = nn.Embedding(1000, 300, padding_idx=5).weight.detach().numpy()
    assert (e[5] == 0).all() and abs(np.delete(e, 5, 0).std() - 1) < 0.01
    for m in (nn.LayerNorm(64), nn.BatchNorm2d(64), nn.GroupNorm(4, 64), nn.InstanceNorm2d(8, affine=True)):
        assert (m.weight.numpy() == 1).all() and (m.bias.numpy() == 0).all()
    bn = nn.BatchNorm2d(8)
    assert (bn.running_mean.numpy() == 0).all() and (bn.running_var.numpy() == 1).all()
    for m in (nn.LSTM(100, 400), nn.GRU(100, 400, 2, bidirectional=True), nn.RNN(100, 400), nn.LSTMCell(100, 400)):
        for p in m.parameters():
            within(p, 1 / 20)
    mha = nn.MultiheadAttention(512, 8)
    within(mha.in_proj_weight, math.sqrt(6 / (512 + 1536)))
    within(mha.out_proj.weight, 1 / math.sqrt(512))
    assert (mha.in_proj_bias.numpy() == 0).all() and (mha.out_proj.bias.numpy() == 0).all()
    mha = nn.MultiheadAttention(64, 4, kdim=32, vdim=48)
    for name, fans in (("q_proj_weight", 128), ("k_proj_weight", 96), ("v_proj_weight", 112)):
        within(getattr(mha, name), math.sqrt(6 / fans))


# ---------------------------------------------------------------- nn.utils: clipping and the flat vector


def _with_grads(grads, dtype=mf.float32):
    ps = []
    for g in grads:
        p = nn.Parameter(mf.zeros(g.shape, dtype=dtype))
        p.grad = mf.tensor(g, dtype=dtype)
        ps.append(p)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1, 0, 0.5, 3.0, math.inf, -math.inf])
def test_clip_grad_norm_against_numpy(norm_type):
    """PyTorch's rule: total = ||(||g_1||_p, ..., ||g_n||_p)||_p (p = 0 counts nonzeros, inf the max, -inf the
    min of |g|), every gradient scaled in place by min(max_norm / (total + 1e-6), 1); the total comes back as a
    0-d tensor of the gradients' dtype. A single tensor, a generator and a list give the same."""
    rng = np.random.RandomState(3)
    grads = [rng.randn(3, 4) * 2, rng.randn(5), np.array([[0.0, 1.5], [0.0, -0.25]])]

    def norm(a):
        a = np.abs(a.ravel())
        if norm_type == 0:
            return float((a != 0).sum())
        return a.max() if norm_type == math.inf else a.min() if norm_type == -math.inf else \
            (a ** norm_type).sum() ** (1 / norm_type)

    g32 = [g.astype(np.float32).astype(np.float64) for g in grads]
    total = norm(np.array([norm(g) for g in g32]))
    for max_norm in (0.5, 1e6):
        ps = _with_grads(grads)
        out = nn.utils.clip_grad_norm_((p for p in ps), max_norm, norm_type=norm_type)
        assert out.shape == () and out.dtype == mf.float32 and not out.requires_grad
        np.testing.assert_allclose(out.item(), total, rtol=1e-5)
        coef = min(max_norm / (total + 1e-6), 1.0)
        for p, g in zip(ps, g32):
            np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-5, atol=1e-7)
    single = _with_grads(grads[:1])[0]
    want = norm(np.array([norm(g32[0])]))  # (for p = 0 the count of nonzero norms: 1)
    np.testing.assert_allclose(nn.utils.clip_grad_norm_(single, 1e6, norm_type).item(), want, rtol=1e-5)


def test_clip_grad_norm_nonfinite_no_grads_and_empty_tensors():
    """error_if_nonfinite: a NaN or inf total raises (RuntimeError) before any gradient changes; without it the
    gradients are scaled by the non-finite coefficient (inf -> 0 * inf = NaN where the gradient is inf).
    Parameters without gradients: total 0 and nothing to do. The inf / -inf norm of an empty gradient raises
    as PyTorch's (max and min have no identity); the other norms count it as 0."""
    g = [np.array([1.0, np.inf]), np.array([3.0, 4.0])]
    ps = _with_grads(g)
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert ps[1].grad.tolist() == [3.0, 4.0]
    total = nn.utils.clip_grad_norm_(ps, 1.0)
    assert math.isinf(total.item()) and ps[1].grad.tolist() == [0.0, 0.0] and math.isnan(ps[0].grad[1].item())
    bare = [nn.Parameter(mf.ones(2)), nn.Parameter(mf.ones(3))]
    assert nn.utils.clip_grad_norm_(bare, 1.0).item() == 0.0 and all(p.grad is None for p in bare)
    for norm_type in (math.inf, -math.inf):
        ps = _with_grads([np.zeros(0), np.array([3.0, 4.0])])
        with pytest.raises(RuntimeError, match="inf norm on an empty tensor"):
            nn.utils.clip_grad_norm_(ps, 1.0, norm_type=norm_type)
        assert ps[1].grad.tolist() == [3.0, 4.0]
    ps = _with_grads([np.zeros(0), np.array([3.0, 4.0])])
    assert nn.utils.clip_grad_norm_(ps, 1e6, norm_type=2).item() == 5.0


def test_clip_grad_value_and_clip_grads_with_norm():
    """clip_grad_value_ clamps each gradient element to [-v, v] in place (the same tensor); get_total_norm and
    clip_grads_with_norm_ are clip_grad_norm_'s two halves: scale by min(max / (total + 1e-6), 1)."""
    ps = _with_grads([np.array([1.0, -3.0, 0.25, np.inf])])
    g0 = ps[0].grad
    assert nn.utils.clip_grad_value_(ps[0], 0.5) is None and ps[0].grad is g0
    assert g0.tolist() == [0.5, -0.5, 0.25, 0.5]
    ps = _with_grads([np.array([3.0, 0.0]), np.array([0.0, 4.0])])
    total = nn.utils.get_total_norm([p.grad for p in ps])
    assert total.item() == 5.0
    nn.utils.clip_grads_with_norm_(ps, 1.0, total)
    np.testing.assert_allclose([p.grad.tolist() for p in ps], [[3 / (5 + 1e-6), 0.0], [0.0, 4 / (5 + 1e-6)]],
                               rtol=1e-6)


def test_pruning_asserts_raise_assertion_errors_and_leave_the_module():
    """PyTorch's prune asserts (AssertionError) that importance_scores and a custom mask have the tensor's shape;
    the same type here (a ValueError too), the module left unpruned."""
    prune = nn.utils.prune
    lin = nn.Linear(4, 3)
    with pytest.raises(AssertionError, match=r"importance_scores should have the same shape.*\(12,\) vs \(3, 4\)"):
        prune.l1_unstructured(lin, "weight", amount=3, importance_scores=mf.arange(12.0))
    with pytest.raises(ValueError, match="mask's shape"):
        prune.custom_from_mask(lin, "weight", mf.ones(4, 3))
    assert not prune.is_pruned(lin) and [n for n, _ in lin.named_parameters()] == ["weight", "bias"]
    scores = mf.tensor(np.arange(12.0).reshape(3, 4))
    prune.l1_unstructured(lin, "weight", amount=5, importance_scores=scores)  # the 5 smallest scores: 0..4
    assert lin.weight_mask.numpy().ravel().tolist() == [0.0] * 5 + [1.0] * 7


def test_convert_conv3d_weight_memory_format():
    """PyTorch's convert_conv3d_weight_memory_format: every Conv3d / ConvTranspose3d weight in the module tree
    laid out channels_last_3d (or back), other layers untouched, the module returned; the convolution's
    values unchanged; another format is refused naming the op."""
    net = nn.Sequential(nn.Conv3d(2, 4, 3), nn.Sequential(nn.ConvTranspose3d(4, 2, 3)), nn.Conv2d(2, 2, 1))
    x = mf.tensor(np.random.RandomState(0).randn(1, 2, 5, 5, 5), dtype=mf.float32)
    before = net[0](x).numpy()
    assert nn.utils.convert_conv3d_weight_memory_format(net, mf.channels_last_3d) is net
    assert net[0].weight.is_contiguous(memory_format=mf.channels_last_3d) and not net[0].weight.is_contiguous()
    assert net[1][0].weight.is_contiguous(memory_format=mf.channels_last_3d) and net[2].weight.is_contiguous()
    np.testing.assert_allclose(net[0](x).numpy(), before, rtol=1e-5, atol=1e-6)
    nn.utils.convert_conv3d_weight_memory_format(net, mf.contiguous_format)
    assert net[0].weight.is_contiguous()
    with pytest.raises(ValueError, match="convert_conv3d_weight_memory_format: memory_format must be one of"):
        nn.utils.convert_conv3d_weight_memory_format(net, mf.channels_last)


@pytest.mark.parametrize("init, args", [("uniform_", ()), ("normal_", ()), ("trunc_normal_", ()), ("zeros_", ()),
                                        ("constant_", (0.5,)), ("kaiming_uniform_", ()), ("xavier_normal_", ()),
                                        ("orthogonal_", ()), ("eye_", ()), ("sparse_", (0.5,))])
def test_inits_refuse_a_lazy_modules_parameter_before_its_first_forward(init, args):
    """PyTorch raises a ValueError ('Attempted to use an uninitialized parameter in ...') for every nn.init
    function on a lazy module's parameter before its shape is known (filling the placeholder would be lost,
    the module initializing it at its first forward); after that forward they fill it."""
    lazy = nn.LazyLinear(3)
    with pytest.raises(ValueError, match=f"uninitialized parameter in nn.init.{init}"):
        getattr(nn.init, init)(lazy.weight, *args)
    lazy(mf.ones(2, 4))
    w = lazy.weight
    assert getattr(nn.init, init)(w, *args) is w and w.shape == (3, 4)


def test_hook_weight_and_spectral_norm_modules_pickle():
    """A module under the hook-form weight_norm / spectral_norm pickles (torch.save of older audio and GAN
    models does this; PyTorch's hook object is the record): the copy computes the same output, and its
    reparametrization is found again by remove_* (the copy's own hook). (deepcopy fails in PyTorch as here:
    the computed weight is no graph leaf.)"""
    import pickle

    x = mf.tensor(np.random.RandomState(0).randn(2, 4), dtype=mf.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        made = [nn.utils.weight_norm(nn.Linear(4, 3)), nn.utils.spectral_norm(nn.Linear(4, 3)).eval()]
    for m, remove in zip(made, (nn.utils.remove_weight_norm, nn.utils.remove_spectral_norm)):
        want = m(x).numpy()
        for other in (pickle.loads(pickle.dumps(m)),):
            np.testing.assert_array_equal(other(x).numpy(), want)
            remove(other)
            assert sorted(n for n, _ in other.named_parameters()) == ["bias", "weight"]
            np.testing.assert_allclose(other(x).numpy(), want, rtol=1e-6)
        assert any(n.endswith("_orig") or n.endswith("_g") for n, _ in m.named_parameters())  # the original kept


def test_parametrized_modules_deepcopy_but_refuse_pickling_as_pytorch():
    """PyTorch: a parametrized module is serialized through its state_dict only (pickling raises a
    RuntimeError saying so); deepcopy works and gives an independent module computing the same."""
    import copy
    import pickle

    m = nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(m)
    twin = copy.deepcopy(m)
    assert type(twin) is type(m) and nn.utils.parametrize.is_parametrized(twin, "weight")
    assert twin.parametrizations.weight.original1 is not m.parametrizations.weight.original1
    x = mf.ones(2, 4)
    np.testing.assert_array_equal(twin(x).numpy(), m(x).numpy())
    with mf.no_grad():
        twin.parametrizations.weight.original0.mul_(2.0)
    assert not np.allclose(twin(x).numpy(), m(x).numpy())
    fresh = nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))
    fresh.load_state_dict(pickle.loads(pickle.dumps(m.state_dict())))
    np.testing.assert_array_equal(fresh(x).numpy(), m(x).numpy())


@pytest.mark.parametrize("conv, bn, fmt, shape", [
    (nn.Conv2d, nn.BatchNorm2d, mf.channels_last, (2, 3, 6, 6)),
    (nn.ConvTranspose2d, nn.BatchNorm2d, mf.channels_last, (2, 3, 6, 6)),
    (nn.Conv3d, nn.BatchNorm3d, mf.channels_last_3d, (1, 3, 4, 4, 4)),
])
def test_fused_convolution_keeps_a_channels_last_weight_layout(conv, bn, fmt, shape):
    """PyTorch's fused weight is the product of the weight and the per-channel scale, so it keeps a
    channels-last weight's layout; the fused layer computes bn(conv(x)) (a float64 NumPy check of the folding:
    w * gamma / sqrt(var + eps) along the output channels)."""
    rng = np.random.RandomState(0)
    c, b = conv(3, 4, 3).eval(), bn(4).eval()
    with mf.no_grad():
        b.running_mean.copy_(mf.tensor(rng.randn(4), dtype=mf.float32))
        b.running_var.copy_(mf.tensor(rng.rand(4) + 0.5, dtype=mf.float32))
        b.weight.copy_(mf.tensor(rng.randn(4), dtype=mf.float32))
    c.to(memory_format=fmt)
    fused = nn.utils.fuse_conv_bn_eval(c, b, transpose=conv is nn.ConvTranspose2d)
    assert fused.weight.is_contiguous(memory_format=fmt) and not fused.weight.is_contiguous()
    scale = b.weight.numpy().astype(np.float64) / np.sqrt(b.running_var.numpy().astype(np.float64) + b.eps)
    axis = 1 if conv is nn.ConvTranspose2d else 0
    want = c.weight.detach().numpy() * scale.reshape([-1 if d == axis else 1 for d in range(c.weight.ndim)])
    np.testing.assert_allclose(fused.weight.detach().numpy(), want, rtol=1e-6)
    x = mf.tensor(rng.randn(*shape), dtype=mf.float32)
    np.testing.assert_allclose(fused(x).numpy(), b(c(x)).numpy(), rtol=1e-5, atol=1e-5)


def test_skip_init_refuses_what_is_no_module_class():
    """skip_init takes a Module subclass: PyTorch raises RuntimeError for another class and (issubclass's)
    TypeError for an instance; both types here, naming skip_init. A class without a device argument:
    RuntimeError. A good call consumes no random numbers and leaves the parameters zero."""
    for bad in (int, nn.Linear(2, 2)):
        with pytest.raises(TypeError, match="skip_init: Expected a Module") as info:
            nn.utils.skip_init(bad)
        assert isinstance(info.value, RuntimeError)
    mf.manual_seed(0)
    want = mf.rand(3).tolist()
    mf.manual_seed(0)
    lin = nn.utils.skip_init(nn.Linear, 5, 4)
    assert mf.rand(3).tolist() == want and lin.weight.shape == (4, 5) and not lin.weight.detach().numpy().any()
