"""Idioms of metric learning, distillation and graph training loops: what their ops keep for backward (a result
changed in place before backward), their gradients and their messages for bad input."""
import warnings

import numpy as np
import pytest

import minifused as mf


def _leaf(values):
    return mf.tensor(np.asarray(values, np.float32), requires_grad=True)


def test_pow_result_changed_in_place_keeps_its_gradient():
    # a GCN's degree normalisation: d = deg.pow(-0.5); d[isinf(d)] = 0. PyTorch's pow keeps its input, not its
    # result, for the base's gradient, so the write is allowed and the gradient is -0.5 * deg ** -1.5 (times the 0
    # that reaches the overwritten entry: NaN there, 0 * -inf)
    deg = _leaf([0.0, 1.0, 4.0, 0.25])
    d = deg.pow(-0.5)
    d[mf.isinf(d)] = 0.0
    (d * mf.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    x = np.array([1.0, 4.0, 0.25])
    np.testing.assert_allclose(deg.grad.numpy()[1:], -0.5 * x ** -1.5 * [2.0, 3.0, 4.0], rtol=1e-6)
    assert np.isnan(deg.grad.numpy()[0])


@pytest.mark.parametrize("exponent", [2, 3, 0.5])
def test_pow_by_a_number_result_changed_in_place(exponent):
    x = _leaf([0.5, 1.5, 2.0])
    y = x ** exponent
    y.mul_(3)
    y.sum().backward()
    base = np.array([0.5, 1.5, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), 3 * exponent * base ** (exponent - 1), rtol=1e-6)


def test_pow_keeps_its_result_for_the_exponents_gradient():
    # d/db a ** b = a ** b * log a reads the result: a write to it must make that backward raise
    b = _leaf([1.0, 2.0])
    y = mf.tensor([2.0, 3.0]) ** b
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_xlogy_result_changed_in_place_keeps_its_gradient():
    # PyTorch's xlogy keeps its operands only: d/da = log b, d/db = a / b
    a, b = _leaf([0.5, 2.0]), _leaf([3.0, 0.25])
    y = mf.xlogy(a, b)
    y.mul_(2)
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * np.log([3.0, 0.25]), rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), 2 * np.array([0.5 / 3.0, 2.0 / 0.25]), rtol=1e-6)


def test_copysign_keeps_its_result():
    # PyTorch's copysign reads its result (y / a) for the gradient: a write to it makes the backward raise
    a = _leaf([1.0, -2.0])
    y = mf.copysign(a, mf.tensor([-1.0, 1.0]))
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


@pytest.mark.parametrize("shapes, message", [
    (((4,), (4,), (1,)), r"1D target tensor expects 2D input tensors, but found inputs with sizes \[4\] and \[4\]"),
    (((3, 4), (4,), (3,)), r"1D target tensor expects 2D input tensors, but found inputs with sizes \[3, 4\] and "
                           r"\[4\]"),
    (((2, 3), (2, 3), ()), r"0D target tensor expects 1D input tensors"),
    (((2, 3, 4), (2, 3, 4), (2, 3)), "0D or 1D target tensor expected, multi-target not supported"),
    (((3, 4), (2, 4), (3,)), r"expected two inputs of one shape, got \(3, 4\) and \(2, 4\)"),
])
def test_cosine_embedding_loss_names_the_ranks_it_expects(shapes, message):
    a, b, y = (mf.ones(*s) if s else mf.tensor(1.0) for s in shapes)
    with pytest.raises(RuntimeError, match="cosine_embedding_loss: " + message):
        mf.nn.functional.cosine_embedding_loss(a, b, y)


def test_scalars_first_addmm_as_old_batch_hard_code_writes_it():
    # squared distances as x^2 + y^2 - 2 x.y, written for PyTorch before 1.5: dist.addmm_(1, -2, x, y.t())
    x = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    t = mf.tensor(x)
    sq = t.pow(2).sum(1, keepdim=True).expand(5, 5)
    dist = sq + sq.t()
    with pytest.warns(UserWarning, match=r"This overload of addmm_ is deprecated:\n\taddmm_\(Number beta, Number "
                                         r"alpha, Tensor mat1, Tensor mat2\)\nConsider using"):
        dist.addmm_(1, -2, t, t.t())
    want = ((x[:, None, :].astype(np.float64) - x[None]) ** 2).sum(-1)
    np.testing.assert_allclose(dist.numpy(), want, atol=1e-5)


@pytest.mark.filterwarnings("ignore:This overload")
def test_scalars_first_forms_of_old_optimizer_code():
    # p.data.add_(-lr, grad); v.mul_(b).addcmul_(1 - b, g, g); p.addcdiv_(-step, m, denom); beta only for addmm
    g = np.array([0.5, -2.0, 3.0], np.float32)
    p, v, grad = mf.tensor([1.0, 2.0, 3.0]), mf.tensor([0.1, 0.2, 0.3]), mf.tensor(g)
    np.testing.assert_allclose(p.clone().add_(-0.1, grad).numpy(), [1.0, 2.0, 3.0] - 0.1 * g, rtol=1e-6)
    np.testing.assert_allclose(p.sub(2, grad).numpy(), [1.0, 2.0, 3.0] - 2 * g, rtol=1e-6)
    np.testing.assert_allclose(v.clone().mul_(0.9).addcmul_(0.1, grad, grad).numpy(),
                               0.9 * np.array([0.1, 0.2, 0.3]) + 0.1 * g * g, rtol=1e-6)
    np.testing.assert_allclose(p.addcdiv(-0.5, grad, v).numpy(), [1.0, 2.0, 3.0] - 0.5 * g / [0.1, 0.2, 0.3],
                               rtol=1e-6)
    m = mf.ones(2, 2)
    np.testing.assert_allclose(m.addmm(0.5, m, m).numpy(), np.full((2, 2), 2.5))


def test_scalars_first_leaves_the_modern_forms_alone():
    x = mf.tensor([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(x.add(2).numpy(), [3.0, 4.0])  # other a number: no deprecated form
        np.testing.assert_allclose(x.add(x, alpha=2).numpy(), [3.0, 6.0])
    with pytest.raises(TypeError):  # the deprecated form takes no keywords, as PyTorch's
        mf.ones(2, 2).addmm(1, -2, mf.ones(2, 2), mf.ones(2, 2), beta=3)


def test_eye_bool_mask_for_hard_negative_mining():
    # dist.masked_fill(same | eye, inf).argmin(1): the diagonal never wins, nor a point of the same class
    dist = mf.tensor([[0.0, 0.5, 0.2], [0.5, 0.0, 0.9], [0.2, 0.9, 0.0]])
    labels = mf.tensor([0, 1, 0])
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    eye = mf.eye(3, dtype=mf.bool)
    assert eye.dtype == mf.bool and eye.numpy().tolist() == np.eye(3, dtype=bool).tolist()
    assert dist.masked_fill(same | eye, float("inf")).argmin(1).numpy().tolist() == [1, 0, 1]
    assert dist.masked_fill(~same | eye, float("-inf")).argmax(1).numpy().tolist() == [2, 0, 0]
    assert mf.eye(mf.tensor(2), np.int64(3)).shape == (2, 3)  # an integer tensor or NumPy int, as PyTorch's


@pytest.mark.parametrize("args, error, message", [
    ((2.0,), TypeError, r"eye\(\): argument 'n' \(position 1\) must be int, not float"),
    ((True,), TypeError, r"eye\(\): argument 'n' \(position 1\) must be int, not bool"),
    ((2, 3.0), TypeError, r"eye\(\): argument 'm' \(position 2\) must be int, not float"),
    ((-1,), RuntimeError, "eye: n must be greater or equal to 0, got -1"),
    ((2, -1), RuntimeError, "eye: m must be greater or equal to 0, got -1"),
])
def test_eye_names_a_bad_size(args, error, message):
    with pytest.raises(error, match=message):
        mf.eye(*args)


def test_kl_div_log_target_must_be_a_bool():
    log_p = mf.tensor([[-0.5, -1.0]])
    with pytest.raises(TypeError, match=r"kl_div\(\): argument 'log_target' must be bool, not int"):
        mf.nn.functional.kl_div(log_p, log_p, reduction="batchmean", log_target=1)


def test_repeat_interleave_of_counts_checks_output_size():
    # CSR rows to edge sources: repeat_interleave(degrees) gives each row's index once per edge
    degrees = mf.tensor([1, 0, 2, 3])
    assert mf.repeat_interleave(degrees, output_size=6).numpy().tolist() == [0, 2, 2, 3, 3, 3]
    with pytest.raises(RuntimeError, match="output_size 5 is not the sum of the repeats"):
        mf.repeat_interleave(degrees, output_size=5)


def test_index_put_of_one_mask_and_one_value_fills_across_dtypes():
    # PyTorch runs it as masked_fill_(mask, value.item()): a one-element value of another dtype is a fill's number;
    # the value still gets its gradient (the sum of the upstream gradient over the mask)
    x = mf.ones(2, 2, dtype=mf.float64, requires_grad=True)
    value = mf.tensor(0.5, requires_grad=True)
    mask = mf.tensor([[True, False], [True, True]])
    y = x.index_put((mask,), value)
    assert y.dtype == mf.float64 and y.detach().numpy().tolist() == [[0.5, 1.0], [0.5, 0.5]]
    (y * mf.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=mf.float64)).sum().backward()
    assert value.grad.dtype == mf.float32 and value.grad.item() == 8.0
    assert x.grad.numpy().tolist() == [[0.0, 2.0], [0.0, 0.0]]
    ints = mf.ones(3, dtype=mf.int64).index_put_((mf.tensor([True, False, True]),), mf.tensor(2.7))
    assert ints.tolist() == [2, 1, 2]


@pytest.mark.parametrize("indices, value, accumulate", [
    (lambda: (mf.tensor([0]),), lambda: mf.tensor(0.0), False),  # an integer index: no fill
    (lambda: (mf.tensor([True, True]),), lambda: mf.tensor([1.0, 2.0]), False),  # two values: no fill
    (lambda: (mf.tensor([True, True]),), lambda: mf.tensor(1.0), True),  # accumulate: no fill
])
def test_index_put_other_dtype_refused_where_it_is_no_fill(indices, value, accumulate):
    with pytest.raises(RuntimeError, match="index_put_: index put requires the source and destination dtypes match"):
        mf.ones(2, 2, dtype=mf.float64).index_put_(indices(), value(), accumulate=accumulate)


@pytest.mark.parametrize("input_dtype, mat_dtype", [(mf.float32, mf.float64), (mf.float64, mf.float32),
                                                    (mf.int64, mf.float32)])
def test_addmm_wants_one_dtype(input_dtype, mat_dtype):
    # as PyTorch's addmm (and minifused's addmv / baddbmm / addbmm): no promotion of the input to the product's
    mats = mf.ones(2, 2, dtype=mat_dtype)
    with pytest.raises(RuntimeError, match="addmm: expected all tensors to have the same dtype"):
        mf.addmm(mf.ones(2, 2, dtype=input_dtype), mats, mats)


def test_soft_margin_loss_keeps_the_inputs_dtype():
    # PyTorch's writes the margins into a tensor of the input's dtype: a float64 target leaves a float32 loss
    x = mf.tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = mf.tensor([1.0, -1.0, -1.0], dtype=mf.float64)
    loss = mf.nn.functional.soft_margin_loss(x, y, reduction="none")
    assert loss.dtype == mf.float32
    np.testing.assert_allclose(loss.detach().numpy(), np.log1p(np.exp(-np.array([1.0, 2.0, -0.5]))), rtol=1e-6)
    loss.sum().backward()
    assert x.grad.dtype == mf.float32
    np.testing.assert_allclose(x.grad.numpy(), -np.array([1.0, -1.0, -1.0]) / (1 + np.exp([1.0, 2.0, -0.5])), rtol=1e-6)


def test_put_wants_one_dtype():
    with pytest.raises(RuntimeError, match=r"put_\(\): self and source expected to have the same dtype, but got "
                                           r"self.dtype = float32 and source.dtype = float64"):
        mf.zeros(3).put_(mf.tensor([1]), mf.tensor([1.0], dtype=mf.float64))


@pytest.mark.parametrize("loss, dtype", [
    (lambda x, t: mf.nn.functional.kl_div(x, t, reduction="batchmean"), mf.float32),  # PyTorch's 0-d rule
    (lambda x, t: mf.nn.functional.poisson_nll_loss(x, t), mf.float32),
    (lambda x, t: mf.nn.functional.mse_loss(x, t), mf.float64),  # broadcast first (dimensioned): promoted
    (lambda x, t: mf.nn.functional.l1_loss(x, t), mf.float64),
    (lambda x, t: mf.nn.functional.cosine_similarity(x, t), mf.float64),  # expanded first, as PyTorch's
])
@pytest.mark.filterwarnings("ignore:Using a target size")  # (mse / l1 warn of the broadcast, as PyTorch's)
def test_a_0d_float64_target_beside_float32_input(loss, dtype):
    x = mf.tensor([[-0.5, -1.0], [-2.0, -0.25]])
    assert loss(x, mf.tensor(0.5, dtype=mf.float64)).dtype == dtype
