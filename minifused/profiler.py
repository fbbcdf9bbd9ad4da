"""``torch.profiler`` as ``minifused.profiler`` (and the legacy ``torch.autograd.profiler.profile``): host-timed
ranges, PyTorch's schedule, its ``key_averages().table()`` layout and its Chrome-trace JSON ("traceEvents").

Events are the :class:`record_function` ranges (``ProfilerStep#N`` under a schedule, keyed ``ProfilerStep*`` as
PyTorch's) and each minifused op while a trace records: ``Function.apply`` / ``apply_`` are swapped for timing
wrappers only then and put back exactly afterwards, so code that is not profiled pays nothing. An op's event is
named ``minifused::<its Function class, lowercased>`` (``minifused::matmul``), an in-place one by its op name
(``minifused::add_``); backward nodes are not timed. Times are ``time.perf_counter_ns`` on the host, in
microseconds as PyTorch's; with ``ProfilerActivity.CUDA`` on a usable device each range also records a pair of
timed CUDA events (read at the end of the trace: its device time) and an NVTX range (without a device, a CUDA
activity warns and the host times are recorded). ``record_shapes`` records the ops' input shapes; memory, stacks,
FLOPs and modules are not recorded (those arguments are accepted). One profile runs at a time: starting a second
raises (PyTorch's silently takes over the first one's collection).
"""
from __future__ import annotations

import collections
import enum
import gzip
import json
import os
import threading
import time
import warnings
from contextlib import ContextDecorator
from time import perf_counter_ns as _now

from . import backend
from .autograd.tape import Function

__all__ = ["profile", "schedule", "supported_activities", "tensorboard_trace_handler", "ProfilerAction",
           "ProfilerActivity", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]

_recording = None  # the profile whose trace records now (all record_function reads on entry)
_started = None  # the profile between its start() and stop()


class ProfilerActivity(enum.Enum):
    CPU, XPU, CUDA, HPU, MTIA, PrivateUse1 = 0, 1, 2, 3, 4, 5


class ProfilerAction(enum.Enum):
    NONE, WARMUP, RECORD, RECORD_AND_SAVE, DEVICE_STOPPED = 0, 1, 2, 3, 4


def supported_activities():
    return {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if backend.cuda_available() else set())


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0, skip_first_wait: int = 0):
    """PyTorch's step -> :class:`ProfilerAction` function: skip ``skip_first`` steps, then cycles of ``wait`` (NONE),
    ``warmup`` (WARMUP) and ``active`` steps (RECORD, the last RECORD_AND_SAVE), ``repeat`` times (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(f"minifused.profiler.schedule: invalid profiler schedule arguments. Got wait={wait} "
                             f"(need >= 0), warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} "
                             f"(need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"minifused.profiler.schedule: step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step, cycle = step - skip_first + (wait if skip_first_wait else 0), wait + warmup + active
        if repeat > 0 and step / cycle >= repeat:
            return ProfilerAction.NONE
        mod = step % cycle
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, use_gzip: bool = False,
                              use_python_export: bool = False):
    """An ``on_trace_ready`` handler writing each trace to ``dir_name/<worker>.<time_ns>.pt.trace.json[.gz]``
    (``worker_name`` by default ``<hostname>_<pid>``), as PyTorch's."""
    def handler_fn(prof) -> None:
        nonlocal worker_name
        try:
            os.makedirs(dir_name, exist_ok=True)
        except OSError as e:
            raise RuntimeError("Can't create directory: " + dir_name) from e
        if not worker_name:
            import socket

            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))

    return handler_fn


class record_function(ContextDecorator):  # noqa: N801 - PyTorch's name
    """``with record_function("name"):`` (or as a decorator) times the block as one event of the recording
    profile; with none recording, entering and leaving only read one global."""

    def __init__(self, name: str, args: str | None = None):
        if not isinstance(name, str):
            raise backend.InputTypeError(f"minifused.profiler.record_function: name must be a str, got "
                                         f"{type(name).__name__}")
        self.name, self.args, self._prof = name, args, None

    def _recreate_cm(self):  # a decorated function's calls each get their own range (recursion, threads)
        return record_function(self.name, self.args)

    def __enter__(self):
        prof = _recording
        if prof is not None:
            self._prof, self._cuda = prof, None
            if prof._cuda:  # a timed CUDA event now (and an NVTX range), another at the exit
                from .cuda import Event

                if prof._nvtx is not None:
                    prof._nvtx.RangePush(self.name)
                self._cuda = Event(enable_timing=True), Event(enable_timing=True), prof._nvtx
                self._cuda[0].record()
            self._t0 = _now()
        return self

    def __exit__(self, *exc):
        prof, self._prof = self._prof, None
        if prof is not None:
            t1 = _now()
            if self._cuda:
                self._cuda[1].record()
                if self._cuda[2] is not None:
                    self._cuda[2].RangePop()
            if prof is _recording:
                prof._records.append((self.name, threading.get_native_id(), self._t0, t1, None, True, self._cuda))
        return False


def _format_time(us):
    return f"{us / 1e6:.3f}s" if us >= 1e6 else f"{us / 1e3:.3f}ms" if us >= 1e3 else f"{us:.3f}us"


def _share(us, total):
    return "NaN" if total == 0 else f"{us * 100.0 / total:.2f}%"


class Interval(collections.namedtuple("Interval", "start end")):
    def elapsed_us(self):
        return self.end - self.start


class _Stats:
    """What events and their averages share: the derived times (microseconds) and the fields not recorded."""
    count, cpu_time_total, self_cpu_time_total, device_time_total, self_device_time_total = 0, 0.0, 0.0, 0.0, 0.0
    cpu_memory_usage = self_cpu_memory_usage = device_memory_usage = self_device_memory_usage = flops = 0
    node_id, is_async, is_remote, is_legacy, overload_name, scope, cpu_parent = -1, False, False, False, "", 0, None
    use_device, is_user_annotation, input_shapes, stack = None, False, (), ()
    cpu_time = property(lambda self: self.cpu_time_total / max(self.count, 1))
    device_time = cuda_time = property(lambda self: self.device_time_total / max(self.count, 1))
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cpu_time_str = property(lambda self: _format_time(self.cpu_time))
    cpu_time_total_str = property(lambda self: _format_time(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: _format_time(self.self_cpu_time_total))
    device_time_str = property(lambda self: _format_time(self.device_time))
    device_time_total_str = property(lambda self: _format_time(self.device_time_total))
    self_device_time_total_str = property(lambda self: _format_time(self.self_device_time_total))


class FunctionEvent(_Stats):
    """One recorded range: ``name`` / ``key``, ``time_range`` (us), ``thread``, ``cpu_parent`` / ``cpu_children``;
    its self times leave out its children's."""
    key = property(lambda self: self.name)
    self_cpu_time_total = property(lambda self: self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children))
    self_device_time_total = property(lambda self: max(
        self.device_time_total - sum(c.device_time_total for c in self.cpu_children), 0.0))

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None, device_time_total=0.0,
                 is_user_annotation=False, trace_name=None, use_device=None):
        self.id, self.name, self.thread, self.time_range = id, name, thread, Interval(start_us, end_us)
        self.trace_name, self.input_shapes = trace_name or name, input_shapes or []
        self.is_user_annotation = is_user_annotation
        self.count, self.cpu_time_total, self.device_time_total = 1, end_us - start_us, device_time_total
        self.use_device, self.cpu_children = use_device, []


class FunctionEventAvg(_Stats):
    """The events of one key added up (``count``, the totals); ``cpu_time`` / ``device_time`` their averages."""
    key = None

    def add(self, other):
        if self.key is None:
            self.key, self.input_shapes, self.cpu_parent = other.key, other.input_shapes, other.cpu_parent
            self.use_device, self.is_user_annotation = other.use_device, other.is_user_annotation
        for f in ("count", "cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        return self

    __iadd__ = add


class EventList(list):
    """Events (or their averages) with PyTorch's ``table``, ``key_averages``, ``total_average``,
    ``export_chrome_trace`` and ``self_cpu_time_total``."""

    def __init__(self, events=(), use_device=None, record_shapes=False):
        super().__init__(events)
        self._use_device, self._record_shapes = use_device, record_shapes

    self_cpu_time_total = property(lambda self: sum(e.self_cpu_time_total for e in self))

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        stats = {}
        for e in self:
            key = (e.key, e.is_user_annotation, str(e.input_shapes) if group_by_input_shape else None)
            stats.setdefault(key, FunctionEventAvg()).add(e)
        for avg in stats.values():
            avg.input_shapes = avg.input_shapes if group_by_input_shape else ""
        return EventList(stats.values(), self._use_device, self._record_shapes)

    def total_average(self):
        total = FunctionEventAvg()
        for e in self:
            total.add(e)
        total.key = "Total"
        return total

    def __str__(self):
        return self.table()

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        """PyTorch's summary table: rows in recording order, or by ``sort_by`` (largest first); ``row_limit``
        rows (-1: all); the device columns only when some event has device time."""
        if time_unit not in (None, "s", "ms", "us"):
            raise backend.InputError(f"minifused.profiler table(): time_unit must be 's', 'ms' or 'us', got "
                                     f"{time_unit!r}")
        if not self:
            return ""
        events = list(self)
        if sort_by is not None:
            attr = str(sort_by).replace("cuda", "device").replace("xpu", "device")
            if not isinstance(sort_by, str) or not isinstance(getattr(events[0], attr, None), (int, float)):
                raise AttributeError(f"minifused.profiler table(): unknown sort_by key {sort_by!r}; expected one of "
                                     f"cpu_time, cuda_time, cpu_time_total, cuda_time_total, self_cpu_time_total, "
                                     f"self_cuda_time_total, cpu_memory_usage, self_cpu_memory_usage, count ...")
            events.sort(key=lambda e: getattr(e, attr), reverse=True)
        dev = (self._use_device or "None").upper()
        has_device = any(e.self_device_time_total > 0 for e in events)
        has_shapes = any(e.input_shapes is not None and len(e.input_shapes) > 0 for e in events)
        headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
        headers += [f"Self {dev}", f"Self {dev} %", f"{dev} total", f"{dev} time avg"] * has_device + ["# of Calls"]
        widths = [min(max(len(e.key) for e in events) + 4, max_name_column_width or 10 ** 9)]
        widths += [12] * (len(headers) - 1)
        if has_shapes:
            headers.append("Input Shapes")
            widths.append(min(max(len(str(e.input_shapes)) for e in events) + 4, max_shapes_column_width or 10 ** 9))
        row, sep = "".join(f"{{:>{w}}}  " for w in widths), "".join("-" * w + "  " for w in widths)
        unit = {"s": 1e6, "ms": 1e3, "us": 1.0}.get(time_unit)
        fmt = _format_time if unit is None else lambda us: f"{us / unit:.3f}{time_unit}"
        cpu_sum, dev_sum = sum(e.self_cpu_time_total for e in events), sum(e.self_device_time_total for e in events)
        out = ["=" * (len(sep) - 2), header] if header is not None else []
        if top_level_events_only:
            out += ["=" * (len(sep) - 2), "This report only display top-level ops statistics"]
            events = [e for e in events if e.cpu_parent is None]
        out += [sep, row.format(*headers), sep]
        for e in events[:None if row_limit < 0 else row_limit]:
            name = e.key
            if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
                name = name[:max_name_column_width - 3] + "..."
            values = [name, _share(e.self_cpu_time_total, cpu_sum), fmt(e.self_cpu_time_total),
                      _share(e.cpu_time_total, cpu_sum), fmt(e.cpu_time_total), fmt(e.cpu_time)]
            if has_device:
                values += [fmt(e.self_device_time_total), _share(e.self_device_time_total, dev_sum),
                           fmt(e.device_time_total), fmt(e.device_time)]
            values += [e.count] + [str(e.input_shapes)[:widths[-1]]] * has_shapes
            out.append(row.format(*values))
        out += [sep, f"Self CPU time total: {fmt(cpu_sum)}"] + [f"Self {dev} time total: {fmt(dev_sum)}"] * has_device
        return "".join(s + "\n" for s in out)

    def export_chrome_trace(self, path):
        """The events as a Chrome trace (``chrome://tracing``, Perfetto, TensorBoard): a JSON object whose
        "traceEvents" hold one complete ("X") event per range, ``ts`` / ``dur`` in microseconds (gzip-compressed
        when ``path`` ends in .gz)."""
        pid = os.getpid()
        trace = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}}]
        for i, e in enumerate(sorted(self, key=lambda e: e.time_range.start)):
            args = {"External id": i + 1, **({"Input Dims": e.input_shapes} if self._record_shapes else {})}
            trace.append({"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
                          "name": e.trace_name, "pid": pid, "tid": e.thread, "ts": round(e.time_range.start, 3),
                          "dur": round(e.time_range.elapsed_us(), 3), "args": args})
        doc = {"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms",
               "baseTimeNanoseconds": time.time_ns() - _now(), "traceEvents": trace, "traceName": str(path)}
        with (gzip.open if str(path).endswith(".gz") else open)(path, "wt") as f:
            json.dump(doc, f)


def _timed(apply, inplace):
    """A classmethod timing each call of ``apply`` (``Function.apply``'s function, or ``apply_``'s when
    ``inplace``: its first argument names the op) as an op event."""
    def timed(cls, *args, **kwargs):
        t0 = _now()
        try:
            return apply(cls, *args, **kwargs)
        finally:
            prof = _recording
            if prof is not None:
                name = "minifused::" + (args[0] if inplace else cls.__name__.lower())
                call = args[1:] if inplace else args
                shapes = [list(a.shape) if hasattr(a, "shape") else [] for a in call] if prof.record_shapes else None
                prof._records.append((name, threading.get_native_id(), t0, _now(), shapes, False, None))

    return classmethod(timed)


class profile:
    """``torch.profiler.profile``: a context manager (or ``start()`` / ``stop()``) recording events; ``step()``
    moves ``schedule`` on (without one every step records, and ``on_trace_ready`` runs at ``stop()``)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False, experimental_config=None,
                 execution_trace_observer=None, acc_events=False, use_cuda=None, custom_trace_id_callback=None,
                 post_processing_timeout_s=None):
        acts = supported_activities() if activities is None else {a for item in activities for a in (
            item if isinstance(item, dict) else [item]) if isinstance(a, ProfilerActivity)}
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead", FutureWarning, stacklevel=2)
            acts = acts | {ProfilerActivity.CUDA} if use_cuda else acts - {ProfilerActivity.CUDA}
        if not acts:
            raise AssertionError(f"minifused.profiler.profile: no valid profiler activities found in {activities!r}")
        if ProfilerActivity.CUDA in acts and not backend.cuda_available():
            warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=2)
        self.activities, self.record_shapes, self.acc_events = acts, bool(record_shapes or with_flops), acc_events
        self.profile_memory, self.with_stack, self.with_flops, self.with_modules = (profile_memory, with_stack,
                                                                                  with_flops, with_modules)
        self.schedule, self.record_steps = (schedule, True) if schedule else (lambda step: ProfilerAction.RECORD, False)
        self.on_trace_ready, self.step_num, self.step_rec_fn = on_trace_ready, 0, None
        self.current_action = self._checked(self.schedule(0))
        self._cuda = ProfilerActivity.CUDA in acts and backend.cuda_available()
        self._use_device = "cuda" if self._cuda else None
        self._records, self._events, self._saved, self._nvtx = [], None, None, None

    @staticmethod
    def _checked(action):
        if action == ProfilerAction.DEVICE_STOPPED:
            raise ValueError("ProfilerAction.DEVICE_STOPPED is set internally by the profiler and must not be "
                             "returned by a user-provided schedule")
        return action

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        global _started
        if _started is not None:
            raise RuntimeError("minifused.profiler.profile: another profiler is already running; profiles do not nest")
        _started = self
        try:
            self._transit(ProfilerAction.NONE, self.current_action)
            self._step_range()
        except BaseException:
            self._release()
            raise

    def stop(self):
        if _started is not self:  # (never started, or stopped already)
            return
        try:
            self._step_range(close=True)
            self._transit(self.current_action, None)
        finally:
            self._release()

    def _release(self):  # (also after a handler or schedule that raised: nothing stays swapped in)
        global _started
        if self._saved is not None:
            self._stop_trace()
        _started = None

    def step(self):
        """The next step begins: its action comes from the schedule."""
        self._step_range(close=True)
        prev, self.current_action = self.current_action, self._checked(self.schedule(self.step_num + 1))
        self.step_num += 1
        self._transit(prev, self.current_action)
        self._step_range()

    def _step_range(self, close=False):
        if close and self.step_rec_fn is not None:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        elif not close and self.record_steps:
            self.step_rec_fn = record_function(f"ProfilerStep#{self.step_num}").__enter__()

    def _transit(self, prev, now):
        """PyTorch's action transitions: a trace records from RECORD to the end of RECORD_AND_SAVE (or stop())."""
        A, recording = ProfilerAction, (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if prev in recording and (now not in recording or prev == A.RECORD_AND_SAVE):
            if prev == A.RECORD and now is not None:
                warnings.warn(f"Incorrect schedule: RECORD followed by {now.name}")
            self._stop_trace()
            if prev == A.RECORD_AND_SAVE or now is None:
                self._trace_ready()
        elif prev == A.WARMUP and now not in recording + (A.WARMUP,):
            if now is not None:
                warnings.warn("Incorrect schedule: WARMUP followed by NONE")
            self._start_trace()
            self._stop_trace()
        if now in recording and (prev not in recording or prev == A.RECORD_AND_SAVE):
            self._start_trace()

    def _start_trace(self):
        global _recording
        if not self.acc_events:
            self._records = []
        d = Function.__dict__
        self._saved = d["apply"], d["apply_"]
        Function.apply, Function.apply_ = _timed(d["apply"].__func__, False), _timed(d["apply_"].__func__, True)
        if self._cuda:
            from cupy.cuda import nvtx

            self._nvtx = nvtx if nvtx.available else None
        _recording = self

    def _stop_trace(self):
        global _recording
        _recording = None
        Function.apply, Function.apply_ = self._saved
        self._saved, self._events = None, self._build()

    def _trace_ready(self):
        if self.on_trace_ready:
            self.on_trace_ready(self)

    def _build(self):
        """The records as events, in start order, each with its parent and children (nesting on one thread)."""
        records = sorted(enumerate(self._records), key=lambda r: (r[1][2], -r[1][3], -r[0]))
        events, stacks = EventList((), self._use_device, self.record_shapes), {}
        for _, (name, tid, t0, t1, shapes, user, cuda) in records:
            if cuda:
                cuda[1].synchronize()
            key = "ProfilerStep*" if user and name.startswith("ProfilerStep#") else name
            e = FunctionEvent(len(events) + 1, key, tid, t0 / 1e3, t1 / 1e3, shapes,
                              cuda[0].elapsed_time(cuda[1]) * 1e3 if cuda else 0.0, user, name, self._use_device)
            stack = stacks.setdefault(tid, [])
            while stack and not (stack[-1].time_range.start <= e.time_range.start <= e.time_range.end
                                 <= stack[-1].time_range.end):
                stack.pop()
            if stack:
                e.cpu_parent = stack[-1]
                stack[-1].cpu_children.append(e)
            stack.append(e)
            events.append(e)
        return events

    def _results(self, what):
        if self._events is None:
            raise AssertionError(f"minifused.profiler.profile: profiler must be initialized before {what}")
        return self._events

    def events(self):
        """The recorded (not aggregated) events of the last trace: an :class:`EventList`."""
        return self._results("accessing events")

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """The events averaged per name (and input shapes): an :class:`EventList` of :class:`FunctionEventAvg`."""
        return self._results("getting key averages").key_averages(group_by_input_shape)

    def export_chrome_trace(self, path, use_python_export=False):
        self._results("exporting a trace").export_chrome_trace(path)


class _AutogradProfile(profile):
    """``torch.autograd.profiler.profile``: the legacy spelling (no schedule); ``table()`` lists every event."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None,
                 post_processing_timeout_s=None, activity_filters=None):
        self.enabled, self.entered = enabled, False
        if not enabled:
            return
        if use_cuda:
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use ``use_device = 'cuda'`` "
                          "instead.", FutureWarning, stacklevel=2)
        cuda = use_cuda or use_device == "cuda"
        with warnings.catch_warnings():  # (its own warning below, pointing at this caller)
            warnings.simplefilter("ignore")
            super().__init__(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * cuda,
                             record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                             with_flops=with_flops, with_modules=with_modules, acc_events=acc_events)
        if cuda and not self._cuda:
            warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=2)
        self._events = EventList()

    def __enter__(self):
        if not self.enabled:
            return None
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        super().__enter__()
        self.entered = True
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.stop()
        return False

    function_events = property(lambda self: self._events)
    self_cpu_time_total = property(lambda self: self._events.self_cpu_time_total)

    def total_average(self):
        return self._events.total_average()

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        return self._events.table(sort_by, row_limit, max_src_column_width, max_name_column_width,
                                  max_shapes_column_width, header, top_level_events_only)

    def __str__(self):
        return str(self._events)


_AutogradProfile.__name__ = _AutogradProfile.__qualname__ = "profile"
