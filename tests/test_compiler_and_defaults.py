"""Small PyTorch APIs: the ``torch.compiler`` namespace (queries False, decorators returning what they decorate),
the deprecated ``set_default_tensor_type``, ``get/set_deterministic_debug_mode`` (tied to
``use_deterministic_algorithms`` as in PyTorch) and ``is_storage``."""
import operator
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import backend
from minifused.toplevel import legacy
from tolerances import cpu


# ---------------------------------------------------------------- torch.compiler
def test_compiler_is_reachable_by_every_spelling():
    import minifused.compiler as by_path
    from minifused import compiler as by_name

    assert by_path is by_name is mf.compiler
    assert mf.compiler.is_compiling() is False
    assert mf.compiler.is_dynamo_compiling() is False and mf.compiler.is_exporting() is False


def test_compiler_decorators_return_what_they_decorate():
    def f(x):
        return x * 2

    def g(x):
        return x + 1

    c = mf.compiler
    assert c.disable(f) is f and c.disable()(f) is f and c.disable(recursive=False, reason="eager only")(f) is f
    assert c.allow_in_graph(f) is f and c.allow_in_graph([f, g]) == [f, g] and c.allow_in_graph((g,)) == [g]
    assert c.assume_constant_result(f) is f
    assert c.nested_compile_region(f) is f and c.nested_compile_region(max_reuse_entries=2)(f) is f
    assert c.reset() is None and c.cudagraph_mark_step_begin() is None
    m = mf.nn.Linear(2, 2)
    assert c.compile(m) is m and c.compile(mode="max-autotune")(f) is f
    # decorated, the functions still compute their own values
    x = cpu([1.5, -2.0], dtype=mf.float64)
    np.testing.assert_array_equal(c.disable(f)(x).numpy(), np.array([3.0, -4.0]))


def test_substitute_in_graph_calls_the_original_function():
    """As in PyTorch's eager mode: the decorated stand-in is only traced, calls run the original."""
    @mf.compiler.substitute_in_graph(operator.indexOf)
    def index_of(a, b, /):
        return -1

    assert index_of([1, 2, 3, 4, 5], 3) == 2 and index_of.__name__ == "index_of"


def test_list_backends():
    assert mf.compiler.list_backends() == ["cudagraphs", "inductor"]
    assert mf.compiler.list_backends(exclude_tags=None) == ["aot_eager", "cudagraphs", "eager", "inductor"]
    assert mf.compiler.list_backends(exclude_tags=("debug",)) == ["cudagraphs", "inductor"]


def test_compiler_bad_input():
    with pytest.raises(TypeError, match="compiler.disable: fn must be callable, got int"):
        mf.compiler.disable(5)
    with pytest.raises(TypeError, match="allow_in_graph: fn must be callable"):
        mf.compiler.allow_in_graph([len, 5])
    with pytest.raises(TypeError, match="substitute_in_graph expects a function but got <class 'int'>"):
        mf.compiler.substitute_in_graph(5)
    with pytest.raises(TypeError, match="expects a function but got <class 'str'>"):
        mf.compiler.substitute_in_graph(len)("len")
    with pytest.raises(TypeError, match="exclude_tags"):
        mf.compiler.list_backends(exclude_tags=5)


# ---------------------------------------------------------------- set_default_tensor_type
@pytest.fixture
def restore_defaults(monkeypatch):
    """The default dtype float32 again afterwards, warnings issued every time, no cuda type's device recorded."""
    monkeypatch.setattr(legacy, "_replaced_device", [])
    was_always = mf.is_warn_always_enabled()
    mf.set_warn_always(True)
    yield
    mf.set_warn_always(was_always)
    mf.set_default_dtype(mf.float32)


@pytest.mark.parametrize("t, dtype", [(mf.DoubleTensor, mf.float64), ("torch.DoubleTensor", mf.float64),
                                      ("torch.HalfTensor", mf.float16), ("minifused.BFloat16Tensor", mf.bfloat16),
                                      ("torch.FloatTensor", mf.float32)])
def test_set_default_tensor_type_sets_the_default_dtype(t, dtype, restore_defaults):
    device = mf.get_default_device()
    with pytest.warns(UserWarning, match=r"torch.set_default_tensor_type\(\) is deprecated as of PyTorch 2.1"):
        mf.set_default_tensor_type(t)
    assert mf.get_default_dtype() == dtype and mf.get_default_device() == device
    x = mf.tensor([1.5, -2.25], device="cpu")
    assert x.dtype == dtype and mf.zeros(2, device="cpu").dtype == dtype
    np.testing.assert_array_equal(x.numpy().astype(np.float64), [1.5, -2.25])
    assert mf.tensor([1, 2], device="cpu").dtype == mf.int64


def test_set_default_tensor_type_warns_once_per_process(monkeypatch):
    monkeypatch.setattr(backend, "_warned", set())
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            mf.set_default_tensor_type("torch.DoubleTensor")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mf.set_default_tensor_type("torch.FloatTensor")  # no second warning
    finally:
        mf.set_default_dtype(mf.float32)


@pytest.mark.parametrize("bad, error, match", [
    (mf.LongTensor, TypeError, "only floating-point types are supported as the default type, got minifused"),
    ("torch.IntTensor", TypeError, "only floating-point types are supported as the default type, got torch"),
    (5, TypeError, "invalid type object: only floating-point types"),
    (mf.float64, TypeError, "invalid type object"),
    ("torch.Tensor", TypeError, "invalid type object"),
    ("torch.Foo", AttributeError, "has no attribute 'Foo'"),
    ("float", ModuleNotFoundError, "No module named 'float'"),
])
def test_set_default_tensor_type_bad_input(bad, error, match, restore_defaults):
    with pytest.raises(error, match=match), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mf.set_default_tensor_type(bad)
    assert mf.get_default_dtype() == mf.float32


def test_set_default_tensor_type_cuda_types(monkeypatch, restore_defaults):
    """A cuda type needs a usable CUDA device; with one it also makes 'cuda' the default device, and a cpu type
    afterwards restores the setting it replaced (here the tests' 'cpu')."""
    monkeypatch.setattr(backend, "cuda_available", lambda: False)
    with pytest.raises(TypeError, match="type torch.cuda.FloatTensor not available"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mf.set_default_tensor_type("torch.cuda.FloatTensor")
    chosen = []
    monkeypatch.setattr(backend, "cuda_available", lambda: True)
    monkeypatch.setattr(mf.toplevel, "set_default_device", chosen.append)
    monkeypatch.setenv("MINIFUSED_DEVICE", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mf.set_default_tensor_type("torch.cuda.DoubleTensor")
        assert chosen == ["cuda"] and mf.get_default_dtype() == mf.float64
        mf.set_default_tensor_type("torch.cuda.FloatTensor")
        assert chosen == ["cuda", "cuda"] and mf.get_default_dtype() == mf.float32
        mf.set_default_tensor_type(mf.DoubleTensor)
        assert chosen == ["cuda", "cuda", "cpu"] and mf.get_default_dtype() == mf.float64
        mf.set_default_tensor_type("torch.FloatTensor")  # no cuda type to undo: the device stays
        assert chosen == ["cuda", "cuda", "cpu"]


# ---------------------------------------------------------------- deterministic debug mode, is_storage
@pytest.fixture
def restore_deterministic():
    yield
    mf.use_deterministic_algorithms(False)


@pytest.mark.parametrize("mode, value, on, warn_only", [("default", 0, False, False), ("warn", 1, True, True),
                                                        ("error", 2, True, False), (0, 0, False, False),
                                                        (1, 1, True, True), (2, 2, True, False),
                                                        (True, 1, True, True)])
def test_deterministic_debug_mode_is_use_deterministic_algorithms(mode, value, on, warn_only, restore_deterministic):
    mf.use_deterministic_algorithms(True)  # a state to change from
    mf.set_deterministic_debug_mode(mode)
    assert mf.get_deterministic_debug_mode() == value
    assert mf.are_deterministic_algorithms_enabled() is on
    assert mf.is_deterministic_algorithms_warn_only_enabled() is warn_only


def test_deterministic_debug_mode_reads_use_deterministic_algorithms(restore_deterministic):
    assert mf.get_deterministic_debug_mode() == 0
    mf.use_deterministic_algorithms(True, warn_only=True)
    assert mf.get_deterministic_debug_mode() == 1
    mf.use_deterministic_algorithms(True)
    assert mf.get_deterministic_debug_mode() == 2
    mf.use_deterministic_algorithms(False, warn_only=True)
    assert mf.get_deterministic_debug_mode() == 0


@pytest.mark.parametrize("bad, error, match", [
    (1.0, TypeError, "debug_mode must be str or int, but got float"),
    (None, TypeError, "debug_mode must be str or int"),
    ("WARN", RuntimeError, "expected one of `default`, `warn`, `error`, but got WARN"),
    (3, RuntimeError, "expected 0, 1, or 2, but got 3"),
    (-1, RuntimeError, "expected 0, 1, or 2, but got -1"),
])
def test_deterministic_debug_mode_bad_input(bad, error, match, restore_deterministic):
    with pytest.raises(error, match=match):
        mf.set_deterministic_debug_mode(bad)
    assert mf.get_deterministic_debug_mode() == 0


def test_is_storage_is_false():
    for obj in (cpu([1.0]), mf.nn.Parameter(cpu([1.0])), [1, 2], None, np.zeros(2)):
        assert mf.is_storage(obj) is False


def test_compile_takes_pytorchs_keywords():
    """torch.compile's keywords (PyTorch 2.13's name / recompile_limit / isolate_recompiles / shapes_spec among them)
    are accepted; the model comes back as it is."""
    def f(x):
        return x + 1

    assert mf.compile(f, name="step", recompile_limit=4, isolate_recompiles=True, shapes_spec=None, mode="max-autotune",
                      fullgraph=True, dynamic=False) is f
    assert mf.compiler.compile(f, name="step") is f
