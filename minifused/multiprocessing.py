"""``torch.multiprocessing``: Python's multiprocessing under PyTorch's module name (its names re-exported), and
PyTorch's ``spawn`` / ``start_processes``: ``fn(i, *args)`` run in ``nprocs`` new processes, the first failure
raised in the parent (:class:`ProcessRaisedException` with the child's traceback, or
:class:`ProcessExitedException` for a process that died without one) after the others are stopped.

Tensors cross to other processes by value (pickled), as any Python object: minifused has no shared-memory tensors
(PyTorch's ``share_memory_``), so workers that must see each other's updates use ``minifused.distributed``."""
from __future__ import annotations

import multiprocessing as _mp
import multiprocessing.connection as _connection
import os
import tempfile
import traceback
from multiprocessing import *  # noqa: F401,F403 - Process, Queue, Pool, get_context, set_start_method ...

__all__ = [*_mp.__all__, "spawn", "start_processes", "ProcessContext", "ProcessException", "ProcessRaisedException",
           "ProcessExitedException"]


class ProcessException(Exception):
    """A spawned process failed: ``error_index`` is its index, ``error_pid`` its process id."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg, self.error_index, self.error_pid = msg, error_index, error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """The process's function raised: the message carries its traceback."""


class ProcessExitedException(ProcessException):
    """The process ended with a non-zero exit code (or a signal: ``signal_name``) and no Python exception."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name)


def _run(fn, index, args, error_path):
    """The child's body: ``fn(index, *args)``; an exception's traceback goes to ``error_path`` (a file: a pipe
    could fill up before the parent reads it) and the exit code is 1."""
    try:
        fn(index, *args)
    except KeyboardInterrupt:
        pass  # the parent stopping the others after a failure
    except Exception:  # noqa: BLE001 - any error of the user's function is reported to the parent
        with open(error_path, "w") as f:
            f.write(traceback.format_exc())
        raise SystemExit(1) from None


class ProcessContext:
    """The spawned processes (``processes``, ``pids()``) and :meth:`join`."""

    def __init__(self, processes, error_paths):
        self.processes, self.error_paths = processes, error_paths
        self._running = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None, grace_period=None):
        """Wait up to ``timeout`` seconds (None: until one ends) for processes to end; True once all have ended
        well. The first that failed has the others terminated (after ``grace_period`` seconds, if given) and its
        error raised."""
        if not self._running:
            return True
        for sentinel in _connection.wait(list(self._running), timeout=timeout):
            index = self._running.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                self._stop_others(grace_period)
                raise self._error(index, process)
        return not self._running

    def _stop_others(self, grace_period):
        alive = [p for p in self.processes if p.is_alive()]
        if grace_period is not None:
            _connection.wait([p.sentinel for p in alive], timeout=grace_period)
        for p in alive:
            if p.is_alive():
                p.terminate()
        for p in alive:
            p.join()
        self._running.clear()

    def _error(self, index, process):
        path = self.error_paths[index]
        if os.path.getsize(path):
            with open(path) as f:
                return ProcessRaisedException(f"\n\n-- Process {index} terminated with the following error:\n"
                                              f"{f.read()}", index, process.pid)
        code = process.exitcode
        if code < 0:
            import signal

            name = signal.Signals(-code).name
            return ProcessExitedException(f"process {index} terminated with signal {name}", index, process.pid,
                                          code, name)
        return ProcessExitedException(f"process {index} terminated with exit code {code}", index, process.pid, code)

    def __del__(self):
        for path in getattr(self, "error_paths", ()):
            try:
                os.unlink(path)
            except OSError:
                pass


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """``fn(i, *args)`` for i in range(nprocs), each in a new process of ``start_method``; with ``join``, waits for
    all (raising the first failure), else returns the :class:`ProcessContext`."""
    if not isinstance(nprocs, int) or isinstance(nprocs, bool) or nprocs < 1:
        raise ValueError(f"start_processes: nprocs must be a positive int, got {nprocs!r}")
    ctx = _mp.get_context(start_method)
    processes, error_paths = [], []
    for i in range(nprocs):
        fd, path = tempfile.mkstemp(prefix="minifused-spawn-")
        os.close(fd)
        process = ctx.Process(target=_run, args=(fn, i, tuple(args), path), daemon=daemon)
        process.start()
        processes.append(process)
        error_paths.append(path)
    context = ProcessContext(processes, error_paths)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """``torch.multiprocessing.spawn``: :func:`start_processes` (with the 'spawn' start method by default)."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
