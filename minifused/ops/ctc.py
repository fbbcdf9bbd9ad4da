"""Connectionist temporal classification (Graves et al., 2006): the per-sample negative log-likelihood of the
targets under all alignments of log-probabilities (T, N, C), and its gradient, as PyTorch's ``ctc_loss``.

The forward (alpha) recursion runs in log space over time, each step vectorized over the batch and the
extended label positions (the targets with blanks between and around them, 2 S + 1 positions); the context
keeps alpha, the extended labels and the lengths, so the backward runs only the beta recursion. The gradient
is PyTorch's: ``exp(log_probs) - occupation`` (the gradient with respect to the logits of a log_softmax that
made ``log_probs``), the occupation of class c at time t being the posterior probability of the paths through
c there, summed over the positions that carry c. One code path on NumPy and CuPy arrays (``array_module``).
"""
from __future__ import annotations

import numpy as np

from .. import backend
from ..autograd import Function
from .indexing import accumulate


def _shift(xp, a, k):
    """``a`` (N, L) moved ``k`` positions along L (right for k > 0, left for k < 0), -inf where nothing came."""
    out = xp.full_like(a, -np.inf)
    if k > 0:
        out[:, k:] = a[:, :-k]
    else:
        out[:, :k] = a[:, -k:]
    return out


def _logsumexp3(xp, a, b, c):
    m = xp.maximum(xp.maximum(a, b), c)
    m = backend.where(m == -np.inf, 0, m)  # all three -inf: the sum is -inf, not NaN
    return m + xp.log(xp.exp(a - m) + xp.exp(b - m) + xp.exp(c - m))


def _layout(xp, targets, target_lengths, blank):
    """The extended labels (N, L), which positions each sample uses (N, L), and where a step may skip the
    position before (a label that differs from the label two positions back: never at a blank)."""
    n, s = targets.shape
    ext = xp.full((n, 2 * s + 1), blank, dtype=xp.int64)
    ext[:, 1::2] = targets
    pos = xp.arange(2 * s + 1)
    valid = pos[None, :] < (2 * target_lengths + 1)[:, None]
    skip = xp.zeros(ext.shape, dtype=bool)
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    return ext, valid, skip


def _alpha(xp, lpe, valid, skip, input_lengths):
    """The forward variables (T, N, L); a sample's stay as they were at its last step past its input length."""
    t_max = lpe.shape[0]
    alpha = xp.empty_like(lpe)
    first = xp.full_like(lpe[0], -np.inf)
    first[:, :2] = lpe[0, :, :2]
    alpha[0] = backend.where(valid, first, -np.inf)
    for t in range(1, t_max):
        prev = alpha[t - 1]
        two_back = backend.where(skip, _shift(xp, prev, 2), -np.inf)
        new = backend.where(valid, _logsumexp3(xp, prev, _shift(xp, prev, 1), two_back) + lpe[t], -np.inf)
        alpha[t] = backend.where((t < input_lengths)[:, None], new, prev)
    return alpha


def _log_likelihood(xp, alpha_end, input_lengths, target_lengths):
    """log p(target | input) (N,) from the forward variables at each sample's last step: the paths that end on
    the last label or the blank after it; an empty input explains only an empty target."""
    last = (2 * target_lengths)[:, None]
    end = xp.take_along_axis(alpha_end, last, axis=1)[:, 0]
    before = xp.take_along_axis(alpha_end, xp.maximum(last - 1, 0), axis=1)[:, 0]
    before = backend.where(target_lengths > 0, before, -np.inf)
    ll = xp.logaddexp(end, before)
    empty = backend.where(target_lengths == 0, 0.0, -np.inf).astype(ll.dtype)
    return backend.where(input_lengths == 0, empty, ll)


def _beta(xp, lpe, valid, skip, input_lengths, target_lengths):
    """The backward variables (T, N, L), -inf at and after each sample's input length."""
    t_max = lpe.shape[0]
    beta = xp.empty_like(lpe)
    pos = xp.arange(lpe.shape[2])[None, :]
    ends = (pos == (2 * target_lengths)[:, None]) | ((pos == (2 * target_lengths - 1)[:, None])
                                                      & (target_lengths > 0)[:, None])
    skip_next = xp.zeros_like(skip)
    skip_next[:, :-2] = skip[:, 2:]
    nxt = xp.full_like(lpe[0], -np.inf)
    for t in range(t_max - 1, -1, -1):
        two_on = backend.where(skip_next, _shift(xp, nxt, -2), -np.inf)
        step = backend.where(valid, _logsumexp3(xp, nxt, _shift(xp, nxt, -1), two_on) + lpe[t], -np.inf)
        last = backend.where(ends, lpe[t], -np.inf)
        nxt = backend.where((t == input_lengths - 1)[:, None], last,
                       backend.where((t < input_lengths - 1)[:, None], step, -np.inf))
        beta[t] = nxt
    return beta


class CTCLoss(Function):
    """Per-sample CTC negative log-likelihood (N,) of log-probabilities (T, N, C); ``targets`` padded (N, S)
    int64 class indices, valid up to ``target_lengths``; lengths int64 (N,) on the input's device."""

    @staticmethod
    def forward(ctx, log_probs, *, targets, input_lengths, target_lengths, blank, zero_infinity):
        xp = backend.array_module(log_probs)
        ext, valid, skip = _layout(xp, targets, target_lengths, blank)
        index = xp.broadcast_to(ext[None], (log_probs.shape[0],) + ext.shape)
        lpe = xp.take_along_axis(log_probs, index, axis=2)  # (T, N, L): each position's log-probability
        alpha = _alpha(xp, lpe, valid, skip, input_lengths)
        nll = -_log_likelihood(xp, alpha[-1], input_lengths, target_lengths)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(log_probs)
            ctx.alpha, ctx.lpe, ctx.layout, ctx.nll = alpha, lpe, (ext, valid, skip), nll
            ctx.lengths, ctx.zero_infinity = (input_lengths, target_lengths), zero_infinity
        return backend.where(nll == np.inf, 0, nll) if zero_infinity else nll

    @staticmethod
    def backward(ctx, g):
        (log_probs,) = ctx.saved_tensors
        xp = backend.array_module(log_probs)
        (ext, valid, skip), (input_lengths, target_lengths) = ctx.layout, ctx.lengths
        beta = _beta(xp, ctx.lpe, valid, skip, input_lengths, target_lengths)
        nll = ctx.nll
        t_max, n, c = log_probs.shape
        # each position's posterior occupation (in [0, 1]: exp is safe), summed over the positions of one class
        gamma = xp.exp(ctx.alpha + beta - ctx.lpe + nll[None, :, None])
        index = tuple(xp.broadcast_to(i, gamma.shape) for i in
                      (xp.arange(t_max)[:, None, None], xp.arange(n)[None, :, None], ext[None]))
        occupation = accumulate((t_max, n, c), log_probs.dtype, index, gamma)
        # PyTorch divides the occupation by exp(log_probs) in log space: a -inf log-probability's gradient is NaN
        grad = backend.where(log_probs == -np.inf, np.nan, xp.exp(log_probs) - occupation)
        # an impossible alignment's gradient is NaN, as PyTorch's (0 with zero_infinity)
        inf = (nll == np.inf)[None, :, None]
        grad = backend.where(inf, 0.0 if ctx.zero_infinity else np.nan, grad)
        inside = (xp.arange(t_max)[:, None] < input_lengths[None, :])[..., None]
        grad = backend.where(inside, grad, 0.0) * xp.asarray(g).reshape(1, n, 1)
        return grad.astype(log_probs.dtype, copy=False)


def ctc_rows(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    """CTC losses (N,) of a (T, N, C) tensor; the others raw arrays on its device, arguments unchecked."""
    return CTCLoss.apply(log_probs, targets=targets, input_lengths=input_lengths, target_lengths=target_lengths,
                         blank=blank, zero_infinity=zero_infinity)
