"""Transfer learning as PyTorch users write it. A small CNN (Conv2d/BatchNorm2d/ReLU blocks, AdaptiveAvgPool2d, an
``fc`` head) is pretrained on task A; its ``state_dict()`` goes through ``torch.save`` into an ``io.BytesIO`` and
back by ``torch.load(buf, map_location=..., weights_only=True)``. Fine-tuning on task B (other classes): either a
new model takes the pretrained dict without the head's keys (a dict comprehension on the key prefix) by
``load_state_dict(..., strict=False)``, its ``missing_keys`` / ``unexpected_keys`` checked, or the pretrained
model's head is replaced by ``nn.Linear(model.fc.in_features, classes)``. The backbone is frozen
(``p.requires_grad = False``, the trainable count by ``sum(p.numel() ...)``), its BatchNorms kept in eval mode by a
``train()`` override; AdamW over ``filter(lambda p: p.requires_grad, ...)`` in two groups (weight decay on
``p.ndim > 1`` only), CosineAnnealingLR, gradient accumulation and ``clip_grad_norm_``; either gradual unfreezing
(the last block's ``requires_grad = True`` and ``optimizer.add_param_group`` at a tenth of the lr, halfway) or
layer-wise lr decay groups built from ``named_parameters()`` by name. Midway a checkpoint dict (model, optimizer,
scheduler, step) is saved to a BytesIO and the run resumes on fresh objects from it; a ``copy.deepcopy`` of the
model trains uninterrupted beside it and the two must agree bit for bit. Validation passes count correct predictions
as the transfer-learning tutorial does (``torch.set_grad_enabled(False)``, ``torch.max``,
``running_corrects.double()``), the best weights kept by ``copy.deepcopy(model.state_dict())`` and loaded at the
end. Last, a linear probe: the pretrained backbone with ``fc = nn.Identity()``, ``eval().requires_grad_(False)``,
under ``no_grad()`` extracts features once (a ``register_forward_hook`` adds a middle block's pooled output, the
hook removed by its handle) and a ``nn.Linear`` trains on the cached features. The images: NumPy patterns drawn from
``--seed``. Only the imports name the framework.

    python finetune_idioms.py --steps 12

``main`` returns the training losses stage by stage: ``--steps`` pretraining steps, ``--steps`` fine-tuning
optimizer steps (each the mean of its micro-batches' losses), ``--steps`` linear-probe steps."""
import argparse
import copy
import io

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

def conv_block(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class Net(nn.Module):
    def __init__(self, num_classes, width=8):
        super().__init__()
        self.backbone = nn.Sequential(conv_block(3, width, 2), conv_block(width, 2 * width, 2),
                                      conv_block(2 * width, 2 * width, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(2 * width, num_classes)
        self.freeze_bn = False

    def train(self, mode=True):
        """Frozen BatchNorms keep their pretrained statistics: eval mode whatever the model's mode."""
        super().train(mode)
        if self.freeze_bn:
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.eval()
        return self

    def forward(self, x):
        return self.fc(self.backbone(x))


NUM_BLOCKS = 3  # backbone.0 .. backbone.2


def make_tasks(seed, n_a=256, n_b=128, n_val=64, size=16):
    """Task A: six blocky colour patterns; task B (training and validation sets): four mixtures of them, so A's
    features help on B."""
    rs = np.random.RandomState(seed)
    base = np.kron(rs.randn(6, 3, 4, 4), np.ones((1, 1, size // 4, size // 4)))
    mixed = np.einsum("kc,chwv->khwv", rs.randn(4, 6) / 2, base)

    def draw(templates, n):
        y = rs.randint(len(templates), size=n)
        x = templates[y] * rs.uniform(0.5, 1.5, (n, 1, 1, 1)) + 0.8 * rs.randn(n, 3, size, size)
        return TensorDataset(torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y))

    return draw(base, n_a), draw(mixed, n_b), draw(mixed, n_val)


def batches(dataset, args, device):
    """Mini-batches on ``device``, epoch after epoch; a shuffling loader draws from its own seeded generator, so
    two runs over the same dataset see the same batches."""
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=args.shuffle, drop_last=True,
                        generator=torch.Generator().manual_seed(args.seed))
    while True:
        for x, y in loader:
            yield x.to(device), y.to(device)


def pretrain(args, device, data, init):
    model = Net(6).to(device)
    init("pretrain", dict(model.named_parameters()))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    model.train()
    losses = []
    for _, (x, y) in zip(range(args.steps), batches(data, args, device)):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, map_location=device, weights_only=True)
    assert "backbone.0.1.running_var" in state and "backbone.0.1.num_batches_tracked" in state, list(state)
    return losses, state


def transferred(args, device, pretrained, init, classes=4):
    """A task-B model carrying the pretrained backbone and a fresh head."""
    if args.head == "filter":
        model = Net(classes).to(device)
        # the initial weights are set before the load: what the load replaces must come from the pretraining
        init("finetune", dict(model.named_parameters()))
        backbone_only = {k: v for k, v in pretrained.items() if not k.startswith("fc.")}
        result = model.load_state_dict(backbone_only, strict=False)
        assert sorted(result.missing_keys) == ["fc.bias", "fc.weight"] and not result.unexpected_keys, result
    else:
        model = Net(6).to(device)
        model.load_state_dict(pretrained)
        model.fc = nn.Linear(model.fc.in_features, classes).to(device)
        init("finetune", dict(model.named_parameters()))
    model.freeze_bn = True
    return model


def unfreeze_last_block(model, optimizer, args):
    block = model.backbone[NUM_BLOCKS - 1]
    for p in block.parameters():
        p.requires_grad = True
    optimizer.add_param_group({"params": list(block.parameters()), "lr": args.ft_lr * 0.1})


def param_groups(model, args):
    """Weight decay on weights only (no biases, no norms); with layer-wise lr decay one pair of groups per depth,
    read from the parameters' names, the head's lr the largest."""
    if args.schedule == "gradual":
        params = list(filter(lambda p: p.requires_grad, model.parameters()))
        return [{"params": [p for p in params if p.ndim > 1], "weight_decay": args.weight_decay},
                {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]
    groups = {}
    for name, p in model.named_parameters():
        depth = int(name.split(".")[1]) if name.startswith("backbone.") else NUM_BLOCKS
        decay = p.ndim > 1
        group = groups.setdefault((depth, decay), {"params": [], "lr": args.ft_lr * args.layer_decay ** (
            NUM_BLOCKS - depth), "weight_decay": args.weight_decay if decay else 0.0})
        group["params"].append(p)
    return list(groups.values())


def setup(model, args, step):
    """The trainable parameters, optimizer and scheduler of fine-tuning as they stand before ``step``."""
    if args.schedule == "gradual":
        for p in model.backbone.parameters():
            p.requires_grad = False
        count = sum(p.numel() for p in model.parameters() if p.requires_grad)
        assert count == model.fc.weight.numel() + model.fc.bias.numel(), count
    optimizer = torch.optim.AdamW(param_groups(model, args), lr=args.ft_lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
    if args.schedule == "gradual" and step > args.steps // 2:
        unfreeze_last_block(model, optimizer, args)
    model.train()
    assert not any(m.training for m in model.modules() if isinstance(m, nn.BatchNorm2d))
    return optimizer, scheduler


def resume(model, optimizer, scheduler, step, args, device):
    """A checkpoint through a BytesIO, then fresh objects restored from it, as after a restart."""
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "step": step}, buf)
    buf.seek(0)
    checkpoint = torch.load(buf, map_location="cpu", weights_only=True)
    model = Net(4).to(device)
    model.freeze_bn = True
    model.load_state_dict(checkpoint["model"])
    optimizer, scheduler = setup(model, args, checkpoint["step"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    return model, optimizer, scheduler, checkpoint["step"]


def evaluate(model, data, args, device):
    """Validation accuracy as the transfer-learning tutorial counts it; back in training mode afterwards."""
    model.eval()
    running_corrects = 0
    with torch.set_grad_enabled(False):
        for x, y in DataLoader(data, batch_size=args.batch_size):
            x, y = x.to(device), y.to(device)
            _, preds = torch.max(model(x), 1)
            running_corrects += torch.sum(preds == y.data)
    model.train()
    assert not any(m.training for m in model.modules() if isinstance(m, nn.BatchNorm2d))
    return (running_corrects.double() / len(data)).item()


def finetune(model, args, device, data, val_data, resume_at=None):
    """The fine-tuning losses and the best validation accuracy, whose weights the model ends with."""
    optimizer, scheduler = setup(model, args, 0)
    stream = batches(data, args, device)
    losses, step = [], 0
    best_acc, best_weights = evaluate(model, val_data, args, device), copy.deepcopy(model.state_dict())
    while step < args.steps:
        if step == resume_at:
            model, optimizer, scheduler, step = resume(model, optimizer, scheduler, step, args, device)
        if args.schedule == "gradual" and step == args.steps // 2:
            unfreeze_last_block(model, optimizer, args)
        running = 0.0
        for _ in range(args.accum):
            x, y = next(stream)
            loss = F.cross_entropy(model(x), y)
            (loss / args.accum).backward()
            running += loss.item() / args.accum
        torch.nn.utils.clip_grad_norm_(filter(lambda p: p.requires_grad, model.parameters()), args.clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(running)
        step += 1
        if step % args.eval_every == 0:
            acc = evaluate(model, val_data, args, device)
            if acc > best_acc:
                best_acc, best_weights = acc, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_weights)
    assert evaluate(model, val_data, args, device) == best_acc
    return losses, best_acc


def linear_probe(args, device, data, pretrained, init, classes=4):
    extractor = Net(6).to(device)
    extractor.load_state_dict(pretrained)
    extractor.fc = nn.Identity()
    extractor.eval().requires_grad_(False)
    captured = []
    handle = extractor.backbone[1].register_forward_hook(lambda m, inputs, out: captured.append(out.mean((2, 3))))
    cache = []
    with torch.no_grad():
        for _, (x, y) in zip(range(len(data) // args.batch_size), batches(data, args, device)):
            cache.append((torch.cat([extractor(x), captured[-1]], dim=1), y))
        handle.remove()
        extractor(x)
    assert len(captured) == len(cache), "the hook ran after its removal"
    probe = nn.Linear(cache[0][0].size(1), classes).to(device)
    init("probe", dict(probe.named_parameters()))
    optimizer = torch.optim.SGD(probe.parameters(), lr=args.probe_lr, momentum=0.9)
    losses = []
    for step in range(args.steps):
        features, y = cache[step % len(cache)]
        optimizer.zero_grad()
        loss = F.cross_entropy(probe(features), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=12, help="steps of each stage")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05, help="pretraining SGD lr")
    p.add_argument("--ft-lr", type=float, default=0.03, help="fine-tuning AdamW lr (the head's)")
    p.add_argument("--probe-lr", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--layer-decay", type=float, default=0.5, help="lr factor per block down from the head (llrd)")
    p.add_argument("--accum", type=int, default=2, help="micro-batches per fine-tuning step")
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clip")
    p.add_argument("--eval-every", type=int, default=2, help="fine-tuning steps between validation passes")
    p.add_argument("--head", choices=("filter", "replace"), default="filter",
                   help="load the backbone's keys only (strict=False) or replace the loaded model's fc")
    p.add_argument("--schedule", choices=("gradual", "llrd"), default="gradual",
                   help="frozen backbone unfrozen halfway, or all layers with layer-wise lr decay")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false")
    return p.parse_args(argv)


def main(argv=None, init=None):
    """Pretrain, fine-tune, probe; ``init(stage, params)``, if given, may set each stage's initial parameters."""
    args = parse_args(argv)
    init = init or (lambda stage, params: None)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    task_a, task_b, val_b = make_tasks(args.seed)

    losses, pretrained = pretrain(args, device, task_a, init)
    model = transferred(args, device, pretrained, init)
    reference = finetune(copy.deepcopy(model), args, device, task_b, val_b)
    tuned, best_acc = finetune(model, args, device, task_b, val_b, resume_at=args.steps * 2 // 3)
    assert (tuned, best_acc) == reference, ((tuned, best_acc), reference)
    losses += tuned
    losses += linear_probe(args, device, task_b, pretrained, init)
    print(f"pretrain {losses[0]:.3f} -> {losses[args.steps - 1]:.3f}, finetune {tuned[0]:.3f} -> {tuned[-1]:.3f}, "
          f"probe {losses[-args.steps]:.3f} -> {losses[-1]:.3f}; best validation accuracy {best_acc:.2f}")
    return losses


if __name__ == "__main__":
    print(main())
