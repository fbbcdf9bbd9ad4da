"""Activation values and gradients to PyTorch's CPU rounding rules: the constants its kernels use, the steps its
composite ops round in 16-bit floats, and the dtypes and errors of edge inputs (tests/test_activation_loss.py
holds the broader checks)."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F


def _grad(fn, x, g, dtype):
    """The input gradient of ``fn`` at ``x`` (float64 values rounded to ``dtype``) for upstream ``g``."""
    t = mf.tensor(np.asarray(x, np.float32)).to(dtype).requires_grad_()
    y = fn(t)
    y.backward(mf.tensor(np.asarray(g, np.float32)).to(dtype))
    return t.grad


def test_hardsigmoid_grad_uses_float32_one_sixth():
    # PyTorch's backward is grad * (1.0f / 6.0f): in float64 that is 0.1666666716337204, not 1/6
    g = _grad(F.hardsigmoid, [0.0, 1.0, -2.5, 3.0, -3.0], [1.0, -2.0, 3.0, 1.0, 1.0], mf.float64)
    sixth = float(np.float32(1 / 6))
    np.testing.assert_array_equal(g.numpy(), [sixth, -2 * sixth, 3 * sixth, 0.0, 0.0])
    assert g.numpy()[0] == 0.1666666716337204
