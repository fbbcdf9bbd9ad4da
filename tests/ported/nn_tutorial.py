"""The "what is torch.nn really?" progression, written as a PyTorch user writes it: logistic regression on
MNIST from raw tensors (hand-written log-softmax, negative log-likelihood by fancy indexing, manual SGD
under no_grad), then refactored one piece at a time onto F.cross_entropy, nn.Module with nn.Parameter,
nn.Linear, optim.SGD, TensorDataset/DataLoader with a validation pass, a CNN, and nn.Sequential with a
Lambda module and adaptive average pooling. Only the imports name the framework.

``main`` trains each stage of ``STAGES`` from fresh weights and returns the training losses, stage by
stage; with ``--steps N`` each stage takes exactly N steps."""
import argparse
import math

import numpy as np

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

from mnist_data import mnist

STAGES = ("from_scratch", "functional", "module", "linear", "optim", "dataloader", "cnn", "sequential")


def log_softmax(x):
    return x - x.exp().sum(-1).log().unsqueeze(-1)


def nll(input, target):
    return -input[range(target.shape[0]), target].mean()


def accuracy(out, yb):
    preds = torch.argmax(out, dim=1)
    return (preds == yb).float().mean()


def batch_bounds(n, bs, epochs, steps):
    """(start, end) of each mini-batch in order, epoch after epoch; at most ``steps`` of them (0: no limit)."""
    bounds = [(i * bs, i * bs + bs) for _ in range(epochs) for i in range((n - 1) // bs + 1)]
    return bounds[:steps] if steps else bounds


def raw_weights(dev):
    weights = torch.randn(784, 10, device=dev) / math.sqrt(784)
    weights.requires_grad_()
    bias = torch.zeros(10, requires_grad=True, device=dev)
    return weights, bias


def train_raw(ctx, name, model_of, loss_func):
    """The first loops: a model made of two raw tensors, updated by hand."""
    weights, bias = raw_weights(ctx.dev)
    ctx.init(name, {"weights": weights, "bias": bias})
    losses = []
    for start, end in batch_bounds(ctx.n, ctx.args.batch_size, ctx.args.epochs, ctx.args.steps):
        xb, yb = ctx.x_train[start:end], ctx.y_train[start:end]
        pred = model_of(xb, weights, bias)
        loss = loss_func(pred, yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * ctx.args.lr
            bias -= bias.grad * ctx.args.lr
            weights.grad.zero_()
            bias.grad.zero_()
        losses.append(loss.item())
    print(f"{name}: loss {loss_func(model_of(xb, weights, bias), yb).item():.4f}, "
          f"accuracy {accuracy(model_of(xb, weights, bias), yb).item():.3f}")
    return losses


class Mnist_Logistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.Parameter(torch.randn(784, 10) / math.sqrt(784))
        self.bias = nn.Parameter(torch.zeros(10))

    def forward(self, xb):
        return xb @ self.weights + self.bias


class Mnist_LogisticLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(784, 10)

    def forward(self, xb):
        return self.lin(xb)


def train_module(ctx, name, model):
    """model.parameters() and model.zero_grad() replace the per-tensor updates."""
    ctx.init(name, dict(model.named_parameters()))
    losses = []
    for start, end in batch_bounds(ctx.n, ctx.args.batch_size, ctx.args.epochs, ctx.args.steps):
        loss = F.cross_entropy(model(ctx.x_train[start:end]), ctx.y_train[start:end])
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= p.grad * ctx.args.lr
            model.zero_grad()
        losses.append(loss.item())
    return losses


def train_optim(ctx, name):
    model = Mnist_LogisticLinear().to(ctx.dev)
    ctx.init(name, dict(model.named_parameters()))
    opt = optim.SGD(model.parameters(), lr=ctx.args.lr)
    losses = []
    for start, end in batch_bounds(ctx.n, ctx.args.batch_size, ctx.args.epochs, ctx.args.steps):
        loss = F.cross_entropy(model(ctx.x_train[start:end]), ctx.y_train[start:end])
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def loss_batch(model, loss_func, xb, yb, opt=None):
    loss = loss_func(model(xb), yb)
    if opt is not None:
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item(), len(xb)


def fit(ctx, model, loss_func, opt, train_dl, valid_dl):
    """Train for the epochs (or steps) asked, with a validation pass after each epoch."""
    losses = []
    for epoch in range(ctx.args.epochs):
        model.train()
        for xb, yb in train_dl:
            if ctx.args.steps and len(losses) == ctx.args.steps:
                break
            losses.append(loss_batch(model, loss_func, xb, yb, opt)[0])
        model.eval()
        with torch.no_grad():
            batch_losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])
        print(f"  epoch {epoch}: validation loss {np.sum(np.multiply(batch_losses, nums)) / np.sum(nums):.4f}")
    return losses


def get_data(ctx, bs):
    train_ds = TensorDataset(ctx.x_train, ctx.y_train)
    valid_ds = TensorDataset(ctx.x_valid, ctx.y_valid)
    return (DataLoader(train_ds, batch_size=bs, shuffle=ctx.args.shuffle),
            DataLoader(valid_ds, batch_size=bs * 2))


class Mnist_CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1)

    def forward(self, xb):
        xb = xb.view(-1, 1, 28, 28)
        xb = F.relu(self.conv1(xb))
        xb = F.relu(self.conv2(xb))
        xb = F.relu(self.conv3(xb))
        xb = F.avg_pool2d(xb, 4)
        return xb.view(-1, xb.size(1))


class Lambda(nn.Module):
    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, x):
        return self.func(x)


class WrappedDataLoader:
    """A DataLoader whose batches pass through ``func`` (reshaping, moving to the device)."""

    def __init__(self, dl, func):
        self.dl, self.func = dl, func

    def __len__(self):
        return len(self.dl)

    def __iter__(self):
        for b in self.dl:
            yield self.func(*b)


def sequential_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        Lambda(lambda x: x.view(x.size(0), -1)),
    )


def train_stage(ctx, name):
    args = ctx.args
    if name == "from_scratch":
        return train_raw(ctx, name, lambda xb, w, b: log_softmax(xb @ w + b), nll)
    if name == "functional":
        return train_raw(ctx, name, lambda xb, w, b: xb @ w + b, F.cross_entropy)
    if name == "module":
        return train_module(ctx, name, Mnist_Logistic().to(ctx.dev))
    if name == "linear":
        return train_module(ctx, name, Mnist_LogisticLinear().to(ctx.dev))
    if name == "optim":
        return train_optim(ctx, name)
    train_dl, valid_dl = get_data(ctx, args.batch_size)
    if name == "dataloader":
        model = Mnist_LogisticLinear().to(ctx.dev)
        lr = args.lr
    elif name == "cnn":
        model = Mnist_CNN().to(ctx.dev)
        lr = args.cnn_lr
    else:
        def preprocess(x, y):
            return x.view(-1, 1, 28, 28).to(ctx.dev), y.to(ctx.dev)
        train_dl, valid_dl = WrappedDataLoader(train_dl, preprocess), WrappedDataLoader(valid_dl, preprocess)
        model = sequential_cnn().to(ctx.dev)
        lr = args.cnn_lr
    ctx.init(name, dict(model.named_parameters()))
    momentum = 0.0 if name == "dataloader" else args.momentum
    opt = optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    return fit(ctx, model, F.cross_entropy, opt, train_dl, valid_dl)


def parse_args(argv):
    parser = argparse.ArgumentParser(description="torch.nn, step by step",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64, help="mini-batch size")
    parser.add_argument("--epochs", type=int, default=1, help="epochs per stage")
    parser.add_argument("--steps", type=int, default=0, help="exactly this many steps per stage (0: the epochs)")
    parser.add_argument("--lr", type=float, default=0.5, help="learning rate of the logistic regressions")
    parser.add_argument("--cnn-lr", type=float, default=0.1, help="learning rate of the CNNs")
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum of the CNNs")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--data-dir", default=None, help="folder with the MNIST IDX files (default: stand-ins)")
    parser.add_argument("--train-size", type=int, default=2048, help="training images")
    parser.add_argument("--valid-size", type=int, default=512, help="validation images")
    parser.add_argument("--stages", default=",".join(STAGES), help="comma-separated stages to run")
    parser.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="DataLoader batches in order")
    args = parser.parse_args(argv)
    unknown = set(args.stages.split(",")) - set(STAGES)
    if unknown:
        parser.error(f"unknown stages {sorted(unknown)}; choose from {', '.join(STAGES)}")
    return args


class Context:
    """What every stage reads: the arguments, the device, the data and the initial-weights hook."""

    def __init__(self, args, init):
        self.args = args
        self.dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        x_train, y_train, x_valid, y_valid = mnist(args.data_dir, args.train_size, args.valid_size, args.seed)
        x_train, x_valid = x_train.reshape(-1, 784), x_valid.reshape(-1, 784)
        x_train, y_train, x_valid, y_valid = map(torch.tensor, (x_train, y_train, x_valid, y_valid))
        self.x_train, self.y_train = x_train.to(self.dev), y_train.to(self.dev)
        self.x_valid, self.y_valid = x_valid.to(self.dev), y_valid.to(self.dev)
        self.n = self.x_train.shape[0]
        self.init = init or (lambda name, params: None)


def main(argv=None, init=None):
    """Train the stages; ``init(stage, params)``, if given, may set each stage's initial parameters in place."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    ctx = Context(args, init)
    losses = []
    for name in args.stages.split(","):
        stage_losses = train_stage(ctx, name)
        print(f"{name}: {len(stage_losses)} steps, loss {stage_losses[0]:.4f} -> {stage_losses[-1]:.4f}")
        losses += stage_losses
    return losses


if __name__ == "__main__":
    main()
