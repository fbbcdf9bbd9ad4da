"""Optimizers on fused update kernels (``minifused.kernels.optim``, ``optim_adaptive``, ``optim_extra``), Adafactor,
Muon and SparseAdam on array operations, L-BFGS, and LR schedulers."""
from . import lr_scheduler, swa_utils  # noqa: F401
from .adadelta import Adadelta  # noqa: F401
from .adafactor import Adafactor  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .adam_variants import Adamax, NAdam, RAdam  # noqa: F401
from .asgd import ASGD  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .muon import Muon  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .rprop import Rprop  # noqa: F401
from .sgd import SGD  # noqa: F401
from .sparse_adam import SparseAdam  # noqa: F401
