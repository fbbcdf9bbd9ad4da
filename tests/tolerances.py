"""What the kernel tests share: the dtypes they sweep, the tolerance of each dtype (one
place), the relative-error measure, and cpu tensors whatever the default device."""
import numpy as np

import minifused as mf
from minifused import backend

DTYPES = [np.float32, np.float16, backend.bfloat16]
TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2e-3, backend.bfloat16: 1.2e-2,
       np.dtype(np.float64): 1e-12}


def cpu(data, **kw):
    """A tensor on the cpu (the NumPy path), whatever the default device."""
    return mf.tensor(data, device="cpu", **kw)


def rel_err(a, b, scale=0.0):
    """‖a − b‖ / ‖b‖ over the finite entries of the reference ``b``, after checking that NaNs
    and infinities sit in the same places; the floor keeps (near-)zero references meaningful.
    ``scale``, if larger than ‖b‖, is the magnitude to measure against: that of the terms whose
    difference ``b`` is (cancellation leaves any rounding of theirs in the result)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    assert np.array_equal(np.isnan(a), np.isnan(b)), "NaN positions differ"
    inf = np.isinf(b)
    assert np.array_equal(a[inf], b[inf]), "infinities differ"
    fin = np.isfinite(b)
    a, b = np.where(fin, a, 0), np.where(fin, b, 0)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), scale, 1e-3 * np.sqrt(max(b.size, 1)), 1e-30)
