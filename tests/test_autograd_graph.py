"""tensor.grad_fn as PyTorch's graph node: name(), next_functions down to AccumulateGrad, identity, metadata."""
import numpy as np
import pytest

import minifused as mf
import minifused.nn.functional as F
from minifused.autograd.graph import AccumulateGrad, Node


def _leaves(fn, seen=None):
    """The variables of the AccumulateGrad nodes reached from ``fn`` (a graph printer's walk)."""
    seen = set() if seen is None else seen
    found = []
    for nxt, _ in fn.next_functions:
        if nxt is None or id(nxt) in seen:
            continue
        seen.add(id(nxt))
        found += [nxt.variable] if hasattr(nxt, "variable") else _leaves(nxt, seen)  # (an AccumulateGrad)
    return found


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))


def test_the_walk_from_the_loss_reaches_every_parameter_once():
    net = _net(mf).to("cpu")
    x, t = (mf.tensor(np.random.RandomState(s).randn(5, k).astype(np.float32), device="cpu")
            for s, k in ((0, 3), (1, 2)))
    loss = F.mse_loss(net(x), t)
    reached = _leaves(loss.grad_fn)
    assert sorted(map(id, reached)) == sorted(map(id, net.parameters()))
    assert all(n is None or isinstance(n, Node) for n, _ in loss.grad_fn.next_functions)


def test_the_walk_matches_pytorchs():
    torch = pytest.importorskip("torch")
    counts = []
    for lib in (mf, torch):
        net = _net(lib)
        x, t = lib.ones(5, 3), lib.zeros(5, 2)
        loss = (lib.nn.functional.mse_loss(net(x), t) + net[0].weight.pow(2).sum())
        reached = _leaves(loss.grad_fn)
        counts.append((len(reached), sorted(tuple(v.shape) for v in reached)))
        # the tutorial's step down from the loss gives a node (PyTorch's 60-minute blitz prints it)
        assert loss.grad_fn.next_functions[0][0] is not None
    assert counts[0] == counts[1]


def test_one_node_per_op_while_held_named_by_its_type():
    x = mf.ones(3, device="cpu", requires_grad=True)
    y = (x * 2).relu()
    node = y.grad_fn
    assert node is y.grad_fn and node.name() == type(node).__name__ and node.name().endswith("Backward")
    assert repr(node).startswith(f"<{node.name()} object at 0x")
    node.metadata["tag"] = 7
    assert y.grad_fn.metadata == {"tag": 7}
    leaf_node, index = node.next_functions[0][0].next_functions[0]
    assert isinstance(leaf_node, AccumulateGrad) and leaf_node.variable is x and index == 0
    assert leaf_node.next_functions == () and x.grad_fn is None


def test_an_input_without_grad_has_no_next_node_and_the_graph_stays_after_backward():
    x = mf.ones(3, device="cpu", requires_grad=True)
    c = mf.ones(3, device="cpu")
    y = (x * c).sum()
    mul = y.grad_fn.next_functions[0][0]
    assert isinstance(mul.next_functions[0][0], AccumulateGrad) and mul.next_functions[1] == (None, 0)
    y.backward()
    assert y.grad_fn.next_functions[0][0] is mul and mul.next_functions[0][0].variable is x
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3, np.float32))


def test_a_custom_functions_node_reads_its_ctx():
    class Scale(mf.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            ctx.save_for_backward(x)
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    x = mf.tensor([1.0, 2.0], device="cpu", requires_grad=True)
    y = Scale.apply(x, 3.0)
    assert y.grad_fn.name() == "ScaleBackward" and y.grad_fn.k == 3.0
    np.testing.assert_array_equal(y.grad_fn.saved_tensors[0].numpy(), [1.0, 2.0])
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        y.grad_fn.nothing
