"""More of PyTorch's edge cases of the reductions, scans, sorting and statistics ops, with the values PyTorch gives:
var / std with a correction past the element count, prod's gradient with NaN, the vector norms at NaN and on empty
dims, quantile with infinities. References are float64 NumPy or PyTorch's formula worked out by hand."""
import math
import warnings

import numpy as np
import pytest

import minifused as mf
from tolerances import cpu

nan, inf = math.nan, math.inf


def grad_of(fn, values, dtype=np.float64):
    x = cpu(np.asarray(values, dtype), requires_grad=True)
    fn(x).sum().backward()
    return x.grad.numpy()


# ---------------------------------------------------------------- var / std
def test_var_gradient_with_correction_past_the_count_divides_by_the_negative_dof():
    # PyTorch's forward divides by max(N - correction, 0) (inf here), its backward by N - correction itself
    a = np.array([[1.0, 2.0, 4.0, 7.0], [0.5, -1.0, 3.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isinf(cpu(a).var(1, correction=5).numpy()).all()
        g = grad_of(lambda x: x.var(1, correction=5), a)
        np.testing.assert_allclose(g, 2 * (a - a.mean(1, keepdims=True)) / (4 - 5))
        assert (grad_of(lambda x: x.std(1, correction=5), a) == 0).all()  # (g / (2 * inf) first: 0)
        assert (grad_of(lambda x: x.var(1, correction=2), [[1.5], [3.0]]) == 0).all()  # (one value: 0, not NaN)
