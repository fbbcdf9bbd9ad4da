"""The one timing helper and results writer shared by every ``bench/*.py``.

Timing: CUDA events around each call, warm-up first, the median of repeats,
rotating over input sets made beforehand from fresh random data (never zeros,
never one buffer that the cache keeps hot). Every benchmark measures its
comparison in the same run: device-to-device copy bandwidth here, a plain
matmul or PyTorch in the benchmark itself.

Results go to ``bench/results/<family>.json`` in the schema of the design card,
with a Markdown table beside it.
"""
from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import cupy

from minifused import backend

RESULTS = Path(__file__).resolve().parent / "results"


def bench_ms(fn, input_sets, warmup=10, repeat=50, before=None):
    """Median milliseconds of ``fn(*inputs)`` over ``repeat`` calls, cycling through ``input_sets``.
    ``before()``, if given, is issued ahead of each timed call, outside the events."""
    input_sets = list(input_sets)
    for i in range(warmup):
        fn(*input_sets[i % len(input_sets)])
    cupy.cuda.get_current_stream().synchronize()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for i in range(repeat):
        args = input_sets[i % len(input_sets)]
        if before is not None:
            before()
        start.record()
        fn(*args)
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def warm_gpu(seconds=0.5):
    """Keeps the GPU busy for about ``seconds`` (back-to-back fp16 matrix products) before the first timing:
    an idle GPU runs at lower clocks, and a first case of microseconds per call (MNIST conv1) measured at
    half its later speed in one run (H100: 1.97 against 3.9 TFLOP/s in the run before)."""
    a = cupy.random.RandomState(0).standard_normal((4096, 4096), dtype=cupy.float32).astype(cupy.float16)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(10):
            a @ a
        cupy.cuda.get_current_stream().synchronize()


_FLUSH = {}


def kernel_ms(fn, input_sets, warmup=10, repeat=50):
    """Median device milliseconds of ``fn(*inputs)`` measured the way the seed's ``do_bench`` does:
    before each call a 256 MiB buffer is zeroed, which evicts the L2 (so inputs come from device
    memory) and keeps the GPU busy while the host issues the call, so that launch latency and host
    overhead stay out of the events. The memset alone (~100 µs) was not always enough: two of four
    runs of bench/norms.py on one H100 timed LayerNorm forward at one N at a fifth (N = 15360) and a
    tenth (N = 3072) of its speed, below its own eager figure: what a host slowed for some
    milliseconds would leave. So a one-thread kernel then waits ``HOST_MARGIN_NS`` on the device
    clock too; it touches no memory, so the L2 is as the memset left it. (The three runs since
    showed no such N: suggestive, not proof of the cause.)"""
    flush, wait = _flush()

    def before():
        flush.fill(0)
        wait((1,), (1,), (cupy.int64(HOST_MARGIN_NS),))

    return bench_ms(fn, input_sets, warmup, repeat, before=before)


def graph_ms(fn, input_sets, replays=20, torch=None):
    """Median device milliseconds per call of ``fn(*inputs)`` in steady state, as METHOD.md asks for
    many small launches: one call per input set is captured into a CUDA graph (each call keeps its
    own outputs), and a replay -- issued behind a short device wait, so the events enclose device work
    only -- is timed with events and divided by the number of calls. Back to back, a call pays no
    event floor (an empty kernel measures ~3 us under ``kernel_ms``) and writes back the L2 lines the
    calls before it left dirty, as in a training step. The sets must be distinct and together much
    larger than the L2 (each call then reads device memory). ``torch``: the module, when ``fn``
    launches through PyTorch (captured by ``torch.cuda.graph``)."""
    if torch is None:
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            keep = [fn(*args) for args in input_sets]  # warm-up; leaves the pool one block per output
            stream.synchronize()
            del keep
            with backend.capturing("graph_ms"):  # as capture_step marks it: launches take PDL where it exists
                stream.begin_capture()
                keep = [fn(*args) for args in input_sets]
                graph = stream.end_capture()
        launch = lambda: graph.launch(stream)  # noqa: E731
    else:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            keep = [fn(*args) for args in input_sets]
            del keep
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            keep = [fn(*args) for args in input_sets]
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        launch = graph.replay
    wait = _flush()[1]
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(3):
        launch()
    times = []
    for _ in range(replays):
        with stream:
            wait((1,), (1,), (cupy.int64(HOST_MARGIN_NS // 2),))
        start.record(stream)
        launch()
        stop.record(stream)
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / len(input_sets))
    del keep
    return statistics.median(times)


def _flush():
    """(256 MiB buffer, device-clock wait kernel) of the current device."""
    dev = cupy.cuda.Device().id
    if dev not in _FLUSH:
        _FLUSH[dev] = cupy.empty(256 << 20, cupy.uint8), cupy.RawKernel(_WAIT_SRC, "wait_ns")
    return _FLUSH[dev]


HOST_MARGIN_NS = 1_000_000
_WAIT_SRC = r"""
extern "C" __global__ void wait_ns(long long ns) {
    long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(10000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""


def host_us(fn, burst=20, bursts=200, warmup=200):
    """Host µs per call of ``fn()``: the time the host spends issuing it, not the GPU's.

    Calls run in bursts of ``burst``, timed on the host clock, with a synchronize between
    bursts that is not timed: the GPU queue never fills, so a call never waits for the GPU
    to drain (at batch 64 one fp32 GEMM keeps only a few SMs busy and can take longer on the
    GPU than on the host; timing thousands of calls back to back would then measure the GPU).
    Returns the median over bursts of the mean per call.
    """
    stream = cupy.cuda.get_current_stream()
    for _ in range(warmup):
        fn()
    stream.synchronize()
    per_call = []
    clock = time.perf_counter
    for _ in range(bursts):
        t0 = clock()
        for _ in range(burst):
            fn()
        per_call.append((clock() - t0) / burst * 1e6)
        stream.synchronize()
    return statistics.median(per_call)


def random_sets(shape, dtype, count=4, seed=0):
    """``count`` independent standard-normal arrays of ``shape`` on the GPU."""
    rs = cupy.random.RandomState(seed)
    return [(rs.standard_normal(shape, dtype=cupy.float32).astype(dtype),) for _ in range(count)]


def copy_bandwidth_gbs(nbytes=1 << 30):
    """Device-to-device copy bandwidth, GB/s counting bytes read plus bytes written."""
    src = cupy.random.RandomState(1).random_sample(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    ms = bench_ms(lambda s, d: d.__setitem__(Ellipsis, s), [(src, dst)], warmup=3, repeat=20)
    return 2 * src.nbytes / ms / 1e6


def gbs(nbytes, ms):
    return nbytes / ms / 1e6


def torch_or_none():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


def gpu_name():
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    return props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])


def _commit():
    if os.environ.get("MINIFUSED_COMMIT"):
        return os.environ["MINIFUSED_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Results:
    """Rows and ratios of one benchmark family, written as JSON and Markdown."""

    def __init__(self, family: str, machine: str | None = None):
        self.family = family
        self.machine = machine  # what ran it, where that is not the GPU (a CPU benchmark)
        self.rows = []
        self.ratios = {}

    def add(self, case, impl, value, unit):
        self.rows.append({"case": case, "impl": impl, "value": float(value), "unit": unit})
        print(f"{case:<40} {impl:<22} {value:12.3f} {unit}", flush=True)

    def ratio(self, name, value):
        self.ratios[name] = float(value)
        print(f"ratio {name:<45} {value:8.3f}", flush=True)

    def write(self, out_dir=None):
        doc = {"bench": self.family, "gpu": self.machine or gpu_name(), "date": datetime.date.today().isoformat(),
               "commit": _commit(), "rows": self.rows, "ratios": self.ratios}
        targets = [Path(out_dir)] if out_dir else [RESULTS]
        if os.environ.get("OUT"):
            targets.append(Path(os.environ["OUT"]))
        for folder in targets:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{self.family}.json").write_text(json.dumps(doc, indent=1) + "\n")
            (folder / f"{self.family}.md").write_text(self.markdown(doc))
        return doc

    @staticmethod
    def markdown(doc):
        lines = [f"# {doc['bench']} — {doc['gpu']}, {doc['date']}, commit {doc['commit']}", "",
                 "| case | impl | value | unit |", "| --- | --- | ---: | --- |"]
        lines += [f"| {r['case']} | {r['impl']} | {r['value']:.3f} | {r['unit']} |" for r in doc["rows"]]
        if doc["ratios"]:
            lines += ["", "| ratio | value |", "| --- | ---: |"]
            lines += [f"| {k} | {v:.3f} |" for k, v in doc["ratios"].items()]
        return "\n".join(lines) + "\n"
