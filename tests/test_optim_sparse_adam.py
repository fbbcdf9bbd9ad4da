"""SparseAdam: the lazy Adam of sparse embeddings, against a float64 NumPy reference of PyTorch's sparse_adam."""
import numpy as np
import pytest

import minifused as mf


def lazy_adam(weight, grads, lr, betas, eps, maximize=False, looked_up=None):
    """PyTorch's ``sparse_adam`` on the rows each gradient holds (``looked_up[step]``, else its nonzero rows),
    float64."""
    w, m, v = weight.astype(np.float64), np.zeros_like(weight, np.float64), np.zeros_like(weight, np.float64)
    for step, g in enumerate(grads, start=1):
        g = -g if maximize else g
        rows = np.flatnonzero(np.any(g != 0, axis=1)) if looked_up is None else np.unique(looked_up[step - 1])
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


def test_zero_gradient_rows_looked_up_are_updated():
    """A looked-up row whose gradient is exactly zero (masked off here) is a row of the sparse gradient, as in
    PyTorch: its moments decay and it moves; the padding row and the rows not looked up stay (float64 reference)."""
    table = np.random.default_rng(4).standard_normal((7, 2))
    emb = mf.nn.Embedding.from_pretrained(mf.tensor(table), freeze=False, padding_idx=6, sparse=True)
    opt = mf.optim.SparseAdam(emb.parameters(), lr=0.1)
    batches = (([1, 2, 3, 6], [1., 1., 0., 1.]), ([1, 2, 2, 6], [0., 1., 0., 1.]), ([4, 1, 3, 3], [0., 0., 0., 1.]))
    grads = []
    for idx, mask in batches:
        opt.zero_grad()
        (emb(mf.tensor(idx)).pow(2).sum(-1) * mf.tensor(mask)).sum().backward()
        grads.append(emb.weight.grad.numpy().copy())
        opt.step()
    assert not grads[1][1].any() and not grads[2][1].any()  # row 1: looked up, gradient zero
    w, m, v = lazy_adam(table, grads, 0.1, (0.9, 0.999), 1e-8, looked_up=[[1, 2, 3], [1, 2], [4, 1, 3]])
    np.testing.assert_allclose(emb.weight.detach().numpy(), w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(opt.state[emb.weight]["exp_avg"].numpy(), m, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(opt.state[emb.weight]["exp_avg_sq"].numpy(), v, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(emb.weight.detach().numpy()[[0, 5, 6]], table[[0, 5, 6]])


def test_rows_recorded_beside_grad_and_forgotten():
    """The .grad's values are the dense lookup's; the rows recorded beside it join over backwards into it and go
    with zeroing or replacing it; a lookup without sparse=True, and a .grad set by hand, record none (SparseAdam
    then takes the nonzero rows)."""
    w = mf.nn.Parameter(mf.tensor(np.arange(12.0).reshape(6, 2)))
    dense = mf.nn.Parameter(mf.tensor(np.arange(12.0).reshape(6, 2)))

    def rows(t):
        r = getattr(t.grad, "_sparse_rows", None)
        return None if r is None else np.flatnonzero(r).tolist()

    (mf.nn.functional.embedding(mf.tensor([4, 1, 1]), w, padding_idx=4, sparse=True) * 0).sum().backward()
    mf.nn.functional.embedding(mf.tensor([4, 1, 1]), dense, padding_idx=4).sum().backward()
    assert rows(w) == [1] and rows(dense) is None and not w.grad.numpy().any()
    (mf.nn.functional.embedding(mf.tensor([[2], [4]]), w, sparse=True)).sum().backward()  # accumulated
    assert rows(w) == [1, 2, 4]
    np.testing.assert_array_equal(w.grad.numpy(), [[0, 0], [0, 0], [1, 1], [0, 0], [1, 1], [0, 0]])
    opt = mf.optim.SparseAdam([w], lr=0.5)
    opt.zero_grad(set_to_none=False)
    assert rows(w) is None and not w.grad.numpy().any()
    mf.nn.functional.embedding(mf.tensor([3]), w, sparse=True).sum().backward()
    assert rows(w) == [3]
    w.grad.zero_()
    assert rows(w) is None
    mf.nn.functional.embedding(mf.tensor([5]), w, sparse=True).sum().backward()
    w.grad = mf.zeros(6, 2, dtype=w.dtype)  # by hand: no record
    w.grad[0] = 1.0
    before = w.detach().numpy().copy()
    opt.step()  # only row 0, the nonzero one, moves
    moved = np.flatnonzero(np.any(w.detach().numpy() != before, axis=1)).tolist()
    assert moved == [0] and opt.state[w]["exp_avg"].numpy()[5].tolist() == [0, 0]


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


# ---------------------------------------------------------------- the rows a sparse gradient holds, against PyTorch
# PyTorch's sparse gradient of an embedding holds every row looked up (but the padding row), even one whose gradient
# is exactly zero; SparseAdam decays that row's moments and moves it. minifused's gradients are dense: the backward
# of a sparse lookup records its rows beside the .grad, and SparseAdam reads them. The same code runs on both
# libraries (``lib`` is torch or minifused), several steps, fp32, the results compared within rtol 1e-6.

def _margin(lib, opt, users, items, steps):
    """A margin loss (user · item against a negative), inactive (exactly zero gradient) for some samples."""
    batches = ([[0, 1, 2], [3, 4, 5], [6, 7, 1]], [[2, 3, 0], [5, 1, 7], [4, 6, 6]], [[1, 1, 4], [0, 2, 3], [7, 5, 0]])
    for u, pos, neg in batches[:steps]:
        opt.zero_grad()
        eu, ep, en = users(lib.tensor(u)), items(lib.tensor(pos)), items(lib.tensor(neg))
        score = (eu * ep).sum(-1) - (eu * en).sum(-1)
        (0.5 - score).relu().sum().backward()
        opt.step()


def _masked(lib, opt, emb, steps, set_to_none=True):
    """Looked-up rows under a zero mask (a zero gradient), duplicates, the padding row, rows looked up in one step
    and not the next."""
    batches = ([[1, 2, 2, 0], [1., 1., 0., 1.]], [[3, 1, 2, 4], [1., 0., 0., 1.]], [[5, 0, 6, 3], [0., 0., 1., 0.]])
    for idx, mask in batches[:steps]:
        opt.zero_grad(set_to_none=set_to_none)
        (emb(lib.tensor(idx)).pow(2).sum(-1) * lib.tensor(mask)).sum().backward()
        opt.step()


def _accumulated(lib, opt, emb, steps, set_to_none=True):
    """Two backward() calls before each step: the rows are those of both lookups (the second's gradient zero)."""
    for s in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        emb(lib.tensor([s + 1, s + 3])).pow(2).sum().backward()
        (emb(lib.tensor([1, 2])) * 0).sum().backward()
        opt.step()


def _retained(lib, opt, emb, steps):
    """One graph walked twice (retain_graph), its second lookup's gradient zero; the weight also looked up by
    F.embedding in the same graph."""
    F = lib.nn.functional
    for s in range(steps):
        opt.zero_grad()
        out = emb(lib.tensor([s + 1, 5])).sum() + (F.embedding(lib.tensor([s, 6]), emb.weight, sparse=True) * 0).sum()
        out.backward(retain_graph=True)
        out.backward()
        opt.step()


def _bags(lib, opt, bag, steps, mode):
    """EmbeddingBag: offsets with an empty bag, a bag whose loss is masked off, per_sample_weights with zeros (sum),
    the padding row."""
    data = ([[1, 2, 3, 0, 4], [0, 2, 2], [1., 1., 0.]], [[4, 2, 0, 3, 1], [0, 0, 3], [1., 1., 0.]],
            [[7, 1, 0, 2, 5], [0, 1, 5], [0., 1., 1.]])
    for idx, offsets, mask in data[:steps]:
        opt.zero_grad()
        weights = lib.tensor([1., 0., 1., 1., 0.5]) if mode == "sum" else None
        out = bag(lib.tensor(idx), lib.tensor(offsets), per_sample_weights=weights)
        (out.pow(2).sum(-1) * lib.tensor(mask)).sum().backward()
        opt.step()


def _run(lib, case, table):
    """The case run in ``lib`` from ``table``: the final weights and each's exp_avg, exp_avg_sq (fp32 arrays)."""
    emb = lib.nn.Embedding.from_pretrained(lib.tensor(table), freeze=False, padding_idx=0, sparse=True)
    if case == "margin":
        items = lib.nn.Embedding.from_pretrained(lib.tensor(table[::-1].copy()), freeze=False, sparse=True)
        opt = lib.optim.SparseAdam([emb.weight, items.weight], lr=0.05, betas=(0.8, 0.9))
        _margin(lib, opt, emb, items, 3)
        params = [emb.weight, items.weight]
    else:
        if case.startswith("bag"):
            mode = case[4:]
            emb = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(table), freeze=False, mode=mode, padding_idx=0,
                                                      sparse=True)
        elif case == "max_norm":
            emb = lib.nn.Embedding.from_pretrained(lib.tensor(table), freeze=False, padding_idx=0, max_norm=1.0,
                                                   sparse=True)
        opt = lib.optim.SparseAdam(emb.parameters(), lr=0.05, betas=(0.8, 0.9))
        params = [emb.weight]
        if case in ("masked", "max_norm"):
            _masked(lib, opt, emb, 3)
        elif case == "masked_zeroed":
            _masked(lib, opt, emb, 3, set_to_none=False)
        elif case in ("accumulated", "accumulated_zeroed"):
            _accumulated(lib, opt, emb, 3, set_to_none=case == "accumulated")
        elif case == "retained":
            _retained(lib, opt, emb, 3)
        else:
            _bags(lib, opt, emb, 3, mode)
    out = []
    for p in params:
        st = opt.state[p]
        out += [p.detach().numpy().copy(), st["exp_avg"].numpy().copy(), st["exp_avg_sq"].numpy().copy()]
    return out


@pytest.mark.parametrize("case", ["margin", "masked", "masked_zeroed", "max_norm", "accumulated",
                                  "accumulated_zeroed", "retained", "bag_sum", "bag_mean"])
def test_looked_up_rows_match_pytorch(case):
    torch = pytest.importorskip("torch")
    table = np.random.default_rng(3).standard_normal((8, 3)).astype(np.float32)
    ours, theirs = _run(mf, case, table), _run(torch, case, table)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
