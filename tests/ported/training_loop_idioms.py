"""An MLP classifier trained with the bookkeeping PyTorch training loops carry around the model: a
train / validation ``random_split`` (seeded ``Generator``) of a ``ConcatDataset`` of ``Subset`` s, a custom
``collate_fn``; ``model.apply`` initialisation; AdamW with no weight decay on biases and norms (parameter
groups from ``named_parameters``), a linear-warmup + cosine ``LambdaLR``; gradient accumulation over
micro-batches with ``clip_grad_norm_``; an EMA of the weights and buffers (``AveragedModel`` with
``get_ema_multi_avg_fn``); label smoothing; a frozen embedding (``requires_grad_(False)``); evaluation under
``inference_mode`` with ``argmax`` / ``topk`` accuracy; early-stopping bookkeeping keeping the best
state_dict; a checkpoint saved and loaded back (``map_location``) and training resumed from it. Only the
imports name the framework.

    python training_loop_idioms.py --steps 12

``main`` returns the training loss of every optimizer step."""
import argparse
import copy
import io
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import ConcatDataset, DataLoader, Subset, TensorDataset, random_split


class Net(nn.Module):
    def __init__(self, features=12, tokens=5, hidden=32, classes=4):
        super().__init__()
        self.embed = nn.Embedding(tokens, 4)
        self.body = nn.Sequential(nn.Linear(features + 4, hidden), nn.LayerNorm(hidden), nn.GELU(),
                                  nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(hidden, classes)

    def forward(self, x, token):
        return self.head(self.body(torch.cat([x, self.embed(token)], dim=1)))


def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.xavier_uniform_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Embedding):
        nn.init.normal_(m.weight, std=0.5)


def collate(batch):
    xs, tokens, ys = zip(*batch)
    return {"x": torch.stack(xs), "token": torch.stack(tokens), "y": torch.tensor([int(y) for y in ys])}


def make_data(n, features=12, tokens=5, classes=4, seed=0):
    rs = np.random.RandomState(seed)
    x = rs.randn(n, features).astype(np.float32)
    token = rs.randint(0, tokens, n)
    y = (x @ rs.randn(features, classes) + np.eye(tokens, classes)[token]).argmax(1)
    full = TensorDataset(torch.from_numpy(x), torch.from_numpy(token), torch.from_numpy(y))
    return ConcatDataset([Subset(full, range(0, n // 2)), Subset(full, range(n // 2, n))])


def evaluate(model, loader):
    model.eval()
    correct = top2 = total = 0
    loss_sum = 0.0
    with torch.inference_mode():
        for batch in loader:
            out = model(batch["x"], batch["token"])
            loss_sum += F.cross_entropy(out, batch["y"], reduction="sum").item()
            correct += (out.argmax(dim=1) == batch["y"]).sum().item()
            top2 += (out.topk(2, dim=1).indices == batch["y"].unsqueeze(1)).any(dim=1).sum().item()
            total += batch["y"].size(0)
    return loss_sum / total, 100.0 * correct / total, 100.0 * top2 / total


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=12, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--patience", type=int, default=100)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    train_set, valid_set = random_split(make_data(320, seed=args.seed), [0.8, 0.2],
                                        generator=torch.Generator().manual_seed(args.seed))
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True,
                              collate_fn=collate, generator=torch.Generator().manual_seed(args.seed))
    valid_loader = DataLoader(valid_set, batch_size=64, collate_fn=collate)

    model = Net()
    model.apply(init_weights)
    model.embed.requires_grad_(False)
    model.to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)

    def warmup_cosine(step):
        if step < args.warmup:
            return (step + 1) / args.warmup
        return 0.5 * (1 + math.cos(math.pi * (step - args.warmup) / max(1, args.steps - args.warmup)))

    scheduler = LambdaLR(optimizer, warmup_cosine)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    losses, best_loss, best_state, bad_epochs, checkpoint = [], float("inf"), None, 0, None
    step, micro, running = 0, 0, 0.0
    optimizer.zero_grad(set_to_none=True)
    while step < args.steps:
        model.train()
        for batch in train_loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            loss = criterion(model(batch["x"], batch["token"]), batch["y"]) / args.accum
            loss.backward()
            running += loss.item()
            micro += 1
            if micro % args.accum:
                continue
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            ema.update_parameters(model)
            losses.append(running)
            running, step = 0.0, step + 1
            if step == args.steps // 2 and checkpoint is None:  # save, then resume from the file
                buffer = io.BytesIO()
                torch.save({"step": step, "model": model.state_dict(), "ema": ema.state_dict(),
                            "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, buffer)
                buffer.seek(0)
                checkpoint = torch.load(buffer, map_location="cpu")
                model.load_state_dict(checkpoint["model"])
                ema.load_state_dict(checkpoint["ema"])
                optimizer.load_state_dict(checkpoint["optimizer"])
                scheduler.load_state_dict(checkpoint["scheduler"])
            if step == args.steps:
                break
        valid_loss, _, _ = evaluate(ema.module, valid_loader)
        if valid_loss < best_loss:
            best_loss, bad_epochs = valid_loss, 0
            best_state = copy.deepcopy(ema.module.state_dict())
        else:
            bad_epochs += 1
            if bad_epochs >= args.patience:
                break
    model.load_state_dict(best_state)
    evaluate(model, valid_loader)
    return losses


if __name__ == "__main__":
    print(main())
