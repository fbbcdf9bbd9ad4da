"""Optimizers on fused update kernels (``minifused.kernels.optim``) and LR schedulers."""
from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
