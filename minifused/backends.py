"""PyTorch's ``torch.backends`` switches under PyTorch's names, so ``torch.backends.cuda.matmul.allow_tf32 =
True`` ports with the import changed. ``cudnn`` names the convolution kernels' switch (minifused has no
cuDNN; the name is PyTorch's). The switches themselves live in :mod:`minifused.backend`."""
from __future__ import annotations

from types import SimpleNamespace

from .backend import tf32_conv, tf32_matmul

cuda = SimpleNamespace(matmul=tf32_matmul)
cudnn = tf32_conv
