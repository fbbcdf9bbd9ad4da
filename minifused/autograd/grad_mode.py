"""``torch.autograd.grad_mode``: the grad-mode context managers where PyTorch keeps them (code that imports them
from there, or subclasses them); the same objects as ``minifused.no_grad`` and its kin (see ``modes``)."""
from __future__ import annotations

from .modes import enable_grad, inference_mode, no_grad, set_grad_enabled

__all__ = ["enable_grad", "inference_mode", "no_grad", "set_grad_enabled"]
