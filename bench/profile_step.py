"""Host µs per op of one eager training step (MNIST MLP and CNN with Adam; ResNet-18 bf16): where the host time goes.

At MNIST sizes an eager step is bound by the host: this shows, per op, how long the
host spends issuing it, so that per-op overhead can be cut and reported before/after.

Method: after a warm-up, steps run in bursts of ``--burst`` with an untimed device
synchronize between bursts (as ``harness.host_us``: the GPU queue never fills, so no
call waits for the GPU). Timers (``time.perf_counter``) sit around

* each op's ``Function.apply`` (forward: validation, tape record, kernel launches) and,
  inside it, the op's ``forward`` (the kernel part): "apply overhead" is the difference;
* each op's ``backward`` inside ``loss.backward()``: the rest of ``backward()`` is the
  engine's walk ("backward engine");
* the phases: ``zero_grad``, model forward, loss, ``backward()``, ``optimizer.step()``.

A second, uninstrumented pass measures the step as users run it (timers cost ~0.3 µs
each). ``--pyinstrument`` also prints a pyinstrument profile when it is importable.
Results go to ``bench/results/profile_step.json`` (GPU runs) in the usual schema, rows
``<model> b<B> <what>`` in µs per step or per call.

    python bench/profile_step.py [--models mlp,cnn,resnet18] [--batch 64] [--steps 400] [--device cuda]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples" / "mnist"))

import numpy as np  # noqa: E402

import minifused as mf  # noqa: E402
import minifused.functional as F  # noqa: E402
from minifused import amp, autograd, backend, optim  # noqa: E402

import train as example  # noqa: E402

clock = time.perf_counter


class Timers:
    """Accumulated seconds and call counts per key, only while ``on``."""

    def __init__(self):
        self.on = False
        self.sec = defaultdict(float)
        self.calls = defaultdict(int)

    def add(self, key, dt):
        if self.on:
            self.sec[key] += dt
            self.calls[key] += 1

    def reset(self):
        self.sec.clear()
        self.calls.clear()


T = Timers()


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def instrument():
    """Wrap Function.apply and every op's forward/backward with timers (returns an undo function)."""
    orig_apply = autograd.Function.__dict__["apply"]
    saved = [(autograd.Function, "apply", orig_apply)]

    def apply(cls, *args, **kwargs):
        t = clock()
        out = orig_apply.__func__(cls, *args, **kwargs)
        T.add(("apply", cls.__name__), clock() - t)
        return out

    autograd.Function.apply = classmethod(apply)
    for sub in set(_subclasses(autograd.Function)):
        for name in ("forward", "backward"):
            if name not in sub.__dict__:
                continue
            fn = sub.__dict__[name]
            saved.append((sub, name, fn))
            inner = fn.__func__ if isinstance(fn, staticmethod) else fn

            def timed(*a, _inner=inner, _key=(name, sub.__name__), **k):
                t = clock()
                out = _inner(*a, **k)
                T.add(_key, clock() - t)
                return out

            setattr(sub, name, staticmethod(timed))

    def undo():
        for cls, name, fn in saved:
            setattr(cls, name, fn)

    return undo


def make(model_name, batch, device):
    """The step of ``model_name``: an MNIST example model (fp32, Adam) or ``resnet18``, bench/resnet.py's
    bf16 step (CIFAR ResNet-18, SGD with momentum and fp32 master weights)."""
    mf.manual_seed(0)
    rng = np.random.default_rng(0)
    y = mf.tensor(rng.integers(0, 10, batch), device=device)
    if model_name == "resnet18":
        import resnet

        model = resnet.resnet18(mf.nn, F.relu).to(device)
        amp.cast_model(model, mf.bfloat16)
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, master_weights=True)
        x = mf.tensor(rng.standard_normal((batch, 3, 32, 32)), dtype=mf.bfloat16, device=device)
    else:
        model = example.build_model(model_name, 0.0).to(device)
        opt = optim.Adam(model.parameters(), lr=1e-3)
        x = mf.tensor(rng.standard_normal((batch, 1, 28, 28)), dtype=mf.float32, device=device)

    def step(timed):
        t0 = clock()
        opt.zero_grad()
        t1 = clock()
        logits = model(x).float()
        t2 = clock()
        loss = F.cross_entropy(logits, y)
        t3 = clock()
        loss.backward()
        t4 = clock()
        opt.step()
        t5 = clock()
        if timed:
            for key, dt in (("zero_grad", t1 - t0), ("model forward", t2 - t1), ("loss", t3 - t2),
                            ("backward()", t4 - t3), ("optimizer.step()", t5 - t4), ("step", t5 - t0)):
                T.add(("phase", key), dt)

    return step


def run(step, steps, burst, timed):
    """Mean host seconds per step over bursts (median of bursts), syncs untimed."""
    per = []
    T.on = timed
    for _ in range(max(1, steps // burst)):
        t = clock()
        for _ in range(burst):
            step(timed)
        per.append((clock() - t) / burst)
        T.on = False
        backend.synchronize()
        T.on = timed
    T.on = False
    return statistics.median(per)


def profile(model_name, batch, device, steps, burst, res, use_pyinstrument):
    step = make(model_name, batch, device)
    for _ in range(30):
        step(False)
    backend.synchronize()
    plain = run(step, steps, burst, timed=False)
    undo = instrument()
    try:
        T.reset()
        instrumented = run(step, steps, burst, timed=True)
    finally:
        undo()
    n = max(1, steps // burst) * burst
    tag = f"{model_name} b{batch}"
    print(f"\n== {tag} on {device}: {plain * 1e6:.0f} µs host per step "
          f"({instrumented * 1e6:.0f} µs instrumented)")
    res.add(f"{tag} step (uninstrumented)", "minifused eager", plain * 1e6, "us/step")
    phases = {k[1]: v / n * 1e6 for k, v in T.sec.items() if k[0] == "phase"}
    for key in ("zero_grad", "model forward", "loss", "backward()", "optimizer.step()", "step"):
        res.add(f"{tag} phase {key}", "minifused eager", phases.get(key, 0.0), "us/step")
    # per op: calls per step, µs per call of apply (forward incl. overhead), its forward, its backward
    ops = sorted({k[1] for k in T.sec if k[0] in ("apply", "backward")})
    print(f"{'op':<24}{'calls/step':>11}{'apply µs':>10}{'kernel part':>12}{'overhead':>10}{'backward µs':>13}")
    total_bwd = 0.0
    for op in ops:
        calls = T.calls.get(("apply", op), 0) / n
        per_apply = T.sec.get(("apply", op), 0.0) / max(T.calls.get(("apply", op), 0), 1) * 1e6
        per_fwd = T.sec.get(("forward", op), 0.0) / max(T.calls.get(("forward", op), 0), 1) * 1e6
        per_bwd = T.sec.get(("backward", op), 0.0) / max(T.calls.get(("backward", op), 0), 1) * 1e6
        total_bwd += T.sec.get(("backward", op), 0.0) / n * 1e6
        print(f"{op:<24}{calls:>11.1f}{per_apply:>10.1f}{per_fwd:>12.1f}{per_apply - per_fwd:>10.1f}{per_bwd:>13.1f}")
        res.add(f"{tag} {op} forward (apply)", "minifused eager", per_apply, "us/call")
        res.add(f"{tag} {op} apply overhead", "minifused eager", per_apply - per_fwd, "us/call")
        if T.calls.get(("backward", op)):
            res.add(f"{tag} {op} backward", "minifused eager", per_bwd, "us/call")
    engine = phases.get("backward()", 0.0) - total_bwd
    print(f"backward engine (walk, accumulation, hooks): {engine:.1f} µs/step; phases (µs/step): "
          + ", ".join(f"{k} {v:.0f}" for k, v in phases.items()))
    res.add(f"{tag} backward engine", "minifused eager", engine, "us/step")
    if use_pyinstrument:
        try:
            from pyinstrument import Profiler
        except ImportError:
            print("pyinstrument is not importable: skipped")
        else:
            prof = Profiler(interval=0.0001)
            prof.start()
            run(step, steps, burst, timed=False)
            prof.stop()
            print(prof.output_text(unicode=True, color=False, show_all=False))


class _Print:
    """Results stand-in for CPU runs (nothing written)."""

    def add(self, *a):
        pass

    def write(self):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--device", default=None, help="cuda (default when usable) or cpu (a smoke run)")
    ap.add_argument("--pyinstrument", action="store_true")
    args = ap.parse_args()
    device = backend.device(args.device)
    if device.type == "cuda":
        from harness import Results

        res = Results("profile_step")
    else:
        res = _Print()
    for name in args.models.split(","):
        profile(name, args.batch, device, args.steps, args.burst, res, args.pyinstrument)
    res.write()


if __name__ == "__main__":
    main()
