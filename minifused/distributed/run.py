"""Launch one process per GPU on this host:

    python -m minifused.distributed.run --nproc-per-node 2 train.py --ddp ARGS
    python -m minifused.distributed.run --nproc-per-node 2 -m some.module ARGS

Each child gets the parent's environment plus ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (the variables ``torchrun`` sets) and
``NCCL_NVLS_ENABLE=0`` (NVLink multicast off). Several hosts: run this on every host with the
same ``--nnodes``, ``--master-addr`` (rank 0's host, reachable from the others) and
``--master-port``, and ``--node-rank`` 0 .. nnodes-1; ranks are ``node_rank * nproc + local``.

If a child fails (non-zero exit or killed), the others are terminated (SIGTERM, then SIGKILL
after ``--grace`` seconds) and the launcher exits with the failed child's code; so does it
on Ctrl-C. A rank stuck inside an NCCL collective waiting for a dead peer is not left hanging.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port(addr="127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m minifused.distributed.run",
                                description="Start one training process per GPU (data parallel).")
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", "--node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=None,
                   help="default: a free port (one host), 29500 (several hosts)")
    p.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL")
    p.add_argument("-m", dest="module", action="store_true", help="run the target as a module (python -m)")
    p.add_argument("target", help="the script (or module, with -m)")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if a.nproc_per_node < 1 or a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        p.error(f"expected --nproc-per-node >= 1 and 0 <= --node-rank < --nnodes, got {a.nproc_per_node}, "
                f"{a.node_rank}, {a.nnodes}")
    if a.master_port is not None and not 1 <= a.master_port <= 65535:
        p.error(f"--master-port must be a TCP port in 1..65535, got {a.master_port}")
    if a.master_port is None:
        a.master_port = free_port() if a.nnodes == 1 else 29500
    return a


def child_env(a, local_rank):
    env = dict(os.environ)  # PYTHONPATH etc. carry over (.gpu/run.sh puts nvmath there)
    env.update(RANK=str(a.node_rank * a.nproc_per_node + local_rank), LOCAL_RANK=str(local_rank),
               WORLD_SIZE=str(a.nnodes * a.nproc_per_node), LOCAL_WORLD_SIZE=str(a.nproc_per_node),
               MASTER_ADDR=a.master_addr, MASTER_PORT=str(a.master_port), NCCL_NVLS_ENABLE="0")
    return env


def _stop(procs, grace):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv=None) -> int:
    a = parse_args(argv)
    cmd = [sys.executable, "-u"] + (["-m", a.target] if a.module else [a.target]) + a.args
    procs = [subprocess.Popen(cmd, env=child_env(a, r)) for r in range(a.nproc_per_node)]
    interrupted = []
    previous = {s: signal.signal(s, lambda sig, _: interrupted.append(sig)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            if interrupted:
                _stop(procs, a.grace)
                return 128 + interrupted[0]
            codes = [p.poll() for p in procs]
            failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                r, c = failed[0]
                how = f"was killed by signal {-c}" if c < 0 else f"exited with code {c}"
                print(f"minifused.distributed.run: local rank {r} {how}; terminating the other ranks",
                      file=sys.stderr, flush=True)
                _stop(procs, a.grace)
                return 128 - c if c < 0 else c
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.05)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


if __name__ == "__main__":
    sys.exit(main())
