"""1x1 convolutions in fp32 without TF32 as strided-batched cuBLASLt GEMMs (strict fp32 compute): the forward
and the data gradient.

A 1x1 filter at padding 0 multiplies each pixel's channels by one (K, C) matrix: per image, ``y[n] (K x PQ) =
W (K x C) @ x[n]'s pixels (C x PQ)`` and ``dx[n]'s pixels = W^T @ dy[n]``, one batched call over the images
(W's stride 0). A stride first gathers x's pixels (and scatters dx's among zeros; conv1x1.cu); the strided
forward of few input channels runs as conv1x1.cu's own SGEMM instead, reading x's pixels in place; the forward
of images of few pixels, as one GEMM over all images (x's pixels gathered channel-major, the output's rows
moved into place after). The GEMMs run
at cuBLAS's SGEMM rate, which the direct FFMA kernels do not reach on these layers of few FLOPs per byte
(ResNet's 1x1 stride-2 shortcuts).
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from . import NULL, cublaslt, get_kernel
from .conv_plan import ints


def _strided_size(h, wd, stride):
    """(P, Q): the pixels a 1x1 filter at padding 0 reads of an H x W map, every stride-th row and column."""
    return -(-h // stride[0]), -(-wd // stride[1])


def applies(dtype, x_shape, w_shape, stride, padding, dilation, groups, tf32, config, forward=False) -> bool:
    """Whether the GPU convolution takes this path: fp32 without TF32, one group, a 1x1 filter at padding 0, at
    least 32 input and output channels (unless ``config.conv1x1`` forces it, or turns it off), and every
    image's x and y pixels (C x PQ, K x PQ) a whole number of 256 bytes (the batched GEMM's matrices stay
    aligned as its plans take them); the ``forward`` alike."""
    if config.conv1x1 is False or dtype != backend.float32 or tf32 or groups != 1:
        return False
    if tuple(w_shape[2:]) != (1, 1) or tuple(padding) != (0, 0):
        return False
    pq = math.prod(_strided_size(*x_shape[2:], stride))
    if (x_shape[1] * pq) % 64 or (w_shape[0] * pq) % 64:
        return False
    return bool(config.conv1x1) or (x_shape[1] >= 32 and w_shape[0] >= 32)


#: conv1x1.cu's moves take 32-bit indices: up to this many elements (with room for a grid's stride past them)
_KERNEL_ELEMENTS = 1 << 30
_THREADS = 256


def _grid(work):
    """conv1x1.cu's grid-stride loops' blocks for ``work`` threads' worth."""
    return (max(1, min(-(-work // _THREADS), 65535 * 8)),)


def _move(name, src, dst, x_shape, stride, channel_major=False):
    """conv1x1.cu's ``name`` from src to dst, between x's (N, C, H, W) and its strided pixels (N, C, P, Q), or
    (gather_pixels' ``channel_major``) (C, N, P, Q)."""
    n, c, h, wd = x_shape
    p, q = _strided_size(h, wd, stride)
    rows = n * c * (p if name == "gather_pixels" else h)
    quads = -(-(q if name == "gather_pixels" else wd) // 4)
    grid = _grid(rows * quads)
    args = (src, dst, *ints(n * c, h, wd, p, q, *stride))
    if name == "gather_pixels":
        args += ints(stride[1] == 2 and wd % 4 == 0 and q % 4 == 0 and src.data.ptr % 16 == 0, c,  # paired
                     channel_major)
    else:
        args += ints(wd % 4 == 0 and dst.data.ptr % 16 == 0)  # quad_stores
    get_kernel("conv1x1.cu", name)(grid, (_THREADS,), args)


def _pixels(x, stride):
    """x (N, C, H, W)'s pixels that a stride-``stride`` 1x1 filter reads, C-contiguous (N, C, P, Q)."""
    import cupy

    if tuple(stride) == (1, 1):
        return x
    if x.size >= _KERNEL_ELEMENTS:
        return cupy.ascontiguousarray(x[:, :, ::stride[0], ::stride[1]])
    n, c, h, wd = x.shape
    xs = cupy.empty((n, c, *_strided_size(h, wd, stride)), np.float32)
    if xs.size:
        _move("gather_pixels", x, xs, x.shape, stride)
    return xs


#: Images of fewer output pixels than this take the forward as one GEMM over all of them (:func:`_one_gemm_forward`)
BATCHED_MIN_PIXELS = 64
#: conv1x1.cu's MOVE_RUNS and MOVE_PIXELS: images_to_channels moves 32 runs of the output a block (of _THREADS), of
#: at most 64 pixels each (its shared memory's room; the images of the one-GEMM forward have fewer), where a run is
#: not whole 16-byte vectors
_MOVE_RUNS, _MOVE_PIXELS = 32, 64
assert BATCHED_MIN_PIXELS <= _MOVE_PIXELS


def forward(x, w, bias, stride, padding):
    """y (N, K, P, Q) of x (N, C, H, W) and w (K, C, 1, 1), fp32 C-contiguous CuPy arrays (``applies``)."""
    import cupy

    pq = math.prod(_strided_size(*x.shape[2:], stride))
    if pq < BATCHED_MIN_PIXELS and x.size < _KERNEL_ELEMENTS and x.shape[0] * w.shape[0] * pq < _KERNEL_ELEMENTS:
        return _one_gemm_forward(x, w, bias, stride)
    if tuple(stride) != (1, 1) and (x.shape[1] <= _STRIDED_MAX_CHANNELS or (
            x.shape[1] <= _STRIDED_LARGE_CHANNELS and x.nbytes > _STRIDED_LARGE_BYTES)):
        return _strided_forward(x, w, bias, stride)
    xs = _pixels(x, stride)
    n, c, p, q = xs.shape
    k = w.shape[0]
    y = cupy.empty((n, k, p, q), np.float32)
    if y.size:
        if c == 0:
            y.fill(0)
        else:  # column-major D (PQ x K) = A (PQ x C, ld PQ) @ B (C x K, ld C), per image
            cublaslt.strided_batched(xs, w, y, n, (c * p * q, 0, k * p * q), cublaslt.OP_N, cublaslt.OP_N,
                                     p * q, k, c, p * q, c, p * q)
        if bias is not None:
            y += bias.reshape(1, k, 1, 1)
    return y


#: The strided forward reads x in place (conv1x1.cu's strided_forward) up to this many input channels: over so
#: short a reduction the batched GEMM runs slowly and the gather is a large share of the time (ResNet's 64-channel
#: shortcuts: 1.17-1.29x the gather and GEMM); from 128 channels the GEMM was faster again, except on an x this
#: large (c128h28s2k1: at batch 256, 103 MB, 1.16x as fast in place; at 128, 0.94x; 128 channels of 34 MB, 1.02x).
_STRIDED_MAX_CHANNELS = 64
_STRIDED_LARGE_CHANNELS, _STRIDED_LARGE_BYTES = 128, 64 << 20


def _one_gemm_forward(x, w, bias, stride):
    """The forward of few pixels an image as one GEMM over all images: x's pixels gathered channel-major (C, N *
    PQ), ``d (K, N * PQ) = W @ those``, and d's rows moved to y (N, K, PQ) with the bias. One image's GEMM of
    so few rows (ResNet's 8x8 -> 4x4 shortcut: 16) runs far below cuBLAS's SGEMM rate, and the direct kernel's
    time grew with the batch where cuDNN's did not."""
    import cupy

    n, c, h, wd = x.shape
    k = w.shape[0]
    p, q = _strided_size(h, wd, stride)
    m = n * p * q
    y = cupy.empty((n, k, p, q), np.float32)
    if y.size == 0:
        return y
    if c == 0:
        y[...] = 0 if bias is None else bias.reshape(1, k, 1, 1)
        return y
    xs = cupy.empty((c, n, p, q), np.float32)
    _move("gather_pixels", x, xs, x.shape, stride, channel_major=True)
    d = cupy.empty((k, m), np.float32)  # column-major D (M x K) = A (M x C, ld M) @ B (C x K, ld C)
    cublaslt.strided_batched(xs, w, d, 1, (0, 0, 0), cublaslt.OP_N, cublaslt.OP_N, m, k, c, m, c, m)
    quads = (p * q) % 4 == 0
    grid = _grid(y.size // 4) if quads else (max(1, min(-(-n * k // _MOVE_RUNS), 65535 * 8)),)
    get_kernel("conv1x1.cu", "images_to_channels")(grid, (_THREADS,), (d, bias if bias is not None else NULL, y,
                                                                      *ints(n, k, p * q, quads)))
    return y


def _strided_forward(x, w, bias, stride):
    """The strided forward: conv1x1.cu's strided_forward, x's pixels read where they lie."""
    import cupy

    n, c, h, wd = x.shape
    k = w.shape[0]
    p, q = _strided_size(h, wd, stride)
    y = cupy.empty((n, k, p, q), np.float32)
    if y.size:
        grid = (-(-n * p * q // 128), -(-k // 128))
        get_kernel("conv1x1.cu", "strided_forward")(grid, (256,), (x, w, bias if bias is not None else NULL, y,
                                                                  *ints(n, c, h, wd, k, p, q, *stride)))
    return y


def backward_data(dy, w, x_shape, stride, padding):
    """dx (N, C, H, W) of dy (N, K, P, Q) and w (K, C, 1, 1) (``applies``)."""
    import cupy

    n, k, p, q = dy.shape
    c = x_shape[1]
    dxs = cupy.empty((n, c, p, q), np.float32) if tuple(stride) != (1, 1) else cupy.empty(tuple(x_shape), np.float32)
    if dxs.size:
        if k == 0:
            dxs.fill(0)
        else:  # column-major D (PQ x C) = A (PQ x K, ld PQ) @ B^T (B: K x C as column-major C x K, ld C)
            cublaslt.strided_batched(dy, w, dxs, n, (k * p * q, 0, c * p * q), cublaslt.OP_N, cublaslt.OP_T,
                                     p * q, c, k, p * q, c, p * q)
    if tuple(stride) == (1, 1):
        return dxs
    if np.prod(x_shape) >= _KERNEL_ELEMENTS:
        dx = cupy.zeros(tuple(x_shape), np.float32)
        dx[:, :, ::stride[0], ::stride[1]] = dxs
        return dx
    dx = cupy.empty(tuple(x_shape), np.float32)
    if dx.size:
        _move("scatter_pixels", dxs, dx, x_shape, stride)
    return dx


#: the filter gradient stays with the direct kernels, which already run these layers near cuDNN's strict fp32
backward_filter = None
