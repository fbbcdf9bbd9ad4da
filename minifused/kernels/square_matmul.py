"""In-place product with a square matrix: ``x[:] = x @ w`` (or ``x @ w.T``), in row blocks.

``square_matmul_(x, w, transpose=False, bias=None, activation=None, *, config=None) -> x``

``x`` (rows, n), ``w`` (n, n), one dtype. Rows of the product depend only on the same rows of
``x``, so ``x`` can be consumed a block of rows at a time: each block is multiplied into a
block-sized scratch array by the plan-cached GEMMs of :mod:`.linear` and copied back over the
rows it came from. The extra memory is the scratch, never a second ``x``:

* ``transpose=True``: ``x @ w.T`` is a Linear forward (``linear_forward``), so ``bias`` and
  ``activation`` ('relu' / 'gelu') ride in its epilog for free;
* ``transpose=False``: ``x @ w`` is a Linear input-gradient GEMM (``linear_backward_data``), so no
  transposed copy of ``w`` is needed (no epilog there: ``bias``/``activation`` are refused).

Every full block has one shape, so one cached plan serves them all; the last partial block gets
its own. On the GPU the copy of block ``i`` back into ``x`` runs on a side stream while block
``i+1`` multiplies (the GEMM is compute-bound, the copy memory-bound), with at most two scratch
blocks alive; the blocks are sized so that both together stay within ``x.nbytes / 8``
(``SCRATCH_FRACTION``); a :class:`SquareMatmulConfig` changes that (tests, benchmarks). Inputs are
assumed valid (the checks live in ``functional``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import backend
from .linear import linear_backward_data, linear_forward

SCRATCH_FRACTION = 8  # scratch blocks alive at once take at most x.nbytes / SCRATCH_FRACTION


@dataclass(frozen=True)
class SquareMatmulConfig:
    """``block_rows``: rows per block (None: :func:`block_rows_for` the scratch budget);
    ``overlap_copies=False``: copy each block back on the caller's stream, one block alive at a time."""

    block_rows: int | None = None
    overlap_copies: bool = True


_DEFAULT = SquareMatmulConfig()


def block_rows_for(rows: int, buffers: int) -> int:
    """Rows per block so that ``buffers`` blocks fit in 1/SCRATCH_FRACTION of ``x``.

    Rounded down to a multiple of 128 when that large (GEMM tiles are 64-256 rows), at least 1.
    At 65536 rows with two buffers: 4096-row blocks, 1/16 of ``x`` each.
    """
    b = max(1, rows // (SCRATCH_FRACTION * buffers))
    return b - b % 128 if b >= 128 else b


def _block_product(xb, w, transpose, bias, activation):
    """``act(xb @ w.T + bias)`` or ``xb @ w`` into a new block-sized array (the scratch)."""
    if transpose:
        return linear_forward(xb, w, bias, activation)[0]
    return linear_backward_data(xb, w)[0]


def square_matmul_ref(x, w, transpose=False, bias=None, activation=None, *, config=None):
    """NumPy reference of :func:`square_matmul_`: the same blocks, through the Linear GEMMs' references
    (``config.overlap_copies`` has no meaning here)."""
    rows = x.shape[0]
    step = (config or _DEFAULT).block_rows or block_rows_for(rows, 1)
    for r0 in range(0, rows, step):
        xb = x[r0:r0 + step]
        xb[...] = _block_product(xb, w, transpose, bias, activation)
    return x


def square_matmul_(x, w, transpose=False, bias=None, activation=None, *, config=None):
    """Overwrite ``x`` with ``x @ w`` (``x @ w.T`` if ``transpose``, plus ``bias`` and ``activation``
    then); returns ``x``. ``config``: a :class:`SquareMatmulConfig` (None: the default, which keeps
    the scratch within ``x.nbytes / 8``)."""
    if not backend.is_cuda_array(x):
        return square_matmul_ref(x, w, transpose, bias, activation, config=config)
    import cupy

    rows = x.shape[0]
    if rows == 0 or x.shape[1] == 0:
        return x
    config = config or _DEFAULT
    step = config.block_rows or block_rows_for(rows, 2 if config.overlap_copies else 1)
    with cupy.cuda.Device(x.data.device_id):
        if not config.overlap_copies or step >= rows:
            for r0 in range(0, rows, step):
                xb = x[r0:r0 + step]
                xb[...] = _block_product(xb, w, transpose, bias, activation)
            return x
        return _overlapped(cupy, x, w, transpose, bias, activation, step)


def _overlapped(cupy, x, w, transpose, bias, activation, step):
    """GEMMs on the caller's stream, copies back on a side stream, ordered by events:
    the copy of block i waits for its GEMM; before block i+1's scratch is allocated the caller's
    stream waits for the copy of block i-1, whose scratch is then released (so the pool can hand
    it back without a race, and at most two blocks are alive); at the end the caller's stream
    waits for the last copy. No host synchronization; valid inside a graph capture (fork/join)."""
    main = cupy.cuda.get_current_stream()
    side = _side_stream(cupy, x.data.device_id)
    contiguous = x.flags.c_contiguous
    pending = []  # (scratch, copy-done event), oldest first
    for r0 in range(0, x.shape[0], step):
        if len(pending) == 2:
            old, done = pending.pop(0)
            main.wait_event(done)
            del old
        xb = x[r0:r0 + step]
        yb = _block_product(xb, w, transpose, bias, activation)
        ready = cupy.cuda.Event(block=False, disable_timing=True)
        ready.record(main)
        side.wait_event(ready)
        if contiguous:  # one DMA-able copy; the block's rows are adjacent in x
            cupy.cuda.runtime.memcpyAsync(xb.data.ptr, yb.data.ptr, yb.nbytes, 3, side.ptr)
        else:
            with side:
                xb[...] = yb
        done = cupy.cuda.Event(block=False, disable_timing=True)
        done.record(side)
        pending.append((yb, done))
    main.wait_event(pending[-1][1])  # the last copy, and through side's order every earlier one
    return x


_SIDE = {}  # device id -> the side stream for the copies back


def _side_stream(cupy, dev):
    s = _SIDE.get(dev)
    if s is None:
        s = _SIDE[dev] = cupy.cuda.Stream(non_blocking=True)
    return s
