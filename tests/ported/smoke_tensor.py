"""PyTorch-API snippets for the torch and torch.Tensor names of tests/data/torch_names.txt: ``tensor_table(m)``
maps each name to a small call of it as training code writes it, through the module ``m`` (``torch`` or
``minifused``). tests/test_torch_names.py runs them on minifused, and under PyTorch to check the table itself."""
import importlib
import math
import os
import tempfile
import types

import numpy as np


def resolve(root, dotted):
    """``root`` then each attribute of ``dotted`` (the part after ``torch.``); a submodule its parent does
    not import (``utils.data``) is imported, as ``import torch.utils.data`` would."""
    obj, path = root, root.__name__
    for part in dotted.split("."):
        path = f"{path}.{part}"
        try:
            obj = getattr(obj, part)
        except AttributeError:
            if not isinstance(obj, types.ModuleType):
                raise
            try:
                obj = importlib.import_module(path)
            except ImportError:
                raise AttributeError(f"{path} does not exist") from None
    return obj


class Lazy:
    """A namespace looked up at call time, so one missing namespace fails only the entries that use it."""

    def __init__(self, root, dotted):
        self._root, self._dotted = root, dotted

    def __getattr__(self, name):
        return getattr(resolve(self._root, self._dotted), name)


def ok(cond, what="check"):
    if not cond:
        raise AssertionError(what)
    return cond


def tensor_table(m):
    """{torch name: a call of it through ``m``} for the top-level functions and the Tensor methods."""
    cuda = Lazy(m, "cuda")

    def r(*shape):
        return m.randn(*shape)

    def idx(values):
        return m.tensor(values)  # int64, as PyTorch makes it from Python ints

    def leaf(*shape):
        return m.randn(*shape).requires_grad_()

    def if_cuda(fn):  # GPU-only calls run where a GPU is
        return fn() if cuda.is_available() else None

    def grad_mode():
        x = leaf(3)
        with m.no_grad():
            y = x * 2
            with m.enable_grad():
                z = x * 2
        with m.set_grad_enabled(False):
            w = x * 2
        ok(not y.requires_grad and z.requires_grad and not w.requires_grad and m.is_grad_enabled())

    def inference():
        with m.inference_mode():
            return ok(not (leaf(3) * 2).requires_grad)

    def autograd_grad():
        x = leaf(3)
        (g,) = m.autograd.grad((x * x).sum(), x)
        ok(np.allclose(g.tolist(), (2 * x).tolist()))

    def custom_function():
        class Square(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * x * grad

        x = leaf(3)
        Square.apply(x).sum().backward()
        ok(np.allclose(x.grad.tolist(), (2 * x).tolist()))

    def save_load():
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ckpt.pt")
            m.save({"w": m.arange(3.0), "epoch": 2}, path)
            ok(m.load(path)["w"].tolist() == [0.0, 1.0, 2.0])

    def rng_state():
        state = m.get_rng_state()
        a = m.rand(3).tolist()
        m.set_rng_state(state)
        ok(m.rand(3).tolist() == a)

    def default_device():
        prev = m.get_default_device()
        m.set_default_device("cpu")
        try:
            ok(m.zeros(1).device.type == "cpu" and m.get_default_device().type == "cpu")
        finally:
            m.set_default_device(prev)

    def where():
        x = r(4)
        return m.where(x > 0, x, m.zeros_like(x))

    def backward_grad():
        x = leaf(3)
        (x * x).sum().backward()
        ok(x.grad.shape == (3,))

    def hook():
        x = leaf(3)
        x.register_hook(lambda g: g * 2)
        x.sum().backward()
        ok(x.grad.tolist() == [2.0, 2.0, 2.0])

    def retain():
        y = leaf(3) * 2
        y.retain_grad()
        y.sum().backward()
        ok(y.grad.tolist() == [1.0, 1.0, 1.0])

    def masked_fill_():
        x = r(4)
        return x.masked_fill_(x > 0, 0.0)

    def getitem():
        x = r(3, 4)
        return x[0, 1:], x[:, -1], x[x > 0], x[range(3), idx([0, 2, 3])], x[idx([2, 0])]

    def setitem():
        x = r(3, 4)
        x[0] = 1.0
        x[:, 1] = r(3)
        x[x < 0] = 0.0
        ok(x.min().item() >= 0.0)

    def iadd():
        x = r(3)
        x += 1.0
        return x

    def isub():
        w = leaf(3)
        with m.no_grad():
            w -= r(3) * 0.1
        ok(w.requires_grad and w.is_leaf)

    table = {
        # tensor creation
        "torch.tensor": lambda: m.tensor([[1.0, 2.0], [3.0, 4.0]]),
        "torch.as_tensor": lambda: m.as_tensor(np.arange(6.0).reshape(2, 3)),
        "torch.from_numpy": lambda: m.from_numpy(np.ones((2, 3), dtype=np.float32)),
        "torch.zeros": lambda: m.zeros(2, 3),
        "torch.ones": lambda: m.ones((2, 3), dtype=m.float64),
        "torch.empty": lambda: m.empty(4, 5),
        "torch.full": lambda: m.full((2, 2), 7.0),
        "torch.zeros_like": lambda: m.zeros_like(r(2, 3)),
        "torch.ones_like": lambda: m.ones_like(r(2, 3)),
        "torch.full_like": lambda: m.full_like(r(2, 3), 0.5),
        "torch.rand": lambda: m.rand(3, 4),
        "torch.randn": lambda: m.randn(2, 3),
        "torch.randint": lambda: m.randint(0, 10, (5,)),
        "torch.rand_like": lambda: m.rand_like(r(2, 3)),
        "torch.randn_like": lambda: m.randn_like(r(2, 3)),
        "torch.randperm": lambda: ok(sorted(m.randperm(10).tolist()) == list(range(10))),
        "torch.arange": lambda: ok(m.arange(0, 10, 2).tolist() == [0, 2, 4, 6, 8]),
        "torch.linspace": lambda: ok(np.allclose(m.linspace(0, 1, steps=5).tolist(), [0, 0.25, 0.5, 0.75, 1])),
        "torch.eye": lambda: m.eye(3),
        "torch.normal": lambda: m.normal(0.0, 1.0, size=(2, 3)),
        "torch.multinomial": lambda: m.multinomial(m.tensor([0.1, 0.2, 0.7]), 2),
        # dtypes, devices, tensor type
        "torch.Tensor": lambda: ok(isinstance(m.zeros(1), m.Tensor)),
        "torch.Size": lambda: ok(m.zeros(2, 3).shape == m.Size([2, 3])),
        "torch.device": lambda: m.zeros(2, device=m.device("cpu")),
        "torch.is_tensor": lambda: ok(m.is_tensor(m.zeros(1)) and not m.is_tensor([1.0])),
        "torch.get_default_dtype": lambda: ok(m.get_default_dtype() == m.float32),
        "torch.set_default_dtype": lambda: m.set_default_dtype(m.get_default_dtype()),
        "torch.finfo": lambda: ok(math.isclose(m.finfo(m.float32).eps, 2.0 ** -23)),
        "torch.pi": lambda: ok(math.isclose(m.pi, math.pi) and m.cos(m.tensor([m.pi])).item() == -1.0),
        "torch.inf": lambda: ok(m.full((2,), -m.inf).tolist() == [-math.inf] * 2),
        "torch.nan": lambda: ok(m.isnan(m.tensor([m.nan, 1.0])).tolist() == [True, False]),
        "torch.FloatTensor": lambda: ok(m.FloatTensor(2, 3).shape == (2, 3) and isinstance(r(2), m.FloatTensor)),
        "torch.LongTensor": lambda: ok(m.LongTensor([1, 2]).tolist() == [1, 2] and r(2).type(m.LongTensor).dtype
                                       == m.int64),
        "torch.get_default_device": default_device,
        "torch.set_default_device": default_device,
        "torch.broadcast_shapes": lambda: ok(m.broadcast_shapes((4, 1), (3,)) == m.Size([4, 3])),
        # random state, grad mode, autograd, checkpoints
        "torch.manual_seed": lambda: (m.manual_seed(3), m.rand(2)),
        "torch.initial_seed": lambda: ok(isinstance(m.initial_seed(), int)),
        "torch.get_rng_state": rng_state,
        "torch.set_rng_state": rng_state,
        "torch.no_grad": grad_mode,
        "torch.enable_grad": grad_mode,
        "torch.set_grad_enabled": grad_mode,
        "torch.is_grad_enabled": grad_mode,
        "torch.inference_mode": inference,
        "torch.autograd.grad": autograd_grad,
        "torch.autograd.Function": custom_function,
        "torch.save": save_load,
        "torch.load": save_load,
        # pointwise math
        "torch.add": lambda: m.add(r(2, 3), r(3)),
        "torch.mul": lambda: m.mul(r(3), 2.0),
        "torch.div": lambda: m.div(r(3), 2.0),
        "torch.abs": lambda: m.abs(r(3)),
        "torch.exp": lambda: m.exp(r(3)),
        "torch.log": lambda: m.log(m.rand(3) + 0.1),
        "torch.log1p": lambda: m.log1p(m.rand(3)),
        "torch.sqrt": lambda: m.sqrt(m.rand(3)),
        "torch.pow": lambda: m.pow(r(3), 2),
        "torch.square": lambda: m.square(r(3)),
        "torch.sin": lambda: m.sin(r(3)),
        "torch.cos": lambda: m.cos(r(3)),
        "torch.tanh": lambda: m.tanh(r(3)),
        "torch.sigmoid": lambda: m.sigmoid(r(3)),
        "torch.relu": lambda: m.relu(r(3)),
        "torch.relu_": lambda: (lambda x: ok(m.relu_(x) is x and x.min().item() >= 0))(r(3)),
        "torch.clamp": lambda: m.clamp(r(3), min=-0.5, max=0.5),
        "torch.clip": lambda: m.clip(r(3), -1.0, 1.0),
        "torch.sign": lambda: m.sign(r(3)),
        "torch.floor": lambda: m.floor(r(3)),
        "torch.round": lambda: m.round(r(3)),
        "torch.maximum": lambda: m.maximum(r(3), r(3)),
        "torch.minimum": lambda: m.minimum(r(3), r(3)),
        "torch.where": where,
        "torch.isnan": lambda: ok(m.isnan(m.tensor([1.0, float("nan")])).tolist() == [False, True]),
        "torch.isinf": lambda: ok(m.isinf(m.tensor([1.0, float("inf")])).tolist() == [False, True]),
        "torch.isfinite": lambda: ok(m.isfinite(m.tensor([1.0, float("inf")])).tolist() == [True, False]),
        "torch.lgamma": lambda: ok(np.allclose(m.lgamma(m.tensor([1.0, 4.0, 0.5])).tolist(),
                                               [0.0, math.log(6.0), 0.5 * math.log(math.pi)], atol=1e-6)),
        "torch.digamma": lambda: ok(np.allclose(m.digamma(m.tensor([1.0, 2.0])).tolist(),
                                                [-0.5772157, 0.4227843], atol=1e-6)),
        # comparison
        "torch.eq": lambda: m.eq(idx([1, 2]), idx([1, 3])),
        "torch.ne": lambda: m.ne(idx([1, 2]), idx([1, 3])),
        "torch.gt": lambda: m.gt(r(3), 0),
        "torch.lt": lambda: m.lt(r(3), r(3)),
        "torch.allclose": lambda: ok(m.allclose(m.ones(3), m.ones(3) + 1e-9)),
        "torch.equal": lambda: ok(m.equal(m.arange(3), m.arange(3))),
        # reductions, sorting, indexing
        "torch.sum": lambda: m.sum(r(2, 3), dim=1),
        "torch.mean": lambda: m.mean(r(2, 3), dim=0, keepdim=True),
        "torch.std": lambda: m.std(r(4)),
        "torch.var": lambda: m.var(r(2, 3), dim=1),
        "torch.max": lambda: (m.max(r(5)), m.max(r(2, 3), 1)[1], m.max(r(2, 3), dim=1).values),
        "torch.min": lambda: (m.min(r(5)), m.min(r(2, 3), dim=1)[0]),
        "torch.amax": lambda: m.amax(r(2, 3), dim=-1),
        "torch.argmax": lambda: m.argmax(r(2, 3), dim=1),
        "torch.argmin": lambda: m.argmin(r(5)),
        "torch.all": lambda: ok(m.all(m.ones(3) > 0)),
        "torch.any": lambda: ok(m.any(idx([0, 0, 1]) > 0)),
        "torch.norm": lambda: ok(math.isclose(m.norm(m.tensor([3.0, 4.0])).item(), 5.0, rel_tol=1e-6)),
        "torch.logsumexp": lambda: m.logsumexp(r(2, 3), dim=1),
        "torch.cumsum": lambda: ok(m.cumsum(idx([1, 2, 3]), dim=0).tolist() == [1, 3, 6]),
        "torch.logcumsumexp": lambda: ok(np.allclose(m.logcumsumexp(m.tensor([0.0, 0.0, 1000.0]), dim=0).tolist(),
                                                     [0.0, math.log(2.0), 1000.0])),
        "torch.sort": lambda: m.sort(r(5))[0],
        "torch.argsort": lambda: m.argsort(r(5), descending=True),
        "torch.topk": lambda: ok(m.topk(m.tensor([1.0, 5.0, 3.0]), 2)[1].tolist() == [1, 2]),
        "torch.unique": lambda: ok(m.unique(idx([3, 1, 3, 2])).tolist() == [1, 2, 3]),
        "torch.nonzero": lambda: ok(m.nonzero(idx([0, 1, 0, 2])).tolist() == [[1], [3]]),
        "torch.gather": lambda: m.gather(r(2, 3), 1, idx([[0], [2]])),
        "torch.index_select": lambda: m.index_select(r(3, 4), 0, idx([0, 2])),
        "torch.softmax": lambda: m.softmax(r(2, 3), dim=1),
        "torch.log_softmax": lambda: m.log_softmax(r(2, 3), dim=1),
        # matrix products
        "torch.matmul": lambda: m.matmul(r(2, 3), r(3, 4)),
        "torch.mm": lambda: m.mm(r(2, 3), r(3, 4)),
        "torch.bmm": lambda: m.bmm(r(2, 3, 4), r(2, 4, 5)),
        "torch.dot": lambda: m.dot(r(3), r(3)),
        "torch.einsum": lambda: m.einsum("ij,jk->ik", r(2, 3), r(3, 4)),
        "torch.diag": lambda: m.diag(r(3)),
        "torch.det": lambda: ok(math.isclose(m.det(m.eye(3) * 2).item(), 8.0, rel_tol=1e-6)),
        "torch.linalg.inv": lambda: ok(np.allclose(m.linalg.inv(m.eye(3) * 2).tolist(), np.eye(3) / 2)),
        "torch.linalg.solve": lambda: ok(np.allclose(m.linalg.solve(m.eye(3) * 2, m.ones(3)).tolist(), 0.5)),
        "torch.linalg.svd": lambda: m.linalg.svd(r(4, 3), full_matrices=False).S,
        # joining and reshaping
        "torch.cat": lambda: ok(m.cat([r(2, 3), r(1, 3)], dim=0).shape == (3, 3)),
        "torch.stack": lambda: ok(m.stack([r(3), r(3)]).shape == (2, 3)),
        "torch.flatten": lambda: ok(m.flatten(r(2, 3, 4), 1).shape == (2, 12)),
        "torch.reshape": lambda: m.reshape(r(6), (2, 3)),
        "torch.squeeze": lambda: m.squeeze(r(1, 3)),
        "torch.unsqueeze": lambda: m.unsqueeze(r(3), 0),
        "torch.transpose": lambda: m.transpose(r(2, 3), 0, 1),
        "torch.permute": lambda: m.permute(r(2, 3, 4), (2, 0, 1)),
        "torch.split": lambda: ok([t.shape[0] for t in m.split(r(5, 2), 2)] == [2, 2, 1]),
        "torch.chunk": lambda: ok(len(m.chunk(r(6), 3)) == 3),
        "torch.flip": lambda: ok(m.flip(m.arange(3), dims=(0,)).tolist() == [2, 1, 0]),
        # torch.Tensor: attributes and conversions
        "torch.Tensor.shape": lambda: ok(r(2, 3).shape == (2, 3) and r(2, 3).shape[1] == 3),
        "torch.Tensor.size": lambda: ok(r(2, 3).size() == (2, 3) and r(2, 3).size(1) == 3),
        "torch.Tensor.dim": lambda: ok(r(2, 3).dim() == 2),
        "torch.Tensor.ndim": lambda: ok(r(2, 3).ndim == 2),
        "torch.Tensor.numel": lambda: ok(r(2, 3).numel() == 6),
        "torch.Tensor.dtype": lambda: ok(r(2).dtype == m.float32),
        "torch.Tensor.device": lambda: ok(r(2).device.type == "cpu"),
        "torch.Tensor.is_cuda": lambda: ok(not r(2).is_cuda),
        "torch.Tensor.item": lambda: ok(isinstance(r(1).sum().item(), float)),
        "torch.Tensor.tolist": lambda: ok(idx([[1, 2]]).tolist() == [[1, 2]]),
        "torch.Tensor.numpy": lambda: ok(isinstance(r(2, 3).numpy(), np.ndarray)),
        "torch.Tensor.cpu": lambda: r(2).cpu(),
        "torch.Tensor.cuda": lambda: if_cuda(lambda: r(2).cuda()),
        "torch.Tensor.to": lambda: (r(2).to(m.float64), r(2).to("cpu"), r(2).to(m.device("cpu"), m.float16)),
        "torch.Tensor.float": lambda: ok(idx([1]).float().dtype == m.float32),
        "torch.Tensor.double": lambda: ok(r(2).double().dtype == m.float64),
        "torch.Tensor.half": lambda: ok(r(2).half().dtype == m.float16),
        "torch.Tensor.long": lambda: ok(r(2).long().dtype == m.int64),
        "torch.Tensor.int": lambda: ok(r(2).int().dtype == m.int32),
        "torch.Tensor.bool": lambda: ok(r(2).bool().dtype == m.bool),
        "torch.Tensor.type_as": lambda: ok(r(2).type_as(m.zeros(1, dtype=m.float64)).dtype == m.float64),
        "torch.Tensor.contiguous": lambda: r(2, 3).t().contiguous(),
        "torch.Tensor.clone": lambda: r(2).clone(),
        "torch.Tensor.detach": lambda: ok(not (leaf(2) * 2).detach().requires_grad),
        "torch.Tensor.new_zeros": lambda: ok(r(2).new_zeros((3,)).shape == (3,)),
        "torch.Tensor.new_tensor": lambda: r(2).new_tensor([1.0, 2.0]),
        # torch.Tensor: autograd
        "torch.Tensor.data": lambda: r(3).data.mul_(0.5),
        "torch.Tensor.requires_grad": lambda: ok(not r(2).requires_grad and leaf(2).requires_grad),
        "torch.Tensor.requires_grad_": lambda: ok(r(2).requires_grad_().requires_grad),
        "torch.Tensor.grad": backward_grad,
        "torch.Tensor.grad_fn": lambda: ok((leaf(2) * 2).grad_fn is not None and leaf(2).grad_fn is None),
        "torch.Tensor.is_leaf": lambda: ok(leaf(2).is_leaf and not (leaf(2) * 2).is_leaf),
        "torch.Tensor.backward": backward_grad,
        "torch.Tensor.register_hook": hook,
        "torch.Tensor.retain_grad": retain,
        # torch.Tensor: in place
        "torch.Tensor.zero_": lambda: ok(r(3).zero_().tolist() == [0.0] * 3),
        "torch.Tensor.fill_": lambda: ok(r(2).fill_(1.5).tolist() == [1.5, 1.5]),
        "torch.Tensor.copy_": lambda: r(3).copy_(r(3)),
        "torch.Tensor.add_": lambda: (r(3).add_(r(3), alpha=0.5), r(3).add_(1.0)),
        "torch.Tensor.sub_": lambda: r(3).sub_(1.0),
        "torch.Tensor.mul_": lambda: r(3).mul_(2.0),
        "torch.Tensor.div_": lambda: r(3).div_(2.0),
        "torch.Tensor.clamp_": lambda: r(3).clamp_(min=0),
        "torch.Tensor.normal_": lambda: m.empty(3, 4).normal_(0, 0.02),
        "torch.Tensor.uniform_": lambda: m.empty(3, 4).uniform_(-0.1, 0.1),
        "torch.Tensor.masked_fill_": masked_fill_,
        "torch.Tensor.scatter_": lambda: ok(m.zeros(2, 4).scatter_(1, idx([[1], [3]]), 1.0).sum().item() == 2.0),
        # torch.Tensor: math and reductions
        "torch.Tensor.abs": lambda: r(3).abs(),
        "torch.Tensor.exp": lambda: r(3).exp(),
        "torch.Tensor.log": lambda: (m.rand(3) + 0.1).log(),
        "torch.Tensor.sqrt": lambda: m.rand(3).sqrt(),
        "torch.Tensor.pow": lambda: r(3).pow(2),
        "torch.Tensor.sigmoid": lambda: r(3).sigmoid(),
        "torch.Tensor.tanh": lambda: r(3).tanh(),
        "torch.Tensor.relu": lambda: r(3).relu(),
        "torch.Tensor.lgamma": lambda: (m.rand(3) + 0.5).lgamma(),
        "torch.Tensor.softmax": lambda: r(2, 3).softmax(dim=-1),
        "torch.Tensor.clamp": lambda: r(3).clamp(min=-1, max=1),
        "torch.Tensor.eq": lambda: idx([1, 2]).eq(idx([1, 3])),
        "torch.Tensor.ne": lambda: idx([1, 2]).ne(idx([1, 3])),
        "torch.Tensor.gt": lambda: r(3).gt(0),
        "torch.Tensor.lt": lambda: r(3).lt(0),
        "torch.Tensor.all": lambda: ok((m.ones(3) > 0).all()),
        "torch.Tensor.any": lambda: ok((idx([0, 1]) > 0).any()),
        "torch.Tensor.sum": lambda: (r(2, 3).sum(), r(2, 3).sum(dim=1, keepdim=True), r(2, 3).sum(0)),
        "torch.Tensor.mean": lambda: (r(2, 3).mean(), r(2, 3).mean(dim=1)),
        "torch.Tensor.std": lambda: r(2, 3).std(),
        "torch.Tensor.var": lambda: r(2, 3).var(dim=0),
        "torch.Tensor.max": lambda: (r(5).max(), r(2, 3).max(dim=1)[1], r(2, 3).max(1).values),
        "torch.Tensor.min": lambda: (r(5).min(), r(2, 3).min(dim=1)[0]),
        "torch.Tensor.argmax": lambda: r(2, 3).argmax(dim=1, keepdim=True),
        "torch.Tensor.norm": lambda: r(2, 3).norm(p=2, dim=1),
        "torch.Tensor.matmul": lambda: r(2, 3).matmul(r(3)),
        # torch.Tensor: shape and indexing
        "torch.Tensor.view": lambda: (r(2, 3).view(-1), r(2, 3).view(3, 2), r(2, 3).view(-1, 6)),
        "torch.Tensor.view_as": lambda: r(6).view_as(r(2, 3)),
        "torch.Tensor.reshape": lambda: r(6).reshape(3, 2),
        "torch.Tensor.flatten": lambda: ok(r(2, 3, 4).flatten(1).shape == (2, 12)),
        "torch.Tensor.unsqueeze": lambda: ok(r(3).unsqueeze(1).shape == (3, 1)),
        "torch.Tensor.squeeze": lambda: ok(r(1, 3).squeeze(0).shape == (3,)),
        "torch.Tensor.transpose": lambda: r(2, 3).transpose(0, 1),
        "torch.Tensor.permute": lambda: r(2, 3, 4).permute(2, 0, 1),
        "torch.Tensor.t": lambda: r(2, 3).t(),
        "torch.Tensor.T": lambda: ok(r(2, 3).T.shape == (3, 2)),
        "torch.Tensor.expand": lambda: ok(r(1, 2).expand(3, 2).shape == (3, 2)),
        "torch.Tensor.expand_as": lambda: r(1, 2).expand_as(r(3, 2)),
        "torch.Tensor.repeat": lambda: ok(r(1, 2).repeat(2, 3).shape == (2, 6)),
        "torch.Tensor.chunk": lambda: r(6, 2).chunk(2, dim=0),
        "torch.Tensor.gather": lambda: r(2, 3).gather(1, idx([[0], [2]])),
        "torch.Tensor.index_select": lambda: r(3, 4).index_select(0, idx([0, 2])),
        "torch.Tensor.masked_fill": lambda: r(2, 2).masked_fill(m.eye(2) > 0, -1e9),
        "torch.Tensor.topk": lambda: r(5).topk(2),
        "torch.Tensor.sort": lambda: r(5).sort(descending=True),
        "torch.Tensor.nonzero": lambda: idx([0, 1, 0, 2]).nonzero(),
        # torch.Tensor: operators
        "torch.Tensor.__getitem__": getitem,
        "torch.Tensor.__setitem__": setitem,
        "torch.Tensor.__len__": lambda: ok(len(r(4, 2)) == 4),
        "torch.Tensor.__add__": lambda: r(2, 3) + r(3) + 1.0,
        "torch.Tensor.__iadd__": iadd,
        "torch.Tensor.__sub__": lambda: r(2, 3) - r(3),
        "torch.Tensor.__rsub__": lambda: 1.0 - r(3),
        "torch.Tensor.__isub__": isub,
        "torch.Tensor.__mul__": lambda: r(3) * 2,
        "torch.Tensor.__truediv__": lambda: r(3) / 2,
        "torch.Tensor.__matmul__": lambda: r(2, 3) @ r(3),
        "torch.Tensor.__pow__": lambda: r(3) ** 2,
        "torch.Tensor.__neg__": lambda: -r(3),
        "torch.Tensor.__eq__": lambda: ok((idx([1, 2]) == idx([1, 3])).sum().item() == 1),
        "torch.Tensor.__lt__": lambda: r(3) < 0,
        "torch.Tensor.__float__": lambda: ok(isinstance(float(r(1)), float) and isinstance(float(r(2).sum()), float)),
    }
    # each dtype as training code uses it: a tensor made in it has it
    for name in ("float32", "float", "float64", "double", "float16", "half", "bfloat16", "int64", "long", "int32",
                 "int", "uint8", "bool"):
        table[f"torch.{name}"] = lambda name=name: ok(m.zeros(2, dtype=getattr(m, name)).dtype == getattr(m, name))
    return table
