"""Module state dicts in PyTorch's protocol: ``_save_to_state_dict`` / ``_load_from_state_dict`` overrides, extra
state, the four state-dict hooks; and ``set_submodule``, ``type``, ``to_empty``. The expected keys, values and
messages are PyTorch 2.14's for the same calls."""
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.nn as nn


class Renamed(nn.Module):
    """A module whose old checkpoints called ``scale`` ``gain``: its override renames the key before loading."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 3)
        self.scale = nn.Parameter(mf.ones(3))

    def _load_from_state_dict(self, sd, prefix, meta, strict, missing, unexpected, errors):
        if prefix + "gain" in sd:
            sd[prefix + "scale"] = sd.pop(prefix + "gain")
        super()._load_from_state_dict(sd, prefix, meta, strict, missing, unexpected, errors)


class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(mf.zeros(2))
        self.count = 0

    def get_extra_state(self):
        return {"count": self.count}

    def set_extra_state(self, state):
        self.count = state["count"]


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(mf.zeros(2))


def test_overridden_load_renames_old_keys_and_extra_state_round_trips():
    root = nn.Sequential(Renamed(), Counted())
    sd = root.state_dict()
    assert list(sd) == ["0.scale", "0.lin.weight", "0.lin.bias", "1.w", "1._extra_state"]
    assert sd["1._extra_state"] == {"count": 0}
    old = {k.replace("0.scale", "0.gain"): v for k, v in sd.items()}
    old["0.gain"] = mf.full((3,), 5.0)
    old["1._extra_state"] = {"count": 7}
    assert repr(root.load_state_dict(old)) == "<All keys matched successfully>"
    np.testing.assert_array_equal(root[0].scale.numpy(), [5.0, 5.0, 5.0])
    assert root[1].count == 7
    assert "0.gain" in old  # the caller's dict is not edited


def test_extra_state_missing_or_unexpected():
    root = nn.Sequential(Renamed(), Counted())
    sd = {k: v for k, v in root.state_dict().items() if not k.endswith("_extra_state")}
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "1._extra_state". '):
        root.load_state_dict(sd)
    result = root.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["1._extra_state"] and result.unexpected_keys == []
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "_extra_state". '):
        Plain().load_state_dict({"w": mf.zeros(2), "_extra_state": 3})


def test_a_failed_load_changes_nothing_extra_state_included():
    m = nn.Sequential(Counted(), nn.Linear(2, 2))
    before = m[1].weight.numpy().copy()
    bad = {"0.w": mf.ones(2), "0._extra_state": {"count": 3}, "1.weight": mf.ones(2, 2), "1.bias": mf.ones(3)}
    with pytest.raises(RuntimeError, match="size mismatch for 1.bias"):
        m.load_state_dict(bad)
    assert m[0].count == 0
    np.testing.assert_array_equal(m[0].w.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(m[1].weight.numpy(), before)


def test_state_dict_hooks_run_edit_and_remove():
    m, calls = Plain(), []
    pre = m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: calls.append(("pre", prefix, keep_vars)))

    def post(mod, sd, prefix, meta):
        calls.append(("post", prefix, sorted(meta)))
        sd[prefix + "added"] = mf.ones(1)

    post_handle = m.register_state_dict_post_hook(post)
    sd = m.state_dict(prefix="p.", keep_vars=True)
    assert list(sd) == ["p.w", "p.added"] and sd["p.w"] is m.w
    assert calls == [("pre", "p.", True), ("post", "p.", ["version"])]
    pre.remove()
    post_handle.remove()
    assert list(m.state_dict()) == ["w"] and len(calls) == 2
    with m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: {}):
        with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
            m.state_dict()
    with m._register_state_dict_hook(lambda mod, sd, prefix, meta: {"x": 1}):  # the old form may replace it
        assert m.state_dict() == {"x": 1}
    assert list(m.state_dict()) == ["w"]


def test_load_hooks_rename_keys_and_forgive_unexpected_ones():
    m, calls = Plain(), []

    def pre(mod, sd, prefix, meta, strict, missing, unexpected, errors):
        calls.append(("pre", prefix, strict, sorted(sd)))
        if prefix + "v" in sd:
            sd[prefix + "w"] = sd.pop(prefix + "v")

    m.register_load_state_dict_pre_hook(pre)
    assert repr(m.load_state_dict({"v": mf.full((2,), 3.0)})) == "<All keys matched successfully>"
    np.testing.assert_array_equal(m.w.numpy(), [3.0, 3.0])
    assert calls[-1] == ("pre", "", True, ["v"])

    def post(mod, keys):
        calls.append(("post", list(keys.missing_keys), list(keys.unexpected_keys)))
        keys.unexpected_keys.clear()

    m.register_load_state_dict_post_hook(post)
    m.load_state_dict({"w": mf.full((2,), 4.0), "zzz": mf.ones(1)})  # strict, yet the hook cleared the problem
    np.testing.assert_array_equal(m.w.numpy(), [4.0, 4.0])
    assert calls[-1] == ("post", [], ["zzz"])


def test_positional_state_dict_arguments_are_pytorchs_deprecated_order():
    m, dest = Plain(), {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = m.state_dict(dest, "q.")
    assert out is dest and list(dest) == ["q.w"]
    assert [w.category for w in caught] == [FutureWarning]


def test_one_element_vector_loads_into_a_0d_buffer():
    m = nn.Module()
    m.register_buffer("s", mf.tensor(1.0))
    m.load_state_dict({"s": mf.tensor([5.0])})
    assert m.s.shape == () and m.s.item() == 5.0


def test_set_submodule():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU()))
    net.set_submodule("1.0", nn.Tanh())
    assert isinstance(net[1][0], nn.Tanh)
    net.set_submodule("1.new", nn.ReLU())
    assert list(dict(net.named_modules())) == ["", "0", "1", "1.0", "1.new"]
    with pytest.raises(AttributeError, match="Sequential has no attribute `9`"):
        net.set_submodule("1.9", nn.Tanh(), strict=True)
    with pytest.raises(ValueError, match="Cannot set the submodule without a target name!"):
        net.set_submodule("", nn.Tanh())
    with pytest.raises(AttributeError, match="`weight` is not an nn.Module"):
        net.set_submodule("0.weight", nn.Tanh())
    with pytest.raises(ValueError, match="`module` is not an nn.Module"):
        net.set_submodule("1.0", 3)
    assert net._get_name() == "Sequential"


def test_type_casts_every_parameter_and_buffer():
    bn = nn.BatchNorm1d(3)
    assert bn.type(mf.float64) is bn
    assert {str(t.dtype) for t in (bn.weight, bn.running_mean, bn.num_batches_tracked)} == {"float64"}


def test_to_empty_keeps_shapes_parameters_and_requires_grad():
    lin = nn.Linear(2, 3)
    lin.weight.grad = mf.ones(3, 2)
    w = lin.weight
    assert lin.to_empty(device="cpu") is lin
    assert lin.weight is w and isinstance(w, nn.Parameter) and w.requires_grad and w.shape == (3, 2)
    assert w.grad is None and w.device.type == "cpu"


def test_optimizer_state_dict_hooks():
    p = nn.Parameter(mf.ones(2))
    opt = mf.optim.SGD([p], lr=0.1, momentum=0.9)  # SGD overrides state_dict: the hooks still run once
    p.grad = mf.ones(2)
    opt.step()
    calls = []
    pre = opt.register_state_dict_pre_hook(lambda o: calls.append("pre"))

    def post(o, sd):
        calls.append("post")
        sd["param_groups"][0]["note"] = "x"

    opt.register_state_dict_post_hook(post)
    opt.register_state_dict_post_hook(lambda o, sd: calls.append("first"), prepend=True)
    sd = opt.state_dict()
    assert calls == ["pre", "first", "post"] and sd["param_groups"][0]["note"] == "x"
    assert sorted(sd["state"][0]) == ["momentum_buffer"]
    pre.remove()
    calls.clear()
    opt.state_dict()
    assert calls == ["first", "post"]

    def load_pre(o, sd):
        calls.append("load_pre")
        return {**sd, "param_groups": [dict(sd["param_groups"][0], lr=0.5)]}

    opt.register_load_state_dict_pre_hook(load_pre)
    opt.register_load_state_dict_post_hook(lambda o: calls.append(("load_post", o.param_groups[0]["lr"])))
    opt.load_state_dict(sd)
    assert calls[-2:] == ["load_pre", ("load_post", 0.5)]
    assert opt.param_groups[0]["lr"] == 0.5 and sd["param_groups"][0]["lr"] == 0.1
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), [1.0, 1.0])
