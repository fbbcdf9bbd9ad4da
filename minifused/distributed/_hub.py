"""The TCP rendezvous, which doubles as the CPU backend's transport.

Rank 0 listens on ``MASTER_ADDR:MASTER_PORT``; every other rank connects to it and says
who it is. That star is all the CPU backend needs: a collective sends each rank's value
to rank 0, which combines them in rank order (so every rank gets the same bits) and sends
the result back. The NCCL backend uses it only to hand out NCCL's unique id and for
host-side barriers.

Every wait is bounded: a rank that does not join, answer, or that closed its socket
(it exited or crashed) raises :class:`DistributedError` naming the rank and the
operation within ``timeout`` seconds, instead of hanging.

Messages are pickled, so ``MASTER_ADDR:MASTER_PORT`` must be reachable only by the job's
own processes (a trusted network), as with ``torch.distributed``; the default address is
the loopback interface.
"""
from __future__ import annotations

import pickle
import socket
import struct
import time

import numpy as np

_HEADER = struct.Struct("!Q")


class DistributedError(RuntimeError):
    """A peer failed, left, or did not answer within the timeout."""


class Hub:
    def __init__(self, rank: int, world: int, addr: str, port: int, timeout: float):
        self.rank, self.world, self.timeout = rank, world, float(timeout)
        self.where = f"{addr}:{port}"
        self.peers = {}  # rank -> socket (rank 0: every other rank; others: {0: rank 0})
        if world > 1:
            (self._serve if rank == 0 else self._join)(addr, port)

    # ------------------------------------------------------------ rendezvous
    def _serve(self, addr, port):
        deadline = time.monotonic() + self.timeout
        try:
            listener = socket.create_server((addr, port))
        except OSError as e:
            raise DistributedError(f"init_process_group: rank 0 cannot listen on {self.where}: {e}") from None
        try:
            while len(self.peers) < self.world - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(1, self.world)) - set(self.peers))
                    raise DistributedError(
                        f"init_process_group: rendezvous timed out after {self.timeout:g} s at {self.where}: "
                        f"{len(self.peers) + 1} of {self.world} ranks joined, ranks {missing} did not")
                listener.settimeout(left)
                try:
                    conn, _ = listener.accept()
                except socket.timeout:
                    continue
                self._setup(conn)
                rank, world = self._recv_from(conn, "?", "rendezvous", timeout=max(left, 0.01))
                if world != self.world or not 0 < rank < self.world or rank in self.peers:
                    conn.close()
                    raise DistributedError(
                        f"init_process_group: a process joined {self.where} as rank {rank} of {world}, but "
                        f"this group has world size {self.world} and ranks {sorted(self.peers)} joined already")
                self.peers[rank] = conn
            for r in sorted(self.peers):
                self._send_to(r, "ok", "rendezvous")
        finally:
            listener.close()

    def _join(self, addr, port):
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn = socket.create_connection((addr, port), timeout=max(deadline - time.monotonic(), 0.01))
                break
            except OSError as e:
                if time.monotonic() >= deadline:
                    raise DistributedError(
                        f"init_process_group: rank {self.rank} could not reach rank 0 at {self.where} within "
                        f"{self.timeout:g} s ({e}); is rank 0 running, with the same MASTER_ADDR/MASTER_PORT?"
                    ) from None
                time.sleep(0.05)
        self._setup(conn)
        self.peers[0] = conn
        self._send_to(0, (self.rank, self.world), "rendezvous")
        left = max(deadline - time.monotonic(), 0.01)
        if self._recv(0, "rendezvous (waiting for every rank to join)", timeout=left) != "ok":
            raise DistributedError(f"init_process_group: unexpected answer from rank 0 at {self.where}")

    @staticmethod
    def _setup(conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # ------------------------------------------------------------ messages
    def _send_to(self, rank, obj, what):
        payload = pickle.dumps(obj, protocol=5)
        conn = self.peers[rank]
        conn.settimeout(self.timeout)
        try:
            conn.sendall(_HEADER.pack(len(payload)) + payload)
        except socket.timeout:
            raise DistributedError(f"{what}: timed out after {self.timeout:g} s sending to rank {rank}") from None
        except OSError as e:
            raise DistributedError(f"{what}: rank {rank} is gone ({e}); it exited or crashed") from None

    def _recv(self, rank, what, timeout=None):
        return self._recv_from(self.peers[rank], rank, what, timeout)

    def _recv_from(self, conn, rank, what, timeout=None):
        timeout = self.timeout if timeout is None else timeout
        conn.settimeout(timeout)
        try:
            (n,) = _HEADER.unpack(self._exactly(conn, _HEADER.size, rank, what))
            return pickle.loads(self._exactly(conn, n, rank, what))
        except socket.timeout:
            raise DistributedError(
                f"{what}: rank {self.rank} waited {timeout:g} s for rank {rank} and got nothing (the timeout); "
                f"is that rank stuck, or not calling the same collective?") from None
        except OSError as e:
            raise DistributedError(f"{what}: connection to rank {rank} failed ({e})") from None

    @staticmethod
    def _exactly(conn, n, rank, what):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = conn.recv_into(view[got:])
            if k == 0:
                raise DistributedError(f"{what}: rank {rank} closed its connection (it exited or crashed)")
            got += k
        return buf

    # ------------------------------------------------------------ collectives on host objects
    def _collective(self, kind, what, obj, combine):
        """Every rank's ``obj`` meets at rank 0, which checks that every rank called the same collective
        (``kind``), computes ``combine(values in rank order)`` and sends the result back. A mismatch or a
        failure of ``combine`` is raised on every rank, with rank 0's message."""
        if self.world == 1:
            return combine([obj])
        if self.rank != 0:
            self._send_to(0, (kind, obj), what)
            status, value = self._recv(0, what)
            if status == "error":
                raise DistributedError(value)
            return value
        values, error = [obj], None
        for r in range(1, self.world):
            other_kind, other = self._recv(r, what)
            if other_kind != kind and error is None:
                error = (f"{what}: rank {r} called {other_kind} while rank 0 called {kind}; "
                         f"every rank must call the same collectives in the same order")
            values.append(other)
        if error is None:
            try:
                result = combine(values)
            except DistributedError as e:
                error = str(e)
        reply = ("error", error) if error else ("ok", result)
        for r in range(1, self.world):
            self._send_to(r, reply, what)
        if error:
            raise DistributedError(error)
        return result

    def all_gather(self, obj, what="all_gather"):
        """Every rank's ``obj``, in rank order, on every rank."""
        return self._collective(what, what, obj, list)

    def all_reduce(self, array: np.ndarray, op: str, what="all_reduce") -> np.ndarray:
        """The reduction of every rank's array, in rank order on rank 0 so every rank gets the same bits."""
        def reduce(arrays):
            out = np.array(arrays[0], copy=True)
            for r, other in enumerate(arrays[1:], 1):
                if other.shape != out.shape or other.dtype != out.dtype:
                    raise DistributedError(f"{what}: rank {r} sent shape {other.shape} {other.dtype}, rank 0 has "
                                           f"{out.shape} {out.dtype}; every rank must reduce the same shape")
                _COMBINE[op](out, other, out=out)
            return (out / self.world).astype(out.dtype, copy=False) if op == "avg" else out
        if self.world == 1:
            return array
        return self._collective(f"{what} (op {op})", what, array, reduce)

    def broadcast(self, obj, src: int, what="broadcast"):
        """``src``'s ``obj`` on every rank (relayed through rank 0; the others send only their call)."""
        if self.world == 1:
            return obj
        return self._collective(f"{what} (src {src})", what, obj if self.rank == src else None, lambda values: values[src])

    def barrier(self, what="barrier"):
        self._collective(what, what, None, lambda values: None)

    def close(self):
        for conn in self.peers.values():
            try:
                conn.close()
            except OSError:
                pass
        self.peers.clear()


_COMBINE = {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}

