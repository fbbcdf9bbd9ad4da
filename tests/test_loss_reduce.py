"""The one-launch loss reduction ('sum' / 'mean') against its float64 reference."""
import numpy as np
import pytest

from minifused.kernels import loss_reduce as R


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("rows", [1, 7, 1024, 1025, 100_003])
def test_gpu_loss_reduce_matches_reference(dtype, rows):
    import cupy

    from minifused import backend

    dt = backend.as_dtype(dtype)
    rng = np.random.default_rng(rows)
    loss = rng.random(rows, dtype=np.float32) * np.float32(300 / rows)  # sums within fp16 range
    weight = (rng.random(rows) > 0.2).astype(np.float32) * rng.random(rows, dtype=np.float32)
    for mean in (False, True):
        out, denom = R.loss_reduce(cupy.asarray(loss), cupy.asarray(weight), mean, dt)
        ref, ref_denom = R.loss_reduce_ref(loss, weight, mean, dt)
        assert out.shape == () and out.dtype == dt
        tol = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
        assert abs(float(out.astype(cupy.float64)) - float(ref.astype(np.float64))) <= tol * abs(float(ref.astype(np.float64)))
        if mean:
            assert denom.dtype == np.float32 and abs(float(denom[0]) - float(ref_denom[0])) <= 1e-5 * float(ref_denom[0])
        else:
            assert denom is None


@pytest.mark.gpu
def test_gpu_loss_reduce_all_ignored_is_nan():
    import cupy

    out, denom = R.loss_reduce(cupy.zeros(5, np.float32), cupy.zeros(5, np.float32), True, np.float32)
    assert bool(cupy.isnan(out)) and float(denom[0]) == 0.0


def test_reference_mean_and_sum():
    loss, weight = np.array([1.0, 2.0, 3.0], np.float32), np.array([1.0, 0.0, 1.0], np.float32)
    out, denom = R.loss_reduce_ref(loss, weight, True, np.float32)
    assert float(out) == 3.0 and float(denom[0]) == 2.0
    out, denom = R.loss_reduce_ref(loss, weight, False, np.float32)
    assert float(out) == 6.0 and denom is None
