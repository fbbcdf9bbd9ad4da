"""A small residual network written in the idioms PyTorch CNN code uses: blocks that add their shortcut in
place (``out += identity``), a ``norm_layer`` factory (``functools.partial``), a dilated last stage, Kaiming
initialisation over ``self.modules()`` and zero-initialised last norms per block, channels-last memory format,
an ``autocast`` region with a ``GradScaler``, label smoothing, top-k accuracy, and a checkpoint saved and
loaded back. Only the imports name the framework.

    python resnet_idioms.py --steps 6

``main`` returns the training losses, one per step."""
import argparse
import functools
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride=1, dilation=1, norm_layer=nn.BatchNorm2d):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, padding=dilation, dilation=dilation, bias=False)
        self.bn1 = norm_layer(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, padding=dilation, dilation=dilation, bias=False)
        self.bn2 = norm_layer(cout)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), norm_layer(cout))

    def forward(self, x):
        identity = x if self.shortcut is None else self.shortcut(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class Net(nn.Module):
    def __init__(self, num_classes=10, norm_layer=None, width=8):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), norm_layer(width),
                                  nn.ReLU(inplace=True))
        self.stages = nn.Sequential(Block(width, width, norm_layer=norm_layer),
                                    Block(width, 2 * width, stride=2, norm_layer=norm_layer),
                                    Block(2 * width, 2 * width, dilation=2, norm_layer=norm_layer))
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(2 * width, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        for m in self.modules():
            if isinstance(m, Block):
                nn.init.constant_(m.bn2.weight, 0)

    def forward(self, x):
        x = self.pool(self.stages(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        _, pred = output.topk(max(topk), 1, True, True)
        correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
        return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / target.size(0)) for k in topk]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--group-norm", action="store_true", help="GroupNorm(4, C) through a norm_layer partial")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    norm_layer = functools.partial(nn.GroupNorm, 4) if args.group_norm else None
    model = Net(norm_layer=norm_layer).to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=5e-4, nesterov=True)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
    scaler = torch.amp.GradScaler(device.type, enabled=False)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    images = torch.randn(args.batch_size, 3, 16, 16, device=device).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (args.batch_size,), device=device)
    losses = []
    for _ in range(args.steps):
        model.train()
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            output = model(images)
            loss = criterion(output, labels)
        top1, top5 = accuracy(output.float(), labels, topk=(1, 5))
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        losses.append(loss.item())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "checkpoint.pth")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "top1": top1}, path)
        state = torch.load(path, map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    model.eval()
    with torch.no_grad():
        F.softmax(model(images), dim=1)
    return losses


if __name__ == "__main__":
    print(main())
