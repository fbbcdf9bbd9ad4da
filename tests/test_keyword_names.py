"""PyTorch's keyword names on the ops PyTorch code calls by keyword: ``torch.flatten(input=t, start_dim=1)``,
``torch.sum(input=x, dim=1, keepdim=True)``, ``torch.add(input=a, other=b, alpha=2)``, ``x.mm(mat2=w)``,
``torch.linalg.norm(input=A)`` ... each call by PyTorch's names (those its argument parser takes, which for
``torch.linalg`` are ``input`` where the documentation writes ``A``), its value checked against NumPy."""
import math

import numpy as np
import pytest

import minifused as mf
import minifused.nn.functional as F

X = np.array([[0.5, -1.25, 2.0, 3.5], [1.5, 0.25, -0.75, 1.0], [-2.0, 4.0, 0.5, -0.5]])  # (3, 4)
Y = np.array([[1.0, 2.0, -1.0, 0.5], [0.25, -3.0, 2.0, 1.5], [-1.0, 0.5, 1.5, 2.5]])
B = X > 0
T3 = np.arange(24.0).reshape(2, 3, 4)
SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]])
L = np.linalg.cholesky(SPD)
V, W = np.array([1.0, -2.0, 3.0]), np.array([0.5, 4.0, -1.0])


def t(a):
    return mf.tensor(a, dtype=mf.float64)


def erf(a):
    return np.vectorize(math.erf)(a)


# (id, minifused call by PyTorch's keywords, the NumPy value)
CASES = [
    # reductions
    ("sum", lambda: mf.sum(input=t(X), dim=1, keepdim=True), lambda: X.sum(1, keepdims=True)),
    ("sum-all", lambda: mf.sum(input=t(X)), lambda: X.sum()),
    ("mean", lambda: mf.mean(input=t(X), dim=0, keepdim=False), lambda: X.mean(0)),
    ("amax", lambda: mf.amax(input=t(X), dim=1, keepdim=True), lambda: X.max(1, keepdims=True)),
    ("amin", lambda: mf.amin(input=t(X), dim=0), lambda: X.min(0)),
    ("max-dim", lambda: mf.max(input=t(X), dim=1).values, lambda: X.max(1)),
    ("max-other", lambda: mf.max(input=t(X), other=t(Y)), lambda: np.maximum(X, Y)),
    ("min-dim", lambda: mf.min(input=t(X), dim=1, keepdim=True).indices, lambda: X.argmin(1)[:, None]),
    ("median", lambda: mf.median(input=t(X), dim=1).values, lambda: np.sort(X, 1)[:, 1]),
    ("var", lambda: mf.var(input=t(X), dim=1, unbiased=False), lambda: X.var(1)),
    ("std", lambda: mf.std(input=t(X), dim=0, correction=0, keepdim=True), lambda: X.std(0, keepdims=True)),
    ("var_mean", lambda: mf.var_mean(input=t(X), dim=1)[0], lambda: X.var(1, ddof=1)),
    ("std_mean", lambda: mf.std_mean(input=t(X), dim=1)[1], lambda: X.mean(1)),
    ("aminmax", lambda: mf.aminmax(input=t(X), dim=0).max, lambda: X.max(0)),
    ("argmax", lambda: mf.argmax(input=t(X), dim=1, keepdim=True), lambda: X.argmax(1)[:, None]),
    ("argmin", lambda: mf.argmin(input=t(X), dim=0), lambda: X.argmin(0)),
    ("prod", lambda: mf.prod(input=t(X), dim=1), lambda: X.prod(1)),
    ("logsumexp", lambda: mf.logsumexp(input=t(X), dim=1), lambda: np.log(np.exp(X).sum(1))),
    ("any", lambda: mf.any(input=t(B), dim=1), lambda: B.any(1)),
    ("all", lambda: mf.all(input=t(B), dim=0, keepdim=True), lambda: B.all(0, keepdims=True)),
    ("count_nonzero", lambda: mf.count_nonzero(input=t(B), dim=0), lambda: B.sum(0)),
    ("norm", lambda: mf.norm(input=t(X), p=2, dim=1), lambda: np.linalg.norm(X, axis=1)),
    # scans
    ("cumsum", lambda: mf.cumsum(input=t(X), dim=1), lambda: X.cumsum(1)),
    ("cumprod", lambda: mf.cumprod(input=t(X), dim=0), lambda: X.cumprod(0)),
    ("cummax", lambda: mf.cummax(input=t(X), dim=1).values, lambda: np.maximum.accumulate(X, 1)),
    ("cummin", lambda: mf.cummin(input=t(X), dim=0).values, lambda: np.minimum.accumulate(X, 0)),
    # shape and movement
    ("flatten", lambda: mf.flatten(input=t(T3), start_dim=1, end_dim=-1), lambda: T3.reshape(2, 12)),
    ("reshape", lambda: mf.reshape(input=t(X), shape=(4, 3)), lambda: X.reshape(4, 3)),
    ("permute", lambda: mf.permute(input=t(T3), dims=(2, 0, 1)), lambda: T3.transpose(2, 0, 1)),
    ("transpose", lambda: mf.transpose(input=t(X), dim0=0, dim1=1), lambda: X.T),
    ("unsqueeze", lambda: mf.unsqueeze(input=t(X), dim=1), lambda: X[:, None]),
    ("squeeze", lambda: mf.squeeze(input=t(X[None]), dim=0), lambda: X),
    ("split", lambda: mf.split(tensor=t(X), split_size_or_sections=3, dim=1)[1], lambda: X[:, 3:]),
    ("Tensor.split", lambda: t(X).split(split_size=[1, 3], dim=1)[1], lambda: X[:, 1:]),
    ("chunk", lambda: mf.chunk(input=t(X), chunks=2, dim=1)[1], lambda: X[:, 2:]),
    ("unbind", lambda: mf.unbind(input=t(X), dim=1)[2], lambda: X[:, 2]),
    ("narrow", lambda: mf.narrow(input=t(X), dim=1, start=1, length=2), lambda: X[:, 1:3]),
    ("tile", lambda: mf.tile(input=t(X), dims=(2, 1)), lambda: np.tile(X, (2, 1))),
    ("tril", lambda: mf.tril(input=t(X), diagonal=-1), lambda: np.tril(X, -1)),
    ("triu", lambda: mf.triu(input=t(X), diagonal=1), lambda: np.triu(X, 1)),
    ("flip", lambda: mf.flip(input=t(X), dims=(0,)), lambda: X[::-1]),
    ("roll", lambda: mf.roll(input=t(X), shifts=1, dims=1), lambda: np.roll(X, 1, 1)),
    ("diag", lambda: mf.diag(input=t(X), diagonal=1), lambda: np.diag(X, 1)),
    ("movedim", lambda: mf.movedim(input=t(T3), source=0, destination=2), lambda: np.moveaxis(T3, 0, 2)),
    ("swapaxes", lambda: mf.swapaxes(input=t(X), axis0=0, axis1=1), lambda: X.T),
    ("Tensor.swapdims", lambda: t(T3).swapdims(dim0=0, dim1=2), lambda: T3.swapaxes(0, 2)),
    ("diff", lambda: mf.diff(input=t(X), n=1, dim=1), lambda: np.diff(X, 1, 1)),
    # arithmetic and comparisons
    ("add", lambda: mf.add(input=t(X), other=t(Y), alpha=2), lambda: X + 2 * Y),
    ("sub", lambda: mf.sub(input=t(X), other=t(Y), alpha=3), lambda: X - 3 * Y),
    ("Tensor.add", lambda: t(X).add(other=t(Y)), lambda: X + Y),
    ("mul", lambda: mf.mul(input=t(X), other=t(Y)), lambda: X * Y),
    ("Tensor.mul", lambda: t(X).mul(other=2.0), lambda: X * 2),
    ("true_divide", lambda: mf.true_divide(input=t(X), other=t(Y)), lambda: X / Y),
    ("pow", lambda: mf.pow(input=t(X), exponent=2), lambda: X ** 2),
    ("Tensor.pow", lambda: t(X).pow(exponent=3), lambda: X ** 3),
    ("clamp", lambda: mf.clamp(input=t(X), min=-0.5, max=0.5), lambda: np.clip(X, -0.5, 0.5)),
    ("clone", lambda: mf.clone(input=t(X)), lambda: X),
    ("maximum", lambda: mf.maximum(input=t(X), other=t(Y)), lambda: np.maximum(X, Y)),
    ("minimum", lambda: t(X).minimum(other=t(Y)), lambda: np.minimum(X, Y)),
    ("eq", lambda: mf.eq(input=t(X), other=0.5), lambda: X == 0.5),
    ("ne", lambda: t(X).ne(other=0.5), lambda: X != 0.5),
    ("lt", lambda: mf.lt(input=t(X), other=t(Y)), lambda: X < Y),
    ("le", lambda: mf.le(input=t(X), other=t(Y)), lambda: X <= Y),
    ("gt", lambda: t(X).gt(other=t(Y)), lambda: X > Y),
    ("greater_equal", lambda: mf.greater_equal(input=t(X), other=t(Y)), lambda: X >= Y),
    # unary
    ("exp", lambda: mf.exp(input=t(X)), lambda: np.exp(X)),
    ("log", lambda: mf.log(input=t(np.abs(X))), lambda: np.log(np.abs(X))),
    ("sqrt", lambda: mf.sqrt(input=t(np.abs(X))), lambda: np.sqrt(np.abs(X))),
    ("tanh", lambda: mf.tanh(input=t(X)), lambda: np.tanh(X)),
    ("sigmoid", lambda: mf.sigmoid(input=t(X)), lambda: 1 / (1 + np.exp(-X))),
    ("neg", lambda: mf.neg(input=t(X)), lambda: -X),
    ("abs", lambda: mf.abs(input=t(X)), lambda: np.abs(X)),
    ("relu", lambda: mf.relu(input=t(X)), lambda: np.maximum(X, 0)),
    ("sin", lambda: mf.sin(input=t(X)), lambda: np.sin(X)),
    ("log1p", lambda: mf.log1p(input=t(np.abs(X))), lambda: np.log1p(np.abs(X))),
    ("erf", lambda: mf.erf(input=t(X)), lambda: erf(X)),
    ("floor", lambda: mf.floor(input=t(X)), lambda: np.floor(X)),
    ("round", lambda: mf.round(input=t(X), decimals=1), lambda: np.round(X, 1)),
    ("sign", lambda: mf.sign(input=t(X)), lambda: np.sign(X)),
    ("frac", lambda: mf.frac(input=t(X)), lambda: X - np.trunc(X)),
    ("square", lambda: mf.square(input=t(X)), lambda: X * X),
    ("special.expit", lambda: mf.special.expit(input=t(X)), lambda: 1 / (1 + np.exp(-X))),
    ("special.erfc", lambda: mf.special.erfc(input=t(X)), lambda: 1 - erf(X)),
    ("F.gelu", lambda: F.gelu(input=t(X), approximate="none"), lambda: 0.5 * X * (1 + erf(X / np.sqrt(2)))),
    ("F.sigmoid", lambda: F.sigmoid(input=t(X)), lambda: 1 / (1 + np.exp(-X))),
    ("F.tanh", lambda: F.tanh(input=t(X)), lambda: np.tanh(X)),
    ("F.one_hot", lambda: F.one_hot(input=mf.tensor([0, 2, 1]), num_classes=3), lambda: np.eye(3)[[0, 2, 1]]),
    # products
    ("matmul", lambda: mf.matmul(input=t(X), other=t(Y.T)), lambda: X @ Y.T),
    ("Tensor.matmul", lambda: t(X).matmul(other=t(Y.T)), lambda: X @ Y.T),
    ("mm", lambda: mf.mm(input=t(X), mat2=t(Y.T)), lambda: X @ Y.T),
    ("Tensor.mm", lambda: t(X).mm(mat2=t(Y.T)), lambda: X @ Y.T),
    ("bmm", lambda: mf.bmm(input=t(T3), mat2=t(T3.transpose(0, 2, 1))), lambda: T3 @ T3.transpose(0, 2, 1)),
    ("dot", lambda: mf.dot(input=t(V), tensor=t(W)), lambda: V @ W),
    ("outer", lambda: mf.outer(input=t(V), vec2=t(W)), lambda: np.outer(V, W)),
    ("ger", lambda: mf.ger(input=t(V), vec2=t(W)), lambda: np.outer(V, W)),
    ("t", lambda: mf.t(input=t(X)), lambda: X.T),
    ("cholesky_solve", lambda: mf.cholesky_solve(input=t(Y[:, :2]), input2=t(L)),
     lambda: np.linalg.solve(SPD, Y[:, :2])),
    ("cholesky_inverse", lambda: mf.cholesky_inverse(input=t(L)), lambda: np.linalg.inv(SPD)),
    # sizes as PyTorch's keyword size=
    ("Tensor.new_zeros", lambda: t(X).new_zeros(size=(2, 5)), lambda: np.zeros((2, 5))),
    ("Tensor.new_ones", lambda: t(X).new_ones(size=[3]), lambda: np.ones(3)),
    ("Tensor.sum_to_size", lambda: t(X).sum_to_size(size=(1, 4)), lambda: X.sum(0, keepdims=True)),
    ("Tensor.resize_", lambda: t(np.arange(6.0)).resize_(size=(2, 3)), lambda: np.arange(6.0).reshape(2, 3)),
    # in place
    ("Tensor.copy_", lambda: mf.zeros(3, 4, dtype=mf.float64).copy_(other=t(X)), lambda: X),
    ("Tensor.map_", lambda: t(X).map_(other=t(Y), callable=lambda a, b: a - b), lambda: X - Y),
    # torch.linalg: `input` (and lstsq's `b`) as PyTorch's argument parser takes them
    ("linalg.norm", lambda: mf.linalg.norm(input=t(X), ord=None, dim=1), lambda: np.linalg.norm(X, axis=1)),
    ("linalg.vector_norm", lambda: mf.linalg.vector_norm(input=t(X), ord=1, dim=0), lambda: np.abs(X).sum(0)),
    ("linalg.matrix_norm", lambda: mf.linalg.matrix_norm(input=t(X), ord="fro"), lambda: np.linalg.norm(X)),
    ("linalg.cholesky", lambda: mf.linalg.cholesky(input=t(SPD), upper=False), lambda: L),
    ("linalg.cholesky_ex", lambda: mf.linalg.cholesky_ex(input=t(SPD)).L, lambda: L),
    ("linalg.eigvalsh", lambda: mf.linalg.eigvalsh(input=t(SPD), UPLO="L"), lambda: np.linalg.eigvalsh(SPD)),
    ("linalg.eigh", lambda: mf.linalg.eigh(input=t(SPD)).eigenvalues, lambda: np.linalg.eigvalsh(SPD)),
    ("linalg.cond", lambda: mf.linalg.cond(input=t(SPD)), lambda: np.linalg.cond(SPD)),
    ("linalg.matrix_exp", lambda: mf.linalg.matrix_exp(input=t(np.diag(V))), lambda: np.diag(np.exp(V))),
    ("linalg.matrix_power", lambda: mf.linalg.matrix_power(input=t(SPD), n=2), lambda: SPD @ SPD),
    ("linalg.matrix_rank", lambda: mf.linalg.matrix_rank(input=t(X)), lambda: np.linalg.matrix_rank(X)),
    ("linalg.pinv", lambda: mf.linalg.pinv(input=t(X)), lambda: np.linalg.pinv(X)),
    ("linalg.lstsq", lambda: mf.linalg.lstsq(input=t(SPD), b=t(V[:, None])).solution,
     lambda: np.linalg.solve(SPD, V[:, None])),
    ("linalg.solve_triangular", lambda: mf.linalg.solve_triangular(input=t(L), B=t(V[:, None]), upper=False),
     lambda: np.linalg.solve(L, V[:, None])),
]


@pytest.mark.parametrize("call,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pytorch_keyword_names(call, expected):
    got, want = call(), np.asarray(expected())
    assert isinstance(got, mf.Tensor)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.astype(np.float64), rtol=1e-10, atol=1e-12)


def test_new_empty_size_keyword():
    e = t(X).new_empty(size=(2, 3), dtype=mf.int64)
    assert tuple(e.shape) == (2, 3) and e.dtype == mf.int64


def test_old_positional_calls_unchanged():
    """The renamed parameters stay where they were: positional calls are as before."""
    np.testing.assert_allclose(mf.sum(t(X), 1, True).numpy(), X.sum(1, keepdims=True))
    np.testing.assert_allclose(mf.add(t(X), t(Y), alpha=2).numpy(), X + 2 * Y)
    np.testing.assert_allclose(mf.flatten(t(T3), 1).numpy(), T3.reshape(2, 12))
    np.testing.assert_allclose(t(X).split(2, 1)[1].numpy(), X[:, 2:])
    np.testing.assert_allclose(mf.linalg.norm(t(X), 2, 1).numpy(), np.linalg.norm(X, axis=1))
    np.testing.assert_allclose(t(X).new_zeros(2, 5).numpy(), np.zeros((2, 5)))
    np.testing.assert_allclose(t(X).sum_to_size(1, 4).numpy(), X.sum(0, keepdims=True))
