"""``AdaptiveLogSoftmaxWithLoss``: the adaptive softmax of Grave et al. (arXiv:1609.04309) with PyTorch's
algorithm, arguments and parameter names (``head``, ``tail.<i>.0`` / ``tail.<i>.1``), so state dicts load
across. Composed of Linear, log_softmax and gather, so autograd covers it on either device."""
from __future__ import annotations

from collections import namedtuple

from .. import functional as F
from .. import ops
from ..tensor import Tensor
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module
from ..backend import InputError, InputTypeError

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: the ``cutoffs[0]`` most frequent classes (labels sorted by frequency, most frequent
    first) and one entry per tail cluster in the ``head`` (``Linear(in_features, cutoffs[0] + n_clusters)``,
    with a bias if ``head_bias``); cluster ``i`` (1-based) is ``Linear(in, in // div_value**i, bias=False)``
    then ``Linear(.., cluster size, bias=False)``. ``forward(input, target)`` returns the named tuple
    ``(output, loss)``: each target's log-probability and their negated mean; ``log_prob`` gives every
    class's, ``predict`` the most probable class."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise InputError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise InputError(f"cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             f"order, where each value is between 1 and n_classes-1 (n_classes={n_classes}), got "
                             f"{cutoffs}")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = [int(c) for c in cutoffs] + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        kw = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **kw),
                                        Linear(hsz, osz, bias=False, **kw)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def _check(self, input, target):
        if not isinstance(input, Tensor) or not isinstance(target, Tensor):
            raise InputTypeError(f"AdaptiveLogSoftmaxWithLoss: expected tensors for input and target, got "
                                 f"{type(input).__name__} and {type(target).__name__}")
        if target.ndim == 1:
            if input.ndim != 2:
                raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: 1D target tensor expects 2D input tensors, but "
                                   f"found inputs with size {list(input.shape)}")
            if input.shape[0] != target.shape[0]:
                raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: Input and target should have the same size in "
                                   f"the batch dimension, got {input.shape[0]} and {target.shape[0]}")
        elif target.ndim == 0:
            if input.ndim != 1:
                raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: 0D target tensor expects 1D input tensors, but "
                                   f"found inputs with size {list(input.shape)}")
        else:
            raise RuntimeError("AdaptiveLogSoftmaxWithLoss: 0D or 1D target tensor expected, multi-target not "
                               f"supported (got a {target.ndim}-D target)")
        if target.dtype.kind not in "iu":
            raise InputTypeError(f"AdaptiveLogSoftmaxWithLoss: expected integer class indices as target, got dtype "
                                 f"{target.dtype}")
        if input.shape[-1] != self.in_features:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: expected input with {self.in_features} features "
                               f"(in_features), got shape {list(input.shape)}")

    def forward(self, input_, target_):
        """``(output, loss)``: ``output[i]`` the log-probability of ``target[i]`` (head part plus, for a tail
        target, its cluster's log-softmax), ``loss`` the mean of ``-output``."""
        self._check(input_, target_)
        batched = target_.ndim > 0
        input = input_ if batched else ops.reshape(input_, (1, -1))
        target = target_ if batched else ops.reshape(target_, (1,))
        n = target.shape[0]
        if n and not bool(((target >= 0) & (target < self.n_classes)).all()):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")
        output = input.new_zeros(n)
        gather_inds = target
        for i in range(1, self.n_clusters + 1):  # the tail clusters that have targets
            low, high = self.cutoffs[i - 1], self.cutoffs[i]
            mask = (target >= low) & (target < high)
            rows = ops.reshape(mask.nonzero(), (-1,))
            if rows.numel() == 0:
                continue
            relative = ops.reshape(target.index_select(0, rows) - low, (-1, 1))
            logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, rows)), 1)
            output = output.index_add(0, rows, ops.reshape(logprob.gather(1, relative), (-1,)))
            gather_inds = gather_inds.masked_fill(mask, self.shortlist_size + i - 1)
        head_logprob = F.log_softmax(self.head(input), 1)
        output = output + ops.reshape(head_logprob.gather(1, ops.reshape(gather_inds, (-1, 1))), (-1,))
        loss = (-output).mean()
        return _ASMoutput(output if batched else ops.reshape(output, ()), loss)

    def _get_full_log_prob(self, input, head_output):
        """Every class's log-probability: the head's for the shortlist, for cluster ``i`` its log-softmax
        plus the head's log-probability of the cluster."""
        head_logprob = F.log_softmax(head_output, 1)
        s = self.shortlist_size
        parts = [head_logprob[:, :s]]
        for i, cluster in enumerate(self.tail):
            parts.append(F.log_softmax(cluster(input), 1) + head_logprob[:, s + i:s + i + 1])
        return ops.cat(parts, 1)

    def log_prob(self, input):
        """Log-probabilities (N, n_classes) of every class for (N, in_features) input."""
        self._check_2d("log_prob", input)
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most probable class (N,) of each row of (N, in_features) input (``log_prob(input).argmax(1)``,
        computing the tail clusters only for rows whose head prefers a cluster)."""
        self._check_2d("predict", input)
        head_output = self.head(input)
        output = head_output.argmax(1)
        not_in_shortlist = output >= self.shortlist_size
        if not bool(not_in_shortlist.any()):
            return output
        if bool(not_in_shortlist.all()):
            return self._get_full_log_prob(input, head_output).argmax(1)
        rows = ops.reshape(not_in_shortlist.nonzero(), (-1,))
        best = self._get_full_log_prob(input.index_select(0, rows), head_output.index_select(0, rows)).argmax(1)
        return output.scatter(0, rows, best)

    def _check_2d(self, op, input):
        if not isinstance(input, Tensor) or input.ndim != 2 or input.shape[1] != self.in_features:
            got = f"shape {list(input.shape)}" if isinstance(input, Tensor) else type(input).__name__
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss.{op}: expected input of shape (N, {self.in_features}), "
                               f"got {got}")
