"""A CIFAR-10 style training script with the tricks such scripts carry: uint8 HWC images made normalised NCHW
floats (per-channel mean / std as (1, 3, 1, 1)); batch augmentation on tensors (reflect-padded random crops,
per-sample flips by ``torch.where``), mixup (``np.random.beta``) and cutmix (``torch.distributions.Beta``, a
``torch.randint`` box pasted from a ``randperm`` of the batch) with mixed losses, soft targets, label smoothing;
a small ResNet (Kaiming fan-out init over ``modules()``, zero last BN gamma per block); nesterov SGD without
weight decay on BN and biases, ``OneCycleLR`` stepped per batch, gradient clipping; top-1 / top-5 accuracy and
a confusion matrix (``bincount``, ``index_put_``) under ``inference_mode``; a checkpoint (model, optimizer,
scheduler, epoch, best accuracy) saved and resumed in a fresh model. Synthetic data, no downloads. Only the
imports name the framework.

    python cifar_tricks.py --steps 16

``main`` returns the training loss of every step."""
import argparse
import os
import random
import tempfile

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


class SyntheticCIFAR(Dataset):
    """10 classes of 32x32 RGB uint8 images (HWC, as CIFAR's pickles hold them): a smooth prototype per class
    plus noise, from a seeded generator."""

    def __init__(self, n, seed=0, train=True):
        rs = np.random.RandomState(seed)
        grid = np.linspace(0, 2 * np.pi, 32)
        protos = np.stack([np.sin(np.add.outer((c % 3 + 1) * grid, (c // 3 + 1) * grid))[..., None]
                           * rs.uniform(0.3, 1.0, 3) for c in range(10)])
        rs = np.random.RandomState(seed + (0 if train else 1))
        self.targets = rs.randint(0, 10, n).tolist()
        noisy = protos[self.targets] * 80 + 128 + rs.randn(n, 32, 32, 3) * 25
        self.data = np.clip(noisy, 0, 255).astype(np.uint8)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        img = torch.from_numpy(self.data[idx]).permute(2, 0, 1).contiguous()  # CHW uint8
        return img, self.targets[idx]


def gpu_normalize(images, mean, std):
    return (images.float().div_(255.0) - mean) / std


def random_crop_flip(x, padding=4):
    n, _, h, w = x.shape
    padded = F.pad(x, (padding,) * 4, mode="reflect")
    offsets = torch.randint(0, 2 * padding + 1, (n, 2), device=x.device)
    crops = [padded[k, :, int(i):int(i) + h, int(j):int(j) + w] for k, (i, j) in enumerate(offsets.tolist())]
    x = torch.stack(crops)
    flip = torch.rand(n, device=x.device) < 0.5
    return torch.where(flip[:, None, None, None], torch.flip(x, dims=[3]), x)


def mixup(x, y, alpha):
    lam = float(np.random.beta(alpha, alpha))
    index = torch.randperm(x.size(0), device=x.device)
    return lam * x + (1 - lam) * x[index, :], y, y[index], lam


def cutmix(x, y, alpha):
    lam = torch.distributions.Beta(torch.tensor([alpha]), torch.tensor([alpha])).sample().item()
    index = torch.randperm(x.size(0), device=x.device)
    h, w = x.size(2), x.size(3)
    ch, cw = int(h * np.sqrt(1.0 - lam)), int(w * np.sqrt(1.0 - lam))
    cy, cx = torch.randint(h, (1,)).item(), torch.randint(w, (1,)).item()
    y1, y2 = np.clip(cy - ch // 2, 0, h), np.clip(cy + ch // 2, 0, h)
    x1, x2 = np.clip(cx - cw // 2, 0, w), np.clip(cx + cw // 2, 0, w)
    x = x.clone()
    x[:, :, y1:y2, x1:x2] = x[index, :, y1:y2, x1:x2]
    lam = 1 - ((y2 - y1) * (x2 - x1) / (h * w))
    return x, y, y[index], lam


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, self.expansion * planes, 1, stride, bias=False),
                                          nn.BatchNorm2d(self.expansion * planes))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, block=BasicBlock, num_blocks=(1, 1, 1), num_classes=10, width=8):
        super().__init__()
        self.in_planes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layers = nn.Sequential(*[self._make_layer(block, width * 2 ** i, n, stride=1 if i == 0 else 2)
                                      for i, n in enumerate(num_blocks)])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(self.in_planes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        for m in self.modules():
            if isinstance(m, BasicBlock):
                nn.init.zeros_(m.bn2.weight)

    def _make_layer(self, block, planes, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.avgpool(self.layers(out))
        return self.fc(torch.flatten(out, 1))


def accuracy(output, target, topk=(1,)):
    _, pred = output.topk(max(topk), 1, True, True)
    correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
    return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / target.size(0)) for k in topk]


def evaluate(model, loader, device, mean, std, num_classes=10):
    model.eval()
    top1 = top5 = 0.0
    confusion = torch.zeros(num_classes, num_classes, dtype=torch.int64, device=device)
    by_bincount = torch.zeros(num_classes * num_classes, dtype=torch.int64, device=device)
    with torch.inference_mode():
        for images, target in loader:
            images, target = images.to(device, non_blocking=True), target.to(device, non_blocking=True)
            output = model(gpu_normalize(images, mean, std))
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            top1, top5 = top1 + acc1.item() * target.size(0), top5 + acc5.item() * target.size(0)
            pred = output.argmax(dim=1)
            confusion.index_put_((target, pred), torch.ones_like(target), accumulate=True)
            by_bincount += torch.bincount(target * num_classes + pred, minlength=num_classes ** 2)
    assert torch.equal(confusion.view(-1), by_bincount)
    per_class = confusion.diag().float() / confusion.sum(1).clamp(min=1).float()
    return top1 / confusion.sum().item(), top5 / confusion.sum().item(), per_class


def make_training(args, device, steps_per_epoch):
    model = ResNet().to(device)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0}],
                                lr=args.lr, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, epochs=args.epochs,
                                                    steps_per_epoch=steps_per_epoch, pct_start=0.25)
    return model, optimizer, scheduler


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=12, help="steps per epoch")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.4)
    p.add_argument("--alpha", type=float, default=0.4, help="mixup / cutmix Beta(alpha, alpha)")
    p.add_argument("--no-augment", action="store_true", help="no crops, flips, mixup, cutmix")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = True
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    train_set = SyntheticCIFAR(args.steps * args.batch_size, seed=args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=not args.no_augment, drop_last=True,
                              generator=torch.Generator().manual_seed(args.seed))
    test_loader = DataLoader(SyntheticCIFAR(64, seed=args.seed, train=False), batch_size=32, shuffle=False)
    model, optimizer, scheduler = make_training(args, device, len(train_loader))
    if init is not None:
        init("model", dict(model.named_parameters()))
    print(f"{sum(p.numel() for p in model.parameters() if p.requires_grad)} trainable parameters")
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    losses, best_acc, start_epoch = [], 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.pth")
        for epoch in range(start_epoch, args.epochs):
            model.train()
            for i, (images, target) in enumerate(train_loader):
                images, target = images.to(device, non_blocking=True), target.to(device, non_blocking=True)
                x = gpu_normalize(images, mean, std)
                if args.no_augment:
                    loss = criterion(model(x), target)
                elif i % 3 == 0:
                    x, y_a, y_b, lam = mixup(random_crop_flip(x), target, args.alpha)
                    out = model(x)
                    loss = lam * criterion(out, y_a) + (1 - lam) * criterion(out, y_b)
                elif i % 3 == 1:
                    x, y_a, y_b, lam = cutmix(random_crop_flip(x), target, args.alpha)
                    soft = lam * F.one_hot(y_a, 10).float() + (1 - lam) * F.one_hot(y_b, 10).float()
                    loss = F.cross_entropy(model(x), soft, label_smoothing=0.1)
                else:
                    loss = criterion(model(random_crop_flip(x)), target)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
                optimizer.step()
                scheduler.step()
                losses.append(loss.item())
            top1, top5, per_class = evaluate(model, test_loader, device, mean, std)
            if top1 >= best_acc:
                best_acc = top1
            torch.save({"epoch": epoch + 1, "best_acc": best_acc, "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, path)
            if epoch == 0:  # resume from the checkpoint in a fresh model, optimizer and scheduler
                checkpoint = torch.load(path, map_location=device)
                model, optimizer, scheduler = make_training(args, device, len(train_loader))
                model.load_state_dict(checkpoint["model"])
                optimizer.load_state_dict(checkpoint["optimizer"])
                scheduler.load_state_dict(checkpoint["scheduler"])
                best_acc = checkpoint["best_acc"]
                assert checkpoint["epoch"] == epoch + 1
    return losses


if __name__ == "__main__":
    print(main())
