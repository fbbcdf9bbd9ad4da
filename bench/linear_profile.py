"""Where the host time of one Linear forward goes (784 -> 1024, fp32, batch 64).

Prints host µs per call for each piece of the hot path (``harness.host_us``: bursts
with an untimed sync between them) beside the µs per call back to back, which waits
for the GPU where the GPU is the slower side; then a cProfile of ``nn.Linear.__call__``; also
the autotuner's view of the seed-size fused forward. A diagnostic, not a result.
"""
from __future__ import annotations

import cProfile
import pstats
import sys
import time
from pathlib import Path

import cupy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import host_us  # noqa: E402

import minifused.functional as F  # noqa: E402
from minifused import nn  # noqa: E402
from minifused.kernels import cublaslt as LT  # noqa: E402
from minifused.kernels import linear as K  # noqa: E402
from minifused.ops import linear as L  # noqa: E402
from minifused.tensor import Tensor  # noqa: E402


def us(fn):
    """(host µs per call in bursts, µs per call back to back): the second waits for the GPU
    whenever the GPU is the slower side."""
    burst = host_us(fn)
    for _ in range(50):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    for _ in range(2000):
        fn()
    b2b = (time.perf_counter() - t0) / 2000 * 1e6
    cupy.cuda.get_current_stream().synchronize()
    return burst, b2b


def main(skip_autotune="--skip-autotune" in sys.argv):
    n, k, m = 64, 784, 1024
    rs = cupy.random.RandomState(0)
    x = Tensor(rs.standard_normal((n, k), dtype=cupy.float32))
    lin = nn.Linear(k, m, activation="relu", device="cuda")
    w, b = lin.weight._data, lin.bias._data
    y, aux = K.linear_forward(x._data, w, b, "relu", aux=True)
    key = next(kk for kk in LT._plans if kk[2] == "fwd" and kk[3] == "RELU_AUX_BIAS" and kk[6] == n)
    plan = LT._plans[key]
    ws = LT._workspace(key[0], key[1], plan.ws_size)
    sptr = key[1]
    noop = cupy.RawKernel(r'extern "C" __global__ void noop(float* p) {}', "noop")
    rows = {
        "cupy.empty (64,1024) f32": lambda: cupy.empty((n, m), cupy.float32),
        "cupy.empty mask": lambda: cupy.empty((n, K.relu_aux_cols(m)), cupy.uint8),
        "cupy.cuda.alloc (y+mask bytes)": lambda: cupy.cuda.alloc(n * m * 4 + n * K.relu_aux_cols(m)),
        "ndarray(memptr=) view": lambda: cupy.ndarray((n, m), cupy.float32, memptr=y.data),
        "get_current_stream().ptr": lambda: cupy.cuda.get_current_stream().ptr,
        "runtime.getDevice": lambda: cupy.cuda.runtime.getDevice(),
        "desc_set_attribute": lambda: LT._lt.matmul_desc_set_attribute(plan.desc, LT._ATTR["BIAS_POINTER"],
                                                                     plan.ptrbuf_addr, 8),
        "plan.run (launch only)": lambda: plan.run(w.data.ptr, x._data.data.ptr, y.data.ptr, b.data.ptr,
                                                   aux.data.ptr, ws.data.ptr, ws.nbytes, sptr),
        "raw lt.matmul": lambda: LT._lt.matmul(plan.handle, plan.desc, plan.alpha_ptr, w.data.ptr, plan.a_layout,
                                              x._data.data.ptr, plan.b_layout, plan.beta_ptr, y.data.ptr,
                                              plan.d_layout, y.data.ptr, plan.d_layout, plan.algo_ptr,
                                              ws.data.ptr, ws.nbytes, sptr),
        "RawKernel noop launch": lambda: noop((1,), (32,), (y,)),
        "K.linear_forward (aux)": lambda: K.linear_forward(x._data, w, b, "relu", aux=True),
        "K.linear_forward (no aux)": lambda: K.linear_forward(x._data, w, b, "relu"),
        "LinearFn.apply": lambda: L.LinearFn.apply(x, lin.weight, lin.bias, activation="relu"),
        "F.linear": lambda: F.linear(x, lin.weight, lin.bias, "relu"),
        "nn.Linear.__call__": lambda: lin(x),
        "Tensor.device (cuda)": lambda: x.device,
        "Tensor._from_array": lambda: Tensor._from_array(y, True),
        "cupy x @ w.T": lambda: x._data @ w.T,
    }
    for name, fn in rows.items():
        burst, b2b = us(fn)
        print(f"{name:<32} host {burst:8.2f} us   back-to-back {b2b:8.2f} us", flush=True)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(3000):
        lin(x)
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)

    if skip_autotune:
        return
    # The autotuner's candidates for the seed-size fused forward.
    n, k, m = 65536, 16384, 8192
    xs = rs.standard_normal((n, k), dtype=cupy.float32).astype(cupy.float16)
    ws_ = (rs.standard_normal((m, k), dtype=cupy.float32) * k ** -0.5).astype(cupy.float16)
    bs = rs.standard_normal((m,), dtype=cupy.float32).astype(cupy.float16)
    tune = LT.GemmConfig(autotune=True, candidates=16)
    for epi_args in (dict(config=tune), dict(bias=bs, activation="relu", aux=True, config=tune)):
        LT.clear_plan_cache()
        K.linear_forward(xs, ws_, **epi_args)
        plan = next(iter(LT._plans.values()))
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        times = []
        for i in range(len(plan.algos)):
            plan.choose(i)
            try:
                K.linear_forward(xs, ws_, **epi_args)
                start.record()
                for _ in range(5):
                    K.linear_forward(xs, ws_, **epi_args)
                stop.record()
                stop.synchronize()
                times.append(round(cupy.cuda.get_elapsed_time(start, stop) / 5, 3))
            except Exception as e:  # noqa: BLE001
                times.append(repr(e)[:40])
        tf = [round(2 * n * k * m / t / 1e9, 1) if isinstance(t, float) else t for t in times]
        print(f"autotune candidates {epi_args.get('activation')}: {len(plan.algos)} -> TFLOP/s {tf}", flush=True)


if __name__ == "__main__":
    main()
