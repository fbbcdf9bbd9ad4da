"""Train an MLP or a CNN on MNIST with minifused.

    python examples/mnist/train.py                       # MLP, the default recipe, 10 epochs
    python examples/mnist/train.py --model cnn --plot curves.png
    python examples/mnist/train.py --device cpu --limit 2000 --epochs 1   # quick, no GPU
    python examples/mnist/train.py --dtype bf16          # mixed precision (fp16: with loss scaling)
    python -m minifused.distributed.run --nproc-per-node 2 examples/mnist/train.py --ddp   # 2 GPUs

The data are read from ``--data-dir`` (else ``$MINIFUSED_DATA``, else ``~/.cache/minifused``),
downloaded there when missing. The whole dataset lives on the device; batches are
gathered there. A checkpoint (model, optimizer, scheduler, epoch, RNG state,
history) is written atomically after every epoch when ``--checkpoint`` is given;
``--resume`` continues from it (an error when it does not exist, unless ``--allow-fresh``: then a new
run starts there, for a job that is restarted with the same command).

On the GPU each training step (forward, backward, optimizer update) is captured once
into a CUDA graph and replayed per batch (``minifused.capture_step``; ``--no-graph``
runs it eagerly); the loss is read back every ``--log-every`` steps only.
``--dtype bf16|fp16`` trains a bfloat16 / float16 model with fp32 master weights in
the optimizer and fp32 loss statistics, and dynamic loss scaling for fp16
(``minifused.amp``).

Default recipe (the issue's "example recipe"): AdamW (lr 1e-3, weight decay 0.01),
batch 128, cosine decay of the lr per step to 0, dropout 0.2 in the MLP (the CNN
has its own dropouts, 0.25 and 0.5, as in PyTorch's example), 10 epochs.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused import amp, optim
from minifused.data import MNIST, DataLoader
from minifused.distributed import DistributedSampler

CHECKPOINT_FORMAT = "minifused-mnist-checkpoint-1"


# ---------------------------------------------------------------- models
class MLP(nn.Module):
    """784-1024-1024-10 with ReLU; each ReLU runs inside its Linear's GEMM (cuBLASLt epilog)."""

    def __init__(self, dropout=0.0):
        super().__init__()
        self.fc1 = nn.Linear(784, 1024, activation="relu")
        self.fc2 = nn.Linear(1024, 1024, activation="relu")
        self.fc3 = nn.Linear(1024, 10)
        self.p = dropout

    def forward(self, x):
        x = x.flatten(1)
        x = F.dropout(self.fc1(x), self.p, self.training)
        x = F.dropout(self.fc2(x), self.p, self.training)
        return self.fc3(x)


class CNN(nn.Module):
    """PyTorch's examples/mnist network, with the same attribute names (so state dicts match)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1, activation="relu")
        self.conv2 = nn.Conv2d(32, 64, 3, 1, activation="relu")
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128, activation="relu")
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv2(self.conv1(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x).flatten(1)
        x = self.dropout2(self.fc1(x))
        return self.fc2(x)


def conv_bn(cin, cout, stride=1, relu=True):
    """3x3 convolution (no bias: the BatchNorm's shift is one), BatchNorm and, optionally, its ReLU, which
    ``Sequential`` runs as one op, the ReLU inside the BatchNorm's kernel."""
    layers = [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, nn.ReLU()) if relu else nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 conv-BN layers and the shortcut (a strided 1x1 conv-BN where the shape
    changes), added before the last ReLU."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, cout, stride), conv_bn(cout, cout, relu=False))
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.body(x) + self.shortcut(x))


class ResNet(nn.Module):
    """A small ResNet for 28x28 digits: a 3x3 stem, three stages of two basic blocks (32, 64 and 128
    channels, the last two starting with stride 2), global average pooling and one Linear."""

    def __init__(self, widths=(32, 64, 128)):
        super().__init__()
        blocks, cin = [], widths[0]
        for i, w in enumerate(widths):
            blocks += [BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w)]
            cin = w
        self.stem = conv_bn(1, widths[0])
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[-1], 10)

    def forward(self, x):
        return self.fc(self.pool(self.blocks(self.stem(x))).flatten(1))


MODELS = {"mlp": MLP, "cnn": CNN, "resnet": ResNet}


def build_model(name, dropout=0.0):
    if name == "mlp":
        return MLP(dropout)
    if name in MODELS:
        return MODELS[name]()
    raise ValueError(f"unknown model {name!r}; expected one of {sorted(MODELS)}")


def build_optimizer(name, params, lr, weight_decay, master_weights=False):
    """``master_weights``: fp32 master copies of float16/bfloat16 parameters (mixed precision)."""
    kw = dict(lr=lr, weight_decay=weight_decay, master_weights=master_weights)
    if name == "sgd":
        return optim.SGD(params, momentum=0.9, **kw)
    if name == "adam":
        return optim.Adam(params, **kw)
    if name == "adamw":
        return optim.AdamW(params, **kw)
    raise ValueError(f"unknown optimizer {name!r}")


def build_scheduler(name, optimizer, total_steps, lr):
    if name == "none":
        return None
    if name == "cosine":
        return optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)
    if name == "onecycle":
        return optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=total_steps)
    raise ValueError(f"unknown schedule {name!r}")


# ---------------------------------------------------------------- loops
def evaluate(model, loader):
    """Accuracy in percent; counts accumulate on the device, one read at the end."""
    model.eval()
    correct = None
    with mf.no_grad():
        for x, y in loader:
            hits = (model(x).argmax(1) == y).sum()
            correct = hits if correct is None else correct + hits
    model.train()
    return 100.0 * int(correct.item()) / loader.n


def make_step(model, optimizer, scaler=None):
    """One training step as a function of the batch: what ``capture_step`` records. The loss
    is computed in fp32 whatever the model's dtype; ``scaler`` (fp16) scales it, and its
    step unscales the gradients and skips the update on inf/NaN, all on the device."""
    scaler = scaler or amp.GradScaler(enabled=False)

    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    return step


def train_epoch(model, optimizer, scheduler, loader, bar=None, log_every=50, step=None):
    """One pass; returns the mean training loss. The loss is read from the device every
    ``log_every`` steps only (for the progress bar), never per step. ``step`` is the
    training step (``make_step``'s, possibly wrapped by ``capture_step``)."""
    model.train()
    step = step or make_step(model, optimizer)
    total, window, steps, seen = None, None, 0, 0
    for x, y in loader:
        d = step(x, y)  # a graph's output buffer is rewritten by the next replay: sum copies
        if scheduler is not None:
            scheduler.step()
        total = d.clone() if total is None else total + d
        steps += 1
        seen += len(y)
        if bar is not None:
            window = d.clone() if window is None else window + d
            bar.update(len(y))
            if steps % log_every == 0:
                bar.set_postfix(loss=f"{window.item() / log_every:.4f}")
                window = None
    return total.item() / max(steps, 1)


# ---------------------------------------------------------------- checkpoints
def save_checkpoint(path, args, model, optimizer, scheduler, epoch, history, scaler=None):
    mf.save({"format": CHECKPOINT_FORMAT, "arch": args.model, "epoch": epoch,
             "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "scaler": scaler.state_dict() if scaler is not None else {},
             "scheduler": scheduler.state_dict() if scheduler is not None else None,
             "rng": mf.get_rng_state(), "history": history,
             "recipe": {k: getattr(args, k) for k in ("optimizer", "lr", "weight_decay", "batch_size",
                                                     "schedule", "dropout", "seed", "epochs", "limit")}},
            path)


def load_checkpoint(path, args, model, optimizer, scheduler, device, scaler=None):
    ckpt = mf.load(path, map_location=str(device))
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise SystemExit(f"{path}: not a checkpoint of this example (format {ckpt.get('format') if isinstance(ckpt, dict) else None!r})")
    if ckpt["arch"] != args.model:
        raise SystemExit(f"{path}: checkpoint of model '{ckpt['arch']}', but --model {args.model} was asked for")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    if scheduler is not None and ckpt["scheduler"] is not None:
        scheduler.load_state_dict(ckpt["scheduler"])
    if scaler is not None and ckpt.get("scaler"):
        scaler.load_state_dict(ckpt["scaler"])
    mf.set_rng_state(ckpt["rng"])
    return ckpt["epoch"] + 1, ckpt["history"]


def plot(path, history):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = list(range(1, len(history["train_loss"]) + 1))
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(epochs, history["train_loss"], marker="o")
    a.set_xlabel("epoch"), a.set_ylabel("training loss"), a.set_yscale("log"), a.grid(True, alpha=0.3)
    b.plot(epochs, history["test_acc"], marker="o", color="tab:green")
    b.set_xlabel("epoch"), b.set_ylabel("test accuracy (%)"), b.grid(True, alpha=0.3)
    fig.tight_layout()
    tmp = f"{path}.tmp.png"
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)


# ---------------------------------------------------------------- main
def _positive(text):
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=tuple(MODELS), default="mlp", help="the network")
    p.add_argument("--epochs", type=_positive, default=10, help="passes over the training set")
    p.add_argument("--batch-size", type=_positive, default=128, help="training batch size")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    p.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="adamw", help="the optimizer")
    p.add_argument("--weight-decay", type=float, default=None,
                   help="default: 0.01 for adamw, 0 otherwise")
    p.add_argument("--schedule", choices=("none", "cosine", "onecycle"), default="cosine",
                   help="lr schedule, stepped every batch")
    p.add_argument("--dropout", type=float, default=0.2, help="MLP dropout after each hidden layer")
    p.add_argument("--dtype", default="float32", help="float32, bf16 (bfloat16) or fp16 (float16): low "
                                                      "precision trains with fp32 master weights")
    p.add_argument("--tf32", choices=("conv", "all", "off"), default="conv",
                   help="float32 on TF32 tensor cores: 'conv' (PyTorch's defaults: convolutions in TF32, "
                        "matmuls in full float32), 'all', or 'off'")
    p.add_argument("--no-graph", action="store_true", help="run the training step eagerly, not from a CUDA graph")
    p.add_argument("--log-every", type=_positive, default=50, help="read the loss for the progress bar every K steps")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when usable)")
    p.add_argument("--data-dir", default=None, help="root holding mnist/ (default $MINIFUSED_DATA, "
                                                    "else ~/.cache/minifused)")
    p.add_argument("--seed", type=int, default=0, help="seeds initialization, shuffling and dropout")
    p.add_argument("--limit", type=_positive, default=None, help="use the first N training images")
    p.add_argument("--test-limit", type=_positive, default=None, help="use the first N test images")
    p.add_argument("--checkpoint", default=None, help="write a checkpoint here after every epoch")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint (which must exist)")
    p.add_argument("--allow-fresh", action="store_true",
                   help="with --resume: start a new run when the checkpoint does not exist yet")
    p.add_argument("--plot", default=None, help="write loss and accuracy curves to this PNG")
    p.add_argument("--no-progress", action="store_true", help="no tqdm bar")
    p.add_argument("--ddp", action="store_true", help="data parallel, one process per GPU: start with python -m "
                   "minifused.distributed.run --nproc-per-node N train.py --ddp (--batch-size is per process)")
    args = p.parse_args(argv)
    if args.weight_decay is None:
        args.weight_decay = 0.01 if args.optimizer == "adamw" else 0.0
    if args.resume and not args.checkpoint:
        p.error("--resume needs --checkpoint PATH")
    if args.resume and not args.allow_fresh and not Path(args.checkpoint).exists():
        p.error(f"--resume: {args.checkpoint} does not exist (add --allow-fresh to start a new run there)")
    try:
        dtype = mf.backend.as_dtype(args.dtype)
    except TypeError:
        dtype = None
    if dtype not in (mf.float32, mf.bfloat16, mf.float16):
        p.error(f"--dtype {args.dtype}: expected float32, bf16 or fp16")
    if args.device is not None and not args.ddp:
        try:
            mf.backend.device(args.device)
        except (ValueError, RuntimeError, TypeError) as e:
            p.error(f"--device {args.device}: {e}")
    return args


def main(argv=None):
    args = parse_args(argv)
    # the math-mode flags are process-wide: restore them when done (tests call main in-process)
    saved = mf.backends.cudnn.allow_tf32, mf.backends.cuda.matmul.allow_tf32
    try:
        return _main(args)
    finally:
        mf.backends.cudnn.allow_tf32, mf.backends.cuda.matmul.allow_tf32 = saved


def _main(args):
    rank = 0
    if args.ddp:  # under minifused.distributed.run; only rank 0 prints, plots and saves checkpoints
        import minifused.distributed as dist

        dist.init_process_group("cpu" if args.device == "cpu" or not mf.cuda_available() else "nccl")
        rank = dist.get_rank()
        if args.device in (None, "cuda"):
            args.device = str(mf.default_device())  # cuda:LOCAL_RANK
        if rank != 0:
            sys.stdout = open(os.devnull, "w")
    device = mf.backend.device(args.device)
    dtype = mf.backend.as_dtype(args.dtype)  # checked by parse_args
    low_precision = dtype != mf.float32
    mf.backends.cudnn.allow_tf32 = args.tf32 in ("conv", "all")
    mf.backends.cuda.matmul.allow_tf32 = args.tf32 == "all"
    mf.manual_seed(args.seed)

    train_set = MNIST(args.data_dir, train=True)
    test_set = MNIST(args.data_dir, train=False)
    for ds, n in ((train_set, args.limit), (test_set, args.test_limit)):
        if n is not None:
            ds.data, ds.targets = ds.data[:n], ds.targets[:n]
    train_loader = DataLoader(train_set, args.batch_size, shuffle=not args.ddp, drop_last=False, seed=args.seed,
                              device=device, dtype=dtype,
                              sampler=DistributedSampler(train_set, seed=args.seed) if args.ddp else None)
    test_loader = DataLoader(test_set, 1000, device=device, dtype=dtype)

    model = build_model(args.model, args.dropout).to(device, dtype)
    if args.ddp:  # state_dict keys stay the plain model's: checkpoints load either way
        model = dist.DistributedDataParallel(model)
    optimizer = build_optimizer(args.optimizer, model.parameters(), args.lr, args.weight_decay,
                                master_weights=low_precision)
    scheduler = build_scheduler(args.schedule, optimizer, args.epochs * len(train_loader), args.lr)
    scaler = amp.GradScaler(enabled=dtype == mf.float16)
    step = make_step(model, optimizer, scaler)
    graphed = device.type == "cuda" and not args.no_graph
    if graphed:
        step = mf.capture_step(step)

    start, history = 0, {"train_loss": [], "test_acc": [], "epoch_s": []}
    if args.resume and Path(args.checkpoint).exists():
        start, history = load_checkpoint(args.checkpoint, args, model, optimizer, scheduler, device, scaler)
        print(f"resumed from {args.checkpoint} after epoch {start}", flush=True)

    tqdm = None
    if not args.no_progress and rank == 0:
        try:
            from tqdm import tqdm
        except ImportError:
            pass
    print(f"{args.model} on {device} ({args.dtype}{', CUDA graphs' if graphed else ''}), {train_loader.n} training / {test_loader.n} test images, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters", flush=True)
    for epoch in range(start, args.epochs):
        train_loader.set_epoch(epoch)
        bar = tqdm(total=train_loader.n, unit="img", unit_scale=True, desc=f"epoch {epoch + 1}/{args.epochs}",
                   leave=False, file=sys.stdout) if tqdm else None
        mf.backend.synchronize()
        t0 = time.perf_counter()
        loss = train_epoch(model, optimizer, scheduler, train_loader, bar, args.log_every, step)  # ends synced
        seconds = time.perf_counter() - t0
        if args.ddp:  # the mean over ranks (each saw its own shard)
            loss = dist.all_reduce(mf.tensor([loss], device="cpu"), "avg").item()
        if bar is not None:
            bar.close()
        acc = evaluate(model, test_loader)
        history["train_loss"].append(loss)
        history["test_acc"].append(acc)
        history["epoch_s"].append(seconds)
        print(f"epoch {epoch + 1}: loss {loss:.4f}, test accuracy {acc:.2f} %, {seconds:.2f} s, "
              f"{train_loader.n / seconds:,.0f} samples/s", flush=True)
        if args.checkpoint and rank == 0:
            save_checkpoint(args.checkpoint, args, model, optimizer, scheduler, epoch, history, scaler)
        if args.plot and rank == 0:
            plot(args.plot, history)
    times = history["epoch_s"]
    summary = {"model": args.model, "dtype": str(dtype), "graphed": graphed, "test_acc": history["test_acc"][-1] if history["test_acc"] else math.nan,
               "s_per_epoch": sum(times) / len(times) if times else math.nan,
               "samples_per_s": train_loader.n * len(times) / sum(times) if times else math.nan,
               "history": history}
    print(f"final: test accuracy {summary['test_acc']:.2f} % | {summary['s_per_epoch']:.2f} s/epoch | "
          f"{summary['samples_per_s']:,.0f} samples/s | {len(history['test_acc'])} epochs", flush=True)
    return summary


if __name__ == "__main__":
    main()
