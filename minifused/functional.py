"""The public function API (``import minifused.functional as F``).

Arguments are validated here, at the boundary: shapes, dtypes and devices,
with messages that name the op, what was expected and what came. The ops
below assume valid input.
"""
from __future__ import annotations

from .ops import (abs, clamp, exp, gelu, log, matmul, maximum, minimum, relu, sigmoid, sqrt,  # noqa: F401,A004
                  tanh, where)

# ---- elementwise and activations (foundation)

# ---- linear (cuBLASLt epilogs)

# ---- convolution and pooling

# ---- normalization

# ---- softmax and losses

# ---- dropout
