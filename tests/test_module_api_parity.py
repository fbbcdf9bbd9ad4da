"""PyTorch parity of the nn.Module API: ``load_state_dict(assign=True)``, forward hooks with ``always_call`` (and
the global module hooks, the hook tables by handle id), ``share_memory``, ``consume_prefix_in_state_dict_if_present``,
ParameterList / ParameterDict as PyTorch's (dict methods, non-tensor values, reprs), ``get_parameter``,
``Sequential(input=...)``, ``requires_grad_``, ``dir``, ``named_modules(memo=)`` and the module repr. Expected values
are float64 NumPy or by hand."""
import copy
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import minifused as mf
from minifused import nn
from minifused.nn import module as nn_module

from tolerances import cpu

W = np.array([[0.5, -1.0], [2.0, 0.25]])
B = np.array([0.1, -0.3])


def _linear(bias=True):
    lin = nn.Linear(2, 2, bias=bias, device="cpu")
    with mf.no_grad():
        lin.weight.copy_(cpu(W, dtype=mf.float32))
        if bias:
            lin.bias.copy_(cpu(B, dtype=mf.float32))
    return lin


# ---------------------------------------------------------------- load_state_dict(assign=True)
def test_assign_puts_the_state_dicts_tensors_in_place():
    """The parameters become the state dict's tensors: their dtype kept (no cast to the module's float32), their
    memory shared, wrapped as Parameters keeping the old ones' requires_grad; a Parameter given is itself used."""
    m = _linear()
    m.weight.requires_grad_(False)
    weight = cpu(np.ones((2, 2)), dtype=mf.float64)
    bias = nn.Parameter(cpu(np.ones(2), dtype=mf.float64))
    m.load_state_dict({"weight": weight, "bias": bias}, assign=True)
    assert isinstance(m.weight, nn.Parameter) and m.weight.dtype == np.float64 and not m.weight.requires_grad
    assert m.bias is bias and m.bias.requires_grad
    weight.fill_(7.0)  # shared memory
    bias.data.fill_(-2.0)
    x = np.array([[1.0, 2.0]])
    np.testing.assert_array_equal(m(cpu(x, dtype=mf.float64)).detach().numpy(), x @ np.full((2, 2), 7.0).T - 2.0)


def test_assign_keeps_buffers_as_the_same_objects_and_copying_still_casts():
    bn = nn.BatchNorm1d(2, device="cpu")
    mean = cpu([1.0, 2.0], dtype=mf.float64)
    count = mf.tensor(5, dtype=mf.int64, device="cpu")
    sd = dict(bn.state_dict(), running_mean=mean, num_batches_tracked=count)
    bn.load_state_dict(sd, assign=True)
    assert bn.running_mean is mean and bn.num_batches_tracked is count
    np.testing.assert_array_equal(bn.running_mean.numpy(), [1.0, 2.0])
    m = _linear()  # without assign: copied into the float32 parameters, as before
    m.load_state_dict({"weight": cpu(np.ones((2, 2))), "bias": cpu(np.zeros(2))})
    assert m.weight.dtype == np.float32 and m.weight.numpy().tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_assign_a_one_element_vector_to_a_scalar_and_an_array():
    class Scalar(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(mf.tensor(1.0, device="cpu"))

    s = Scalar()
    s.load_state_dict({"p": cpu([5.0])}, assign=True)
    assert s.p.shape == () and float(s.p.item()) == 5.0 and s.p.requires_grad
    m = _linear()
    array = np.full((2, 2), 3.0)
    m.load_state_dict({"weight": array, "bias": np.zeros(2)}, assign=True)
    array[0, 0] = 4.0  # the array's memory is the parameter's
    assert m.weight.numpy().tolist() == [[4.0, 3.0], [3.0, 3.0]] and m.weight.dtype == np.float64


def test_assign_checks_everything_before_replacing_anything():
    m = _linear()
    weight, bias = m.weight, m.bias
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bias"'):
        m.load_state_dict({"weight": cpu(np.zeros((2, 2)))}, assign=True)
    with pytest.raises(RuntimeError, match="only floating-point tensors can require gradients, got dtype int64"):
        m.load_state_dict({"weight": mf.ones(2, 2, dtype=mf.int64, device="cpu"), "bias": cpu(B)}, assign=True)
    assert m.weight is weight and m.bias is bias
    np.testing.assert_array_equal(m.weight.detach().numpy(), W.astype(np.float32))
    result = m.load_state_dict({"weight": cpu(np.zeros((2, 2)))}, assign=True, strict=False)
    assert result.missing_keys == ["bias"] and m.weight.numpy().tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert m.bias is bias


def test_assign_is_told_to_load_from_state_dict():
    seen = []

    class Spy(nn.Linear):
        def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args):
            seen.append(local_metadata.get("assign_to_params_buffers", False))
            super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)

    src = _linear().state_dict()
    Spy(2, 2).load_state_dict(src)
    Spy(2, 2).load_state_dict(src, assign=True)
    assert seen == [False, True]


# ---------------------------------------------------------------- forward hooks
def test_always_call_hooks_run_when_a_pre_hook_raises():
    m, log = _linear(), []
    m.register_forward_hook(lambda mod, args, out: log.append(("plain", out)), always_call=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: log.append(("kwargs", kwargs, out)), always_call=True,
                            with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: log.append("never"))

    def bad(mod, args):
        raise ValueError("pre-hook failed")

    m.register_forward_pre_hook(bad)
    with pytest.raises(ValueError, match="pre-hook failed"):
        m(cpu([[1.0, 2.0]]))
    assert log == [("plain", None), ("kwargs", {}, None)]


def test_always_call_hooks_after_a_raising_forward_hook_see_the_output_so_far():
    m, log = _linear(bias=False), []
    m.register_forward_hook(lambda mod, args, out: out * 10.0)
    m.register_forward_hook(lambda mod, args, out: log.append(("A", out.numpy().tolist())), always_call=True)

    def bad(mod, args, out):
        raise KeyError("hook failed")

    m.register_forward_hook(bad)
    m.register_forward_hook(lambda mod, args, out: log.append(("B", out.numpy().tolist())), always_call=True)
    with pytest.raises(KeyError, match="hook failed"):
        m(cpu([[1.0, 2.0]]))
    expected = (10.0 * np.array([[1.0, 2.0]]) @ W.T).tolist()  # A ran in order; B after the error
    assert log == [("A", expected), ("B", expected)]


def test_a_raising_always_call_hook_is_a_warning_and_the_first_error_is_raised():
    m, log = _linear(), []
    m.register_forward_pre_hook(lambda mod, args: (cpu(np.ones((1, 5))),))  # forward then fails on the shape
    m.register_forward_hook(lambda *a: 1 / 0, always_call=True)
    m.register_forward_hook(lambda mod, args, out: log.append((tuple(args[0].shape), out)), always_call=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError):
            m(cpu([[1.0, 2.0]]))
    assert log == [((1, 5), None)]  # the args the pre-hook gave
    assert [str(w.message) for w in caught] == ["module forward hook with ``always_call=True`` raised an exception "
                                                "that was silenced as another error was raised in forward: division "
                                                "by zero"]


def test_hook_tables_by_handle_id():
    m = _linear()
    assert len(m._forward_hooks) == len(m._forward_pre_hooks) == len(m._backward_hooks) == 0

    def hook(mod, args, out):
        return out + 1.0

    handle = m.register_forward_hook(hook)
    m.register_forward_pre_hook(lambda mod, args: None)
    m.register_full_backward_hook(lambda mod, gi, go: None)
    assert list(m._forward_hooks.items()) == [(handle.id, hook)]
    assert len(m._forward_pre_hooks) == 1 and len(m._backward_hooks) == 1 and len(m._backward_pre_hooks) == 0
    x = np.array([[1.0, -1.0]])
    np.testing.assert_allclose(m(cpu(x, dtype=mf.float32)).detach().numpy(), x @ W.T + B + 1.0, rtol=1e-6)
    m._forward_hooks.clear()
    m._forward_pre_hooks = OrderedDict()
    del m._backward_hooks[next(iter(m._backward_hooks))]
    assert len(m._forward_hooks) == 0 and m.__dict__.get("_call_hooks") is None  # back on the fast path
    np.testing.assert_allclose(m(cpu(x, dtype=mf.float32)).detach().numpy(), x @ W.T + B, rtol=1e-6)
    m._forward_hooks[12345] = hook  # as PyTorch code restores a hook
    np.testing.assert_allclose(m(cpu(x, dtype=mf.float32)).detach().numpy(), x @ W.T + B + 1.0, rtol=1e-6)


def test_global_module_hooks_run_before_each_modules_own():
    lin, log = _linear(), []
    lin.register_forward_pre_hook(lambda mod, args: log.append("own pre"))
    lin.register_forward_hook(lambda mod, args, out: log.append("own"))
    pre = nn_module.register_module_forward_pre_hook(lambda mod, args: log.append(("pre", type(mod).__name__)))
    post = nn_module.register_module_forward_hook(
        lambda mod, args, out: log.append((type(mod).__name__, out.numpy().tolist())))
    x = np.array([[1.0, -3.0]])
    try:
        out = nn.Sequential(lin, nn.ReLU())(cpu(x, dtype=mf.float32)).numpy()
    finally:
        pre.remove()
        post.remove()
    y = (x @ W.T + B).astype(np.float32)
    assert [e if isinstance(e, str) else e[:2] if e[0] == "pre" else e[0] for e in log] == [
        ("pre", "Sequential"), ("pre", "Linear"), "own pre", "Linear", "own", ("pre", "ReLU"), "ReLU", "Sequential"]
    np.testing.assert_allclose(log[3][1], y, rtol=1e-6)  # the Linear alone: the ReLU was not fused into it
    np.testing.assert_allclose(out, np.maximum(y, 0), rtol=1e-6)
    log.clear()
    nn.ReLU()(cpu(x, dtype=mf.float32))
    assert log == []  # removed


def test_global_full_backward_hooks_run_before_each_modules_own():
    # PyTorch's nn.modules.module.register_module_full_backward_(pre_)hook: on every module's backward, the global
    # hooks first (they may replace the gradients); ReLU's grad_input is grad_output where its input is positive
    from minifused.nn.modules.module import register_module_full_backward_hook, register_module_full_backward_pre_hook

    lin, log = _linear(), []
    lin.register_full_backward_pre_hook(lambda mod, grad_output: log.append("own pre"))
    lin.register_full_backward_hook(lambda mod, grad_input, grad_output: log.append("own"))
    pre = register_module_full_backward_pre_hook(lambda mod, grad_output: log.append(("pre", type(mod).__name__)))
    post = register_module_full_backward_hook(
        lambda mod, grad_input, grad_output: log.append(type(mod).__name__) or (grad_input[0] * 10,))
    x = cpu(np.array([[1.0, -3.0]]), dtype=mf.float32, requires_grad=True)
    try:
        nn.Sequential(lin, nn.ReLU())(x).sum().backward()
    finally:
        pre.remove()
        post.remove()
    assert log == [("pre", "Sequential"), ("pre", "ReLU"), "ReLU", ("pre", "Linear"), "own pre", "Linear", "own",
                   "Sequential"]
    relu_mask = (np.array([[1.0, -3.0]]) @ W.T + B > 0).astype(np.float64)  # (both positive here)
    np.testing.assert_allclose(x.grad.numpy(), 1000 * (relu_mask @ W), rtol=1e-6)  # x10 at each of three modules
    log.clear()
    lin(x).sum().backward()
    assert log == ["own pre", "own"]  # removed


def test_global_registration_hooks_see_and_may_replace_what_modules_register():
    # PyTorch's nn.modules.module.register_module_{buffer,module,parameter}_registration_hook: hook(module, name,
    # value) on every registration (a parameter only when not None), whose return value, if any, is registered
    from minifused.nn.modules.module import (register_module_buffer_registration_hook,
                                             register_module_module_registration_hook,
                                             register_module_parameter_registration_hook)

    log = []
    handles = [
        register_module_buffer_registration_hook(lambda m, n, b: log.append(("b", n, b if b is None else b.tolist()))),
        register_module_parameter_registration_hook(lambda m, n, p: log.append(("p", n))),
        register_module_module_registration_hook(lambda m, n, s: log.append(("m", n)) or (
            nn.Tanh() if isinstance(s, nn.ReLU) else None))]
    try:
        m = nn.Module()
        m.register_buffer("x", mf.ones(1))
        m.x = mf.zeros(1)
        m.x = None
        m.p = nn.Parameter(mf.ones(1))
        m.p = None
        m.register_parameter("q", None)
        m.act = nn.ReLU()
        m.add_module("none", None)
    finally:
        for h in handles:
            h.remove()
    assert log == [("b", "x", [1.0]), ("b", "x", [0.0]), ("b", "x", None), ("p", "p"), ("m", "act"), ("m", "none")]
    assert isinstance(m.act, nn.Tanh)  # replaced by the hook
    log.clear()
    nn.Sequential(nn.ReLU())
    assert log == []  # removed


# ---------------------------------------------------------------- share_memory, consume_prefix
def test_share_memory_returns_the_module_unchanged():
    m = _linear()
    assert m.share_memory() is m
    np.testing.assert_array_equal(m.weight.detach().numpy(), W.astype(np.float32))


def test_consume_prefix_in_state_dict_if_present():
    from minifused.nn.modules.utils import consume_prefix_in_state_dict_if_present  # (PyTorch's path)
    from minifused.nn.modules.module import register_module_forward_hook, RemovableHandle  # noqa: F401

    class StateDict(OrderedDict):
        pass

    sd = StateDict([("module.weight", 1), ("module.sub.bias", 2), ("other", 3)])
    sd._metadata = OrderedDict([("", {"version": 1}), ("module", {"version": 2}), ("module.sub", {"version": 3})])
    consume_prefix_in_state_dict_if_present(sd, "module.")
    assert sd == {"weight": 1, "sub.bias": 2, "other": 3}
    assert dict(sd._metadata) == {"": {"version": 2}, "sub": {"version": 3}}
    plain = {"a": 1}
    consume_prefix_in_state_dict_if_present(plain, "module.")
    assert plain == {"a": 1}


# ---------------------------------------------------------------- ParameterDict / ParameterList
def _p(*values):
    return nn.Parameter(cpu(list(values)))


def test_parameter_dict_dict_methods():
    a, b = _p(1.0), _p(2.0, 3.0)
    d = nn.ParameterDict({"b": b, "a": a})
    assert list(reversed(d)) == ["b", "a"]
    c = d.copy()
    assert type(c) is nn.ParameterDict and list(c.items()) == [("a", a), ("b", b)]
    e = d.setdefault("e", _p(4.0))
    assert d.setdefault("a") is a and d.setdefault("z") is None and list(d) == ["a", "b", "e", "z"]
    assert d.popitem() == ("z", None) and list(d) == ["a", "b", "e"] and float(d["e"].item()) == float(e.item())
    f = d.fromkeys(["x", "y"], a)
    assert type(f) is nn.ParameterDict and list(f) == ["x", "y"] and f["x"] is a and f["y"] is a
    merged = d | {"q": _p(5.0)}
    assert list(merged) == ["a", "b", "e", "q"] and list(d) == ["a", "b", "e"]
    assert type(OrderedDict(q=a) | d) is OrderedDict
    d |= {"w": _p(6.0)}
    assert list(d) == ["a", "b", "e", "w"] and [n for n, _ in d.named_parameters()] == ["a", "b", "e", "w"]
    d.clear()
    assert len(d) == 0 and list(d.named_parameters()) == [] and list(d.state_dict()) == []
    with pytest.raises(KeyError):
        nn.ParameterDict().popitem()
    with pytest.raises(RuntimeError, match="should not be called"):
        d()


def test_parameter_dict_and_list_keep_non_tensor_values_as_pytorch():
    d = nn.ParameterDict({"b": _p(1.0), "a": cpu([0.0, 0.0], dtype=mf.float64), "c": 3, "d": None})
    assert list(d) == ["a", "b", "c", "d"] and d["c"] == 3 and d["d"] is None
    assert isinstance(d["a"], nn.Parameter) and [n for n, _ in d.named_parameters()] == ["a", "b"]
    assert list(d.state_dict()) == ["a", "b"]
    with pytest.raises(TypeError, match="cannot assign int as parameter 'b'"):
        d["b"] = 3
    d["c"] = _p(7.0)  # a value replaced by a parameter registers it
    assert [n for n, _ in d.named_parameters()] == ["a", "b", "c"] and d.pop("c").numpy().tolist() == [7.0]
    lst = nn.ParameterList([_p(1.0), cpu([0.0, 0.0, 0.0], dtype=mf.float64), 5, "s", None])
    assert len(lst) == 5 and lst[2] == 5 and lst[3] == "s" and lst[-1] is None
    assert isinstance(lst[1], nn.Parameter) and lst[1].requires_grad
    assert [n for n, _ in lst.named_parameters()] == ["0", "1"] and list(lst.state_dict()) == ["0", "1"]
    lst += [_p(2.0)]
    assert lst.__iadd__([_p(3.0)]) is lst and len(lst) == 7 and [float(p.item()) for p in lst[5:]] == [2.0, 3.0]
    with pytest.raises(TypeError, match="cannot assign int as parameter '0'"):
        lst[0] = 3
    lst[2] = _p(9.0)
    assert [n for n, _ in lst.named_parameters()] == ["0", "1", "5", "6", "2"] and float(lst[2].item()) == 9.0
    assert "0" not in dir(lst)
    with pytest.raises(IndexError, match="out of range"):
        lst[7]
    for clone in (copy.deepcopy(lst), pickle.loads(pickle.dumps(lst))):  # values and order kept
        assert _plain(clone) == [[1.0], [0.0, 0.0, 0.0], [9.0], "s", None, [2.0], [3.0]]
    for clone in (copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
        assert list(clone) == ["a", "b", "d"] and _plain(clone.values()) == [[0.0, 0.0], [1.0], None]


def _plain(values):
    return [v.detach().numpy().tolist() if isinstance(v, mf.Tensor) else v for v in values]


def test_parameter_list_and_dict_reprs():
    lst = nn.ParameterList([_p(1.0, 2.0), cpu(np.zeros((2, 3)), dtype=mf.float64), 5])
    assert repr(lst) == ("ParameterList(\n"
                         "    (0): Parameter containing: [float32 of size 2]\n"
                         "    (1): Parameter containing: [float64 of size 2x3]\n"
                         "    (2): Object of type: int\n)")
    assert repr(lst[1:2]) == "ParameterList(  (0): Parameter containing: [float64 of size 2x3])"
    assert repr(nn.ParameterList()) == "ParameterList()"
    d = nn.ParameterDict({"w": _p(1.0, 2.0), "n": None})
    assert repr(d) == ("ParameterDict(\n"
                       "    (n): Object of type: NoneType\n"
                       "    (w): Parameter containing: [minifused.FloatTensor of size 2]\n)")


def test_old_pickles_of_the_containers_still_load():
    """A ParameterList / ParameterDict whose pickle holds its Parameters alone (no ``_size`` / ``_keys``)."""
    lst, d = nn.ParameterList([_p(1.0), _p(2.0)]), nn.ParameterDict({"a": _p(3.0)})
    del lst.__dict__["_size"], d.__dict__["_keys"]
    lst2, d2 = pickle.loads(pickle.dumps(lst)), pickle.loads(pickle.dumps(d))
    assert [float(p.item()) for p in lst2] == [1.0, 2.0] and list(d2) == ["a"] and float(d2["a"].item()) == 3.0


# ---------------------------------------------------------------- smaller API points
def test_get_parameter_refuses_a_none_parameter_and_get_buffer_returns_none():
    m = nn.Module()
    m.register_parameter("x", None)
    m.register_buffer("b", None)
    with pytest.raises(AttributeError, match="`x` is not an nn.Parameter"):
        m.get_parameter("x")
    assert m.get_buffer("b") is None
    lin = _linear()
    assert nn.Sequential(lin).get_parameter("0.weight") is lin.weight


def test_sequential_takes_its_input_by_keyword():
    x = np.array([[-1.0, 2.0]])
    out = nn.Sequential(_linear(), nn.ReLU())(input=cpu(x, dtype=mf.float32))
    np.testing.assert_allclose(out.detach().numpy(), np.maximum(x @ W.T + B, 0), rtol=1e-6)


def test_requires_grad_takes_a_bool_only():
    m = _linear()
    with pytest.raises(TypeError, match="must be bool, not int"):
        m.requires_grad_(0)
    assert m.weight.requires_grad and m.requires_grad_(False) is m and not m.bias.requires_grad
    relu = nn.ReLU()
    assert relu.requires_grad_(0) is relu  # no parameter to set: nothing refused, as PyTorch's


def test_dir_lists_parameters_buffers_and_submodules():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.ReLU())
            self.scale = nn.Parameter(cpu([1.0]))
            self.register_buffer("stat", cpu([0.0]))

    names = dir(Net())
    assert {"body", "scale", "stat", "forward", "training"} <= set(names) and names == sorted(names)
    assert "0" not in dir(Net().body)


def test_named_modules_memo_holds_the_modules():
    lin = _linear()
    net = nn.Sequential(lin, lin, nn.ReLU())
    memo = set()
    assert [n for n, _ in net.named_modules(memo=memo)] == ["", "0", "2"]
    assert memo == {net, lin, net[2]}
    assert [n for n, _ in net.named_modules(memo={lin})] == ["", "2"]
    assert [n for n, _ in net.named_modules(memo={net}, remove_duplicate=False)] == []


def test_module_repr_puts_a_multi_line_extra_repr_and_children_on_their_own_lines():
    class WithExtra(nn.Module):
        def __init__(self, child):
            super().__init__()
            if child:
                self.relu = nn.ReLU()

        def extra_repr(self):
            return "a=1"

    class TwoLines(nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    assert repr(WithExtra(False)) == "WithExtra(a=1)"
    assert repr(WithExtra(True)) == "WithExtra(\n  a=1\n  (relu): ReLU()\n)"
    assert repr(TwoLines()) == "TwoLines(\n  a=1\n  b=2\n)"
    assert repr(nn.Module()) == "Module()"


def test_plain_values_may_be_set_before_module_init_but_not_parameters_or_modules():
    # PyTorch's __setattr__: before Module.__init__ a plain value (a config number, a tensor) is an ordinary
    # attribute; a Parameter, a Module or an nn.Buffer has no table to go in yet (AttributeError)
    class Early(nn.Module):
        def __init__(self):
            self.width = 3
            self.scale = mf.ones(1)
            super().__init__()
            self.lin = nn.Linear(self.width, 1)

    m = Early()
    assert m.width == 3 and m.scale.tolist() == [1.0]
    assert list(m.state_dict()) == ["lin.weight", "lin.bias"]

    for value in (nn.Parameter(mf.ones(1)), nn.ReLU(), nn.Buffer(mf.ones(1))):
        class TooEarly(nn.Module):
            def __init__(self):
                self.x = value

        with pytest.raises(AttributeError, match="before Module.__init__"):
            TooEarly()


def test_module_type_takes_legacy_tensor_types_and_their_names():
    # PyTorch's Module.type runs Tensor.type on every parameter and buffer: a dtype, a legacy tensor type or its
    # name ('torch.DoubleTensor', unchanged by an import swap) casts all of them, integer buffers too
    for dst in ("torch.DoubleTensor", "minifused.DoubleTensor", mf.DoubleTensor, mf.float64):
        bn = nn.BatchNorm1d(2, device="cpu")
        assert bn.type(dst) is bn
        assert {str(v.dtype) for v in bn.state_dict().values()} == {"float64"}
        assert bn.weight.device.type == "cpu"
    lin = _linear()
    with pytest.raises(ValueError, match="invalid type"):
        lin.type("torch.FooTensor")
    assert lin.weight.dtype == mf.float32


def test_module_to_an_unknown_string_names_it_a_device():
    # PyTorch reads a string given to Module.to as a device ('gpu': RuntimeError naming the device types); it was
    # reported as an unknown dtype here
    lin = _linear()
    with pytest.raises(RuntimeError, match="unknown device 'gpu'"):
        lin.to("gpu")
    assert lin.weight.dtype == mf.float32 and lin.to("cpu") is lin


# ---------------------------------------------------------------- a differential sweep against PyTorch 2.13
class _Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(2, 2, device="cpu")
        self.l2 = nn.Linear(2, 2, device="cpu")
        self.l2.weight = self.l1.weight
        self.shared = self.l1
        self.seq = nn.Sequential(self.l1, self.l2)


def test_tied_weights_and_shared_submodules_are_named_once_unless_asked():
    m = _Tied()  # PyTorch 2.13's names, in order
    assert [k for k, _ in m.named_parameters()] == ["l1.weight", "l1.bias", "l2.bias"]
    assert [k for k, _ in m.named_parameters(remove_duplicate=False)] == [
        "l1.weight", "l1.bias", "l2.weight", "l2.bias", "shared.weight", "shared.bias", "seq.0.weight",
        "seq.0.bias", "seq.1.weight", "seq.1.bias"]
    assert [k for k, _ in m.named_modules(prefix="root")] == ["root", "root.l1", "root.l2", "root.seq"]
    assert [k for k, _ in m.named_modules(remove_duplicate=False)] == ["", "l1", "l2", "shared", "seq", "seq.0",
                                                                       "seq.1"]
    assert [k for k, _ in m.named_children()] == ["l1", "l2", "seq"] and len(list(m.parameters())) == 3
    assert list(m.state_dict()) == ["l1.weight", "l1.bias", "l2.weight", "l2.bias", "shared.weight", "shared.bias",
                                    "seq.0.weight", "seq.0.bias", "seq.1.weight", "seq.1.bias"]


def test_deleting_a_non_persistent_buffer_forgets_that_it_was():
    m = nn.Module()
    m.register_buffer("running", cpu(np.ones(2)), persistent=False)
    del m.running
    assert m._non_persistent_buffers_set == set()  # PyTorch's: discarded with the buffer
    m._buffers["running"] = cpu(np.zeros(2))  # (as state-dict pre-hooks and older code register buffers)
    assert list(m.state_dict()) == ["running"]


def test_parameter_dict_missing_key_is_a_key_error_and_pytorchs_attribute_error():
    pd = nn.ParameterDict({"a": cpu(np.ones(1))})
    for kind in (KeyError, AttributeError):
        with pytest.raises(kind):
            pd["zz"]
    assert pd.get("zz", 5) == 5 and "zz" not in pd


def test_module_dict_update_errors_are_pytorchs_and_add_nothing():
    md = nn.ModuleDict({"b": nn.ReLU()})
    with pytest.raises(TypeError, match="^ModuleDict.update should be called with an iterable of key/value pairs, "
                                        "but got int$"):
        md.update(3)
    with pytest.raises(ValueError, match="^ModuleDict update sequence element #1 has length 1; 2 is required$"):
        md.update([("c", nn.Tanh()), ("a",)])
    with pytest.raises(TypeError, match="^ModuleDict update sequence element #0 should be Iterable; is int$"):
        md.update([1])
    with pytest.raises(TypeError, match="'q' is a int, not a Module"):
        md.update([("c", nn.Tanh()), ("q", 3)])
    with pytest.raises(KeyError, match='contain "\\.", got: a.b'):
        md.update({"c": nn.Tanh(), "a.b": nn.ReLU()})
    assert list(md) == ["b"]  # (PyTorch's would have added "c" before each error)
    md.update([("z", nn.Tanh())])
    md.update({"a": nn.ELU(), "b": nn.GELU()})  # a plain dict in its order; an existing key keeps its place
    assert list(md) == ["b", "z", "a"] and type(md["b"]).__name__ == "GELU"


@pytest.mark.parametrize("container", [nn.ModuleList, nn.Sequential])
def test_container_item_assignment_takes_an_integer_index(container):
    c = container([nn.ReLU(), nn.Tanh()]) if container is nn.ModuleList else container(nn.ReLU(), nn.Tanh())
    with pytest.raises(TypeError, match="item assignment takes an integer index, got a slice"):
        c[0:1] = [nn.ELU()]
    c[-1] = nn.ELU()
    assert [type(x).__name__ for x in c] == ["ReLU", "ELU"]


def test_to_a_complex_dtype_casts_floating_and_complex_tensors_and_half_double_only_floating_ones():
    def fresh():
        m = nn.Module()
        for name, dt in (("i", mf.int32), ("h", mf.float16), ("c", mf.complex64)):
            m.register_buffer(name, mf.zeros(2, dtype=dt, device="cpu"))
        return m

    def dtypes(m):
        return [str(v.dtype) for v in m.state_dict().values()]

    # PyTorch 2.13's dtypes, in the buffers' order i, h, c
    assert dtypes(fresh().half()) == ["int32", "float16", "complex64"]
    assert dtypes(fresh().double()) == ["int32", "float64", "complex64"]
    assert dtypes(fresh().to(mf.complex128)) == ["int32", "complex128", "complex128"]
    lin = _linear().to(mf.complex64)
    assert [str(p.dtype) for p in lin.parameters()] == ["complex64", "complex64"]
    np.testing.assert_array_equal(lin.weight.detach().numpy(), W.astype(np.complex64))
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes, but got desired dtype=int32"):
        _linear().to(mf.int32)


def test_backward_hooks_see_one_grad_output_per_output_none_for_a_non_tensor():
    class ThreeOut(nn.Module):
        def forward(self, x, y):
            return x * 2, 5, y * 3

    m, log = ThreeOut(), []

    def pre(mod, grad_output):
        log.append(("pre", [None if g is None else g.tolist() for g in grad_output]))
        return grad_output[0] * 10, None, grad_output[2]

    m.register_full_backward_pre_hook(pre)
    m.register_full_backward_hook(lambda mod, gi, go: log.append(
        ("full", [g.tolist() for g in gi], [None if g is None else g.tolist() for g in go])))
    x, y = cpu([1.0], dtype=mf.float32).requires_grad_(), cpu([1.0], dtype=mf.float32)
    a, k, b = m(x, y)
    (a * k + b).sum().backward()
    # PyTorch 2.13's: the output 5 and y * 3 (no gradient) get None; y's grad_input is zeros
    assert log == [("pre", [[5.0], None, None]), ("full", [[100.0], [0.0]], [[50.0], None, None])]
    assert x.grad.tolist() == [100.0]
    m2 = ThreeOut()
    m2.register_full_backward_pre_hook(lambda mod, grad_output: (grad_output[0],))
    with pytest.raises(RuntimeError, match="length 1, expected a tuple of 3 gradients"):
        m2(x, y)[0].sum().backward()


def test_full_backward_hooks_do_not_run_for_an_output_of_no_tensor_or_tuple():
    class DictOut(nn.Module):
        def forward(self, x):
            return {"a": x * 2}

    m, log = DictOut(), []
    m.register_full_backward_hook(lambda *a: log.append("full"))
    m.register_full_backward_pre_hook(lambda *a: log.append("pre"))
    x = cpu([1.0], dtype=mf.float32).requires_grad_()
    m(x)["a"].sum().backward()
    assert log == [] and x.grad.tolist() == [2.0]  # PyTorch's: its hooks wrap tensors and tuples only
