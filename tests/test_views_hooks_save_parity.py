"""PyTorch's behaviour of: ``Tensor._base`` / ``_is_view()`` (the root tensor a view views), ``storage_offset()``
of dtype views and expanded views, ``Module.register_backward_hook`` (the deprecated hook, on the module's last
op), a state_dict's ``_metadata`` through ``save`` / ``load``, and pickles / copies of tensors (pickle drops
``.grad``, ``deepcopy`` keeps it); each checked against hand-computed or NumPy values."""
import copy
import io
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import minifused as mf
from minifused import nn
from tolerances import cpu


def _grid():
    return cpu(np.arange(24, dtype=np.float32).reshape(4, 6))


# ------------------------------------------------------------ _base and _is_view
def test_base_is_the_root_tensor_of_every_view():
    x = _grid()
    views = {"slice": x[1:], "slice of slice": x[1:][1:], "int": x[1], "view": x.view(6, 4), "t": x.t(),
             "transpose": x.transpose(0, 1), "permute": x.permute(1, 0), "expand": x[:1].expand(3, 6),
             "narrow": x.narrow(1, 1, 2), "unsqueeze": x.unsqueeze(0), "squeeze": x.unsqueeze(0).squeeze(0),
             "select": x.select(0, 2), "split": x.split(2)[1], "unbind": x.unbind(0)[3], "diagonal": x.diagonal(),
             "unfold": x.unfold(1, 2, 2), "as_strided": x.as_strided((2, 2), (1, 2), 1), "empty": x[4:],
             "view of view of view": x.t()[1:].unsqueeze(0)}
    for name, v in views.items():
        assert v._base is x and v._is_view(), name
    assert x._base is None and not x._is_view()
    # a write through a view of a view lands in x's memory: x[2, 1:] after x[1:][1:][0, 1:] += 100
    ref = np.arange(24, dtype=np.float64).reshape(4, 6)
    ref[2, 1:] += 100
    with mf.no_grad():
        views["slice of slice"][0, 1:] += 100
    np.testing.assert_array_equal(x.numpy(), ref)


def test_copies_and_dtype_views_are_no_views():
    x = _grid()
    for name, t in {"clone": x.clone(), "detach": x.detach(), "data": x.data, "advanced index": x[[0, 1]],
                    "reshape that copies": x.t().reshape(24), "view(dtype)": x.view(mf.int32)}.items():
        assert t._base is None and not t._is_view(), name
    # a chain of views ends where a view op copied, or at a view(dtype) (PyTorch's: no autograd view)
    r = x.t().reshape(24)
    s = r[2:]
    assert s._base is r and not r._is_view()
    d = x.view(mf.int16)
    assert d[1:, 2:]._base is d
    # an in-place view op keeps a tensor what it was: a view of the same base, or no view
    y = x[1:]
    y.unsqueeze_(0)
    z = x.clone()
    z.unsqueeze_(0)
    assert y._base is x and z._base is None


def test_base_of_views_taken_in_and_out_of_grad_mode():
    w = cpu(np.zeros(3, np.float32), requires_grad=True) * 1
    v = w[1:]
    v.mul_(2)
    with mf.no_grad():
        u = w[1:]
    assert v._base is w and u._base is w and w._base is None


# ------------------------------------------------------------ storage_offset
def test_storage_offset_of_dtype_views_counts_the_view_dtype():
    x = _grid()  # 4 x 6 float32: 48 int16, 96 uint8 elements of storage
    assert x.view(mf.int16)[:, 2:].storage_offset() == 2
    assert x.view(mf.int16)[1:, 3:].storage_offset() == 12 + 3  # a row of 12 int16, then 3
    assert x.view(mf.uint8)[1:, 3:].storage_offset() == 24 + 3
    assert x.view(mf.int16).view(mf.uint8)[1:, 3:].storage_offset() == 24 + 3
    assert x[:, 2:].view(mf.int64).storage_offset() == 1  # 2 float32 = 8 bytes = 1 int64
    assert x[1:, 2:].view(mf.float64).storage_offset() == (6 + 2) // 2
    assert x.view(mf.int16)[:, 4:].view(mf.int32).storage_offset() == 2


def test_storage_offset_of_an_expanded_view():
    x = _grid()
    assert x[1:2].expand(3, 6).storage_offset() == 6
    assert x[2:3, 1:].expand(2, 5).storage_offset() == 13
    # as_strided reads the storage from there on: row 2 of x again
    e = x[2:3].expand(2, 6)
    np.testing.assert_array_equal(e.as_strided((6,), (1,)).numpy(), np.arange(12, 18, dtype=np.float32))


# ------------------------------------------------------------ register_backward_hook (deprecated)
_UPSTREAM = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
_X = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)


def _record(store):
    def hook(module, grad_input, grad_output):
        store.append((module, [None if g is None else g.numpy().copy() for g in grad_input],
                      [g.numpy().copy() for g in grad_output]))
    return hook


def test_backward_hook_of_a_one_op_module_sees_that_ops_gradients():
    m, seen = nn.ReLU(), []
    m.register_backward_hook(_record(seen))
    x = cpu(_X, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        (m(x) * cpu(_UPSTREAM)).sum().backward()
    (module, grad_input, grad_output), = seen
    assert module is m
    np.testing.assert_array_equal(grad_output[0], _UPSTREAM)
    np.testing.assert_array_equal(grad_input[0], _UPSTREAM * (_X > 0))
    assert len(grad_input) == len(grad_output) == 1
    np.testing.assert_array_equal(x.grad.numpy(), _UPSTREAM * (_X > 0))


def test_backward_hook_may_replace_grad_input():
    m = nn.ReLU()
    m.register_backward_hook(lambda module, gi, go: (gi[0] * 0 + 7,))  # guided-backprop style
    x0 = cpu(_X, requires_grad=True)
    (m(x0 * 1) * cpu(_UPSTREAM)).sum().backward()
    np.testing.assert_array_equal(x0.grad.numpy(), np.full((2, 3), 7.0))
    with pytest.raises(RuntimeError, match="changed the size"):
        m2 = nn.Sigmoid()
        m2.register_backward_hook(lambda module, gi, go: (gi[0][:1],))
        m2(cpu(_X, requires_grad=True) * 1).sum().backward()


def test_backward_hook_of_linear_and_conv_sees_their_ops_input_gradients():
    rng = np.random.default_rng(0)
    lin, seen = nn.Linear(3, 4), []
    lin.register_backward_hook(_record(seen))
    x = cpu(_X, requires_grad=True)
    g = rng.standard_normal((2, 4)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        (lin(x) * cpu(g)).sum().backward()
    w = lin.weight.numpy().astype(np.float64)
    (_, (gx, gw, gb), (go,)), = seen  # minifused's Linear is one op of (input, weight, bias)
    np.testing.assert_allclose(go, g)
    np.testing.assert_allclose(gx, g @ w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw, g.T.astype(np.float64) @ _X, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb, g.sum(0), rtol=1e-5, atol=1e-6)
    # Conv2d's op is (input, weight, bias), as PyTorch's: the bias gradient is the upstream summed over N, H, W
    conv, seen = nn.Conv2d(2, 3, 3), []
    conv.register_backward_hook(_record(seen))
    xi = cpu(rng.standard_normal((1, 2, 5, 5)).astype(np.float32), requires_grad=True)
    up = rng.standard_normal((1, 3, 3, 3)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        (conv(xi) * cpu(up)).sum().backward()
    (_, (gxi, gwc, gbc), _), = seen
    assert gxi.shape == (1, 2, 5, 5) and gwc.shape == (3, 2, 3, 3)
    np.testing.assert_allclose(gbc, up.astype(np.float64).sum((0, 2, 3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gwc, conv.weight.grad.numpy())
    np.testing.assert_allclose(gxi, xi.grad.numpy())


def test_backward_hook_warns_as_pytorch_where_it_misses_input_gradients():
    m = nn.Tanh()
    m.register_backward_hook(lambda *a: None)
    with pytest.warns(FutureWarning, match="forward contains multiple autograd Nodes"):
        m(cpu(_X, requires_grad=True)).sum().backward()  # a leaf input: PyTorch's AccumulateGrad node
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m(cpu(_X, requires_grad=True) * 1).sum().backward()  # the op's one input is the module's: no warning
        with mf.no_grad():
            m(cpu(_X))  # nothing recorded: no hook, no warning


def test_backward_hooks_of_nested_modules_run_inner_first():
    order = []
    outer = nn.Sequential(nn.Tanh())
    outer.register_backward_hook(lambda module, gi, go: order.append(type(module).__name__))
    outer[0].register_backward_hook(lambda module, gi, go: order.append(type(module).__name__))
    x = cpu(_X, requires_grad=True)
    outer(x * 1).sum().backward()
    assert order == ["Tanh", "Sequential"]
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh(_X.astype(np.float64)) ** 2, rtol=1e-6, atol=1e-6)


def test_full_and_deprecated_backward_hooks_do_not_mix():
    message = "Cannot use both regular backward hooks and full backward hooks on a single Module"
    m = nn.ReLU()
    m.register_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match=message):
        m.register_backward_hook(lambda *a: None)
    m = nn.ReLU()
    handle = m.register_backward_hook(lambda *a: None)
    assert list(m._backward_hooks.values())[0] is not None and len(m._backward_hooks) == 1
    handle.remove()
    assert len(m._backward_hooks) == 0
    with pytest.raises(RuntimeError, match=message):  # as PyTorch's: the module keeps the kind it took
        m.register_full_backward_hook(lambda *a: None)
    m.register_full_backward_pre_hook(lambda *a: None)  # a pre-hook goes with either kind


# ------------------------------------------------------------ save / load of a state_dict's _metadata
def test_save_load_keeps_the_state_dict_metadata():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    sd = model.state_dict()
    buf = io.BytesIO()
    mf.save({"model": sd, "epoch": 3}, buf)
    buf.seek(0)
    loaded = mf.load(buf)["model"]
    want = OrderedDict([("", {"version": 1}), ("0", {"version": 1}), ("1", {"version": 2})])
    assert type(loaded._metadata) is OrderedDict and loaded._metadata == want
    np.testing.assert_array_equal(loaded["0.weight"].numpy(), model[0].weight.numpy())
    fresh = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    fresh.load_state_dict(loaded)
    np.testing.assert_array_equal(fresh[0].weight.numpy(), model[0].weight.numpy())


# ------------------------------------------------------------ pickles and copies of tensors
def _leaf_with_grad():
    t = cpu(np.array([1.0, 2.0], np.float32), requires_grad=True)
    (t * t).sum().backward()
    return t


def test_pickle_keeps_values_and_requires_grad_not_grad():
    t = _leaf_with_grad()
    p = pickle.loads(pickle.dumps(t))
    assert p.grad is None and p.requires_grad and p.is_leaf
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0])
    w = nn.Parameter(cpu(np.ones(2, np.float32)))
    (w * 2).sum().backward()
    q = pickle.loads(pickle.dumps(w))
    assert type(q) is nn.Parameter and q.grad is None and q.requires_grad
    # a tensor an op made pickles as a leaf that requires grad
    y = pickle.loads(pickle.dumps(t * 3))
    assert y.is_leaf and y.requires_grad and y.grad_fn is None
    np.testing.assert_array_equal(y.numpy(), [3.0, 6.0])
    # copy.copy: the same memory, a leaf without .grad
    c = copy.copy(t)
    assert c.grad is None and c.requires_grad and c.data_ptr() == t.data_ptr()


def test_pickle_leaves_hooks_behind_with_a_warning():
    t = cpu(np.array([1.0, 2.0], np.float32), requires_grad=True)
    t.register_hook(_double)
    with pytest.warns(UserWarning, match="will not be serialized"):
        p = pickle.loads(pickle.dumps(t))
    (p * 1).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [1.0, 1.0])


def _double(g):
    return g * 2


def test_deepcopy_keeps_grad_of_a_leaf_and_refuses_a_non_leaf():
    t = _leaf_with_grad()
    d = copy.deepcopy(t)
    np.testing.assert_array_equal(d.grad.numpy(), [2.0, 4.0])
    assert d.requires_grad and d.grad is not t.grad and d.data_ptr() != t.data_ptr()
    with mf.no_grad():
        d.grad.zero_()
    np.testing.assert_array_equal(t.grad.numpy(), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(t * 2)
