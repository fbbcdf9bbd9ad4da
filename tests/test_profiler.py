"""minifused.profiler against PyTorch 2.13's torch.profiler: the import paths, record_function's host times, op
events (and Function.apply put back exactly), schedule()'s actions and the steps that reach on_trace_ready, the
key_averages() table (layout, sorting, row_limit: the expected strings are PyTorch's for the same events), the
Chrome-trace JSON, the legacy torch.autograd.profiler.profile, and the errors."""
import glob
import gzip
import importlib
import json
import os
import re
import time
import warnings

import pytest

import minifused as mf
from minifused import backend
from minifused.autograd.tape import Function
from minifused.profiler import (EventList, FunctionEvent, ProfilerAction, ProfilerActivity, profile,
                                record_function, schedule, tensorboard_trace_handler)
from tolerances import cpu


def test_import_paths_and_enums():
    import minifused.autograd.profiler as ap

    assert importlib.import_module("minifused.profiler") is mf.profiler
    assert mf.autograd.profiler is ap and ap.record_function is mf.profiler.record_function
    assert ap.profile.__name__ == "profile" and issubclass(ap.profile, mf.profiler.profile)
    assert [(a.name, a.value) for a in (ProfilerActivity.CPU, ProfilerActivity.CUDA)] == [("CPU", 0), ("CUDA", 2)]
    assert [a.name for a in ProfilerAction] == ["NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE", "DEVICE_STOPPED"]


def test_record_function_times_its_range_and_nesting():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("outer"):
            time.sleep(0.01)
            with record_function("inner"):
                time.sleep(0.002)
    outer, inner = prof.events()
    assert (outer.name, inner.name, inner.cpu_parent, outer.cpu_children) == ("outer", "inner", outer, [inner])
    assert outer.cpu_time_total >= 12000 and inner.cpu_time_total >= 2000  # microseconds
    assert outer.time_range.start <= inner.time_range.start <= inner.time_range.end <= outer.time_range.end
    assert outer.self_cpu_time_total == pytest.approx(outer.cpu_time_total - inner.cpu_time_total)
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["outer"].count == 1 and avg["outer"].cpu_time_total == outer.cpu_time_total
    assert prof.key_averages().self_cpu_time_total == pytest.approx(outer.cpu_time_total)


def test_op_events_count_the_calls_and_apply_is_put_back():
    saved = Function.__dict__["apply"], Function.__dict__["apply_"]
    x = cpu([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    with profile(record_shapes=True) as prof:
        for _ in range(3):
            y = (x @ x).relu()
        y.detach().add_(1.0)
        assert Function.__dict__["apply"] is not saved[0]
    assert (Function.__dict__["apply"], Function.__dict__["apply_"]) == saved
    assert Function.__dict__["apply"] is saved[0] and Function.__dict__["apply_"] is saved[1]
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts == {"minifused::matmul": 3, "minifused::relu": 3, "minifused::add_": 1}
    by_shape = {(e.key, str(e.input_shapes)): e.count for e in prof.key_averages(group_by_input_shape=True)}
    assert by_shape[("minifused::matmul", "[[2, 2], [2, 2]]")] == 3
    with pytest.raises(ZeroDivisionError):  # a block that raises leaves the original methods too
        with profile():
            1 / 0
    assert Function.__dict__["apply"] is saved[0] and Function.__dict__["apply_"] is saved[1]


def test_record_function_without_a_profile_and_as_a_decorator():
    with record_function("nobody listens") as rf:
        pass
    assert rf._prof is None and mf.profiler._recording is None

    @record_function("fib")
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    with profile() as prof:
        assert fib(4) == 3
    assert {e.key: e.count for e in prof.key_averages()} == {"fib": 9}  # fib(4) makes 9 calls
    with pytest.raises(TypeError, match=r"record_function: name must be a str, got int"):
        record_function(3)


def test_schedule_actions_are_pytorchs():
    expected = {  # [s(i).name for i in range(14)] with PyTorch 2.13
        (1, 1, 2, 0, 0): "N W R S N W R S N W R S N W",
        (1, 1, 2, 2, 0): "N W R S N W R S N N N N N N",
        (0, 0, 1, 0, 0): "S S S S S S S S S S S S S S",
        (2, 1, 3, 1, 2): "N N N N W R R S N N N N N N",
        (1, 0, 1, 2, 1): "N N S N S N N N N N N N N N"}
    letter = {"NONE": "N", "WARMUP": "W", "RECORD": "R", "RECORD_AND_SAVE": "S"}
    for (wait, warmup, active, repeat, skip_first), actions in expected.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (warmup=0 warns, as PyTorch's)
            s = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
        assert " ".join(letter[s(i).name] for i in range(14)) == actions
    for bad in (dict(wait=-1, warmup=1, active=2), dict(wait=1, warmup=1, active=0),
                dict(wait=0, warmup=1, active=1, repeat=-1), dict(wait=0, warmup=1, active=1, skip_first=-1)):
        with pytest.raises(AssertionError, match=r"schedule: invalid profiler schedule arguments"):
            schedule(**bad)
    with pytest.raises(TypeError):
        schedule(1, 1, 1)
    with pytest.warns(UserWarning, match="warmup"):
        schedule(wait=0, warmup=0, active=1)


def test_steps_reach_on_trace_ready_as_pytorchs():
    calls = []

    def handler(p):
        calls.append((p.step_num, sorted({e.name for e in p.events()})))

    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2), on_trace_ready=handler) as prof:
        for i in range(10):
            with record_function(f"it{i}"):
                pass
            prof.step()
    assert calls == [(4, ["ProfilerStep*", "it2", "it3"]), (8, ["ProfilerStep*", "it6", "it7"])]
    calls.clear()
    with profile(on_trace_ready=handler) as prof:  # no schedule: every step records, the handler runs at stop()
        with record_function("a"):
            pass
        prof.step()
        with record_function("b"):
            pass
    assert calls == [(1, ["a", "b"])]
    with pytest.raises(ValueError, match="DEVICE_STOPPED"):
        profile(schedule=lambda step: ProfilerAction.DEVICE_STOPPED)


def _tree():
    """train_step [0, 5000] us around two matmuls [100, 1100], [1200, 3200] and x [3500, 3750]."""
    events = [FunctionEvent(1, "train_step", 1, 0, 5000), FunctionEvent(2, "minifused::matmul", 1, 100, 1100),
              FunctionEvent(3, "minifused::matmul", 1, 1200, 3200), FunctionEvent(4, "x", 1, 3500, 3750)]
    for child in events[1:]:
        events[0].cpu_children.append(child)
        child.cpu_parent = events[0]
    return EventList(events)


SEP = "---------------------  " + "------------  " * 6
HEAD = "                 Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls  "
STEP = "           train_step        35.00%       1.750ms       100.00%       5.000ms       5.000ms             1  "
MM = "    minifused::matmul        60.00%       3.000ms        60.00%       3.000ms       1.500ms             2  "
X = "                    x         5.00%     250.000us         5.00%     250.000us     250.000us             1  "


def test_table_is_pytorchs_layout():
    # PyTorch's EventList.table() for the same four events (torch.autograd.profiler_util.FunctionEvent)
    events = _tree()
    total = "Self CPU time total: 5.000ms\n"
    assert events.key_averages().table() == "\n".join([SEP, HEAD, SEP, STEP, MM, X, SEP, total])
    assert events.key_averages().table(sort_by="self_cpu_time_total", row_limit=2) == "\n".join(
        [SEP, HEAD, SEP, MM, STEP, SEP, total])
    assert events.key_averages().table(row_limit=0) == "\n".join([SEP, HEAD, SEP, SEP, total])
    by_total = events.table(sort_by="cpu_time_total").splitlines()
    assert [row.split()[0] for row in by_total[3:7]] == ["train_step", "minifused::matmul", "minifused::matmul", "x"]
    assert by_total[4].split()[4] == "2.000ms" and by_total[5].split()[4] == "1.000ms"
    top = events.key_averages().table(top_level_events_only=True, header="H").splitlines()
    assert top[:4] == ["=" * 105, "H", "=" * 105, "This report only display top-level ops statistics"]
    assert top[7] == STEP and top[8] == SEP
    assert EventList().table() == ""
    with pytest.raises(AttributeError, match=r"table\(\): unknown sort_by key 'foo'"):
        events.key_averages().table(sort_by="foo")


def test_table_device_columns_only_with_device_time():
    events = EventList([FunctionEvent(1, "fwd", 1, 0, 2000, device_time_total=1500.0, use_device="cuda")], "cuda")
    lines = events.table().splitlines()
    assert [c.strip() for c in re.split(r"\s{2,}", lines[1].strip())] == [
        "Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA", "Self CUDA %",
        "CUDA total", "CUDA time avg", "# of Calls"]
    assert lines[3].split()[6:10] == ["1.500ms", "100.00%", "1.500ms", "1.500ms"]
    assert lines[-1] == "Self CUDA time total: 1.500ms"
    assert "CUDA" not in _tree().table()


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                time.sleep(0.001)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    ranges = {e["name"]: e for e in doc["traceEvents"] if e["ph"] == "X"}
    assert doc["displayTimeUnit"] == "ms" and set(ranges) == {"outer", "inner"}
    outer, inner = ranges["outer"], ranges["inner"]
    assert outer["cat"] == "user_annotation" and outer["pid"] == os.getpid() and inner["dur"] >= 1000
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3
    assert outer["dur"] == pytest.approx(prof.events()[0].cpu_time_total, abs=1e-3)
    handler = tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w0", use_gzip=True)
    with profile(schedule=schedule(wait=0, warmup=1, active=1), on_trace_ready=handler) as prof:
        for i in range(4):
            with record_function(f"it{i}"):
                pass
            prof.step()
    files = sorted(glob.glob(str(tmp_path / "tb" / "*")))
    assert len(files) == 2 and all(re.fullmatch(r"w0\.\d+\.pt\.trace\.json\.gz", os.path.basename(f)) for f in files)
    names = {e["name"] for f in files for e in json.loads(gzip.open(f, "rt").read())["traceEvents"] if e["ph"] == "X"}
    assert names == {"ProfilerStep#1", "it1", "ProfilerStep#3", "it3"}


def test_errors_and_nesting():
    with pytest.raises(AssertionError, match="profile: no valid profiler activities"):
        profile(activities=[])
    with pytest.raises(AssertionError, match="before getting key averages"):
        profile().key_averages()
    saved = Function.__dict__["apply"]
    with profile() as prof:
        with pytest.raises(RuntimeError, match="profile: another profiler is already running"):
            profile().start()
    assert Function.__dict__["apply"] is saved and mf.profiler._started is None
    prof.stop()  # stopped already: nothing to do (the original methods stay)
    assert Function.__dict__["apply"] is saved
    if not backend.cuda_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])


def test_legacy_autograd_profile():
    ap = mf.autograd.profiler
    with ap.profile(enabled=False) as off:
        pass
    assert off is None
    with ap.profile() as prof:
        for _ in range(2):
            with ap.record_function("step"):
                time.sleep(0.001)
    rows = [line.split()[0] for line in prof.table().splitlines()[3:-2]]
    assert rows == ["step", "step"]  # every event, as PyTorch's legacy table
    assert [(e.key, e.count) for e in prof.key_averages()] == [("step", 2)]
    assert prof.self_cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in prof.function_events))
    assert prof.total_average().key == "Total" and prof.total_average().count == 2
    with pytest.raises(RuntimeError, match="not reentrant"):
        with prof:
            pass
    assert ap.profile().key_averages().table() == ""
    if not backend.cuda_available():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ap.profile(use_cuda=True)
        assert [(w.category, str(w.message)[:26]) for w in caught] == [
            (FutureWarning, "The attribute `use_cuda` w"), (UserWarning, "CUDA is not available, dis")]


@pytest.mark.gpu
def test_cuda_range_has_device_time():
    x = mf.randn(1024, 1024, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("mm"):
            for _ in range(4):
                x = x @ x / 1024
    (avg,) = [e for e in prof.key_averages() if e.key == "mm"]
    assert avg.device_time_total > 0 and "Self CUDA" in prof.key_averages().table()
