"""minifused.func's reverse-mode transforms (grad, grad_and_value, vjp, jacrev) and the loop vmap, against
float64 formulas: per-sample gradients, as vmap(grad(loss)) computes them, equal each sample's own backward."""
import numpy as np
import pytest

import minifused as mf
from minifused import func

X0 = np.array([1.0, 2.0, 3.0])
W0 = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


def test_grad_and_grad_and_value():
    np.testing.assert_allclose(func.grad(lambda x: (x ** 3).sum())(mf.tensor(X0)).numpy(), 3 * X0 ** 2)
    gx, gw = func.grad(lambda x, w: (w @ x).sin().sum(), argnums=(0, 1))(mf.tensor(X0), mf.tensor(W0))
    c = np.cos(W0 @ X0)
    np.testing.assert_allclose(gx.numpy(), W0.T @ c, rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), np.outer(c, X0), rtol=1e-12)
    g, (value, aux) = func.grad_and_value(lambda x: ((x ** 2).sum(), x.max()), has_aux=True)(mf.tensor(X0))
    np.testing.assert_allclose(g.numpy(), 2 * X0)
    assert value.item() == 14.0 and aux.item() == 3.0 and not value.requires_grad
    unused = func.grad(lambda x, y: (x * 2).sum(), argnums=1)(mf.tensor(X0), mf.tensor(X0))
    assert unused.tolist() == [0.0, 0.0, 0.0]  # an argument the output does not reach: zeros
    with pytest.raises(RuntimeError, match="scalar tensor"):
        func.grad(lambda x: x * 2)(mf.tensor(X0))


def test_vjp_and_jacrev():
    out, vjp_fn = func.vjp(lambda x: (x * 2, x.sum()), mf.tensor(X0))
    assert out[0].tolist() == [2.0, 4.0, 6.0]
    for _ in range(2):  # callable more than once
        (g,) = vjp_fn((mf.ones(3, dtype=mf.float64), mf.tensor(2.0, dtype=mf.float64)))
        assert g.tolist() == [4.0, 4.0, 4.0]
    jac = func.jacrev(lambda x: x.sin() * x[0])(mf.tensor(X0))
    want = np.diag(np.cos(X0) * X0[0])
    want[:, 0] += np.sin(X0)
    np.testing.assert_allclose(jac.numpy(), want, rtol=1e-12)
    jw = func.jacrev(lambda w, x: w @ x, argnums=0)(mf.tensor(W0), mf.tensor(X0))
    assert tuple(jw.shape) == (2, 2, 3)
    np.testing.assert_allclose(jw.numpy(), np.einsum("ij,k->ijk", np.eye(2), X0))


def test_transforms_take_pytrees_of_tensors():
    """As PyTorch's: an argument may be a dict, list, tuple or namedtuple of tensors (a model's parameters for
    functional_call: grad(loss)(params), the meta-learning inner step), its gradients and Jacobians come in its
    structure, and vjp / jacrev / jvp keep an output's structure too (float64 formulas)."""
    from collections import namedtuple

    rng = np.random.default_rng(0)
    model = mf.nn.Linear(3, 2).double()
    w, b, x = rng.standard_normal((2, 3)), rng.standard_normal(2), rng.standard_normal((4, 3))
    params = {"weight": mf.tensor(w), "bias": mf.tensor(b)}
    g = func.grad(lambda p: (func.functional_call(model, p, (mf.tensor(x),)) ** 2).sum())(params)
    y = x @ w.T + b
    assert list(g) == ["weight", "bias"]
    np.testing.assert_allclose(g["weight"].numpy(), 2 * y.T @ x, rtol=1e-12)
    np.testing.assert_allclose(g["bias"].numpy(), 2 * y.sum(0), rtol=1e-12)

    pair = namedtuple("pair", "a b")
    t = mf.tensor(X0)
    g = func.grad(lambda p, q: (p.a * p.b).sum() + (q[1]["c"] ** 2).sum(), argnums=(0, 1))(pair(t, t + 1),
                                                                                           [t, {"c": t}])
    assert type(g[0]) is pair and isinstance(g[1], list) and list(g[1][1]) == ["c"]
    assert g[0].a.tolist() == (X0 + 1).tolist() and g[0].b.tolist() == X0.tolist()
    assert g[1][0].tolist() == [0.0] * 3 and g[1][1]["c"].tolist() == (2 * X0).tolist()

    out, vjp_fn = func.vjp(lambda p: {"y": p["a"] * 2, "z": p["a"].sum()}, {"a": t})
    assert out["y"].tolist() == (2 * X0).tolist() and not out["z"].requires_grad
    (ga,) = vjp_fn({"y": mf.ones(3, dtype=mf.float64), "z": mf.tensor(2.0, dtype=mf.float64)})
    assert ga["a"].tolist() == [4.0, 4.0, 4.0]
    jac = func.jacrev(lambda p, q: {"u": p["a"] * q, "v": q.sum()}, argnums=(0, 1))({"a": t}, t + 1)
    np.testing.assert_array_equal(jac["u"][0]["a"].numpy(), np.diag(X0 + 1))
    np.testing.assert_array_equal(jac["u"][1].numpy(), np.diag(X0))
    assert jac["v"][0]["a"].tolist() == [0.0] * 3 and jac["v"][1].tolist() == [1.0] * 3
    value, jv = func.jvp(lambda p: {"s": (p["a"] ** 2).sum()}, ({"a": t},), ({"a": mf.ones(3, dtype=mf.float64)},))
    assert value["s"].item() == (X0 ** 2).sum() and jv["s"].item() == 2 * X0.sum()
    np.testing.assert_array_equal(func.hessian(lambda p: (p["a"] ** 3).sum())({"a": t})["a"]["a"].numpy(),
                                  np.diag(6 * X0))
    with pytest.raises(ValueError, match="grad_and_value: the argument 0 to differentiate must be a tensor or a "
                                         "pytree .* got a int"):
        func.grad(lambda p: p["a"].sum())({"a": t, "n": 3})
    with pytest.raises(RuntimeError, match="must hold floating-point tensors, got int64"):
        func.grad(lambda p: p["a"].sum())({"a": mf.arange(3)})


def test_vmap_of_grad_gives_per_sample_gradients(device):
    rng = np.random.default_rng(0)
    w, xs, ys = rng.standard_normal((2, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)

    def loss(w, x, y):
        return ((w @ x).tanh().sum() - y) ** 2

    got = func.vmap(func.grad(loss), in_dims=(None, 0, 0))(*(mf.tensor(a, device=device) for a in (w, xs, ys)))
    assert tuple(got.shape) == (4, 2, 3)
    for i in range(4):
        t = np.tanh(w @ xs[i])
        want = np.outer(2 * (t.sum() - ys[i]) * (1 - t * t), xs[i])
        np.testing.assert_allclose(got[i].cpu().numpy(), want, rtol=1e-10)
    a, s = func.vmap(lambda p, q: (p * q, p.sum()), in_dims=(1, None))(mf.ones(2, 5), mf.tensor([2.0, 3.0]))
    assert tuple(a.shape) == (5, 2) and a[0].tolist() == [2.0, 3.0] and s.tolist() == [2.0] * 5
    t = func.vmap(lambda p: p * 2, out_dims=1)(mf.ones(4, 3))
    assert tuple(t.shape) == (3, 4)
    with pytest.raises(ValueError, match="one size along the mapped dimensions"):
        func.vmap(lambda p, q: p + q)(mf.ones(2), mf.ones(3))


def test_model_ensembling_with_stack_module_state_and_vmap():
    """PyTorch's model-ensembling recipe: the models' parameters stacked (new leaves that require grad), vmap over
    functional_call with dict arguments; each model's slice of the outputs and of the stacked parameters' gradients
    is that model's own (float64 formulas of the two-layer MLP)."""
    rng = np.random.default_rng(0)
    models = [mf.nn.Sequential(mf.nn.Linear(5, 4), mf.nn.ReLU(), mf.nn.Linear(4, 3)).double() for _ in range(3)]
    x = rng.standard_normal((6, 5))
    params, buffers = func.stack_module_state(models)
    assert sorted(params) == ["0.bias", "0.weight", "2.bias", "2.weight"] and buffers == {}
    assert all(p.shape[0] == 3 and p.requires_grad and p.is_leaf for p in params.values())
    out = func.vmap(lambda p, b, data: func.functional_call(models[0], (p, b), (data,)), in_dims=(0, 0, None))(
        params, buffers, mf.tensor(x))
    out.sum().backward()
    for i, m in enumerate(models):
        w1, b1, w2, b2 = (t.detach().numpy() for t in m.parameters())
        h = x @ w1.T + b1
        np.testing.assert_allclose(out[i].detach().numpy(), np.maximum(h, 0) @ w2.T + b2, rtol=1e-12)
        np.testing.assert_allclose(params["2.weight"].grad.numpy()[i], np.ones((3, 6)) @ np.maximum(h, 0),
                                   rtol=1e-12)
        np.testing.assert_allclose(params["0.bias"].grad.numpy()[i], ((h > 0) * (np.ones((6, 3)) @ w2)).sum(0),
                                   rtol=1e-12)
        assert m[0].weight.grad is None  # the stacked parameters are new leaves
    with pytest.raises(RuntimeError, match="at least one model"):
        func.stack_module_state([])
    models[1].eval()
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        func.stack_module_state(models)
    with pytest.raises(ValueError, match="must map tensors"):
        func.vmap(lambda d: d["a"], in_dims=0)({"a": mf.ones(2), "b": 3})


def test_module_to_a_device_minifused_lacks_names_the_device():
    """The recipe's ``base_model.to('meta')``: minifused has no meta device, and says so (not 'unknown dtype')."""
    with pytest.raises(ValueError, match="unknown device 'meta'"):
        mf.nn.Linear(2, 2).to("meta")


def test_replace_all_batch_norm_modules_stops_running_statistics():
    """As PyTorch's: BatchNorm modules (not InstanceNorm) lose their running statistics and normalize by the batch's
    in evaluation too (float64 formula)."""
    m = mf.nn.Sequential(mf.nn.BatchNorm2d(3), mf.nn.Conv2d(3, 3, 1),
                         mf.nn.InstanceNorm2d(3, track_running_stats=True)).double()
    assert func.replace_all_batch_norm_modules_(m) is m
    assert m[0].running_mean is None and m[0].num_batches_tracked is None and not m[0].track_running_stats
    assert sorted(dict(m.named_buffers())) == ["2.num_batches_tracked", "2.running_mean", "2.running_var"]
    x = np.random.default_rng(1).standard_normal((4, 3, 2, 2))
    y = m[0].eval()(mf.tensor(x)).detach().numpy()
    mean, var = x.mean((0, 2, 3), keepdims=True), x.var((0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-10)


def test_stateless_functional_call_warns_as_deprecated_and_func_does_not():
    """PyTorch deprecates torch.nn.utils.stateless.functional_call (FutureWarning) for torch.func.functional_call,
    the same call without the warning; both give the forward with the given weight."""
    import warnings

    from minifused import func
    from minifused.nn.utils import stateless

    m = mf.nn.Linear(2, 1, bias=False)
    w = mf.tensor([[2.0, 3.0]])
    with pytest.warns(FutureWarning, match="stateless.functional_call` is deprecated as of PyTorch 2.0"):
        old = stateless.functional_call(m, {"weight": w}, (mf.ones(2),))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = func.functional_call(m, {"weight": w}, (mf.ones(2),))
    assert old.tolist() == new.tolist() == [5.0]
