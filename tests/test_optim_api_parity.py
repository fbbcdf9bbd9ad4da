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
