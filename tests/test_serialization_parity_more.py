"""save / load and state dicts against PyTorch's documented behaviour: what torch.save keeps (shared memory, strides,
Parameters, object identity) and what load_state_dict reports and refuses."""
import io

import numpy as np
import pytest

import minifused as mf
from minifused import backend, nn


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


def _round_trip(obj, **load_kw):
    buf = io.BytesIO()
    mf.save(obj, buf)
    buf.seek(0)
    return mf.load(buf, **load_kw)


# ------------------------------------------------------------ what torch.save keeps of tensors
def test_a_tensor_saved_twice_loads_as_one_object():
    a = mf.arange(4.0)
    d = _round_trip({"a": a, "b": a, "c": [a]})
    assert d["a"] is d["b"] is d["c"][0]


def test_views_share_memory_after_a_load():
    """torch.save keeps storages: a view and its base (a Parameter and its state_dict entry) still share."""
    a = mf.arange(6.0)
    d = _round_trip({"a": a, "v": a[2:5], "bits": a.view(mf.int32)})
    d["a"][3] = 100.0
    assert d["v"].tolist() == [2.0, 100.0, 4.0] and d["v"].storage_offset() == 2
    assert d["bits"][3].item() == np.float32(100.0).view(np.int32)
    m = nn.Linear(2, 2)
    d = _round_trip({"sd": m.state_dict(), "w": m.weight})
    assert d["sd"]["weight"].data_ptr() == d["w"].data_ptr()


def test_strides_are_kept():
    t = _round_trip(mf.arange(6.0).reshape(2, 3).t())
    assert t.stride() == (1, 3) and not t.is_contiguous() and t.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    x = mf.randn(2, 3, 4, 5).to(memory_format=mf.channels_last)
    y = _round_trip(x)
    assert y.stride() == (60, 1, 15, 3) and y.is_contiguous(memory_format=mf.channels_last)
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    e = _round_trip(mf.arange(3.0).expand(4, 3))
    assert e.stride() == (0, 1) and e.tolist() == [[0.0, 1.0, 2.0]] * 4


def test_a_slice_of_a_large_tensor_stores_only_what_is_saved():
    buf = io.BytesIO()
    big = mf.zeros(1_000_000)
    mf.save([big[:2], big[-2:]], buf)
    assert len(buf.getvalue()) < 10_000


def test_parameters_load_as_parameters():
    p, q, t = _round_trip([nn.Parameter(mf.ones(2)), nn.Parameter(mf.ones(2), requires_grad=False),
                           mf.ones(2, requires_grad=True)])
    assert type(p) is nn.Parameter and p.requires_grad
    assert type(q) is nn.Parameter and not q.requires_grad
    assert type(t) is mf.Tensor and t.requires_grad and t.is_leaf
    sd = _round_trip(nn.Linear(2, 2).state_dict(keep_vars=True))
    assert [type(v) for v in sd.values()] == [nn.Parameter, nn.Parameter]
    sd = _round_trip(nn.Linear(2, 2).state_dict())
    assert [type(v) for v in sd.values()] == [mf.Tensor, mf.Tensor]


def test_builtins_that_torch_load_takes_back_under_weights_only():
    from collections import Counter

    obj = {"s": {1, 2}, "c": 1 + 2j, "b": b"ab", "ba": bytearray(b"x"), "n": Counter("aab"),
           "size": mf.ones(2, 3).shape, (1, "a"): "tuple key", 1.5: "float key", None: "none key", True: "bool key"}
    got = _round_trip(obj)
    assert got == obj and list(got) == list(obj)
    assert [type(got[k]) for k in ("s", "c", "b", "ba", "n", "size")] == [set, complex, bytes, bytearray, Counter,
                                                                          mf.Size]
    with pytest.raises(TypeError, match="dict keys must be"):
        mf.save({mf.ones(1): 1}, io.BytesIO())


# ------------------------------------------------------------ load_state_dict
def test_load_result_is_pytorchs_named_tuple():
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    r = m.load_state_dict({"0.weight": mf.zeros(3, 2), "x": mf.ones(1)}, strict=False)
    assert type(r).__name__ == "_IncompatibleKeys" and r._fields == ("missing_keys", "unexpected_keys")
    assert r._asdict() == {"missing_keys": ["0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"],
                           "unexpected_keys": ["x"]}
    assert str(r) == repr(r) and repr(m.load_state_dict(m.state_dict())) == "<All keys matched successfully>"


def test_load_pre_hooks_see_the_state_dicts_metadata():
    m = nn.Linear(2, 2)
    seen = []
    m.register_load_state_dict_pre_hook(lambda module, sd, *rest: seen.append(getattr(sd, "_metadata", None)))
    m.load_state_dict(m.state_dict())
    assert seen == [{"": {"version": 1}}]


# ------------------------------------------------------------ load's arguments
def test_map_location_callable_returning_none_loads_where_saved():
    """torch.load: a callable's None falls back to the default behaviour, as if map_location was not given."""
    seen = []
    t = _round_trip(mf.ones(2), map_location=lambda storage, location: seen.append(location))
    assert seen == ["cpu"] and str(t.device) == "cpu" and t.tolist() == [1.0, 1.0]


def test_unpickler_keywords_are_accepted_and_others_refused():
    assert _round_trip({"a": 1}, encoding="latin1", errors="strict", fix_imports=True) == {"a": 1}
    with pytest.raises(TypeError, match="unexpected keyword argument.*'foo'"):
        _round_trip(1, foo=1)


# ------------------------------------------------------------ nn.utils.vector_to_parameters
def test_vector_to_parameters_makes_the_parameters_views_of_vec():
    """PyTorch's: ``param.data = vec[i:j].view_as(param).data``: same Parameter objects, vec's memory and dtype,
    extra elements of vec unused."""
    m = nn.Linear(2, 3)
    weight = m.weight
    vec = mf.arange(12, dtype=mf.float64)
    nn.utils.vector_to_parameters(vec, m.parameters())
    assert m.weight is weight and type(weight) is nn.Parameter and weight.requires_grad
    assert weight.dtype == mf.float64 and weight.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert m.bias.tolist() == [6.0, 7.0, 8.0]
    vec[0] = 50.0
    assert weight[0, 0].item() == 50.0
    with pytest.raises(ValueError, match="vec has 8 elements but the parameters hold 9"):
        nn.utils.vector_to_parameters(mf.zeros(8), m.parameters())


# ------------------------------------------------------------ weights_only
class _Config:  # (module level: pickle finds classes by name)
    def __init__(self, lr, weight):
        self.lr, self.weight = lr, weight


def test_other_objects_are_pickled_and_need_weights_only_false_or_an_allowlist():
    """torch.save pickles any object; torch.load (weights_only=True by default) refuses classes it does not allow,
    naming them, and takes them with weights_only=False or after add_safe_globals."""
    import pickle

    obj = {"cfg": _Config(0.1, nn.Parameter(mf.ones(2))), "s": slice(1, 2), "bf": _Config(0, mf.ones(2).bfloat16())}
    buf = io.BytesIO()
    mf.save(obj, buf)
    for weights_only in (None, True):
        buf.seek(0)
        with pytest.raises(pickle.UnpicklingError, match="(?s)Weights only load failed.*GLOBAL .*_Config"):
            mf.load(buf, weights_only=weights_only)
    buf.seek(0)
    got = mf.load(buf, weights_only=False)
    assert got["cfg"].lr == 0.1 and type(got["cfg"].weight) is nn.Parameter and got["s"] == slice(1, 2)
    with mf.serialization.safe_globals([_Config, slice]):
        buf.seek(0)
        got = mf.load(buf)
    assert got["cfg"].weight.requires_grad and got["cfg"].weight.tolist() == [1.0, 1.0]
    assert got["bf"].weight.dtype == mf.bfloat16  # (the allowlist's own tensors' dtypes need no listing)
    assert mf.serialization.get_safe_globals() == []


def test_map_location_reaches_the_tensors_of_a_pickled_model():
    """A whole model in a checkpoint (torch.save pickles it): torch.load's map_location applies to its tensors too,
    a callable called once per tensor storage with the saved location, as PyTorch's."""
    torch = pytest.importorskip("torch")
    calls = {}

    def record(framework):
        def map_location(storage, location):
            calls.setdefault(framework, []).append(location)
            return storage
        return map_location

    for framework, lib in (("torch", torch), ("minifused", mf)):
        buf = io.BytesIO()
        lib.save({"model": lib.nn.Linear(3, 2).half(), "epoch": 1}, buf)
        buf.seek(0)
        got = lib.load(buf, map_location=record(framework), weights_only=False)
        assert got["model"].weight.dtype == lib.float16 and str(got["model"].bias.device) == "cpu"
        assert isinstance(got["model"].weight, lib.nn.Parameter)
    assert calls["minifused"] == calls["torch"] == ["cpu", "cpu"]
    if not backend.cuda_available():  # a cuda target without a usable device is refused, as PyTorch's
        buf.seek(0)
        with pytest.raises(RuntimeError, match="no CUDA device is usable"):
            mf.load(buf, map_location="cuda", weights_only=False)


def test_a_view_reaching_outside_its_stored_bytes_is_a_damaged_file(tmp_path):
    import json
    import zipfile

    path = tmp_path / "c.ckpt"
    a = mf.arange(6.0)
    mf.save([a, a[1:3]], path)
    with zipfile.ZipFile(path) as z:
        arrays = {k[:-4]: np.load(io.BytesIO(z.read(k))) for k in z.namelist()}
    tree = json.loads(arrays["__tree__"].tobytes())
    tree["obj"][1]["view"]["offset"] = 20  # 2 floats from byte 20 of 24
    arrays["__tree__"] = np.frombuffer(json.dumps(tree).encode(), np.uint8)
    np.savez(path.with_suffix(".npz"), **arrays)
    with pytest.raises(mf.serialization.CheckpointError, match="reaches outside its 24 bytes"):
        mf.load(path.with_suffix(".npz"))
