"""PyTorch's most used names, on minifused: each name of tests/data/torch_names.txt must exist with `torch`
replaced by `minifused`, and smoke-run. tests/ported/smoke_tensor.py and smoke_nn.py hold, per name, a small
call as training code writes it (classes constructed and used, functions called on small tensors, methods
called on a tensor); the same table runs under PyTorch itself (the gpu test), so every call in it is PyTorch's
API. The smoke calls run with minifused's default device set to the CPU. A name without a smoke call only has
to exist; ``EXISTING_ONLY`` says which those may be."""
from pathlib import Path

import pytest

import minifused
from minifused import backend
from ported.smoke_nn import nn_table
from ported.smoke_tensor import resolve, tensor_table

NAMES_FILE = Path(__file__).parent / "data" / "torch_names.txt"
THRESHOLD = 0.98
EXISTING_ONLY = set()  # every name has a smoke call today


def load_names():
    lines = (line.strip() for line in NAMES_FILE.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def smoke_table(m):
    """{torch name: a call of it through the module ``m`` (torch or minifused)}."""
    return {**tensor_table(m), **nn_table(m)}


def check(m, names, table):
    """{name: why it fails} for the names that do not exist on ``m`` or whose smoke call raises."""
    failures = {}
    for name in names:
        try:
            resolve(m, name.split(".", 1)[1])
        except AttributeError as e:
            failures[name] = f"missing ({e})"
            continue
        if name in table:
            try:
                table[name]()
            except Exception as e:  # noqa: BLE001 - any error is this name's failure, reported below
                first_line = str(e).splitlines()[0] if str(e) else ""
                failures[name] = f"{type(e).__name__}: {first_line}"[:160]
    return failures


def _report(failures):
    return "\n".join(f"  {name}: {why}" for name, why in sorted(failures.items()))


@pytest.fixture
def cpu_default(monkeypatch):
    """minifused's default device is the CPU for the test, as PyTorch's is."""
    monkeypatch.setenv("MINIFUSED_DEVICE", "cpu")
    backend._env_default_device.cache_clear()
    yield
    monkeypatch.undo()
    backend._env_default_device.cache_clear()


def test_name_list_is_well_formed():
    names = load_names()
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert all(n.startswith("torch.") for n in names)
    assert 300 <= len(names) <= 450
    table = smoke_table(minifused)
    assert not set(table) - set(names), sorted(set(table) - set(names))
    assert set(names) - set(table) == EXISTING_ONLY, sorted(set(names) - set(table) - EXISTING_ONLY)


def test_at_least_98_percent_exist_and_smoke_run(cpu_default):
    names = load_names()
    failures = check(minifused, names, smoke_table(minifused))
    passed = 1 - len(failures) / len(names)
    assert passed >= THRESHOLD, (f"{passed:.1%} of {len(names)} PyTorch names exist and smoke-run on minifused "
                                 f"(need {THRESHOLD:.0%}); failing:\n{_report(failures)}")


def test_every_name_exists():
    missing = sorted(check(minifused, load_names(), {}))
    assert not missing, f"{len(missing)} PyTorch names missing on minifused:\n  " + "\n  ".join(missing)


@pytest.mark.gpu
def test_smoke_table_is_pytorch_api(torch):
    """Every smoke call runs under PyTorch itself, so the table asks minifused for PyTorch's API only."""
    failures = check(torch, load_names(), smoke_table(torch))
    assert not failures, _report(failures)
