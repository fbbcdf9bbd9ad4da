"""torch names added at the top level: autograd.grad, unique, multinomial, normal, finfo/iinfo, softmax as a
function and a method, flip(dims=), clip, Size, int; quantile's NaN rules, mode's index, searchsorted's forms,
cosine_similarity / pairwise_distance, random_, rsub, positive and the special namespace."""
import numpy as np
import pytest

import minifused as mf
from minifused import autograd


def test_autograd_grad_changes_no_grad_attribute(rng):
    x = mf.tensor(rng.standard_normal(4), requires_grad=True)
    w = mf.tensor(rng.standard_normal(4), requires_grad=True)
    x.grad = mf.ones(4, dtype=mf.float64)
    h = x * w
    y = (h * h).sum()
    gx, gh = autograd.grad(y, [x, h], retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), 2 * x.numpy() * w.numpy() ** 2, rtol=1e-12)
    np.testing.assert_allclose(gh.numpy(), 2 * h.numpy(), rtol=1e-12)
    assert x.grad.numpy().tolist() == [1, 1, 1, 1] and w.grad is None and h.grad is None
    (gw,) = autograd.grad(y, w, grad_outputs=mf.tensor(3.0, dtype=mf.float64))
    np.testing.assert_allclose(gw.numpy(), 6 * x.numpy() ** 2 * w.numpy(), rtol=1e-12)


def test_autograd_grad_unused_and_bad_input():
    x, z = mf.randn(3, requires_grad=True), mf.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="not used to compute the outputs; pass allow_unused=True"):
        autograd.grad((x * 2).sum(), [x, z], retain_graph=True)
    gx, gz = autograd.grad((x * 2).sum(), [x, z], allow_unused=True)
    assert gz is None and gx.numpy().tolist() == [2, 2, 2]
    (g,) = autograd.grad((x * x).sum(), x, create_graph=True)  # a gradient with a graph of its own
    np.testing.assert_allclose(autograd.grad(g.sum(), x)[0].numpy(), [2, 2, 2])
    with pytest.raises(RuntimeError, match="does not require grad"):
        autograd.grad((x * 2).sum(), mf.randn(3))


def test_quantile_nan_rules_and_gradient():
    """A NaN in a row makes quantile's result NaN, nanquantile skips it (NaN for a row of NaNs only), as PyTorch's;
    the gradient of an interpolated quantile splits between the two neighbours."""
    nan = float("nan")
    x = mf.tensor([[1.0, nan, 3.0, 4.0], [2.0, 6.0, 4.0, 8.0], [nan, nan, nan, nan]])
    q = mf.quantile(x, 0.5, dim=1).numpy()
    assert np.isnan(q[0]) and q[1] == 5.0 and np.isnan(q[2])
    nq = mf.nanquantile(x, mf.tensor([0.5, 1.0]), dim=1).numpy()
    np.testing.assert_array_equal(nq[:, :2], [[3.0, 5.0], [4.0, 8.0]])
    assert np.isnan(nq[:, 2]).all()
    y = mf.tensor([3.0, 1.0, 2.0, 5.0], requires_grad=True)
    mf.quantile(y, 0.4).backward()  # rank 1.2 of [1, 2, 3, 5]: 0.8 * 2 + 0.2 * 3
    np.testing.assert_allclose(y.grad.numpy(), [0.2, 0.0, 0.8, 0.0], rtol=1e-6)


def test_mode_searchsorted_bucketize_and_distances():
    """mode: the smallest of the most frequent values and its last index; searchsorted with a number, a sorter
    and int32 output; bucketize's right; cosine_similarity and pairwise_distance at the top level (PyTorch's)."""
    values, indices = mf.mode(mf.tensor([[1.0, 3, 3, 2, 2, 5], [4, 4, 1, 1, 1, 4]]))
    assert values.tolist() == [2.0, 1.0] and indices.tolist() == [4, 4]
    seq = mf.tensor([1.0, 3.0, 5.0])
    assert mf.searchsorted(seq, 3).item() == 1 and mf.searchsorted(seq, 3, side="right").item() == 2
    out = mf.searchsorted(mf.tensor([5.0, 1.0, 3.0]), mf.tensor([2.0, 6.0]), sorter=mf.tensor([1, 2, 0]),
                          out_int32=True)
    assert out.tolist() == [1, 3] and out.dtype == mf.int32
    assert mf.bucketize(mf.tensor([1.0, 3.0, 6.0]), seq).tolist() == [0, 1, 3]
    assert mf.bucketize(3.0, seq, right=True).item() == 2
    a, b = mf.tensor([[1.0, 0.0], [3.0, 4.0]]), mf.tensor([[1.0, 1.0], [3.0, 4.0]])
    np.testing.assert_allclose(mf.cosine_similarity(a, b).numpy(), [2 ** -0.5, 1.0], rtol=1e-6)
    np.testing.assert_allclose(mf.pairwise_distance(a, b).numpy(), [1.0, 0.0], atol=1e-5)
    assert mf.histc(mf.tensor([1.0, 2.0, 1.0, 4.0]), bins=4, min=0, max=3).tolist() == [0.0, 2.0, 1.0, 0.0]


def test_random_rsub_positive_and_special():
    """Tensor.random_ draws integers in [from, to) (dtype-bounded without to), rsub / positive as PyTorch's, and
    torch.special's names reach the functions minifused has."""
    mf.manual_seed(0)
    x = mf.zeros(2000).random_(3, 7)
    assert x.dtype == mf.float32 and set(np.unique(x.numpy()).tolist()) == {3.0, 4.0, 5.0, 6.0}
    assert set(mf.zeros(500, dtype=mf.int64).random_(4).numpy().tolist()) == {0, 1, 2, 3}
    assert mf.zeros(500, dtype=mf.float16).random_().max().item() <= 2 ** 11
    assert set(mf.zeros(200, dtype=mf.bool).random_().numpy().tolist()) == {False, True}
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=5 >= to=5"):
        mf.zeros(3).random_(5, 5)
    w = mf.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="random_"):
        w.random_(3)  # a leaf that requires grad
    a = mf.tensor([1.0, 2.0])
    assert mf.rsub(a, 5, alpha=2).tolist() == [3.0, 1.0] and mf.rsub(a, mf.tensor([3.0, 3.0])).tolist() == [2.0, 1.0]
    assert mf.positive(a) is a and a.positive() is a
    with pytest.raises(TypeError, match="positive: the `\\+` operator, on a bool tensor is not supported"):
        mf.positive(mf.tensor([True]))
    np.testing.assert_allclose(mf.special.expit(a).numpy(), 1 / (1 + np.exp(-a.numpy())), rtol=1e-6)
    np.testing.assert_allclose(mf.special.softmax(a, 0).numpy(), np.exp([1, 2]) / np.exp([1, 2]).sum(), rtol=1e-6)


def test_unique():
    t = mf.tensor([[3, 1], [3, 2]])
    assert mf.unique(t).tolist() == [1, 2, 3]
    values, inverse, counts = t.unique(return_inverse=True, return_counts=True)
    assert values.tolist() == [1, 2, 3] and inverse.tolist() == [[2, 0], [2, 1]] and counts.tolist() == [1, 1, 2]
    rows, inverse = mf.unique(mf.tensor([[1, 2], [0, 5], [1, 2]]), dim=0, return_inverse=True)
    assert rows.tolist() == [[0, 5], [1, 2]] and inverse.tolist() == [1, 0, 1]


def test_multinomial_frequencies_and_errors():
    mf.manual_seed(0)
    p = mf.tensor([0.1, 0.0, 0.9], dtype=mf.float64)
    draws = mf.multinomial(p, 4000, replacement=True).numpy()
    counts = np.bincount(draws, minlength=3) / 4000
    assert counts[1] == 0 and abs(counts[2] - 0.9) < 0.03
    rows = mf.multinomial(mf.tensor([[1.0, 1.0, 0.0], [0.0, 2.0, 5.0]]), 2)
    assert rows.shape == (2, 2) and sorted(rows.numpy()[0].tolist()) == [0, 1] and sorted(rows.numpy()[1].tolist()) == [1, 2]
    with pytest.raises(ValueError, match="without replacement from 3 categories"):
        mf.multinomial(p, 4)
    with pytest.raises(ValueError, match="non-negative"):
        mf.multinomial(mf.tensor([0.5, -0.1]), 1)


def test_normal_and_limits():
    mf.manual_seed(1)
    z = mf.normal(2.0, 3.0, size=(20000,))
    assert abs(float(z.mean()) - 2) < 0.1 and abs(float(z.std()) - 3) < 0.1
    m = mf.normal(mf.tensor([0.0, 100.0]), 0.0)
    assert m.tolist() == [0.0, 100.0]
    with pytest.raises(ValueError, match="std must be >= 0"):
        mf.normal(0.0, -1.0, size=(2,))
    assert mf.finfo(mf.float32).eps == 2.0 ** -23 and mf.finfo(mf.bfloat16).eps == 2.0 ** -7
    assert mf.iinfo(mf.int32).max == 2 ** 31 - 1 and mf.int == mf.int32


def test_softmax_spellings_flip_clip_size(rng):
    x = mf.tensor(rng.standard_normal((2, 3)))
    e = np.exp(x.numpy())
    np.testing.assert_allclose(mf.softmax(x, dim=1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(x.log_softmax(-1).numpy(), np.log(e / e.sum(1, keepdims=True)), rtol=1e-12)
    assert mf.flip(mf.arange(3), dims=(0,)).tolist() == [2, 1, 0] and mf.arange(3).flip(0).tolist() == [2, 1, 0]
    assert mf.clip(mf.tensor([-2.0, 0.5, 2.0]), -1.0, 1.0).tolist() == [-1.0, 0.5, 1.0]
    assert mf.zeros(2, 3).shape == mf.Size([2, 3])


def test_cuda_stream_and_event_without_a_gpu(monkeypatch):
    """Without a usable device, Event / Stream / current_stream raise naming themselves (as PyTorch's do);
    ``cuda.stream(None)`` is a no-op context and a non-stream is refused."""
    monkeypatch.setattr(mf.backend, "cuda_available", lambda: False)
    for make, name in ((lambda: mf.cuda.Event(enable_timing=True), "Event"), (mf.cuda.Stream, "Stream"),
                       (mf.cuda.current_stream, "current_stream"), (mf.cuda.default_stream, "default_stream")):
        with pytest.raises(RuntimeError, match=f"minifused.cuda.{name}: no usable CUDA device"):
            make()
    with mf.cuda.stream(None):
        pass
    with pytest.raises(TypeError, match="expected a minifused.cuda.Stream or None"):
        mf.cuda.stream("side")


@pytest.mark.gpu
def test_gpu_events_time_work_and_streams_carry_it():
    """Events around a matmul give a positive time; work issued inside ``cuda.stream(s)`` runs on s (its result
    equals the default stream's), and events / wait_stream order the two streams."""
    a = mf.randn(512, 512, device="cuda")
    start, end = mf.cuda.Event(enable_timing=True), mf.cuda.Event(enable_timing=True)
    start.record()
    ref = a @ a
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) > 0
    side = mf.cuda.Stream()
    side.wait_stream(mf.cuda.current_stream())
    with mf.cuda.stream(side):
        assert mf.cuda.current_stream() == side
        out = a @ a
    mf.cuda.current_stream().wait_stream(side)
    side.synchronize()
    assert side.query() and mf.cuda.current_stream() != side
    np.testing.assert_allclose(out.cpu().numpy(), ref.cpu().numpy(), rtol=1e-5, atol=1e-4)
    done = side.record_event()
    done.wait()
    done.synchronize()
    assert mf.cuda.default_stream().cuda_stream == 0


# PyTorch 2.14's messages for the same calls (torch.testing.assert_close; "torch." read as "minifused.")
_ASSERT_CLOSE_CASES = [
    ((mf.tensor([1., 2., 3.]), mf.tensor([1., 2., 3.0001])), {},
     "Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\nGreatest absolute difference: "
     "9.989738464355469e-05 at index (2,) (up to 1e-05 allowed)\nGreatest relative difference: "
     "3.329801984364167e-05 at index (2,) (up to 1.3e-06 allowed)"),
    ((mf.tensor([1., 2.]), mf.tensor([1., 2., 3.])), {},
     "The values for attribute 'shape' do not match: minifused.Size([2]) != minifused.Size([3])."),
    ((mf.tensor([1., 2.]), mf.tensor([1., 2.], dtype=mf.float64)), {},
     "The values for attribute 'dtype' do not match: minifused.float32 != minifused.float64."),
    ((mf.tensor([1, 2]), mf.tensor([1, 3])), {},
     "Tensor-likes are not equal!\n\nMismatched elements: 1 / 2 (50.0%)\nGreatest absolute difference: 1 at "
     "index (1,)\nGreatest relative difference: 0.3333333432674408 at index (1,)"),
    ((1.0, 1.1), {}, "Scalars are not close!\n\nExpected 1.1 but got 1.0.\nAbsolute difference: "
     "0.10000000000000009 (up to 1e-07 allowed)\nRelative difference: 0.09090909090909098 (up to 1e-07 allowed)"),
    ((1, 1.0), {}, "The (d)types do not match: <class 'int'> != <class 'float'>."),
    (([mf.ones(2), 3], [mf.ones(2), 4]), {}, "Scalars are not equal!\n\nExpected 4 but got 3.\nAbsolute "
     "difference: 1\nRelative difference: 0.25\n\nThe failure occurred for item [1]"),
    (({"a": mf.ones(2)}, {"b": mf.ones(2)}), {}, "The keys of the mappings do not match:\nMissing keys in the "
     "actual mapping: ['b']\nAdditional keys in the actual mapping: ['a']"),
    ((mf.ones(2, dtype=mf.float16), mf.ones(2, dtype=mf.float16) * 1.002), {},
     "Tensor-likes are not close!\n\nMismatched elements: 2 / 2 (100.0%)\nGreatest absolute difference: "
     "0.001953125 at index (0,) (up to 1e-05 allowed)\nGreatest relative difference: 0.001949310302734375 at "
     "index (0,) (up to 0.001 allowed)"),
    ((mf.tensor([1., float("inf")]), mf.tensor([1., -float("inf")])), {},
     "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\nGreatest absolute difference: inf at "
     "index (1,) (up to 1e-05 allowed)\nGreatest relative difference: nan at index (1,) (up to 1.3e-06 allowed)"),
    ((mf.ones(2, 3), mf.ones(3, 2).t()), {"check_stride": True},
     "The values for attribute 'stride()' do not match: (3, 1) != (1, 2)."),
    ((mf.ones(2), mf.ones(2) + 1), {"rtol": 0.1, "atol": 0, "msg": "custom"}, "custom"),
]


@pytest.mark.parametrize("case", range(len(_ASSERT_CLOSE_CASES)))
def test_assert_close_raises_pytorchs_messages(case):
    args, kwargs, message = _ASSERT_CLOSE_CASES[case]
    with pytest.raises(AssertionError) as err:
        mf.testing.assert_close(*args, **kwargs)
    assert str(err.value) == message


def test_assert_close_passes_and_refuses_like_pytorch():
    ok = [(mf.tensor([1., 2.]), mf.tensor([1., 2.], dtype=mf.float64), {"check_dtype": False}),
          (1.0, 1.0 + 1e-8, {}), ([mf.ones(2), 3], (mf.ones(2), 3), {}), (np.ones(2), np.ones(2), {}),
          (mf.tensor([float("nan")]), mf.tensor([float("nan")]), {"equal_nan": True}),
          (mf.ones(2), mf.ones(2) + 1, {"rtol": 1, "atol": 0}), (None, None, {}),
          (mf.ones(2, dtype=mf.bfloat16), mf.ones(2, dtype=mf.bfloat16) * 1.01, {}),
          (mf.ones(2, requires_grad=True), mf.ones(2), {}), (mf.zeros(0), mf.zeros(0), {})]
    for a, e, kw in ok:
        mf.testing.assert_close(a, e, **kw)
    with pytest.raises(AssertionError, match="Xcustom"):
        mf.testing.assert_close(mf.ones(2), mf.zeros(2), rtol=0.0, atol=0.0, msg=lambda m: "Xcustom " + m)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                                         "atol"):
        mf.testing.assert_close(mf.ones(2), mf.ones(2), rtol=1e-3)
    with pytest.raises(TypeError, match="No comparison pair was able to handle inputs of type"):
        mf.testing.assert_close(mf.ones(2), np.ones(2))


def test_dtype_seed_and_asarray():
    assert all(isinstance(d, mf.dtype) for d in (mf.float32, mf.bfloat16, mf.int64, mf.bool))
    s = mf.seed()
    assert mf.initial_seed() == s and 0 <= s < 2 ** 63
    a = mf.rand(3)
    mf.manual_seed(s)
    np.testing.assert_array_equal(mf.rand(3).numpy(), a.numpy())
    host = np.arange(3, dtype=np.float32)
    shared = mf.asarray(host)
    shared[0] = 7.0
    assert host[0] == 7.0  # the same memory
    copied = mf.asarray(host, copy=True)
    copied[1] = -1.0
    assert host[1] == 1.0
    assert mf.asarray([1, 2]).dtype == mf.int64 and mf.asarray([1.5]).dtype == mf.float32
    t = mf.asarray(host, dtype=mf.float64)
    assert t.dtype == mf.float64 and t.tolist() == [7.0, 1.0, 2.0]
    g = mf.asarray(host, requires_grad=True)
    assert g.requires_grad and g.is_leaf
    for obj, kw in (([1.0], {}), (host, {"dtype": mf.float64})):
        with pytest.raises(ValueError, match="asarray: copy=False, but .* needs a copy"):
            mf.asarray(obj, copy=False, **kw)
    mf.asarray(host, copy=False)[2] = 9.0
    assert host[2] == 9.0


def test_in_place_triangles_index_copy_fill_diagonal_and_their_gradients(device):
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    t = mf.tensor(a, device=device)
    assert t.clone().tril_().tolist() == np.tril(a).tolist()
    assert t.clone().triu_(1).tolist() == np.triu(a, 1).tolist()
    assert t.narrow_copy(1, 1, 2).tolist() == a[:, 1:3].tolist()
    src = np.arange(9.0, dtype=np.float32).reshape(3, 3)
    got = mf.zeros(5, 3, device=device).index_copy_(0, mf.tensor([0, 4, 2], device=device), mf.tensor(src,
                                                                                                      device=device))
    want = np.zeros((5, 3), np.float32)
    want[[0, 4, 2]] = src
    assert got.tolist() == want.tolist()
    with pytest.raises(RuntimeError, match="same dtype"):
        mf.zeros(5, 3, device=device).index_copy_(0, mf.tensor([0], device=device),
                                                  mf.ones(1, 3, dtype=mf.float64, device=device))
    wrapped = np.zeros((7, 3), np.float32)
    wrapped.reshape(-1)[::4] = 5.0  # numpy's wrap rule is PyTorch's
    assert mf.zeros(7, 3, device=device).fill_diagonal_(5.0, wrap=True).tolist() == wrapped.tolist()
    assert mf.zeros(7, 3, device=device).fill_diagonal_(5.0).tolist() == (np.eye(7, 3) * 5).tolist()
    cube = mf.zeros(3, 3, 3, device=device).fill_diagonal_(1.0)._data
    assert [float(cube[i, i, i]) for i in range(3)] == [1.0] * 3 and float(cube.sum()) == 3.0
    with pytest.raises(RuntimeError, match="equal length"):
        mf.zeros(3, 3, 2, device=device).fill_diagonal_(1.0)
    # gradients (PyTorch 2.14's on the same calls)
    p = mf.ones(3, 3, device=device, requires_grad=True)
    (p * 3).tril_().sum().backward()
    assert p.grad.tolist() == (np.tril(np.ones((3, 3))) * 3).tolist()
    p, s = mf.ones(3, 3, device=device, requires_grad=True), mf.ones(2, 3, device=device, requires_grad=True)
    q = (p * 1).index_copy(0, mf.tensor([2, 0], device=device), s * 2)
    (q * mf.arange(9.0, device=device).reshape(3, 3)).sum().backward()
    assert p.grad.tolist() == [[0, 0, 0], [3, 4, 5], [0, 0, 0]] and s.grad.tolist() == [[12, 14, 16], [0, 2, 4]]
    p = mf.ones(3, 3, device=device, requires_grad=True)
    q = p * 1
    q.fill_diagonal_(0.0)
    q.sum().backward()
    assert p.grad.tolist() == (1 - np.eye(3)).tolist()
    # PyTorch's refusals (a leaf, a view of one; a value a backward saved), naming fill_diagonal_
    with pytest.raises(RuntimeError, match="fill_diagonal_: a leaf Variable that requires grad is being used in an "
                                           "in-place operation"):
        p.fill_diagonal_(0.0)
    with pytest.raises(RuntimeError, match="fill_diagonal_: a view of a leaf Variable that requires grad"):
        p[:2].fill_diagonal_(0.0)
    e = p.exp()
    e.fill_diagonal_(0.0)
    with pytest.raises(RuntimeError, match=r"modified by an in-place operation \(last by fill_diagonal_\)"):
        e.sum().backward()


def test_argwhere_ger_sum_to_size_and_detach_(device):
    x = mf.tensor([[0, 1], [2, 0]], device=device)
    assert mf.argwhere(x).tolist() == [[0, 1], [1, 0]] and x.argwhere().dtype == mf.int64
    assert mf.ger(mf.tensor([1.0, 2.0]), mf.tensor([3.0, 4.0, 5.0])).tolist() == [[3, 4, 5], [6, 8, 10]]
    b = np.arange(24.0).reshape(2, 3, 4)
    t = mf.tensor(b, dtype=mf.float64, device=device)
    for size, want in (((3, 1), b.sum(0).sum(1, keepdims=True)), ((1, 3, 4), b.sum(0, keepdims=True)),
                       ((4,), b.sum((0, 1))), ((2, 3, 4), b)):
        np.testing.assert_allclose(t.sum_to_size(*size).cpu().numpy(), want)
    for bad in ((2, 4), (1, 2, 3, 4)):
        with pytest.raises(RuntimeError, match="is not expandable to size"):
            t.sum_to_size(*bad)
    p = mf.ones(2, 3, device=device, requires_grad=True)
    p.sum_to_size(1, 3).pow(2).sum().backward()
    assert p.grad.tolist() == [[4.0] * 3] * 2
    w = mf.ones(3, device=device, requires_grad=True)
    y = w * 2
    assert y.detach_() is y and not y.requires_grad and y.grad_fn is None and y.is_leaf
    with pytest.raises(RuntimeError, match="can't detach views in-place"):
        (w * 2)[1:].detach_()


def test_distribution_fills(device):
    mf.manual_seed(0)
    n = 40000
    e = mf.zeros(n, device=device).exponential_(2.0)
    assert float(e.min()) >= 0 and abs(float(e.mean()) - 0.5) < 0.02
    g = mf.zeros(n, dtype=mf.int64, device=device).geometric_(0.25)
    assert g.dtype == mf.int64 and int(g.min()) == 1 and abs(float(g.float().mean()) - 4.0) < 0.1
    ln = mf.zeros(n, device=device).log_normal_(0.5, 0.25).log()
    assert abs(float(ln.mean()) - 0.5) < 0.01 and abs(float(ln.std()) - 0.25) < 0.01
    c = mf.zeros(n + 1, device=device).cauchy_(3.0, 2.0)
    assert abs(float(c.median()) - 3.0) < 0.1  # the median and quartiles of Cauchy(3, 2): 3, 1, 5
    assert abs(float(mf.quantile(c, 0.25)) - 1.0) < 0.15 and abs(float(mf.quantile(c, 0.75)) - 5.0) < 0.15
    for call, match in ((lambda: mf.zeros(3).exponential_(0), "lambda > 0"), (lambda: mf.zeros(3).geometric_(1.0),
                        r"p to be in \(0, 1\)"), (lambda: mf.zeros(3).log_normal_(0, 0), "std > 0"),
                        (lambda: mf.zeros(3).cauchy_(0, -1), "sigma > 0"),
                        (lambda: mf.zeros(3, dtype=mf.int64).exponential_(), "floating-point")):
        with pytest.raises(RuntimeError, match=match):
            call()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        mf.zeros(3, requires_grad=True).exponential_()


def test_threads_mps_distributed_sampler_path_and_real_tensor_views():
    """PyTorch 2.14's answers on the same calls."""
    import importlib

    before = mf.get_num_threads()
    assert isinstance(before, int) and before >= 1
    try:
        mf.set_num_threads(3)
        assert mf.get_num_threads() == 3
    finally:
        mf.backends._threads["intra"] = None
    for call, exc, match in ((lambda: mf.set_num_threads(0), RuntimeError, "expects a positive integer"),
                             (lambda: mf.set_num_threads(2.0), RuntimeError, "expects an int, but got float"),
                             (lambda: mf.set_num_interop_threads(-1), RuntimeError, "expects a positive integer")):
        with pytest.raises(exc, match=match):
            call()
    assert mf.backends.mps.is_available() is False and mf.backends.mps.is_built() is False
    from minifused.utils.data.distributed import DistributedSampler

    assert DistributedSampler is importlib.import_module("minifused.utils.data").DistributedSampler
    a = mf.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(a.mH.numpy(), a.numpy().swapaxes(-1, -2))
    np.testing.assert_array_equal(a[0].H.numpy(), a[0].numpy().T)
    for name, t in (("H", mf.arange(3.0)), ("H", a), ("mH", mf.arange(3.0)), ("mT", mf.arange(3.0))):
        with pytest.raises(RuntimeError, match=f"tensor.{name} is only supported on matrices"):
            getattr(t, name)
    assert a.resolve_conj() is a and a.resolve_neg() is a and a.is_inference() is False
