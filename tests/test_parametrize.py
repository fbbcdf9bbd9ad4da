"""nn.utils.parametrize and nn.utils.parametrizations (weight_norm, spectral_norm): values, gradients, state
dict keys, assignment through right_inverse, removal, bad input; weight_norm against PyTorch on the GPU."""
import numpy as np
import pytest

import minifused as mf
import minifused.nn as nn
from minifused.nn.utils import parametrizations as PZ
from minifused.nn.utils import parametrize as P


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).t()


class Scaled(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k

    def right_inverse(self, x):
        return x / self.k


def test_weight_norm_parametrization_matches_the_hook_form_and_keys():
    mf.manual_seed(0)
    old, new = nn.Conv2d(3, 4, 3), nn.Conv2d(3, 4, 3)
    new.load_state_dict(old.state_dict())
    w0 = old.weight.detach().numpy().copy()
    nn.utils.weight_norm(old)
    PZ.weight_norm(new)
    assert type(new).__name__ == "ParametrizedConv2d"
    assert sorted(new.state_dict()) == ["bias", "parametrizations.weight.original0",
                                        "parametrizations.weight.original1"]
    np.testing.assert_allclose(new.weight.detach().numpy(), w0, rtol=1e-6, atol=1e-7)
    x = mf.randn(2, 3, 5, 5)
    y_old, y_new = old(x), new(x)
    np.testing.assert_allclose(y_new.detach().numpy(), y_old.detach().numpy(), rtol=1e-5, atol=1e-6)
    (y_old * y_old).sum().backward()
    (y_new * y_new).sum().backward()
    g, v = new.parametrizations.weight.original0, new.parametrizations.weight.original1
    np.testing.assert_allclose(g.grad.numpy(), old.weight_g.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(v.grad.numpy(), old.weight_v.grad.numpy(), rtol=1e-4, atol=1e-6)
    whole = PZ.weight_norm(nn.Linear(3, 2), dim=None)
    assert whole.parametrizations.weight.original0.shape == ()


def test_spectral_norm_parametrization_normalizes_by_the_largest_singular_value():
    mf.manual_seed(1)
    conv = PZ.spectral_norm(nn.Conv2d(3, 6, 3))
    assert sorted(conv.state_dict()) == ["bias", "parametrizations.weight.0._u", "parametrizations.weight.0._v",
                                         "parametrizations.weight.original"]
    x = mf.randn(2, 3, 6, 6)
    for _ in range(20):  # training forwards run the power iteration
        conv(x)
    w = conv.weight.detach().numpy().reshape(6, -1)
    assert abs(np.linalg.svd(w, compute_uv=False)[0] - 1.0) < 1e-3
    conv.eval()
    u = conv.parametrizations.weight[0]._u.numpy().copy()
    conv(x).sum().backward()
    np.testing.assert_array_equal(conv.parametrizations.weight[0]._u.numpy(), u)  # no iteration in evaluation
    assert conv.parametrizations.weight.original.grad is not None
    tconv = PZ.spectral_norm(nn.ConvTranspose2d(4, 2, 3))
    assert tconv.parametrizations.weight[0]._u.shape == (2,)  # dim 1: the output channels
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        PZ.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)


def test_register_assign_chain_and_remove():
    lin = nn.Linear(3, 3)
    original = lin.weight
    P.register_parametrization(lin, "weight", Symmetric())
    assert lin.parametrizations.weight.original is original  # no right_inverse: the same parameter
    w = lin.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    assert P.is_parametrized(lin) and P.is_parametrized(lin, "weight") and not P.is_parametrized(lin, "bias")
    assert "weight" not in dict(lin.named_parameters())
    P.register_parametrization(lin, "weight", Scaled(2.0))  # applied after Symmetric
    np.testing.assert_allclose(lin.weight.detach().numpy(), 2 * w, rtol=1e-6)
    with pytest.raises(RuntimeError, match="Symmetric does not implement right_inverse"):  # (PyTorch's error)
        lin.weight = mf.eye(3) * 4
    with mf.no_grad(), P.cached():
        kept = lin.weight.numpy().copy()
    P.remove_parametrizations(lin, "weight")
    assert type(lin) is nn.Linear and not P.is_parametrized(lin) and lin.weight is original
    np.testing.assert_allclose(lin.weight.detach().numpy(), kept, rtol=1e-6)
    assert sorted(lin.state_dict()) == ["bias", "weight"]
    base = nn.Linear(2, 2)
    before, opt = base.weight, mf.optim.SGD(base.parameters(), lr=1.0)  # an optimizer made before registering
    scaled = P.register_parametrization(base, "weight", Scaled(3.0))
    assert scaled.parametrizations.weight.original is before  # right_inverse's value in the same parameter
    scaled.weight = mf.eye(2) * 6  # stored through the right_inverse
    np.testing.assert_allclose(scaled.weight.detach().numpy(), np.eye(2) * 6, rtol=1e-6)
    scaled(mf.ones(1, 2)).sum().backward()
    assert before.grad is not None
    opt.step()
    np.testing.assert_allclose(scaled.weight.detach().numpy(), np.eye(2) * 6 - 9, rtol=1e-6)  # 3 * (2I - 3)
    stored = scaled.parametrizations.weight.original.detach().numpy().copy()
    P.remove_parametrizations(scaled, "weight", leave_parametrized=False)
    np.testing.assert_array_equal(scaled.weight.detach().numpy(), stored)


def test_parametrize_bad_input():
    class Grow(nn.Module):
        def forward(self, x):
            return mf.cat([x, x])

    with pytest.raises(ValueError, match="may not change the shape or dtype"):
        P.register_parametrization(nn.Linear(2, 2), "weight", Grow())
    grown = P.register_parametrization(nn.Linear(2, 2), "weight", Grow(), unsafe=True)
    assert grown.weight.shape == (4, 2)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'kernel'"):
        P.register_parametrization(nn.Linear(2, 2), "kernel", Symmetric())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(nn.Linear(2, 2), "weight")
    with pytest.raises(TypeError, match="expected a Module"):
        P.register_parametrization(nn.Linear(2, 2), "weight", lambda x: x)
    wn = PZ.weight_norm(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        P.remove_parametrizations(wn, "weight", leave_parametrized=False)


@pytest.mark.gpu
def test_gpu_weight_norm_parametrization_matches_pytorch(torch):
    rng = np.random.default_rng(2)
    w, b, x = (rng.standard_normal(s).astype(np.float32) for s in ((5, 4), (5,), (3, 4)))
    ours = nn.Linear(4, 5).to("cuda")
    theirs = torch.nn.Linear(4, 5).cuda()
    with mf.no_grad():
        ours.weight.copy_(mf.tensor(w, device="cuda"))
        ours.bias.copy_(mf.tensor(b, device="cuda"))
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
        theirs.bias.copy_(torch.tensor(b))
    PZ.weight_norm(ours)
    torch.nn.utils.parametrizations.weight_norm(theirs)
    y, ty = ours(mf.tensor(x, device="cuda")), theirs(torch.tensor(x, device="cuda"))
    np.testing.assert_allclose(y.detach().cpu().numpy(), ty.detach().cpu().numpy(), rtol=1e-5, atol=1e-6)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    for name in ("original0", "original1"):
        np.testing.assert_allclose(getattr(ours.parametrizations.weight, name).grad.cpu().numpy(),
                                   getattr(theirs.parametrizations.weight, name).grad.cpu().numpy(),
                                   rtol=1e-4, atol=1e-6)


def test_norm_reparametrizations_dims_as_pytorchs():
    """spectral_norm's output dimension is 1 for every transposed convolution (both forms); legacy weight_norm's
    dim=-1 is the whole tensor's norm."""
    from minifused.nn.utils import parametrizations as PZ

    assert nn.utils.spectral_norm(nn.ConvTranspose1d(3, 4, 3)).weight_u.shape == (4,)
    assert nn.utils.spectral_norm(nn.Conv1d(3, 4, 3)).weight_u.shape == (4,)
    m = PZ.spectral_norm(nn.ConvTranspose3d(3, 2, 2))
    assert m.parametrizations.weight[0]._u.shape == (2,)
    lin = nn.utils.weight_norm(nn.Linear(3, 4), dim=-1)
    assert lin.weight_g.shape == ()
    np.testing.assert_allclose(float(lin.weight_g.item()), np.linalg.norm(lin.weight_v.detach().numpy()), rtol=1e-6)


def test_utils_modules_by_their_dotted_names():
    import importlib

    for sub, name in (("fusion", "fuse_conv_bn_eval"), ("clip_grad", "clip_grad_norm_"),
                      ("convert_parameters", "parameters_to_vector"), ("weight_norm", "remove_weight_norm"),
                      ("spectral_norm", "spectral_norm")):
        module = importlib.import_module(f"minifused.nn.utils.{sub}")
        assert getattr(module, name) is getattr(nn.utils, name)


def test_functional_call_replaces_a_parametrized_tensor():
    m = P.register_parametrization(nn.Linear(2, 1), "weight", Scaled(3.0))
    with mf.no_grad():
        m.bias.zero_()
    out = mf.func.functional_call(m, {"weight": mf.tensor([[1.0, 2.0]])}, (mf.ones(1, 2),))
    np.testing.assert_allclose(out.numpy(), [[3.0]])
    np.testing.assert_allclose(m(mf.ones(1, 2)).detach().numpy(), m.weight.detach().numpy().sum(1, keepdims=True))


def _householder_q(x):
    """Reference for the householder map: the product of I - tau v v^T over x's columns (v: the column below the
    diagonal with a 1 on it, tau = 2 / |v|^2), each column times the sign of x's diagonal."""
    n, k = x.shape
    q = np.eye(n)
    for j in range(k):
        v = np.zeros(n)
        v[j], v[j + 1:] = 1.0, x[j + 1:, j]
        q = q @ (np.eye(n) - 2.0 / (v @ v) * np.outer(v, v))
    return q[:, :k] * np.sign(np.diagonal(x))


def _expm(a):
    """exp(a) by scaling and squaring a Taylor series (float64)."""
    s = max(0, int(np.ceil(np.log2(max(np.abs(a).sum(1).max(), 1e-300)))) + 1)
    b, term, out = a / 2.0 ** s, np.eye(len(a)), np.eye(len(a))
    for i in range(1, 30):
        term = term @ b / i
        out = out + term
    for _ in range(s):
        out = out @ out
    return out


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (4, 4), (2, 3, 3), (2, 2, 5)])
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_parametrization(shape, orthogonal_map):
    """parametrizations.orthogonal, PyTorch's: trivialized (the default), the weight starts as the orthogonal
    factor of its QR decomposition (R's diagonal positive; for a square weight exactly that), the original reset to
    minus the identity and ``base`` a buffer; without trivialization the map itself, checked against NumPy
    formulas (householder's original the reflectors of the weight's QR decomposition), and assigning to the matrix_exp / cayley maps raises (registering does not). Results have
    orthonormal columns (rows where wide); the gradient reaches the original."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(shape)

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(mf.tensor(w0, dtype=mf.float64))

    def orthonormal(w):
        g = np.swapaxes(w, -1, -2) @ w if w.shape[-2] >= w.shape[-1] else w @ np.swapaxes(w, -1, -2)
        np.testing.assert_allclose(g, np.broadcast_to(np.eye(g.shape[-1]), g.shape), atol=1e-12)

    m = PZ.orthogonal(Holder(), "weight", orthogonal_map)
    assert sorted(m.state_dict()) == ["parametrizations.weight.0.base", "parametrizations.weight.original"]
    w = m.weight.detach().numpy()
    orthonormal(w)
    eye = np.zeros(shape)
    for i in range(min(shape[-2:])):
        eye[..., i, i] = -1.0
    np.testing.assert_array_equal(m.parametrizations.weight.original.detach().numpy(), eye)
    if shape[-2] == shape[-1]:  # no random completion: the QR factor itself
        q, r = np.linalg.qr(w0)
        np.testing.assert_allclose(w, q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :], atol=1e-12)
    (m.weight ** 3).sum().backward()
    assert m.parametrizations.weight.original.grad is not None
    q = np.linalg.qr(rng.standard_normal(shape if shape[-2] >= shape[-1] else shape[:-2] + shape[-1:-3:-1]))[0]
    q = q if shape[-2] >= shape[-1] else np.swapaxes(q, -1, -2)
    with mf.no_grad():
        m.weight = mf.tensor(q, dtype=mf.float64)
    np.testing.assert_allclose(m.weight.detach().numpy(), q, atol=1e-12)

    m = PZ.orthogonal(Holder(), "weight", orthogonal_map, use_trivialization=False)
    assert sorted(m.state_dict()) == ["parametrizations.weight.original"]
    w = m.weight.detach().numpy()
    orthonormal(w)
    # registering stores right_inverse(weight): for householder the reflectors of its QR decomposition (so the
    # weight becomes its orthogonal factor, R's diagonal positive), for the others the weight itself
    orig = m.parametrizations.weight.original.detach().numpy()
    for x, w1, got in zip(orig.reshape(-1, *shape[-2:]), w0.reshape(-1, *shape[-2:]), w.reshape(-1, *shape[-2:])):
        wide = x.shape[0] < x.shape[1]
        x, w1, got = (x.T, w1.T, got.T) if wide else (x, w1, got)
        n, k = x.shape
        if orthogonal_map == "householder":
            want = _householder_q(x)
            q1, r1 = np.linalg.qr(w1)
            np.testing.assert_allclose(got, q1 * np.sign(np.diagonal(r1)), atol=1e-12)
        else:
            low = np.concatenate([np.tril(x), np.zeros((n, n - k))], axis=1)
            a = low - low.T
            want = _expm(a) if orthogonal_map == "matrix_exp" else np.linalg.solve(np.eye(n) - a / 2, np.eye(n) + a / 2)
            want = want[:, :k]
        np.testing.assert_allclose(got, want, atol=1e-10)
    if orthogonal_map == "householder":  # assigning stores the reflectors of the value's QR decomposition
        with mf.no_grad():
            m.weight = mf.tensor(q, dtype=mf.float64)
        np.testing.assert_allclose(m.weight.detach().numpy(), q, atol=1e-12)
    else:
        with pytest.raises(NotImplementedError):
            m.weight = mf.tensor(q, dtype=mf.float64)


def test_orthogonal_parametrization_defaults_and_bad_input():
    """The default map is matrix_exp for a square weight, householder otherwise; a 1-d tensor, a missing name and
    an unknown map raise ValueError, as PyTorch's."""
    assert PZ.orthogonal(nn.Linear(3, 3)).parametrizations.weight[0].orthogonal_map == "matrix_exp"
    assert PZ.orthogonal(nn.Linear(3, 5)).parametrizations.weight[0].orthogonal_map == "householder"
    for kwargs in ({"name": "bias"}, {"name": "nothing"}, {"orthogonal_map": "svd"}):
        with pytest.raises(ValueError):
            PZ.orthogonal(nn.Linear(3, 3), **kwargs)


def test_cached_computes_each_parametrized_tensor_once():
    """Within cached() a parametrized tensor is computed at its first access and the same tensor returned after
    (one graph, gradients as PyTorch's), until the outermost context exits; outside it every access recomputes."""
    calls = []

    class Counted(Scaled):
        def forward(self, x):
            calls.append(1)
            return super().forward(x)

    m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Counted(2.0))
    calls.clear()
    with P.cached():
        a = m.weight
        with P.cached():
            assert m.weight is a
        assert m.weight is a and len(calls) == 1
        (a.sum() + m.weight.sum()).backward()
    np.testing.assert_array_equal(m.parametrizations.weight.original.grad.numpy(), np.full((3, 3), 4.0))
    assert m.weight is not m.weight and len(calls) == 3
