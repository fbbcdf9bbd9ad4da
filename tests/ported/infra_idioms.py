"""A small CNN classifier trained with the infrastructure PyTorch users put around a model: activation
checkpointing of a residual block (``torch.utils.checkpoint.checkpoint``, ``use_reentrant=False``); gradient
accumulation over micro-batches (``loss / accum``, one ``optimizer.step()`` every ``accum``); a checkpoint of
model, optimizer, scheduler, EMA, SWA model, generator states and step written with ``torch.save`` into an
``io.BytesIO`` halfway, loaded with ``torch.load`` into a freshly built model, optimizer and scheduler, and the
training resumed from it, step for step as the run that went on (the script checks that: bit for bit on the CPU);
an exponential moving average of the weights written by hand (``p_ema.mul_(d).add_(p, alpha=1 - d)`` under
``torch.no_grad()``) and a stochastic weight average (``AveragedModel``, ``update_bn``); a forward hook capturing
the block's activations (removed with ``handle.remove()``), a full backward hook logging the head's output
gradient, ``Tensor.register_hook`` clamping each parameter's gradient and logging the features' gradient; the stem
frozen (``requires_grad_(False)``) and later unfrozen into a new parameter group (``add_param_group``);
initialisation by ``model.apply`` (``kaiming_normal_`` fan-out ReLU, ``xavier_uniform_``, ``constant_`` for the
norms); CPU bfloat16 autocast (``--amp``). The data: a ``TensorDataset`` of NumPy images drawn from ``--seed``
read by a ``DataLoader`` with a custom ``collate_fn``, in order or through a ``WeightedRandomSampler`` or a
``SubsetRandomSampler`` reseeded every epoch (``--sampler``), the validation rows split off in order or by
``random_split`` with a seeded ``Generator`` (``--random-split``; the frameworks' generators draw different
splits). Only the imports name the framework.

    python infra_idioms.py --steps 16

``main`` returns the training loss of every optimizer step (those past the checkpoint from the resumed run)."""
import argparse
import copy
import io

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, update_bn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, Subset, SubsetRandomSampler, TensorDataset, WeightedRandomSampler, random_split


class ResidualBlock(nn.Module):
    def __init__(self, channels, dropout):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.drop = nn.Dropout2d(dropout)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.conv2(self.drop(out)))


class Net(nn.Module):
    def __init__(self, channels=8, classes=4, dropout=0.0, use_checkpoint=True):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, channels, 3, padding=1, bias=False), nn.GroupNorm(2, channels),
                                  nn.ReLU())
        self.block = ResidualBlock(channels, dropout)
        self.head = nn.Linear(2 * channels, classes)
        self.use_checkpoint = use_checkpoint
        self.feature_grad_norms = []

    def forward(self, x):
        x = self.stem(x)
        if self.use_checkpoint and self.training:
            x = checkpoint(self.block, x, use_reentrant=False)
        else:
            x = self.block(x)
        features = torch.cat([F.adaptive_avg_pool2d(x, 1), F.adaptive_max_pool2d(x, 1)], dim=1).flatten(1)
        if features.requires_grad:
            features.register_hook(lambda g: self.feature_grad_norms.append(g.norm().item()))
        return self.head(features)


def init_weights(m):
    if isinstance(m, nn.Conv2d):
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Linear):
        nn.init.xavier_uniform_(m.weight)
        nn.init.constant_(m.bias, 0.0)
    elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
        nn.init.constant_(m.weight, 1.0)
        nn.init.constant_(m.bias, 0.0)


def make_data(n, size=8, classes=4, seed=0):
    """Images whose class is the quadrant holding a bright blob, over noise; the classes unbalanced."""
    rs = np.random.RandomState(seed)
    y = rs.choice(classes, n, p=[0.4, 0.3, 0.2, 0.1])
    x = 0.5 * rs.randn(n, 1, size, size)
    half = size // 2
    for i, c in enumerate(y):
        r, col = (c // 2) * half + rs.randint(0, half - 1), (c % 2) * half + rs.randint(0, half - 1)
        x[i, 0, r:r + 2, col:col + 2] += 1.5
    return TensorDataset(torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y))


def collate(batch):
    images, labels = zip(*batch)
    return {"image": torch.stack(images), "label": torch.tensor([int(y) for y in labels])}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=16, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=16, help="micro-batch size")
    p.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--clip-value", type=float, default=0.5, help="each gradient element clamped to this")
    p.add_argument("--unfreeze-at", type=int, default=None, help="the step the stem joins (default: a quarter)")
    p.add_argument("--save-at", type=int, default=None, help="the step the checkpoint is taken (default: half)")
    p.add_argument("--ema-decay", type=float, default=0.9)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--sampler", choices=("none", "weighted", "subset"), default="none")
    p.add_argument("--random-split", action="store_true", help="validation rows by random_split, not the last")
    p.add_argument("--amp", action="store_true", help="bfloat16 autocast on the CPU")
    p.add_argument("--no-checkpoint", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def build(args, device):
    """A model with its hooks, frozen stem, optimizer and scheduler; the EMA and SWA copies."""
    model = Net(dropout=args.dropout, use_checkpoint=not args.no_checkpoint).to(device)
    model.apply(init_weights)
    for p in model.parameters():  # gradient value clipping, element by element, as each gradient arrives
        p.register_hook(lambda grad: torch.clamp(grad, -args.clip_value, args.clip_value))
    ema_model = copy.deepcopy(model)
    for p in ema_model.parameters():
        p.requires_grad_(False)
    swa_model = AveragedModel(model)
    model.stem.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=max(1, args.steps // 3), gamma=0.5)
    return model, ema_model, swa_model, optimizer, scheduler


def unfreeze(model, optimizer, args):
    model.stem.requires_grad_(True)
    optimizer.add_param_group({"params": model.stem.parameters(), "lr": args.lr * 0.5, "weight_decay": 0.0})


def epochs(loader, generator, seed, start):
    """The loader's batches from the ``start``-th on; each epoch's order fixed by reseeding ``generator``."""
    epoch = start // len(loader)
    while True:
        generator.manual_seed(seed + epoch)
        for i, batch in enumerate(loader):
            if epoch * len(loader) + i >= start:
                yield batch
        epoch += 1


def train(state, loader, generator, args, device, start, stop):
    model, ema_model, swa_model, optimizer, scheduler = state
    losses = []
    stream = epochs(loader, generator, args.seed, start * args.accum)
    model.train()
    for step in range(start, stop):
        if step == args.unfreeze_at:
            unfreeze(model, optimizer, args)
        running = 0.0
        for _ in range(args.accum):
            batch = next(stream)
            x, y = batch["image"].to(device), batch["label"].to(device)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp):
                loss = F.cross_entropy(model(x), y)
            (loss / args.accum).backward()
            running += loss.item() / args.accum
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        decay = min(args.ema_decay, (1 + step) / (10 + step))
        with torch.no_grad():
            for p_ema, p in zip(ema_model.parameters(), model.parameters()):
                p_ema.mul_(decay).add_(p, alpha=1 - decay)
            for b_ema, b in zip(ema_model.buffers(), model.buffers()):
                b_ema.copy_(b)
        if step >= args.steps // 2:
            swa_model.update_parameters(model)
        losses.append(running)
    return losses


def save(state, step, buffer):
    model, ema_model, swa_model, optimizer, scheduler = state
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "ema": ema_model.state_dict(), "swa": swa_model.state_dict(),
                "step": step, "rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}, buffer)


def resume(buffer, args, device):
    buffer.seek(0)
    # each tensor back on the device it was saved from: the generators' states on the CPU, as set_rng_state wants
    ckpt = torch.load(buffer, weights_only=True)
    state = build(args, device)
    model, ema_model, swa_model, optimizer, scheduler = state
    if ckpt["step"] > args.unfreeze_at:  # the optimizer had the stem's group: the new one needs it to load
        unfreeze(model, optimizer, args)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    ema_model.load_state_dict(ckpt["ema"])
    swa_model.load_state_dict(ckpt["swa"])
    torch.set_rng_state(ckpt["rng"])  # dropout draws what the run that went on drew
    if ckpt["cuda_rng"] is not None:
        torch.cuda.set_rng_state_all(ckpt["cuda_rng"])
    return state, ckpt["step"]


def evaluate(model, dataset, device):
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with torch.inference_mode():
        for batch in DataLoader(dataset, batch_size=64, collate_fn=collate):
            out = model(batch["image"].to(device))
            y = batch["label"].to(device)
            loss_sum += F.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
    return loss_sum / total, correct / total


def main(argv=None, init=None):
    args = parse_args(argv)
    args.unfreeze_at = args.steps // 4 if args.unfreeze_at is None else args.unfreeze_at
    args.save_at = args.steps // 2 if args.save_at is None else args.save_at
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    full = make_data(480, seed=args.seed)
    if args.random_split:
        train_set, valid_set = random_split(full, [0.8, 0.2], generator=torch.Generator().manual_seed(args.seed))
    else:
        train_set, valid_set = Subset(full, range(384)), Subset(full, range(384, 480))
    generator = torch.Generator()
    labels = torch.stack([train_set[i][1] for i in range(len(train_set))])
    if args.sampler == "weighted":  # each class drawn as often as the others
        class_weights = 1.0 / torch.bincount(labels, minlength=4).double()
        sampler = WeightedRandomSampler(class_weights[labels], num_samples=len(train_set), generator=generator)
    elif args.sampler == "subset":  # a random order of the rows that are not the rarest class
        sampler = SubsetRandomSampler(torch.nonzero(labels != 3).flatten().tolist(), generator=generator)
    else:
        sampler = None
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, collate_fn=collate, drop_last=True,
                        generator=generator)

    state = build(args, device)
    model = state[0]
    if init is not None:
        init("model", dict(model.named_parameters()))
        with torch.no_grad():  # the averages start from the injected weights too
            for p_ema, p in zip(state[1].parameters(), model.parameters()):
                p_ema.copy_(p)
    activations, calls = {}, []

    def capture(module, inputs, output):
        activations["block"] = output.detach()
        calls.append(output.shape[0])

    handle = model.block.register_forward_hook(capture)
    head_grads = []
    model.head.register_full_backward_hook(lambda m, grad_input, grad_output:
                                           head_grads.append(grad_output[0].norm().item()))

    first = train(state, loader, generator, args, device, 0, args.save_at)
    dead = (activations["block"] == 0).float().mean().item()
    handle.remove()
    buffer = io.BytesIO()
    save(state, args.save_at, buffer)
    going_on = train(state, loader, generator, args, device, args.save_at, args.steps)

    resumed_state, start = resume(buffer, args, device)
    resumed = train(resumed_state, loader, generator, args, device, start, args.steps)
    # bit for bit on the CPU; a GPU's kernels may sum in another order from run to run
    tol = dict(rtol=0.0, atol=0.0) if device.type == "cpu" else dict(rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(resumed, going_on, **tol)
    for a, b in zip(resumed_state[:3], state[:3]):  # model, EMA and SWA
        torch.testing.assert_close(a.state_dict(), b.state_dict(), **tol)

    model, ema_model, swa_model = resumed_state[:3]
    update_bn([batch["image"] for batch in DataLoader(train_set, batch_size=64, collate_fn=collate)], swa_model,
              device=device)
    for name, m in (("model", model), ("EMA", ema_model), ("SWA", swa_model)):
        loss, accuracy = evaluate(m, valid_set, device)
        print(f"{name}: validation loss {loss:.3f}, accuracy {accuracy:.2f}")
    print(f"block forward hook calls {len(calls)}, dead fraction {dead:.2f}; head gradient norms {len(head_grads)}, "
          f"feature gradient norms {len(state[0].feature_grad_norms)}")
    return first + resumed


if __name__ == "__main__":
    print(main())
