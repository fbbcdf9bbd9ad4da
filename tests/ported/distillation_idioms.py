"""Knowledge distillation as PyTorch users write it: a teacher MLP (with BatchNorm) trained briefly on the hard
labels, then frozen (``eval()``, ``requires_grad_(False)``, its logits under ``torch.inference_mode()``) while a
smaller student learns from ``nn.KLDivLoss(reduction='batchmean')`` between ``F.log_softmax(s / T)`` and
``F.softmax(t / T)`` times ``T * T`` (on odd steps the ``log_target=True`` form on the teacher's log-softmax)
plus the cross-entropy on the labels; gradient accumulation over micro-batches (``loss / accum``, one
``optimizer.step()`` every ``accum``); an EMA of the student's weights (``AveragedModel`` with
``get_ema_multi_avg_fn``) evaluated at the end. The data: a ``TensorDataset`` of NumPy points drawn from
``--seed``; the training set a ``ConcatDataset`` of two ``Subset`` s, read in order by a ``DataLoader`` with
``drop_last=True``; the held-out rows a ``random_split`` (seeded ``Generator``) into validation and test sets,
which only the evaluations read. Only the imports name the framework.

    python distillation_idioms.py --steps 12

``main`` returns the student's training loss of every optimizer step."""
import argparse

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import ConcatDataset, DataLoader, Subset, TensorDataset, random_split


def mlp(features, hidden, classes, norm):
    # no bias before the norm: it would subtract it again (and Adam would blow up its zero gradient's rounding)
    return nn.Sequential(nn.Linear(features, hidden, bias=False), norm(hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def make_data(n, features=10, classes=4, seed=0):
    """Labels from a random two-layer map of the points, so the teacher has something to find."""
    rs = np.random.RandomState(seed)
    x = rs.randn(n, features).astype(np.float32)
    y = (np.tanh(x @ rs.randn(features, 16)) @ rs.randn(16, classes)).argmax(1)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def distillation_loss(student_logits, teacher_logits, temperature, log_target=False):
    """Hinton et al.'s soft-target term, scaled by T**2 so its gradients keep their size as T changes."""
    log_p = F.log_softmax(student_logits / temperature, dim=1)
    if log_target:
        kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
        return kl(log_p, F.log_softmax(teacher_logits / temperature, dim=1)) * temperature * temperature
    kl = nn.KLDivLoss(reduction="batchmean")
    return kl(log_p, F.softmax(teacher_logits / temperature, dim=1)) * temperature * temperature


def evaluate(model, teacher, loader, device):
    model.eval()
    correct = agree = total = 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            pred = model(x).argmax(dim=1)
            correct += (pred == y).sum().item()
            agree += (pred == teacher(x).argmax(dim=1)).sum().item()
            total += len(y)
    return correct / total, agree / total


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=12, help="student optimizer steps")
    p.add_argument("--teacher-steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=16, help="micro-batch size")
    p.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--alpha", type=float, default=0.7, help="weight of the soft-target term")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def batches(loader, device):
    """The loader's batches on ``device``, epoch after epoch."""
    while True:
        for x, y in loader:
            yield x.to(device), y.to(device)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    full = make_data(480, seed=args.seed)
    train_set = ConcatDataset([Subset(full, range(0, 192)), Subset(full, range(192, 384))])
    valid_set, test_set = random_split(Subset(full, range(384, 480)), [0.5, 0.5],
                                       generator=torch.Generator().manual_seed(args.seed))
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=False, drop_last=True)
    valid_loader = DataLoader(valid_set, batch_size=32)
    test_loader = DataLoader(test_set, batch_size=32)

    teacher = mlp(10, 64, 4, nn.BatchNorm1d).to(device)
    student = mlp(10, 16, 4, nn.LayerNorm).to(device)
    if init is not None:
        init("model", dict(nn.ModuleDict({"teacher": teacher, "student": student}).named_parameters()))
    optimizer = torch.optim.Adam(teacher.parameters(), lr=1e-2)
    teacher.train()
    for step, (x, y) in zip(range(args.teacher_steps), batches(train_loader, device)):
        optimizer.zero_grad()
        F.cross_entropy(teacher(x), y).backward()
        optimizer.step()
    teacher.eval()
    teacher.requires_grad_(False)

    optimizer = torch.optim.SGD(student.parameters(), lr=args.lr, momentum=0.9, nesterov=True)
    ema = AveragedModel(student, multi_avg_fn=get_ema_multi_avg_fn(0.999))

    losses, running = [], 0.0
    stream = batches(train_loader, device)
    student.train()
    optimizer.zero_grad(set_to_none=True)
    for micro in range(args.steps * args.accum):
        x, y = next(stream)
        with torch.inference_mode():
            teacher_logits = teacher(x)
        student_logits = student(x)
        soft = distillation_loss(student_logits, teacher_logits, args.temperature,
                                 log_target=(micro // args.accum) % 2 == 1)
        loss = args.alpha * soft + (1 - args.alpha) * F.cross_entropy(student_logits, y)
        (loss / args.accum).backward()
        running += loss.item() / args.accum
        if (micro + 1) % args.accum == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            ema.update_parameters(student)
            losses.append(running)
            running = 0.0

    accuracy, agreement = evaluate(student, teacher, valid_loader, device)
    ema_accuracy, _ = evaluate(ema.module, teacher, test_loader, device)
    print(f"student accuracy {accuracy:.2f} (agrees with the teacher on {agreement:.2f}), EMA {ema_accuracy:.2f}")
    return losses


if __name__ == "__main__":
    print(main())
