"""MLP idioms around sparse routing and compression as PyTorch users write them, on synthetic NumPy data; ``--arch``
picks the model:

- ``moe``: a mixture-of-experts layer in a residual MLP regressing a piecewise function: a gate ``nn.Linear``,
  ``torch.topk`` of the gate logits and a softmax over the top-k, a Switch-style load-balancing loss (the fraction
  of tokens per expert by ``F.one_hot(...).float().mean(0)`` times the mean gate probability) and a router
  z-loss (``logsumexp``), capacity-limited dropping of overflow tokens (``cumsum`` over the one-hot of the
  assignments, top-1 choices first); ``--dispatch`` picks how tokens reach the experts (an ``nn.ModuleList`` of
  small MLPs): ``mask`` (per expert, ``torch.nonzero(..., as_tuple=True)`` of a boolean mask, ``index_select``,
  combined by ``index_add_``), ``sort`` (boolean-mask filtering of the kept assignments, ``argsort(stable=True)``
  by expert, ``bincount`` sizes, ``torch.split(x, sizes.tolist())``, combined by ``scatter_add_``) or ``einsum``
  (every expert on every token with stacked expert weights as ``nn.Parameter``, ``torch.einsum("bd,edh->beh",
  ...)``, the top-k weights spread by ``scatter`` into a dense combine matrix);
- ``quant``: quantization-aware training by hand on a classification task: fake quantization with a straight-through
  estimator ``x + (torch.round(x / s).clamp(qmin, qmax) * s - x).detach()`` (``--fake-quant builtin``:
  ``torch.fake_quantize_per_channel_affine`` / ``fake_quantize_per_tensor_affine`` with zero points as buffers),
  per-channel weight scales and a per-tensor activation scale as buffers updated by an EMA of ``amax`` under
  ``torch.no_grad()``; a learned step size
  quantizer (LSQ) as a ``torch.autograd.Function`` (forward round / clamp, backward with the gradient scale, the
  step's gradient reduced by ``sum_to_size``), its activation step initialised from the first batch (a flag buffer);
  binarized weights by ``torch.sign`` with a straight-through estimator and a mean-magnitude scale; then magnitude
  pruning by ``torch.nn.utils.prune`` (``global_unstructured`` over two layers, ``l1_unstructured`` on the head),
  fine-tuning under the masks, and ``prune.remove`` at the end;
- ``lowrank``: LoRA adapters on a frozen MLP (``requires_grad_(False)``): A and B low-rank parameters
  (``kaiming_uniform_(a=math.sqrt(5))`` on A, zeros on B; or, with ``--lora-init pissa``, the base weight's top
  singular directions by ``torch.svd_lowrank``, taken out of the base), scaled by ``alpha / r``, the adapted layers
  swapped in by ``setattr``; the blocks run under ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``;
  gradient accumulation with ``loss / accum``; AdamW with a parameter group of its own for the adapters; a
  weight-space EMA of the trainable parameters by ``parameters_to_vector`` / ``vector_to_parameters``, evaluated by
  swapping it in; the adapters merged into the base weights under ``torch.no_grad()`` at the end, the outputs
  checked to agree.

Routing by top-k and rounding to a grid are discontinuous: a last-bit difference can move a token to another expert
or a value to the next level. The data, initial weights and learning rates here keep PyTorch's own 20-step run at
``--seed 3`` within 1e-5 (relative) of itself under a 1e-6 relative perturbation of its initial weights, in every
arch and dispatch. Only the imports name the framework.

    python efficient_mlp_idioms.py --arch moe --dispatch sort --steps 30

``main`` returns the training loss of every step."""
import argparse
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, prune, vector_to_parameters
from torch.utils.checkpoint import checkpoint


def batches(x, y, batch_size, device):
    """The fixed batches of (x, y), in order, cycled."""
    x, y = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    n = x.size(0) // batch_size
    step = 0
    while True:
        i = step % n
        yield x[i * batch_size:(i + 1) * batch_size], y[i * batch_size:(i + 1) * batch_size]
        step += 1


# ---------------------------------------------------------------- mixture of experts

def piecewise_data(rs, n, features=16, outputs=4, regions=4):
    """Points around ``regions`` centres, each region with a smooth map of its own: a task experts can split."""
    centres = 2.0 * rs.randn(regions, features)
    region = rs.randint(0, regions, n)
    x = centres[region] + rs.randn(n, features)
    w = rs.randn(regions, features, outputs) / math.sqrt(features)
    y = np.tanh(np.einsum("nf,nfo->no", x, w[region])) + 0.1 * region[:, None]
    return x.astype(np.float32), y.astype(np.float32)


class Expert(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        return self.net(x)


class MoE(nn.Module):
    def __init__(self, dim, hidden, num_experts=4, k=2, capacity_factor=1.25, dispatch="sort"):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts, self.k, self.capacity_factor, self.dispatch = num_experts, k, capacity_factor, dispatch
        if dispatch == "einsum":
            bound1, bound2 = 1 / math.sqrt(dim), 1 / math.sqrt(hidden)
            self.w1 = nn.Parameter(torch.empty(num_experts, dim, hidden).uniform_(-bound1, bound1))
            self.b1 = nn.Parameter(torch.empty(num_experts, hidden).uniform_(-bound1, bound1))
            self.w2 = nn.Parameter(torch.empty(num_experts, hidden, dim).uniform_(-bound2, bound2))
            self.b2 = nn.Parameter(torch.empty(num_experts, dim).uniform_(-bound2, bound2))
        else:
            self.experts = nn.ModuleList([Expert(dim, hidden) for _ in range(num_experts)])

    def route(self, x):
        """Top-k expert indices (n, k), their renormalised weights, which assignments fit the capacity, aux loss."""
        logits = self.gate(x)
        probs = F.softmax(logits, dim=-1)
        top_logits, top_idx = torch.topk(logits, self.k, dim=-1)
        weights = F.softmax(top_logits, dim=-1)
        # Switch Transformer's balance loss: tokens' share per expert (top-1) times the mean gate probability
        frac = F.one_hot(top_idx[:, 0], self.num_experts).float().mean(0)
        balance = self.num_experts * torch.sum(frac * probs.mean(0))
        z_loss = torch.logsumexp(logits, dim=-1).pow(2).mean()
        # capacity: each expert takes its first `capacity` assignments, every token's first choice before any second
        n = x.size(0)
        capacity = int(self.capacity_factor * n * self.k / self.num_experts)
        onehot = F.one_hot(top_idx.t().reshape(-1), self.num_experts)  # (k * n, E), choice-major
        position = torch.cumsum(onehot, dim=0) * onehot  # 1-based slot in its expert, 0 elsewhere
        keep = (position.sum(-1) <= capacity).view(self.k, n).t()  # (n, k)
        return top_idx, weights, keep, balance + 1e-3 * z_loss

    def forward(self, x):
        top_idx, weights, keep, aux = self.route(x)
        if self.dispatch == "mask":
            out = torch.zeros_like(x)
            for e, expert in enumerate(self.experts):
                token_idx, slot = torch.nonzero((top_idx == e) & keep, as_tuple=True)
                if token_idx.numel() == 0:
                    continue
                h = expert(x.index_select(0, token_idx))
                out.index_add_(0, token_idx, h * weights[token_idx, slot].unsqueeze(1))
        elif self.dispatch == "sort":
            kept = keep.reshape(-1)
            flat_expert = top_idx.reshape(-1)[kept]
            flat_weight = weights.reshape(-1)[kept]
            flat_token = torch.arange(x.size(0), device=x.device).repeat_interleave(self.k)[kept]
            order = torch.argsort(flat_expert, stable=True)
            sizes = torch.bincount(flat_expert, minlength=self.num_experts)
            tokens = flat_token[order]
            chunks = torch.split(x[tokens], sizes.tolist())
            h = torch.cat([expert(chunk) for expert, chunk in zip(self.experts, chunks)])
            h = h * flat_weight[order].unsqueeze(1)
            out = torch.zeros_like(x).scatter_add_(0, tokens.unsqueeze(1).expand(-1, x.size(1)), h)
        else:
            combine = torch.zeros(x.size(0), self.num_experts, device=x.device, dtype=x.dtype)
            combine = combine.scatter(1, top_idx, weights * keep.float())
            h = F.gelu(torch.einsum("bd,edh->beh", x, self.w1) + self.b1)
            y = torch.einsum("beh,ehd->bed", h, self.w2) + self.b2
            out = torch.einsum("be,bed->bd", combine, y)
        return out, aux


class MoEMLP(nn.Module):
    def __init__(self, features, outputs, dim=32, hidden=32, **moe):
        super().__init__()
        self.inp = nn.Linear(features, dim)
        self.norm = nn.LayerNorm(dim)
        self.moe = MoE(dim, hidden, **moe)
        self.head = nn.Linear(dim, outputs)

    def forward(self, x):
        h = F.gelu(self.inp(x))
        m, aux = self.moe(self.norm(h))
        return self.head(h + m), aux


def train_moe(args, device, init):
    rs = np.random.RandomState(args.seed)
    x, y = piecewise_data(rs, 8 * args.batch_size)
    model = MoEMLP(x.shape[1], y.shape[1], num_experts=args.num_experts, k=args.top_k,
                   capacity_factor=args.capacity_factor, dispatch=args.dispatch).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr or 3e-3)
    data = batches(x, y, args.batch_size, device)
    losses = []
    for _ in range(args.steps):
        xb, yb = next(data)
        pred, aux = model(xb)
        loss = F.mse_loss(pred, yb) + args.aux_weight * aux
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        top_idx, _, keep, _ = model.moe.route(model.norm(F.gelu(model.inp(xb))))
        load = torch.bincount(top_idx[:, 0], minlength=args.num_experts)
    print(f"tokens per expert (top-1) on the last batch: {load.tolist()}, assignments over capacity: "
          f"{int((~keep).sum())} of {keep.numel()}")
    return losses


# ---------------------------------------------------------------- quantization-aware training and pruning

def teacher_classes(rs, n, features=32, classes=8):
    """Gaussian inputs labelled by a random two-layer tanh teacher's argmax."""
    x = rs.randn(n, features)
    w1, w2 = rs.randn(features, 48) / math.sqrt(features), rs.randn(48, classes) / math.sqrt(48)
    y = np.argmax(np.tanh(x @ w1) @ w2, axis=1)
    return x.astype(np.float32), y.astype(np.int64)


def fake_quant(x, scale, qmin, qmax):
    """Round to the grid of ``scale`` in the forward pass; the identity's gradient in the backward pass (STE)."""
    return x + (torch.round(x / scale).clamp(qmin, qmax) * scale - x).detach()


class FakeQuantLinear(nn.Linear):
    """Symmetric per-output-channel weight and per-tensor input fake quantization, scales tracked by EMAs; by the
    STE expression, or by PyTorch's fake-quantize ops (``builtin``: no gradient where a value was clamped)."""

    def __init__(self, in_features, out_features, bits=8, momentum=0.9, builtin=False):
        super().__init__(in_features, out_features)
        self.qmax = 2 ** (bits - 1) - 1
        self.momentum = momentum
        self.builtin = builtin
        self.register_buffer("w_scale", torch.ones(out_features, 1))
        self.register_buffer("x_scale", torch.ones(()))
        self.register_buffer("w_zero_point", torch.zeros(out_features, dtype=torch.int32))
        self.register_buffer("x_zero_point", torch.zeros((), dtype=torch.long))
        self.register_buffer("calibrated", torch.tensor(False))

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                w_scale = self.weight.abs().amax(dim=1, keepdim=True) / self.qmax
                x_scale = x.abs().amax() / self.qmax
                if not self.calibrated:
                    self.w_scale.copy_(w_scale)
                    self.x_scale.copy_(x_scale)
                    self.calibrated.fill_(True)
                else:
                    self.w_scale.mul_(self.momentum).add_(w_scale, alpha=1 - self.momentum)
                    self.x_scale.mul_(self.momentum).add_(x_scale, alpha=1 - self.momentum)
        if self.builtin:
            w = torch.fake_quantize_per_channel_affine(self.weight, self.w_scale.view(-1), self.w_zero_point, 0,
                                                       -self.qmax, self.qmax)
            x = torch.fake_quantize_per_tensor_affine(x, self.x_scale, self.x_zero_point, -self.qmax, self.qmax)
        else:
            w = fake_quant(self.weight, self.w_scale, -self.qmax, self.qmax)
            x = fake_quant(x, self.x_scale, -self.qmax, self.qmax)
        return F.linear(x, w, self.bias)


class LSQ(torch.autograd.Function):
    """Learned step size quantization (Esser et al.): the step's gradient scaled by ``grad_scale``."""

    @staticmethod
    def forward(ctx, x, step, grad_scale, qmin, qmax):
        ctx.save_for_backward(x, step)
        ctx.grad_scale, ctx.qmin, ctx.qmax = grad_scale, qmin, qmax
        return torch.round(x / step).clamp(qmin, qmax) * step

    @staticmethod
    def backward(ctx, grad_output):
        x, step = ctx.saved_tensors
        v = x / step
        lower, upper = (v < ctx.qmin).float(), (v > ctx.qmax).float()
        middle = 1.0 - lower - upper
        grad_x = grad_output * middle
        grad_step = (lower * ctx.qmin + upper * ctx.qmax + middle * (torch.round(v) - v)) * grad_output
        return grad_x, (grad_step * ctx.grad_scale).sum_to_size(step.shape), None, None, None


class LSQLinear(nn.Linear):
    """Signed per-channel weight steps and an unsigned activation step (its input follows a ReLU), all learned."""

    def __init__(self, in_features, out_features, bits=4):
        super().__init__(in_features, out_features)
        self.wq = 2 ** (bits - 1) - 1
        self.aq = 2 ** bits - 1
        with torch.no_grad():
            init = 2 * self.weight.abs().mean(dim=1, keepdim=True) / math.sqrt(self.wq)
        self.w_step = nn.Parameter(init)
        self.x_step = nn.Parameter(torch.ones(()))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))

    def forward(self, x):
        if self.training and not self.initialized:
            with torch.no_grad():
                self.x_step.copy_(2 * x.abs().mean() / math.sqrt(self.aq))
                self.initialized.fill_(True)
        w = LSQ.apply(self.weight, self.w_step, 1.0 / math.sqrt(self.in_features * self.wq), -self.wq, self.wq)
        x = LSQ.apply(x, self.x_step, 1.0 / math.sqrt(x.numel() * self.aq), 0, self.aq)
        return F.linear(x, w, self.bias)


class BinaryLinear(nn.Linear):
    """Weights binarized to ``sign(w)`` times each row's mean magnitude (XNOR-Net), with an STE."""

    def forward(self, x):
        w = self.weight
        binary = w + (torch.sign(w) - w).detach()
        return F.linear(x, binary * w.abs().mean(dim=1, keepdim=True), self.bias)


class QuantMLP(nn.Module):
    def __init__(self, features, classes, width=64, bits=4, builtin=False):
        super().__init__()
        self.fc1 = FakeQuantLinear(features, width, bits=bits, builtin=builtin)
        self.fc2 = LSQLinear(width, width, bits=bits)
        self.fc3 = BinaryLinear(width, width)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h))
        h = self.norm(self.fc3(h))
        return self.head(h)


def sparsity(tensor):
    return float((tensor == 0).sum()) / tensor.numel()


def train_quant(args, device, init):
    rs = np.random.RandomState(args.seed)
    x, y = teacher_classes(rs, 8 * args.batch_size)
    model = QuantMLP(x.shape[1], int(y.max()) + 1, bits=args.bits, builtin=args.fake_quant == "builtin").to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    # SGD with momentum, as LSQ trains: Adam's normalisation turns the step sizes' small gradients, which jump when
    # a value crosses a rounding boundary, into full-size updates (PyTorch's own 20-step run at --seed 3 then moves
    # by 3e-3 under a 1e-6 perturbation of its weights; by 7e-6 with SGD at lr 0.05, 4-bit fc1 and fc2)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr or 0.05, momentum=0.9)
    data = batches(x, y, args.batch_size, device)
    prune_at = int(args.steps * args.prune_at)
    losses = []
    for step in range(args.steps):
        if step == prune_at:
            # the Parameters move to weight_orig (the optimizer keeps training them); masks zero the pruned entries
            prune.global_unstructured([(model.fc1, "weight"), (model.fc2, "weight")],
                                      pruning_method=prune.L1Unstructured, amount=args.prune_amount)
            prune.l1_unstructured(model.head, "weight", amount=args.prune_amount / 2)
        xb, yb = next(data)
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    for module in (model.fc1, model.fc2, model.head):
        if prune.is_pruned(module):
            prune.remove(module, "weight")
    model.eval()
    with torch.no_grad():
        accuracy = (model(xb).argmax(1) == yb).float().mean().item()
    print(f"last batch accuracy {accuracy:.2f}; sparsity fc1 {sparsity(model.fc1.weight):.2f}, "
          f"fc2 {sparsity(model.fc2.weight):.2f}, head {sparsity(model.head.weight):.2f}; "
          f"fc2 activation step {model.fc2.x_step.item():.4f}")
    return losses


# ---------------------------------------------------------------- LoRA adapters

class LoRALinear(nn.Module):
    def __init__(self, base, r=4, alpha=8):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / r
        self.merged = False

    @torch.no_grad()
    def init_principal(self, niter=4):
        """PiSSA: the adapter starts as the base weight's top-r singular directions (``torch.svd_lowrank``), which
        the base gives up, so the layer's output is unchanged."""
        U, S, V = torch.svd_lowrank(self.base.weight, q=self.lora_A.size(0), niter=niter)
        root = (S / self.scaling).sqrt()
        self.lora_B.copy_(U * root)
        self.lora_A.copy_(root.unsqueeze(1) * V.t())
        self.base.weight -= self.scaling * self.lora_B @ self.lora_A

    def forward(self, x):
        out = self.base(x)
        if not self.merged:
            out = out + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling
        return out

    @torch.no_grad()
    def merge(self):
        self.base.weight += (self.lora_B @ self.lora_A) * self.scaling
        self.merged = True


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Backbone(nn.Module):
    def __init__(self, features, outputs, dim=32, depth=2, use_checkpoint=True):
        super().__init__()
        self.embed = nn.Linear(features, dim)
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, outputs)
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.use_checkpoint and self.training else block(x)
        return self.head(x)


def add_lora(model, r, alpha, principal=False):
    """Freeze the backbone, then swap each block's Linears for adapted ones; the head stays trainable."""
    model.requires_grad_(False)
    for block in model.blocks:
        for name in ("fc1", "fc2"):
            adapted = LoRALinear(getattr(block, name), r=r, alpha=alpha)
            if principal:
                adapted.init_principal()
            setattr(block, name, adapted)
    model.head.requires_grad_(True)


def train_lowrank(args, device, init):
    rs = np.random.RandomState(args.seed)
    n, features, outputs = 8 * args.batch_size * args.accum, 24, 6
    x = rs.randn(n + 64, features)
    w1, w2 = rs.randn(features, 32) / math.sqrt(features), rs.randn(32, outputs) / math.sqrt(32)
    y = np.sin(x @ w1) @ w2 + 0.05 * rs.randn(n + 64, outputs)
    x, y = x.astype(np.float32), y.astype(np.float32)
    model = Backbone(features, outputs, use_checkpoint=not args.no_checkpoint)
    add_lora(model, args.rank, args.alpha, principal=args.lora_init == "pissa")
    model.to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    adapters = [p for name, p in model.named_parameters() if "lora_" in name]
    trainable = [p for p in model.parameters() if p.requires_grad]
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    print(f"trainable parameters {sum(p.numel() for p in trainable)} of {frozen + sum(p.numel() for p in trainable)}")
    lr = args.lr or 1e-2
    optimizer = torch.optim.AdamW([{"params": adapters, "weight_decay": 0.0},
                                   {"params": model.head.parameters(), "lr": lr / 2}], lr=lr, weight_decay=0.01)
    ema = parameters_to_vector(trainable).detach().clone()
    data = batches(x[:n], y[:n], args.batch_size, device)
    losses = []
    for _ in range(args.steps):
        optimizer.zero_grad()
        total = 0.0
        for _ in range(args.accum):
            xb, yb = next(data)
            loss = F.mse_loss(model(xb), yb) / args.accum
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        with torch.no_grad():
            ema.mul_(args.ema_decay).add_(parameters_to_vector(trainable), alpha=1 - args.ema_decay)
        losses.append(total)

    x_val, y_val = torch.from_numpy(x[n:]).to(device), torch.from_numpy(y[n:]).to(device)
    model.eval()
    with torch.no_grad():
        current = parameters_to_vector(trainable).clone()
        vector_to_parameters(ema, trainable)
        ema_loss = F.mse_loss(model(x_val), y_val).item()
        vector_to_parameters(current, trainable)
        before = model(x_val)
        for module in model.modules():
            if isinstance(module, LoRALinear):
                module.merge()
        after = model(x_val)
    if not torch.allclose(before, after, atol=1e-5, rtol=1e-4):
        raise RuntimeError(f"merged adapters changed the outputs by {(before - after).abs().max().item():.3g}")
    print(f"validation loss {F.mse_loss(after, y_val).item():.4f} (weight EMA {ema_loss:.4f}); merged outputs agree")
    return losses


TRAIN = {"moe": train_moe, "quant": train_quant, "lowrank": train_lowrank}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=sorted(TRAIN), default="moe")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=None, help="default: 3e-3 (moe), 0.05 (quant), 1e-2 (lowrank)")
    p.add_argument("--dispatch", choices=("sort", "mask", "einsum"), default="sort", help="moe")
    p.add_argument("--num-experts", type=int, default=4, help="moe")
    p.add_argument("--top-k", type=int, default=2, help="moe")
    p.add_argument("--capacity-factor", type=float, default=1.25, help="moe")
    p.add_argument("--aux-weight", type=float, default=0.01, help="moe: the balance and z-losses' weight")
    p.add_argument("--bits", type=int, default=4, help="quant: the LSQ layer's bits")
    p.add_argument("--fake-quant", choices=("ste", "builtin"), default="ste",
                   help="quant: the first layer's fake quantization by the STE expression or torch's ops")
    p.add_argument("--prune-at", type=float, default=0.5, help="quant: the fraction of the steps before pruning")
    p.add_argument("--prune-amount", type=float, default=0.4, help="quant")
    p.add_argument("--rank", type=int, default=4, help="lowrank")
    p.add_argument("--alpha", type=float, default=8.0, help="lowrank")
    p.add_argument("--lora-init", choices=("zeros", "pissa"), default="zeros",
                   help="lowrank: B zeros, or both factors from the base weight's top singular directions")
    p.add_argument("--accum", type=int, default=2, help="lowrank: micro-batches per step")
    p.add_argument("--no-checkpoint", action="store_true", help="lowrank")
    p.add_argument("--ema-decay", type=float, default=0.9, help="lowrank")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return TRAIN[args.arch](args, device, init)


if __name__ == "__main__":
    print(main())
