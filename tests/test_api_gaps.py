"""PyTorch names that minifused lacked: torch.utils.data's iterable datasets, StackDataset, default_convert,
get_worker_info; torch.autograd's Variable, gradcheck, set_detect_anomaly and autograd.functional."""
import collections

import numpy as np
import pytest

import minifused as mf
from minifused import autograd
from minifused.utils.data import (ChainDataset, ConcatDataset, DataLoader, IterableDataset, StackDataset,
                                  TensorDataset, default_convert, get_worker_info)


class Stream(IterableDataset):
    def __init__(self, n, sized=False):
        self.n, self.sized = n, sized

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        if not self.sized:
            raise TypeError(f"object of type {type(self).__name__!r} has no len()")
        return self.n


def _vals(batches):
    return [b.numpy().tolist() for b in batches]


# ---------------------------------------------------------------- utils.data
def test_iterable_dataset_batches_in_stream_order():
    loader = DataLoader(Stream(5), batch_size=2)
    batches = list(loader)
    assert _vals(batches) == [[0, 1], [2, 3], [4]]
    assert batches[0].dtype == np.int64  # Python ints collate to int64, as PyTorch's
    assert _vals(DataLoader(Stream(5), batch_size=2, drop_last=True)) == [[0, 1], [2, 3]]
    assert _vals(DataLoader(Stream(5), batch_size=2, shuffle=False)) == [[0, 1], [2, 3], [4]]
    assert list(DataLoader(Stream(3), batch_size=None)) == [0, 1, 2]  # items pass through
    assert list(DataLoader(Stream(3), batch_size=None, collate_fn=lambda x: x * 10)) == [0, 10, 20]
    assert list(DataLoader(Stream(3), batch_size=2, collate_fn=lambda xs: sum(xs))) == [1, 2]
    loader = DataLoader(Stream(4), batch_size=3)
    assert _vals(loader) == _vals(loader) == [[0, 1, 2], [3]]  # every epoch iterates the stream afresh


def test_iterable_dataset_collates_tuples_and_converts_arrays():
    class Pairs(IterableDataset):
        def __iter__(self):
            for i in range(3):
                yield np.full(2, i, np.float32), i

    x, y = next(iter(DataLoader(Pairs(), batch_size=3)))
    np.testing.assert_array_equal(x.numpy(), [[0, 0], [1, 1], [2, 2]])
    assert y.numpy().tolist() == [0, 1, 2]
    items = list(DataLoader(Pairs(), batch_size=None))
    assert isinstance(items[1], list) and isinstance(items[1][0], mf.Tensor) and items[1][1] == 1


def test_iterable_dataset_len_and_refused_options():
    assert len(DataLoader(Stream(5, sized=True), batch_size=2)) == 3
    assert len(DataLoader(Stream(5, sized=True), batch_size=2, drop_last=True)) == 2
    assert len(DataLoader(Stream(5, sized=True), batch_size=None)) == 5
    with pytest.raises(TypeError):
        len(DataLoader(Stream(5), batch_size=2))
    for kw, name in ((dict(shuffle=True), "shuffle"), (dict(sampler=[0, 1]), "sampler"),
                     (dict(batch_sampler=[[0]]), "batch_sampler")):
        with pytest.raises(ValueError, match=f"IterableDataset: expected unspecified {name} option"):
            DataLoader(Stream(3), **kw)
    with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
        DataLoader(Stream(3), batch_size=None, drop_last=True)


def test_iterable_dataset_base_and_chain():
    with pytest.raises(TypeError, match="abstract"):  # (no __iter__: an abstract class, as PyTorch's)
        IterableDataset()
    chain = ChainDataset([Stream(2), Stream(3)])
    assert list(chain) == [0, 1, 0, 1, 2]
    assert list(Stream(2) + Stream(1)) == [0, 1, 0] and isinstance(Stream(1) + Stream(1), ChainDataset)
    assert len(ChainDataset([Stream(2, True), Stream(3, True)])) == 5
    with pytest.raises(TypeError):
        len(chain)
    with pytest.raises(TypeError, match="ChainDataset only supports IterableDataset"):
        list(ChainDataset([Stream(1), TensorDataset(mf.ones(2))]))
    with pytest.raises(TypeError, match="ConcatDataset does not support IterableDataset"):
        ConcatDataset([Stream(1)])
    assert _vals(DataLoader(chain, batch_size=4)) == [[0, 1, 0, 1], [2]]
    assert get_worker_info() is None


def test_stack_dataset():
    a, b = mf.arange(3, device="cpu"), mf.arange(3, device="cpu") * 2
    s = StackDataset(a, b)
    assert len(s) == 3 and [int(v) for v in s[1]] == [1, 2]
    assert [[int(v) for v in item] for item in s.__getitems__([0, 2])] == [[0, 0], [2, 4]]
    d = StackDataset(x=a, label=[5, 6, 7])
    assert int(d[2]["x"]) == 2 and d[2]["label"] == 7
    batch = next(iter(DataLoader(d, batch_size=3)))
    assert batch["label"].numpy().tolist() == [5, 6, 7] and batch["x"].numpy().tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="at least one dataset"):
        StackDataset()
    with pytest.raises(ValueError, match="size mismatch"):
        StackDataset(a, mf.arange(2))
    with pytest.raises(ValueError, match="both types are given"):
        StackDataset(a, x=a)


def test_default_convert_as_pytorch():
    Point = collections.namedtuple("Point", "x y")
    out = default_convert([np.ones(2), (np.arange(2), 3, "a"), {"k": np.zeros(1, np.float32)},
                           Point(np.float64(2.5), "s"), np.array(["a"])], device="cpu")
    assert isinstance(out[0], mf.Tensor) and out[0].dtype == np.float64
    np.testing.assert_array_equal(out[0].numpy(), [1.0, 1.0])
    assert isinstance(out[1], list) and out[1][0].numpy().tolist() == [0, 1] and out[1][1:] == [3, "a"]
    assert out[2]["k"].dtype == np.float32
    assert type(out[3]) is Point and float(out[3].x) == 2.5 and out[3].x.shape == () and out[3].y == "s"
    assert isinstance(out[4], np.ndarray)  # strings are not converted


# ---------------------------------------------------------------- autograd
def _t(values, requires_grad=False):
    return mf.tensor(np.asarray(values, np.float64), device="cpu", requires_grad=requires_grad)


def test_variable_is_a_tensor_alias():
    from minifused.autograd import Variable

    x = _t([1.0, 2.0], requires_grad=True)
    assert isinstance(x, Variable) and isinstance(mf.ones(2), Variable) and not isinstance(3.0, Variable)
    assert not issubclass(mf.Tensor, Variable)
    v = Variable(x)
    assert type(v) is mf.Tensor and v is not x and not v.requires_grad and v.is_leaf
    assert v.data_ptr() == x.data_ptr()  # shares the memory, as PyTorch's
    y = x * 2
    w = Variable(y, requires_grad=True)
    assert w.requires_grad and w.is_leaf and w.grad_fn is None  # cut from y's graph
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [4.0, 8.0])
    assert x.grad is None
    empty = Variable()
    assert empty.shape == (0,)
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got int"):
        Variable(3)
    with pytest.warns(UserWarning, match="volatile was removed"):
        Variable(x, volatile=True)
    with pytest.raises(TypeError, match="only floating-point"):
        Variable(mf.ones(2, dtype=mf.int64), requires_grad=True)


def test_set_detect_anomaly_function_and_context():
    assert not autograd.is_anomaly_enabled()
    with autograd.set_detect_anomaly(True):
        assert autograd.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match="Sqrt backward gradient"), np.errstate(invalid="ignore"):
            (_t([0.0], True).sqrt() * 0).sum().backward()  # (a NaN gradient: 0 / 0)
        with autograd.set_detect_anomaly(False):
            assert not autograd.is_anomaly_enabled()
            x = _t([0.0], True)
            with np.errstate(invalid="ignore", divide="ignore"):
                (x.sqrt() * 0).sum().backward()
            assert np.isnan(x.grad.numpy()[0])
        assert autograd.is_anomaly_enabled()
    assert not autograd.is_anomaly_enabled()
    autograd.set_detect_anomaly(True)  # a plain call switches it, as PyTorch's
    try:
        assert autograd.is_anomaly_enabled()
    finally:
        autograd.set_detect_anomaly(False)
    assert not autograd.is_anomaly_enabled()
    with autograd.set_detect_anomaly(True, check_nan=False):  # (on, without the NaN check: PyTorch's)
        assert autograd.is_anomaly_enabled() and not autograd.is_anomaly_check_nan_enabled()
        x = _t([0.0], True)
        with np.errstate(invalid="ignore", divide="ignore"):
            (x.sqrt() * 0).sum().backward()
        assert np.isnan(x.grad.numpy()[0])
    with pytest.raises(TypeError, match="set_detect_anomaly: mode and check_nan must be bools"):
        autograd.set_detect_anomaly(1)


def test_gradcheck_passes_and_catches_a_wrong_backward():
    x, y = _t([[0.3, -1.2], [0.7, 2.0]], True), _t([0.5, -0.25], True)
    assert autograd.gradcheck(lambda a, b: (a * b).tanh().sum(1), (x, y))
    assert autograd.gradcheck(lambda a: (a.exp(), a * 3), x, eps=1e-6, atol=1e-5)  # one tensor, two outputs
    assert autograd.gradcheck(lambda a, k: a * k, (x, 2.0))  # a non-tensor argument passes through

    class WrongSquare(autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a  # should be 2 * g * a

    with pytest.raises(autograd.GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        autograd.gradcheck(WrongSquare.apply, (x,))
    assert issubclass(autograd.GradcheckError, RuntimeError)
    assert autograd.gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        autograd.gradcheck(lambda a: a * 2, (_t([1.0]),))
    with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double precision"):
        autograd.gradcheck(lambda a: a * 2, (mf.ones(2, device="cpu", requires_grad=True),), eps=1e-2, atol=1e-3)
    with pytest.raises(NotImplementedError, match="check_forward_ad"):
        autograd.gradcheck(lambda a: a, (x,), check_forward_ad=True)
    from minifused.autograd.gradcheck import GradcheckError

    assert GradcheckError is autograd.GradcheckError


def test_jacobian_matches_hand_computed():
    from minifused.autograd.functional import jacobian

    a_np, b_np = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0])
    a, b = _t(a_np), _t(b_np)
    j = jacobian(lambda x: x * x, a)
    np.testing.assert_allclose(j.numpy(), np.diag(2 * a_np))
    assert not a.requires_grad  # the caller's tensors are left alone

    def f(x, y):  # out0 = outer(x, y) (3, 2); out1 = sum(x) (independent of y)
        return x.reshape(3, 1) * y.reshape(1, 2), x.sum()

    (dxo, dyo), (dxs, dys) = jacobian(f, (a, b))
    ref_dx = np.zeros((3, 2, 3))
    ref_dy = np.zeros((3, 2, 2))
    for i in range(3):
        for k in range(2):
            ref_dx[i, k, i] = b_np[k]
            ref_dy[i, k, k] = a_np[i]
    np.testing.assert_allclose(dxo.numpy(), ref_dx)
    np.testing.assert_allclose(dyo.numpy(), ref_dy)
    np.testing.assert_allclose(dxs.numpy(), np.ones(3))
    np.testing.assert_array_equal(dys.numpy(), np.zeros(2))  # independent input: zeros
    single_out = jacobian(lambda x, y: (x * 2).sum() + y[0], (a, b))
    assert isinstance(single_out, tuple) and len(single_out) == 2
    np.testing.assert_allclose(single_out[1].numpy(), [1.0, 0.0])
    with pytest.raises(RuntimeError, match="output 1 of the user-provided function is independent of input 1"):
        jacobian(f, (a, b), strict=True)
    graphed = jacobian(f, (a, b), create_graph=True)  # the same values, which differentiate further
    for got, want in zip(graphed, jacobian(f, (a, b))):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.detach().numpy(), w.numpy())
    with pytest.raises(TypeError, match="inputs must be either a Tensor or a tuple of Tensors"):
        jacobian(lambda x: x, 3.0)
    with pytest.raises(TypeError, match="outputs of the user-provided function must be either a Tensor"):
        jacobian(lambda x: 1.0, a)


def test_vjp_matches_hand_computed():
    from minifused.autograd.functional import vjp

    a_np = np.array([1.0, 2.0, 3.0])
    a = _t(a_np)
    out, g = vjp(lambda x: (x ** 3).sum(), a)
    assert float(out) == pytest.approx(36.0) and not out.requires_grad
    np.testing.assert_allclose(g.numpy(), 3 * a_np ** 2)
    v = _t([1.0, -2.0, 0.5])
    out, g = vjp(lambda x: x * x, a, v)
    np.testing.assert_allclose(out.numpy(), a_np ** 2)
    np.testing.assert_allclose(g.numpy(), 2 * a_np * v.numpy())
    b = _t([4.0, 5.0])
    outs, (ga, gb) = vjp(lambda x, y: (x.sum() * y, x * 2), (a, b), (_t([1.0, 1.0]), _t([1.0, 0.0, -1.0])))
    assert isinstance(outs, tuple) and len(outs) == 2
    np.testing.assert_allclose(ga.numpy(), 9.0 + np.array([2.0, 0.0, -2.0]))  # sum(y) + 2 v2
    np.testing.assert_allclose(gb.numpy(), [6.0, 6.0])  # sum(x)
    _, (gx, gy) = vjp(lambda x, y: x * 2, (a, b), _t([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(gy.numpy(), [0.0, 0.0])
    with pytest.raises(RuntimeError, match="independent of input 1"):
        vjp(lambda x, y: x * 2, (a, b), _t([1.0, 1.0, 1.0]), strict=True)
    with pytest.raises(RuntimeError, match="v can only be None"):
        vjp(lambda x: x * 2, a)
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be \(3,\) but got \(2,\)"):
        vjp(lambda x: x * 2, a, b)
