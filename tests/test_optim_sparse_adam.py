"""SparseAdam: the lazy Adam of sparse embeddings, against a float64 NumPy reference of PyTorch's sparse_adam."""
import numpy as np
import pytest

import minifused as mf


def lazy_adam(weight, grads, lr, betas, eps, maximize=False):
    """PyTorch's ``sparse_adam`` on the rows each gradient touches (its nonzero rows), float64."""
    w, m, v = weight.astype(np.float64), np.zeros_like(weight, np.float64), np.zeros_like(weight, np.float64)
    for step, g in enumerate(grads, start=1):
        g = -g if maximize else g
        rows = np.flatnonzero(np.any(g != 0, axis=1))
        m[rows] = betas[0] * m[rows] + (1 - betas[0]) * g[rows]
        v[rows] = betas[1] * v[rows] + (1 - betas[1]) * g[rows] ** 2
        step_size = lr * np.sqrt(1 - betas[1] ** step) / (1 - betas[0] ** step)
        w[rows] -= step_size * m[rows] / (np.sqrt(v[rows]) + eps)
    return w, m, v


BATCHES = ([[1, 2], [2, 7]], [[3, 0], [1, 1]], [[0, 0], [0, 0]], [[7, 3], [9, 2]])  # the third: padding only


@pytest.mark.parametrize("maximize", [False, True])
def test_embedding_rows_against_reference(maximize):
    table = np.random.default_rng(0).standard_normal((10, 3))
    target = np.random.default_rng(1).standard_normal(3)
    emb = mf.nn.Embedding(10, 3, padding_idx=0, sparse=True, dtype=mf.float64)
    with mf.no_grad():
        emb.weight.copy_(mf.tensor(table))
    opt = mf.optim.SparseAdam(emb.parameters(), lr=0.1, betas=(0.8, 0.9), eps=1e-6, maximize=maximize)
    grads = []
    for batch in BATCHES:
        opt.zero_grad()
        (emb(mf.tensor(batch)) - mf.tensor(target)).pow(2).sum().backward()
        grads.append(emb.weight.grad.numpy().copy())
        opt.step()
    w, m, v = lazy_adam(table, grads, 0.1, (0.8, 0.9), 1e-6, maximize)
    np.testing.assert_allclose(emb.weight.detach().numpy(), w, rtol=1e-12, atol=1e-12)
    state = opt.state[emb.weight]
    assert state["step"] == 4  # every step counts, the padding-only one too
    np.testing.assert_allclose(state["exp_avg"].numpy(), m, atol=1e-12)
    np.testing.assert_allclose(state["exp_avg_sq"].numpy(), v, atol=1e-12)
    # rows no batch looked up (4, 5, 6, 8) and the padding row keep their values and have no moments
    for row in (0, 4, 5, 6, 8):
        np.testing.assert_array_equal(emb.weight.detach().numpy()[row], table[row])
        assert not state["exp_avg"].numpy()[row].any()


def test_float32_matches_float64_and_state_dict_round_trip():
    table = np.random.default_rng(2).standard_normal((6, 4)).astype(np.float32)
    bag = mf.nn.EmbeddingBag.from_pretrained(mf.tensor(table), freeze=False, mode="mean", sparse=True)
    opt = mf.optim.SparseAdam(bag.parameters(), lr=0.05)
    grads = []
    for idx in ([1, 2, 4], [5, 1, 1]):
        opt.zero_grad()
        bag(mf.tensor(idx), mf.tensor([0, 2])).sum().backward()
        grads.append(bag.weight.grad.numpy().astype(np.float64))
        opt.step()
    w, _, _ = lazy_adam(table, grads, 0.05, (0.9, 0.999), 1e-8)
    np.testing.assert_allclose(bag.weight.detach().numpy(), w, rtol=1e-5, atol=1e-6)
    again = mf.optim.SparseAdam(bag.parameters(), lr=0.05)
    again.load_state_dict(opt.state_dict())
    assert again.state[bag.weight]["step"] == 2


def test_bad_arguments():
    p = mf.nn.Parameter(mf.zeros(3, 2))
    with pytest.raises(ValueError, match="Invalid learning rate: 0.0"):
        mf.optim.SparseAdam([p], lr=0.0)
    with pytest.raises(ValueError, match="Invalid epsilon value"):
        mf.optim.SparseAdam([p], eps=0)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        mf.optim.SparseAdam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match=r"SparseAdam: a parameter must be a floating tensor of rows .* shape \(\)"):
        mf.optim.SparseAdam([mf.nn.Parameter(mf.tensor(1.0))])
