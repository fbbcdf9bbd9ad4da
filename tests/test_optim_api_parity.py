"""The training-loop API around the optimizers and mixed precision, against PyTorch's (2.13, CPU) documented
behaviour: what the groups and state dicts carry, hooks, GradScaler's rules. Values were read from torch."""
import numpy as np
import pytest

import minifused as mf
from minifused import nn, optim

# the implementation switches PyTorch's optimizers keep in ``defaults`` and every group, with their defaults
SWITCHES = {
    "SGD": dict(foreach=None, differentiable=False, fused=None),
    "Adam": dict(foreach=None, capturable=False, differentiable=False, fused=None),
    "AdamW": dict(foreach=None, capturable=False, differentiable=False, fused=None),
    "Adamax": dict(foreach=None, differentiable=False, capturable=False),
    "NAdam": dict(foreach=None, capturable=False, differentiable=False),
    "RAdam": dict(foreach=None, capturable=False, differentiable=False),
    "Adagrad": dict(foreach=None, differentiable=False, fused=None),
    "Adadelta": dict(capturable=False, foreach=None, differentiable=False),
    "RMSprop": dict(capturable=False, foreach=None, differentiable=False),
    "Rprop": dict(foreach=None, differentiable=False, capturable=False),
    "ASGD": dict(foreach=None, differentiable=False, capturable=False),
    "Adafactor": dict(foreach=None),
    "Muon": {},
}
ALL_SWITCHES = ("foreach", "fused", "capturable", "differentiable")


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_groups_and_state_dicts_carry_pytorchs_switches(name):
    """Each optimizer keeps the switches PyTorch's keeps (and no other) in its defaults, its groups (those added
    later too) and its state dict; they can be read and set through ``param_groups``."""
    p, q = nn.Parameter(mf.ones(2, 2)), nn.Parameter(mf.ones(3, 2))
    opt = getattr(optim, name)([p])
    opt.add_param_group({"params": [q]})
    want = SWITCHES[name]
    for entries in (opt.defaults, *opt.param_groups, *opt.state_dict()["param_groups"]):
        assert {k: entries[k] for k in ALL_SWITCHES if k in entries} == want
    if "foreach" in want:
        opt.param_groups[0]["foreach"] = False  # (code turns it off by hand: saved as set)
        assert opt.state_dict()["param_groups"][0]["foreach"] is False


def test_switches_given_are_kept_and_load_as_pytorchs():
    """Values given to the constructor are kept as given; a state dict's switches replace the group's on load
    (PyTorch's load_state_dict takes the saved group whole), and a differentiable one is refused."""
    p = nn.Parameter(mf.ones(2))
    opt = optim.Adam([p], lr=0.1, foreach=True, capturable=True)
    g = opt.param_groups[0]
    assert (g["foreach"], g["fused"], g["capturable"], g["differentiable"]) == (True, None, True, False)
    assert optim.SGD([p], fused=True).param_groups[0]["fused"] is True
    sd = opt.state_dict()
    other = optim.Adam([nn.Parameter(mf.ones(2))], lr=0.1)
    other.load_state_dict(sd)
    assert other.param_groups[0]["foreach"] is True and other.param_groups[0]["capturable"] is True
    bad = dict(sd, param_groups=[dict(sd["param_groups"][0], differentiable=True)])
    with pytest.raises(NotImplementedError, match=r"Adam\.load_state_dict: differentiable=True"):
        other.load_state_dict(bad)
    assert other.param_groups[0]["differentiable"] is False  # (refused before anything changed)


def test_foreach_is_positional_where_pytorchs_is():
    """Adagrad's and Adadelta's ``foreach`` follow ``eps`` (RMSprop's capturable, foreach, maximize and
    differentiable follow ``centered``), positionally, as in PyTorch's signatures."""
    p = nn.Parameter(mf.ones(2))
    assert optim.Adagrad([p], 0.1, 0, 0, 0, 1e-10, True).param_groups[0]["foreach"] is True
    assert optim.Adadelta([p], 1.0, 0.9, 1e-6, 0, True).param_groups[0]["foreach"] is True
    g = optim.RMSprop([p], 0.01, 0.99, 1e-8, 0, 0, False, True, False, True).param_groups[0]
    assert (g["capturable"], g["foreach"], g["maximize"]) == (True, False, True)


def test_step_hooks_see_the_optimizer_first_in_args():
    """PyTorch's step hooks get ``(optimizer, args, kwargs)`` where ``args`` is step's whole argument list, the
    optimizer first; a pre-hook's new args replace that list (one without the optimizer is refused here, before
    anything changes); handles have an ``id`` and remove their hook on leaving a ``with`` block."""
    p = nn.Parameter(mf.ones(2))
    opt = optim.SGD([p], lr=0.5)
    calls = []
    opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", args, kwargs)))
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", args, kwargs)))
    p.grad = mf.ones(2)
    opt.step(closure=None)
    opt.step(None)
    assert calls == [("pre", (opt,), {"closure": None}), ("post", (opt,), {"closure": None}),
                     ("pre", (opt, None), {}), ("post", (opt, None), {})]
    with opt.register_step_pre_hook(lambda o, args, kwargs: ((o, lambda: mf.tensor(7.0)), kwargs)) as handle:
        assert isinstance(handle.id, int)
        assert float(opt.step()) == 7.0
    assert opt.step() is None  # (removed on leaving the block)
    opt.register_step_pre_hook(lambda o, args, kwargs: ((lambda: mf.tensor(7.0),), {}))
    before = p.detach().numpy().copy()
    with pytest.raises(RuntimeError, match="optimizer step pre-hook: the new args must start with the optimizer"):
        opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), before)


# ---------------------------------------------------------------- GradScaler (CPU)
def _scaled_step(scaler, opt, p, grad_factor=1.0):
    opt.zero_grad()
    scaler.scale((p * mf.tensor([grad_factor, 1.0])).sum()).backward()
    return scaler.step(opt)


def test_scaler_trajectory_of_scales_and_skips():
    """PyTorch's values (init_scale 8, growth_interval 2, SGD lr 0.1 on p = [1, 2]): an inf or NaN gradient
    skips the step and halves the scale, two clean steps double it."""
    from minifused import amp

    p = nn.Parameter(mf.tensor([1.0, 2.0]))
    opt = optim.SGD([p], lr=0.1)
    scaler = amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    seen = []
    for g in [1.0, np.inf, 1.0, 1.0, np.nan, 1.0]:
        assert _scaled_step(scaler, opt, p, g) is None
        scaler.update()
        seen.append((scaler.get_scale(), scaler.state_dict()["_growth_tracker"], round(float(p[0]), 6)))
    assert seen == [(8.0, 1, 0.9), (4.0, 0, 0.9), (4.0, 1, 0.8), (8.0, 0, 0.7), (4.0, 0, 0.7), (4.0, 1, 0.6)]
    assert scaler.state_dict() == {"scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2,
                                   "_growth_tracker": 1}


def test_scaler_scale_takes_what_pytorchs_takes():
    """Disabled, scale() returns its argument itself, whatever it is; enabled, lists and tuples keep their type,
    other iterables come back as a lazy map, integer tensors are scaled to float32, as PyTorch's."""
    from minifused import amp

    off = amp.GradScaler("cpu", enabled=False)
    losses = [mf.tensor(1.0)]
    assert off.scale(losses) is losses and off.scale(3.0) == 3.0
    on = amp.GradScaler("cpu", init_scale=4.0)
    assert [float(t) for t in on.scale(iter([mf.tensor(1.0), mf.tensor(2.0)]))] == [4.0, 8.0]
    nested = on.scale([mf.tensor(1.0), (mf.tensor(2.0),)])
    assert type(nested[1]) is tuple and float(nested[1][0]) == 8.0
    scaled = on.scale(mf.tensor(3))
    assert scaled.dtype == mf.float32 and float(scaled) == 12.0
    with pytest.raises(TypeError, match="GradScaler.scale: expected the loss tensor, got float"):
        on.scale(1.0)


def test_scaler_step_forwards_arguments_and_refuses_a_closure_keyword():
    """step(opt, *args, **kwargs) passes them to opt.step; a ``closure=`` keyword is refused while enabled (as
    PyTorch's RuntimeError) and passed through while disabled."""
    from minifused import amp

    p = nn.Parameter(mf.tensor([1.0, 2.0]))
    opt = optim.SGD([p], lr=0.1)
    scaler = amp.GradScaler("cpu", init_scale=8.0)
    scaler.scale(p.sum()).backward()
    with pytest.raises(RuntimeError, match="GradScaler.step: closure use is not supported"):
        scaler.step(opt, closure=lambda: mf.tensor(1.0))
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, 2.0])  # nothing stepped
    assert float(scaler.step(opt, lambda: mf.tensor(5.0))) == 5.0  # (positional: forwarded, as PyTorch's)
    off = amp.GradScaler("cpu", enabled=False)
    assert float(off.step(opt, closure=lambda: mf.tensor(6.0))) == 6.0


def test_scaler_update_needs_a_recorded_step():
    """As PyTorch's: update() before any scale() raises, and update() without new_scale needs a step (or
    unscale_) since the last update, rather than count an unchecked iteration as clean; the scale is unchanged."""
    from minifused import amp

    scaler = amp.GradScaler("cpu", init_scale=8.0, growth_interval=1)
    with pytest.raises(RuntimeError, match="GradScaler.update: no scale\\(\\) call yet"):
        scaler.update()
    with pytest.raises(RuntimeError, match="GradScaler.update: no scale\\(\\) call yet"):
        scaler.update(4.0)
    p = nn.Parameter(mf.tensor([1.0, 2.0]))
    opt = optim.SGD([p], lr=0.1)
    scaler.scale(p.sum()).backward()
    with pytest.raises(RuntimeError, match="no inf checks were recorded since the last update"):
        scaler.update()
    assert scaler.state_dict()["_growth_tracker"] == 0 and scaler.get_scale() == 8.0
    scaler.update(2.0)  # a new scale needs no step
    assert scaler.get_scale() == 2.0
    scaler.unscale_(opt)
    scaler.update()  # unscale_ recorded the check: a clean iteration, the scale grows
    assert scaler.get_scale() == 4.0
    amp.GradScaler("cpu", enabled=False).update()  # disabled: nothing to check


def test_disabled_scaler_load_state_dict_does_nothing():
    from minifused import amp

    off = amp.GradScaler("cpu", enabled=False)
    off.load_state_dict({"scale": 3.0, "growth_factor": 5.0, "backoff_factor": 0.1, "growth_interval": 7,
                         "_growth_tracker": 1})
    off.load_state_dict({"anything": 1})
    assert off.state_dict() == {} and off.get_scale() == 1.0 and off.get_growth_factor() == 2.0


def test_autocast_takes_a_device_string_with_an_index():
    """``autocast(str(device))`` with 'cpu:0' / 'cuda:0' autocasts that device type, as PyTorch's; a bad index or
    an unknown type is refused."""
    lin = nn.Linear(2, 2)
    with mf.autocast("cpu:0"):
        assert mf.is_autocast_enabled("cpu") and lin(mf.ones(1, 2)).dtype == mf.bfloat16
    with mf.autocast("cuda:0"):
        assert not mf.is_autocast_enabled("cpu") and lin(mf.ones(1, 2)).dtype == mf.float32
    for bad in ("cuda:x", "gpu"):
        with pytest.raises(ValueError, match="autocast: device_type must be 'cuda' or 'cpu'"):
            mf.autocast(bad)


def test_pytorchs_helpers_for_optimizers_written_for_it():
    """``from torch.optim.optimizer import Optimizer, ParamsT, _use_grad_for_differentiable, _get_value`` (as
    custom optimizers copied from PyTorch's do): the decorated step runs without grad mode, which is restored."""
    from minifused.optim.optimizer import Optimizer, ParamsT, StateDict, _get_value, _use_grad_for_differentiable

    assert ParamsT is not None and StateDict is not None
    modes = []

    class Plain(Optimizer):
        def __init__(self, params: ParamsT, lr=0.5):
            super().__init__(params, dict(lr=lr, differentiable=False))

        @_use_grad_for_differentiable
        def step(self, closure=None):
            modes.append(mf.is_grad_enabled())
            for g in self.param_groups:
                for p in g["params"]:
                    p.add_(p.grad, alpha=-_get_value(g["lr"]))

    p = nn.Parameter(mf.ones(2))
    opt = Plain([p], lr=mf.tensor(0.25))
    p.grad = mf.ones(2)
    opt.step()
    assert modes == [False] and mf.is_grad_enabled() and Plain.step.__name__ == "step"
    np.testing.assert_array_equal(p.detach().numpy(), [0.75, 0.75])
    assert _get_value(mf.tensor(2.0)) == 2.0 and _get_value(3) == 3


# p = [1, -2] with gradient [0.5, 1]: one step at lr 0, one at lr 0.1, by PyTorch 2.13 (CPU) with the group replaced
# by a plain dict between construction and the first step
PLAIN_DICT_STEPS = {
    "SGD": [0.949999988079071, -2.0999999046325684], "Adam": [0.8999999761581421, -2.0999999046325684],
    "AdamW": [0.8989999890327454, -2.0980000495910645], "RMSprop": [0.291118860244751, -2.708881139755249],
    "Adagrad": [0.9292893409729004, -2.0707106590270996], "Adadelta": [0.9996755719184875, -2.0003244876861572],
    "Adamax": [0.8999999761581421, -2.0999999046325684], "NAdam": [0.9216315746307373, -2.0783684253692627],
    "RAdam": [0.949999988079071, -2.0999999046325684], "ASGD": [1.0, -2.0],
    "Rprop": [0.9999977946281433, -2.000002145767212],
}


@pytest.mark.parametrize("name", sorted(PLAIN_DICT_STEPS))
def test_a_plain_dict_put_in_param_groups_steps_with_its_current_entries(name):
    """``opt.param_groups[0] = {...}`` (a plain dict, as PyTorch's groups are) steps, reading the dict's entries at
    each step: an lr of 0 leaves the parameter, then the lr the dict was changed to moves it as PyTorch's does."""
    p = nn.Parameter(mf.tensor([1.0, -2.0]))
    opt = getattr(optim, name)([p], lr=0.1)
    d = dict(opt.param_groups[0], lr=0.0)
    opt.param_groups[0] = d
    p.grad = mf.tensor([0.5, 1.0])
    opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, -2.0] if name != "Rprop" else
                                  np.float32([0.9999989867210388, -2.0000009536743164]))
    d["lr"] = 0.1
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), PLAIN_DICT_STEPS[name], rtol=1e-6)
    assert opt.state_dict()["param_groups"][0]["lr"] == 0.1


def test_load_state_dict_refuses_group_values_every_step_would_refuse():
    """A state dict whose group holds an lr that is no number (or betas that are no pair) is refused at load, with
    nothing taken: PyTorch's loads it and each step raises a TypeError; a group mirrored on a GPU would fail halfway
    through the load. A loaded betas list becomes a tuple, as the constructor's."""
    p, q = nn.Parameter(mf.ones(2)), nn.Parameter(mf.ones(2))
    opt = optim.Adam([{"params": [p]}, {"params": [q]}], lr=0.1)
    p.grad, q.grad = mf.ones(2), mf.ones(2)
    opt.step()
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = 0.5
    sd["state"][0]["exp_avg"] = mf.zeros(2)
    for key, bad, what in (("lr", "x", "'lr' must be a number or a one-element tensor, got 'x'"),
                           ("betas", [0.5], r"'betas' must be a pair of numbers, got \(0\.5,\)")):
        sd["param_groups"][1][key] = bad
        with pytest.raises(TypeError, match=r"Adam\.load_state_dict: group 1 of the state dict would fail every step "
                                            rf"\(optimizer step: group entry {what}\)"):
            opt.load_state_dict(sd)
        assert opt.param_groups[0]["lr"] == 0.1 and opt.state[p]["exp_avg"].tolist() != [0.0, 0.0]
        sd["param_groups"][1][key] = opt.param_groups[1][key]
    sd["param_groups"][1]["betas"] = [0.5, 0.6]
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[1]["betas"] == (0.5, 0.6)
    assert opt.state[p]["exp_avg"].tolist() == [0.0, 0.0]


# p = [1, -2] after two steps of gradient [0.5, 1] at lr 0.1 with weight_decay tensor(0.25) (and eps tensor(0.5) but
# for SGD and ASGD), by PyTorch 2.13 (CPU)
TENSOR_HYPER_STEPS = {
    "SGD": [0.784375011920929, -2.143749952316284], "Adam": [0.8802748322486877, -2.0996506214141846],
    "AdamW": [0.8518750071525574, -2.032916784286499], "RMSprop": [0.7506962418556213, -2.1747968196868896],
    "Adagrad": [0.8925839066505432, -2.090681791305542], "NAdam": [0.8902363181114197, -2.091283082962036],
    "ASGD": [0.8518565893173218, -2.0987095832824707],
}


@pytest.mark.parametrize("name", sorted(TENSOR_HYPER_STEPS))
def test_eps_and_weight_decay_may_be_tensors(name):
    """A one-element tensor eps or weight_decay is taken, as PyTorch's steps take it (its value read at each step,
    as a Tensor lr's); a Tensor momentum, which chooses kernels, is still refused with a TypeError."""
    p = nn.Parameter(mf.tensor([1.0, -2.0]))
    kw = dict(lr=0.1, weight_decay=mf.tensor(0.25), **({"momentum": 0.9} if name == "SGD" else {}))
    if name not in ("SGD", "ASGD"):
        kw["eps"] = mf.tensor(0.5)
    opt = getattr(optim, name)([p], **kw)
    for _ in range(2):
        p.grad = mf.tensor([0.5, 1.0])
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), TENSOR_HYPER_STEPS[name], rtol=1e-6)
    assert isinstance(opt.param_groups[0]["weight_decay"], mf.Tensor)
    if name in ("SGD", "RMSprop"):
        with pytest.raises(TypeError, match=f"{name}: invalid momentum tensor"):
            getattr(optim, name)([p], lr=0.1, momentum=mf.tensor(0.5))


# PyTorch 2.13 (CPU): each optimizer's defaults keys, and the state keys of a parameter before any step and after one
# with a gradient (lr 0.1, the other arguments default)
BOOKKEEPING = {
    "SGD": ("dampening differentiable foreach fused lr maximize momentum nesterov weight_decay", "", ""),
    "Adam": ("amsgrad betas capturable decoupled_weight_decay differentiable eps foreach fused lr maximize "
             "weight_decay", "", "exp_avg exp_avg_sq step"),
    "AdamW": ("amsgrad betas capturable decoupled_weight_decay differentiable eps foreach fused lr maximize "
              "weight_decay", "", "exp_avg exp_avg_sq step"),
    "RMSprop": ("alpha capturable centered differentiable eps foreach lr maximize momentum weight_decay", "",
                "square_avg step"),
    "Adagrad": ("differentiable eps foreach fused initial_accumulator_value lr lr_decay maximize weight_decay",
                "step sum", "step sum"),
    "Adadelta": ("capturable differentiable eps foreach lr maximize rho weight_decay", "", "acc_delta square_avg step"),
    "Adamax": ("betas capturable differentiable eps foreach lr maximize weight_decay", "", "exp_avg exp_inf step"),
    "NAdam": ("betas capturable decoupled_weight_decay differentiable eps foreach lr maximize momentum_decay "
              "weight_decay", "", "exp_avg exp_avg_sq mu_product step"),
    "RAdam": ("betas capturable decoupled_weight_decay differentiable eps foreach lr maximize weight_decay", "",
              "exp_avg exp_avg_sq step"),
    "ASGD": ("alpha capturable differentiable foreach lambd lr maximize t0 weight_decay", "", "ax eta mu step"),
    "Rprop": ("capturable differentiable etas foreach lr maximize step_sizes", "", "prev step step_size"),
}


@pytest.mark.parametrize("name", sorted(BOOKKEEPING))
def test_construction_and_bookkeeping_as_pytorchs(name):
    """What PyTorch's optimizers accept and refuse at construction and in add_param_group, how they number and keep
    groups in state dicts, and what zero_grad and a step without gradients or with a closure leave (PyTorch's
    exception types; a refused group or state dict changes nothing)."""
    cls = getattr(optim, name)
    defaults, before, after = (sorted(s.split()) for s in BOOKKEEPING[name])
    P = lambda: nn.Parameter(mf.ones(2))  # noqa: E731
    for params in ([], iter([]), (q for q in [])):
        with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
            cls(params, lr=0.1)
    with pytest.raises(KeyError, match="'params'"):
        cls([{"lr": 0.1}], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        cls([{"params": {P()}}], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        cls([P() * 2], lr=0.1)
    with pytest.raises(ValueError, match="invalid learning rate -0.1"):
        cls([P()], lr=-0.1)
    with pytest.raises(TypeError, match="invalid learning rate '0.1'"):
        cls([P()], lr="0.1")
    a, b, c, d = P(), P(), P(), P()
    opt = cls([{"params": [a, b], "mine": 3}, {"params": c}], lr=0.1)
    assert sorted(opt.defaults) == defaults and opt.param_groups[0]["mine"] == 3 and "mine" not in opt.defaults
    assert sorted(opt.state.get(a, {})) == before and len(opt.state) == (3 if before else 0)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [d, b]})
    assert len(opt.param_groups) == 2 and d not in opt.state
    opt.add_param_group({"params": [d], "lr": 0.5})
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2], [3]] and sd["param_groups"][0]["mine"] == 3
    assert sorted(sd["param_groups"][2]) == sorted(defaults + ["params"]) and sd["param_groups"][2]["lr"] == 0.5
    # no gradients: zero_grad(set_to_none=False) leaves them None, a step changes nothing and returns the closure's
    b.grad = mf.ones(2)
    opt.zero_grad(set_to_none=False)
    assert a.grad is None and b.grad.tolist() == [0.0, 0.0]
    b.grad = None
    assert opt.step() is None and opt.step(lambda: 3.5) == 3.5
    assert a.tolist() == [1.0, 1.0] and sorted(opt.state_dict()["state"]) == ([0, 1, 2] if before else [])
    opt.param_groups[0]["lr"] = 0.0  # (taken at the next step)
    a.grad = b.grad = mf.ones(2)
    opt.step()
    if name != "Rprop":  # (Rprop's step sizes start from the lr and are clamped to at least 1e-6)
        assert a.tolist() == [1.0, 1.0]
    assert sorted(opt.state.get(a, {})) == after
    # state dicts of other group counts and sizes are refused (ValueError) and change nothing
    kept = opt.state_dict()
    for groups in ([[P(), P(), P(), P()]], [[P()], [P(), P()], [P()]]):
        other = cls([{"params": g} for g in groups], lr=0.1)
        with pytest.raises(ValueError, match="parameter groups|parameters in the state dict"):
            opt.load_state_dict(other.state_dict())
        assert opt.state_dict()["param_groups"] == kept["param_groups"] and sorted(opt.state.get(a, {})) == after
    # extra keys load as PyTorch's: one beside 'state' is ignored, a group's own is kept
    kept["extra"] = 1
    kept["param_groups"][1]["note"] = "x"
    opt.load_state_dict(kept)
    assert "extra" not in opt.state_dict() and opt.param_groups[1]["note"] == "x"
