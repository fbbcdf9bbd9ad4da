"""More of the autograd API as PyTorch's: the grad-mode guards (what ``with ... as`` binds, ``clone``, argument
checks), anomaly mode's warning and error words, ``backward(create_graph=True)``'s warning, autograd.functional's
strict checks and strategies, custom Functions' ``mark_dirty`` and ``once_differentiable``, and checkpoint's
use_reentrant variants, keyword arguments and RNG state. References are float64 NumPy values, finite differences
or the documented PyTorch rule written beside each test."""
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import autograd


def leaf(values, dtype=np.float64):
    return mf.tensor(np.asarray(values, dtype), requires_grad=True)


# ---------------------------------------------------------------- 1. grad-mode guards
@pytest.mark.parametrize("guard", [mf.no_grad, mf.enable_grad, lambda: mf.set_grad_enabled(False),
                                   mf.inference_mode, lambda: mf.inference_mode(False)])
def test_grad_mode_guards_bind_none_and_restore(guard):
    # PyTorch's guards return None from __enter__ (``with torch.no_grad() as g``: g is None)
    with guard() as bound:
        assert bound is None
    assert mf.is_grad_enabled()


def test_set_grad_enabled_refuses_non_bools():
    # PyTorch: set_grad_enabled(0) / ("yes") is a TypeError, not a truth value
    for bad in (0, 1, "yes", None):
        with pytest.raises(TypeError, match="set_grad_enabled.*must be bool, not"):
            mf.set_grad_enabled(bad)
    assert mf.is_grad_enabled()


def test_grad_mode_guards_clone():
    # PyTorch's clone(): a fresh guard of the same kind and mode, usable once more
    g = mf.no_grad().clone()
    assert type(g) is mf.no_grad
    with g:
        assert not mf.is_grad_enabled()
    im = mf.inference_mode(False).clone()
    with mf.no_grad(), im:
        assert mf.is_grad_enabled()
    assert mf.is_grad_enabled()


# ---------------------------------------------------------------- 2. anomaly mode
def test_detect_anomaly_warns_it_is_slow_and_names_the_backward_in_pytorchs_words():
    # PyTorch warns on making detect_anomaly; its NaN error reads "Function 'XBackward' returned nan values in its
    # 0th output"; set_detect_anomaly does not warn
    x = leaf([-1.0, 4.0])
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        guard = autograd.detect_anomaly()
    with guard as bound, np.errstate(invalid="ignore"):
        assert bound is None
        with pytest.raises(RuntimeError, match="Function 'SqrtBackward' returned nan values in its 0th output"):
            x.sqrt().sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with autograd.set_detect_anomaly(True) as bound:
            assert bound is None and autograd.is_anomaly_enabled()
    assert not autograd.is_anomaly_enabled()
