"""F.ctc_loss / nn.CTCLoss: values against a float64 brute force over every alignment (tiny sizes) and the
log-space recursion of tests/opinfo.py (larger), PyTorch's gradient (exp(log_probs) minus the posterior
occupation) by finite differences, the reductions, zero_infinity, the argument forms and the errors; the cuda
path against PyTorch on the GPU."""
import itertools

import numpy as np
import pytest
from opinfo import ctc_loss_ref, log_softmax_ref

import minifused as mf
import minifused.functional as F
from minifused import nn
from minifused.autograd import gradcheck


def t64(a, **kw):
    return mf.tensor(np.asarray(a, np.float64), **kw)


def ints(a):
    return mf.tensor(np.asarray(a, np.int64))


def _log_probs(t, n, c, seed=0, dtype=np.float64):
    x = np.random.default_rng(seed).standard_normal((t, n, c)) * 1.5
    return log_softmax_ref(x, 2).astype(dtype)


def _brute_force(lp, labels, blank):
    """(loss, PyTorch's gradient) of one sample's (T, C) log-probabilities: every path of T classes, those that
    collapse to ``labels`` summed; the gradient is exp(lp) minus each class's share of the matching paths."""
    t_len, c = lp.shape
    total, share = 0.0, np.zeros_like(lp)
    for path in itertools.product(range(c), repeat=t_len):
        collapsed = [k for i, k in enumerate(path) if k != blank and (i == 0 or k != path[i - 1])]
        if collapsed == list(labels):
            p = np.exp(sum(lp[i, k] for i, k in enumerate(path)))
            total += p
            share[np.arange(t_len), list(path)] += p
    if total == 0:
        return np.inf, None
    return -np.log(total), np.exp(lp) - share / total


@pytest.mark.parametrize("labels,blank,t_len", [((1, 2), 0, 4), ((1, 1), 0, 4), ((2,), 1, 3), ((), 0, 3),
                                                 ((0, 2, 0), 1, 4), ((1, 1, 1), 0, 5)])
def test_matches_brute_force_over_all_alignments(labels, blank, t_len):
    lp = _log_probs(t_len, 1, 3, seed=len(labels) + blank)
    want, want_grad = _brute_force(lp[:, 0], labels, blank)
    x = t64(lp, requires_grad=True)
    targets = ints([list(labels) + [blank]])  # padded: what lies past the length is never read
    loss = F.ctc_loss(x, targets, (t_len,), (len(labels),), blank=blank, reduction="sum")
    loss.backward()
    np.testing.assert_allclose(loss.item(), want, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy()[:, 0], want_grad, rtol=1e-10, atol=1e-12)


def test_impossible_alignment_brute_force_agrees():
    # (1, 1) needs a blank between the repeats: 3 steps; 2 cannot
    lp = _log_probs(2, 1, 3)
    assert _brute_force(lp[:, 0], (1, 1), 0)[0] == np.inf
    assert F.ctc_loss(t64(lp), ints([[1, 1]]), (2,), (2,), reduction="none").numpy()[0] == np.inf


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-11), (np.float32, 2e-5)])
def test_batch_matches_log_space_reference(dtype, tol):
    rng = np.random.default_rng(3)
    lp = _log_probs(40, 5, 7, seed=4, dtype=dtype)
    tl = np.array([12, 0, 5, 19, 1])
    il = np.array([40, 3, 17, 40, 1])
    targets = rng.integers(1, 7, (5, 20))
    got = F.ctc_loss(mf.tensor(lp), ints(targets), ints(il), ints(tl), reduction="none")
    assert got.dtype == dtype and tuple(got.shape) == (5,)
    want = ctc_loss_ref(lp.astype(np.float64), targets, il, tl, reduction="none")
    np.testing.assert_allclose(got.numpy(), want, rtol=tol)


def test_gradient_by_finite_differences_through_log_softmax():
    rng = np.random.default_rng(5)
    x = t64(rng.standard_normal((6, 3, 4)), requires_grad=True)
    targets = ints([[1, 2, 2], [3, 3, 0], [2, 0, 0]])
    for kw in (dict(reduction="mean"), dict(reduction="sum", blank=0), dict(reduction="none")):
        assert gradcheck(lambda a: F.ctc_loss(F.log_softmax(a, 2), targets, (6, 5, 2), (3, 2, 1), **kw), (x,))


def test_gradient_is_pytorchs_exp_minus_occupation():
    """PyTorch's ctc_loss gradient is the true gradient with respect to log_probs plus exp(log_probs) (the
    logits' gradient through a log_softmax): checked against central differences of the loss itself."""
    lp = _log_probs(5, 2, 4, seed=6)
    targets, il, tl = ints([[1, 3], [2, 0]]), (5, 4), (2, 1)
    x = t64(lp, requires_grad=True)
    g = np.array([0.7, -1.3])
    (F.ctc_loss(x, targets, il, tl, reduction="none") * t64(g)).sum().backward()
    numeric, eps = np.zeros_like(lp), 1e-6
    for i in np.ndindex(lp.shape):
        for sign in (1, -1):
            shifted = lp.copy()
            shifted[i] += sign * eps
            numeric[i] += sign * (F.ctc_loss(t64(shifted), targets, il, tl, reduction="none").numpy() @ g) / (2 * eps)
    inside = (np.arange(5)[:, None] < np.array(il))[..., None]  # past its input length a sample's gradient is 0
    want = np.where(inside, numeric + np.exp(lp) * g[None, :, None], 0.0)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6, atol=1e-8)


def test_reductions_and_argument_forms():
    lp = _log_probs(8, 3, 5, seed=7)
    padded = np.array([[1, 4, 4, 2], [3, 0, 0, 0], [2, 2, 0, 0]])
    tl, il = np.array([4, 1, 2]), np.array([8, 6, 7])
    per = ctc_loss_ref(lp, padded, il, tl, reduction="none")
    concat = ints(np.concatenate([padded[i, :tl[i]] for i in range(3)]))
    x = t64(lp)
    forms = [(ints(padded), ints(il), ints(tl)), (concat, list(il), tuple(tl)),
             (mf.tensor(padded.astype(np.int32)), mf.tensor(il.astype(np.int32)).reshape(3, 1), ints(tl)),
             (mf.tensor(padded.astype(np.float32) + 0.5), tuple(il), tuple(tl))]  # floats truncate, as PyTorch's
    for targets, a, b in forms:
        np.testing.assert_allclose(F.ctc_loss(x, targets, a, b, reduction="none").numpy(), per, rtol=1e-12)
        np.testing.assert_allclose(F.ctc_loss(x, targets, a, b, reduction="sum").item(), per.sum(), rtol=1e-12)
        np.testing.assert_allclose(F.ctc_loss(x, targets, a, b).item(), np.mean(per / tl), rtol=1e-12)
    # 'mean' divides by the target length clamped to 1
    empty = F.ctc_loss(x, ints(padded), ints(il), ints([0, 0, 0]))
    np.testing.assert_allclose(empty.item(), ctc_loss_ref(lp, padded, il, [0, 0, 0], reduction="none").mean())
    # unbatched (T, C): a batch of one, the result 0-d
    one = F.ctc_loss(t64(lp[:, 0]), ints(padded[0]), mf.tensor(8), mf.tensor(4), reduction="none")
    assert one.shape == () and np.isclose(one.item(), per[0], rtol=1e-12)
    assert np.isclose(F.ctc_loss(t64(lp[:, 0]), ints(padded[:1]), (8,), (4,)).item(), per[0] / 4, rtol=1e-12)


def test_empty_input_and_empty_target():
    lp = _log_probs(4, 3, 3, seed=8)
    got = F.ctc_loss(t64(lp), ints([[1, 2], [1, 2], [0, 0]]), (0, 0, 4), (0, 2, 0), reduction="none").numpy()
    # an empty input explains only an empty target; an empty target is all blanks
    np.testing.assert_allclose(got, [0.0, np.inf, -lp[:, 2, 0].sum()], rtol=1e-12)


def test_infinite_losses_and_zero_infinity():
    lp = _log_probs(5, 2, 4, seed=9)
    targets, il, tl = ints([[1, 2, 3], [1, 1, 1]]), (5, 4), (3, 3)  # (1, 1, 1) needs 5 steps, has 4
    x = t64(lp, requires_grad=True)
    loss = F.ctc_loss(x, targets, il, tl, reduction="none")
    assert np.isfinite(loss.numpy()[0]) and loss.numpy()[1] == np.inf
    loss.sum().backward()
    grad = x.grad.numpy()
    assert np.isfinite(grad[:, 0]).all()
    assert np.isnan(grad[:4, 1]).all() and (grad[4, 1] == 0).all()  # NaN within its input length, as PyTorch's
    finite = grad[:, 0]
    x = t64(lp, requires_grad=True)
    loss = F.ctc_loss(x, targets, il, tl, reduction="sum", zero_infinity=True)
    loss.backward()
    np.testing.assert_allclose(loss.item(), ctc_loss_ref(lp, targets.numpy(), il, tl, reduction="none")[0])
    np.testing.assert_allclose(x.grad.numpy()[:, 0], finite, rtol=1e-12)
    assert (x.grad.numpy()[:, 1] == 0).all()
    mean = F.ctc_loss(t64(lp), targets, il, tl, zero_infinity=True)
    np.testing.assert_allclose(mean.item(), loss.item() / 3 / 2)


def test_minus_infinity_log_probability_has_nan_gradient():
    # PyTorch's backward divides by exp(log_probs) in log space: NaN there, whether the class is in the target
    lp = _log_probs(4, 1, 4, seed=15)
    lp[1, 0, 3] = lp[2, 0, 1] = -np.inf
    x = t64(lp, requires_grad=True)
    loss = F.ctc_loss(x, ints([[1, 2]]), (4,), (2,), reduction="sum")
    loss.backward()
    grad = x.grad.numpy()[:, 0]
    assert np.isfinite(loss.item()) and np.isnan(grad[1, 3]) and np.isnan(grad[2, 1])
    assert np.isfinite(np.delete(grad.ravel(), [7, 9])).all()


def test_no_gradient_kept_without_grad():
    lp = _log_probs(4, 1, 3)
    out = F.ctc_loss(t64(lp), ints([[1]]), (4,), (1,))
    assert not out.requires_grad
    np.testing.assert_allclose(out.item(), ctc_loss_ref(lp, np.array([[1]]), (4,), (1,)), rtol=1e-12)


def test_float32_gradient_matches_float64():
    lp = _log_probs(12, 3, 5, seed=10)
    targets, il, tl = ints([[1, 2, 3, 4], [4, 4, 0, 0], [2, 0, 0, 0]]), (12, 10, 7), (4, 2, 1)
    grads = []
    for dtype in (np.float32, np.float64):
        x = mf.tensor(lp.astype(dtype), requires_grad=True)
        F.ctc_loss(x, targets, il, tl).backward()
        assert x.grad.dtype == dtype
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-6)


def test_module():
    lp = _log_probs(6, 2, 4, seed=11)
    targets, il, tl = ints([[1, 2], [3, 0]]), (6, 5), (2, 1)
    m = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    assert (m.blank, m.reduction, m.zero_infinity) == (0, "sum", True) and repr(m) == "CTCLoss()"
    np.testing.assert_allclose(m(t64(lp), targets, il, tl).item(),
                               F.ctc_loss(t64(lp), targets, il, tl, reduction="sum").item(), rtol=1e-15)
    assert repr(nn.CTCLoss()) == "CTCLoss()" and nn.CTCLoss().blank == 0
    with pytest.raises(ValueError, match="reduction"):
        nn.CTCLoss(reduction="avg")


def _err(**kw):
    args = dict(log_probs=t64(_log_probs(5, 2, 4)), targets=ints([[1, 2, 2], [3, 1, 0]]), input_lengths=(5, 4),
                target_lengths=(3, 2))
    args.update(kw)
    return lambda: F.ctc_loss(**args)


@pytest.mark.parametrize("call,exc,match", [
    (_err(input_lengths=(6, 4)), ValueError, "ctc_loss: expected input_lengths to have value at most 5"),
    (_err(input_lengths=(-1, 4)), ValueError, "input_lengths to have value at least 0"),
    (_err(target_lengths=(4, 2)), ValueError, "targets to have size at least 4 .* at dimension 1"),
    (_err(target_lengths=(3, -1)), ValueError, "target_lengths to have value at least 0"),
    (_err(blank=4), ValueError, r"blank must be in label range \[0, 4\)"),
    (_err(blank=-1), ValueError, "blank must be in label range"),
    (_err(input_lengths=mf.tensor([5.0, 4.0])), TypeError, "input_lengths must be integral"),
    (_err(input_lengths=(5,)), ValueError, r"input_lengths must be of size batch_size \(2\)"),
    (_err(target_lengths=ints([3])), ValueError, "target_lengths must be of size batch_size"),
    (_err(input_lengths=5), TypeError, "input_lengths must be a tensor or a tuple / list of ints"),
    (_err(targets=ints([[1, 2, 2]])), ValueError, "targets to have size 2 .* at dimension 0"),
    (_err(targets=ints([1, 2, 2, 3])), ValueError, "concatenated targets of size 5"),
    (_err(targets=ints([[[1, 2, 2], [3, 1, 0]]])), ValueError, "targets of 1 to 2 dimensions"),
    (_err(targets=ints([[1, 4, 2], [3, 1, 0]])), ValueError, r"targets must be class indices in \[0, 4\).* got 4"),
    (_err(log_probs=t64(np.zeros((1, 5, 2, 4)))), ValueError, r"log_probs of shape \(T, N, C\)"),
    (_err(log_probs=t64(_log_probs(5, 1, 4)[:, 0]), input_lengths=ints([5, 4]), target_lengths=ints([3])),
     ValueError, r"ctc_loss: input_lengths must be of size batch_size \(1\), got 2"),  # (unbatched: one each)
    (_err(log_probs=mf.zeros((5, 2, 4), dtype=mf.float16)), NotImplementedError, "not implemented for float16"),
    (_err(log_probs=mf.zeros((5, 2, 4), dtype=mf.bfloat16)), NotImplementedError, "not implemented for bfloat16"),
    (_err(log_probs=t64(np.zeros((5, 0, 4))), targets=ints(np.zeros((0, 3))), input_lengths=(),
          target_lengths=()), ValueError, "log_probs tensor must not be empty"),
    (_err(reduction="avg"), ValueError, "reduction must be one of"),
    (_err(zero_infinity=1), TypeError, "zero_infinity must be a bool"),
    (_err(blank=True), TypeError, "blank must be an int"),
    (_err(targets=[[1, 2, 2], [3, 1, 0]]), TypeError, "expected tensors for log_probs and targets"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_target_past_its_length_is_not_checked():
    # padding past each target length is never read (PyTorch's padded targets may hold anything there)
    lp = _log_probs(5, 2, 4)
    a = F.ctc_loss(t64(lp), ints([[1, 2, -7], [3, 99, 99]]), (5, 4), (2, 1), reduction="none")
    b = F.ctc_loss(t64(lp), ints([[1, 2, 0], [3, 0, 0]]), (5, 4), (2, 1), reduction="none")
    np.testing.assert_array_equal(a.numpy(), b.numpy())


# ---------------------------------------------------------------- cuda against PyTorch
def _gpu_case(torch, dtype, seed, reduction, zero_infinity, concatenated, blank):
    rng = np.random.default_rng(seed)
    t_len, n, c = 50, 6, 9
    x = rng.standard_normal((t_len, n, c)).astype(dtype)
    tl = rng.integers(0, 15, n)
    il = rng.integers(1, t_len + 1, n)
    il[0], tl[1], il[2] = t_len, 0, 3  # a full-length input, an empty target, a likely impossible alignment
    labels = rng.integers(0, c - 1, (n, 15))
    labels = np.where(labels >= blank, labels + 1, labels)  # never the blank
    targets = np.concatenate([labels[i, :tl[i]] for i in range(n)]) if concatenated else labels
    g = rng.standard_normal(n).astype(dtype) if reduction == "none" else np.array(1.7, dtype)
    kw = dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    xs = mf.tensor(x, device="cuda", requires_grad=True)
    ours = F.ctc_loss(xs, mf.tensor(targets, device="cuda"), mf.tensor(il), tuple(tl), **kw)
    (ours * mf.tensor(g, device="cuda")).sum().backward()
    xt = torch.tensor(x, device="cuda", requires_grad=True)
    # int64 targets on the GPU: PyTorch's native CUDA kernel (cuDNN's takes int32 targets on the cpu only)
    theirs = torch.nn.functional.ctc_loss(xt, torch.tensor(targets, device="cuda"), torch.tensor(il),
                                          torch.tensor(tl), **kw)
    (theirs * torch.tensor(g, device="cuda")).sum().backward()
    return ours, xs.grad, theirs, xt.grad


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-4), (np.float64, 1e-10)])
@pytest.mark.parametrize("reduction,zero_infinity,concatenated,blank", [
    ("mean", False, False, 0), ("none", True, True, 3), ("sum", True, False, 8), ("none", False, False, 0)])
def test_cuda_matches_pytorch(torch, dtype, tol, reduction, zero_infinity, concatenated, blank):
    ours, grad, theirs, their_grad = _gpu_case(torch, dtype, 12, reduction, zero_infinity, concatenated, blank)
    assert ours.device == mf.device("cuda") and ours.dtype == dtype and tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.cpu().numpy(), theirs.detach().cpu().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(grad.cpu().numpy(), their_grad.cpu().numpy(), rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.gpu
def test_cuda_matches_cpu():
    lp = _log_probs(30, 4, 6, seed=13, dtype=np.float32)
    targets, il, tl = np.random.default_rng(14).integers(1, 6, (4, 10)), (30, 25, 12, 30), (10, 7, 3, 0)
    grads = {}
    for device in ("cpu", "cuda"):
        x = mf.tensor(lp, device=device, requires_grad=True)
        # cpu targets go to the input's device (device= given: a gpu test's default device is cuda)
        out = F.ctc_loss(x, mf.tensor(targets, device="cpu"), il, tl, reduction="none")
        (out * mf.arange(1, 5, dtype=mf.float32, device=device)).sum().backward()
        grads[device] = (out.cpu().numpy(), x.grad.cpu().numpy())
    # float32 log-space recursions over 30 steps: NumPy's and CuPy's exp / log differ in their last bits, and the
    # occupations subtract nearly equal exponentials (the first H200 run: 1.4e-5 at most; the PyTorch test's 1e-4)
    for a, b in zip(grads["cpu"], grads["cuda"]):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)
