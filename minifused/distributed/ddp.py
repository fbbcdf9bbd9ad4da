"""``DistributedDataParallel``: every rank holds the whole model, sees its own shard of each
batch, and averages gradients with the others during backward.

How the gradients travel: the parameters are grouped, in reverse registration order (roughly
the order backward produces their gradients), into buckets of consecutive parameters of one
dtype, the gradients' own (bf16 parameters get bf16 buckets). The first bucket holds at most
1 MiB, as PyTorch's does: its gradients (the last layers') come first, so the first all-reduce
starts early in backward instead of waiting for a full bucket; the others hold about
``bucket_cap_mb`` MB. Each parameter's slice of its bucket's flat buffer starts 256-byte aligned,
as a fresh allocation does. Each parameter carries a post-accumulate-grad hook; the backward
writes a parameter's ``.grad`` as soon as it is complete and the hook counts it in. When a
bucket is full it is launched on a separate CUDA stream, which first waits for the gradients,
copies them into the bucket's flat buffer, all-reduces it (NCCL average) and copies the averages
back into the ``.grad`` tensors; meanwhile the backward of the earlier layers keeps running on
the compute stream. Buckets are launched strictly in order, so every rank issues the same
collectives in the same order. When the backward ends (an autograd callback) any bucket not
launched yet is launched (gradients that never came count as zeros), and the compute stream
waits for the communication stream: the optimizer step that follows sees averaged gradients.
On the CPU backend each bucket is reduced over the sockets at once, in the hook.

``gradient_as_bucket_view=True`` (PyTorch's option): each ``.grad`` is a view of its slice of
the bucket (a tensor of the parameter's shape and dtype), so nothing is copied in or out: the
backward accumulates into the view, the all-reduce runs in place, and the gradients take no
memory beside the buckets. A ``.grad`` that is not the view when its bucket is launched (None
after ``zero_grad(set_to_none=True)``, so the backward made a new array; or one the user
assigned) is copied into the slice, on the compute stream, and replaced by the view; one that
never came becomes zeros.

``no_sync()``: forward and backward inside it only accumulate local gradients; the first
backward outside it then averages the accumulated sums (gradient accumulation).

CUDA graphs (``minifused.capture_step``): NCCL collectives can be captured (NCCL >= 2.9) and
everything this class issues on the device is capturable: the buckets' flat buffers (and the
gradient views into them) are allocated here, before any capture, at fixed addresses; the
communication stream joins and leaves the capture through events; nothing synchronizes the host.
What it needs: the communicator exists before the capture (``init_process_group`` first), and
every rank captures and replays the same steps in the same order (the same data-loader length
per rank: a ``DistributedSampler``). The Python-side bookkeeping (which bucket is ready, which
``.grad`` is not its view yet) runs once, at capture; each replay launches the recorded copies
and all-reduces. ``tests/test_distributed.py`` checks the captured step against the eager one
on two GPUs.

State dicts: unlike PyTorch, whose DDP prefixes every key with ``module.``, ``state_dict()``
returns the wrapped module's own keys, so a checkpoint saved from a DDP model loads into a
plain one and back; ``load_state_dict`` also accepts PyTorch's ``module.``-prefixed keys.
"""
from __future__ import annotations

import contextlib
import numbers

from .. import autograd, backend
from ..autograd import no_grad
from ..kernels import is_channels_last
from ..nn.module import Module
from ..tensor import Tensor
from . import _all_reduce_array, _require, broadcast

_FIRST_BUCKET_BYTES = 2 ** 20  # PyTorch's cap on the first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES)
_ALIGN_BYTES = 256  # each slice aligned as a fresh allocation is: a kernel that vectorizes treats a view alike


def _event(stream):
    """An event recorded on ``stream`` (None: the current one); without timing, as a captured
    cross-stream dependency wants."""
    import cupy

    ev = cupy.cuda.Event(disable_timing=True)
    ev.record(stream)
    return ev


class _Bucket:
    """Parameters of one dtype and a flat buffer of that dtype; ``views[i]``: parameter i's slice of it,
    a tensor of the parameter's shape (the padding between slices stays zero)."""

    __slots__ = ("params", "flat", "views", "ready")

    def __init__(self, params):
        self.params = params
        p = params[0]
        align = max(1, _ALIGN_BYTES // p.element_size())
        offsets, n = [], 0
        for q in params:
            offsets.append(n)
            n += -(-q.numel() // align) * align
        with backend.on_device(p.device):
            self.flat = p._xp.zeros(n, p.dtype)
        self.views = [Tensor._from_array(_slice_like(self.flat[o:o + q.numel()], q._data))
                      for q, o in zip(params, offsets)]
        self.ready = 0


def _slice_like(flat, p):
    """A slice of a bucket as a view in the layout of its parameter ``p`` (C order or channels-last): a
    ``.grad`` the optimizer walks in ``p``'s memory order."""
    if not is_channels_last(p):
        return flat.reshape(p.shape)
    n, c, h, w = p.shape
    return flat.reshape(n, h, w, c).transpose(0, 3, 1, 2)


def _check_same_model(g, module):
    """Every rank holds the same parameters (names, shapes, dtypes), checked over the host before any
    collective on them, as PyTorch does: a mismatch raises on every rank."""
    mine = [(name, tuple(p.shape), str(p.dtype)) for name, p in module.named_parameters()]
    everyone = g.hub.all_gather(mine, "DistributedDataParallel (parameter shapes)")
    for rank, theirs in enumerate(everyone):
        if theirs == everyone[0]:
            continue
        for (n0, s0, d0), (n, s, d) in zip(everyone[0], theirs):
            if (n0, s0, d0) != (n, s, d):
                theirs = f"{s} {d}" if n == n0 else f"parameter {n!r} {s} {d}"
                raise RuntimeError(f"DistributedDataParallel: parameter {n0!r} has shape {s0} {d0} on rank 0 but "
                                   f"{theirs} on rank {rank}; every rank must build the same model")
        raise RuntimeError(f"DistributedDataParallel: rank 0 has {len(everyone[0])} parameters but rank {rank} has "
                           f"{len(theirs)}; every rank must build the same model")


class DistributedDataParallel(Module):
    """Wrap ``module`` (already on this rank's device) for data-parallel training."""

    def __init__(self, module, bucket_cap_mb=25, broadcast_buffers=True, gradient_as_bucket_view=False):
        super().__init__()
        g = _require("DistributedDataParallel")
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected a Module, got {type(module).__name__}")
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, numbers.Real) or not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be a number > 0, got {bucket_cap_mb!r}")
        if not isinstance(gradient_as_bucket_view, bool):
            raise TypeError(f"DistributedDataParallel: gradient_as_bucket_view must be True or False, got "
                            f"{gradient_as_bucket_view!r}")
        self.module = module
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.world_size = g.world
        self.broadcast_buffers = bool(broadcast_buffers)
        self.require_backward_grad_sync = True
        params = [p for p in module.parameters() if p.requires_grad]
        devices = {str(t.device) for t in (*module.parameters(), *module.buffers())}
        if len(devices) > 1:
            raise ValueError(f"DistributedDataParallel: the module spans devices {sorted(devices)}; one "
                             f"process drives one device")
        self.device = backend.device(devices.pop()) if devices else backend.CPU
        _check_same_model(g, module)
        with no_grad():  # every rank starts from rank 0's weights
            for t in (*module.parameters(), *module.buffers()):
                broadcast(t, 0)
        self._buckets = self._make_buckets(params[::-1], bucket_cap_mb * 2 ** 20)
        self._bucket_of = {id(p): b for b in self._buckets for p in b.params}
        self._stream = None
        if self.device.type == "cuda":
            import cupy

            with backend.on_device(self.device):
                self._stream = cupy.cuda.Stream(non_blocking=True)
        self._sync = True
        self._reset()
        for p in params:
            p.register_post_accumulate_grad_hook(self._grad_ready)

    @staticmethod
    def _make_buckets(params, cap_bytes):
        """Consecutive parameters of one dtype, closed once a bucket holds ``cap_bytes`` (the first:
        ``_FIRST_BUCKET_BYTES``, if less; a larger parameter gets a bucket of its own)."""
        buckets, current, size = [], [], 0
        for p in params:
            if current and p.dtype != current[0].dtype:
                buckets.append(_Bucket(current))
                current, size = [], 0
            current.append(p)
            size += p.numel() * p.element_size()
            if size >= (cap_bytes if buckets else min(cap_bytes, _FIRST_BUCKET_BYTES)):
                buckets.append(_Bucket(current))
                current, size = [], 0
        if current:
            buckets.append(_Bucket(current))
        return buckets

    # ------------------------------------------------------------ forward and the hooks
    def forward(self, *args, **kwargs):
        self._reset()  # a backward that failed half-way leaves no stale counts behind
        self._sync = self.require_backward_grad_sync
        if self.broadcast_buffers and self.world_size > 1:
            with no_grad():
                for b in self.module.buffers():
                    broadcast(b, 0)
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward accumulates local gradients without communicating."""
        prev, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = prev

    def _reset(self):
        for b in self._buckets:
            b.ready = 0
        self._next = 0
        self._queued = False

    def _grad_ready(self, p):
        if not self._sync:
            return
        if not self._queued:
            autograd.queue_callback(self._finish)
            self._queued = True
        self._bucket_of[id(p)].ready += 1
        buckets = self._buckets
        while self._next < len(buckets) and buckets[self._next].ready >= len(buckets[self._next].params):
            self._launch(buckets[self._next])
            self._next += 1

    def _launch(self, bucket):
        if self.gradient_as_bucket_view:
            for p, view in zip(bucket.params, bucket.views):
                self._into_view(p, view)
        else:
            for p in bucket.params:
                if p.grad is None:  # not used in this forward (on this rank, at least): counts as zero
                    p.grad = Tensor._from_array(p._xp.zeros(p.shape, p.dtype))
        if self._stream is None:
            self._reduce(bucket)
            return
        self._stream.wait_event(_event(None))  # the gradients are written on the compute stream
        with self._stream:
            self._reduce(bucket)

    @staticmethod
    def _into_view(p, view):
        """Make ``p.grad`` its bucket view, keeping its value (zeros if it has none). On the compute
        stream: a new gradient array is freed right after, where it was made."""
        if p.grad is view:
            return
        if p.grad is None:
            view._data.fill(0)
        else:
            view._data[...] = p.grad._data
        view._bump("DistributedDataParallel (gradient into its bucket view)")
        p.grad = view

    def _reduce(self, bucket):
        copies = not self.gradient_as_bucket_view
        if copies:
            for p, view in zip(bucket.params, bucket.views):
                view._data[...] = p.grad._data
        _all_reduce_array(bucket.flat, "avg", self._stream)
        for p, view in zip(bucket.params, bucket.views):
            if copies:
                p.grad._data[...] = view._data
            p.grad._bump("DistributedDataParallel gradient all_reduce")

    def _finish(self):
        """End of backward: launch what is left, and make the compute stream wait for it all."""
        while self._next < len(self._buckets):
            self._launch(self._buckets[self._next])
            self._next += 1
        if self._stream is not None:
            import cupy

            cupy.cuda.get_current_stream().wait_event(_event(self._stream))
        self._reset()

    # ------------------------------------------------------------ state
    def state_dict(self, prefix=""):
        """The wrapped module's keys, without PyTorch's ``module.`` prefix."""
        return self.module.state_dict(prefix=prefix)

    def load_state_dict(self, state_dict, strict=True):
        """Load into the wrapped module; keys may carry PyTorch DDP's ``module.`` prefix."""
        if state_dict and all(isinstance(k, str) and k.startswith("module.") for k in state_dict):
            state_dict = {k[len("module."):]: v for k, v in state_dict.items()}
        return self.module.load_state_dict(state_dict, strict)

    def extra_repr(self):
        view = ", gradient_as_bucket_view=True" if self.gradient_as_bucket_view else ""
        return f"world_size={self.world_size}, buckets={len(self._buckets)}{view}"
