"""Polynomial regression, written as a PyTorch user writes it: a random polynomial of degree 4 is fitted
by one linear layer on the features x, x^2, x^3, x^4 with the smooth L1 loss and hand-written gradient
steps, until the loss falls under a threshold. Only the imports name the framework.

``main`` prints the learned and the actual polynomial and returns the loss of every step."""
import argparse

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F

POLY_DEGREE = 4


def make_features(x):
    """The columns x, x^2, ..., x^POLY_DEGREE of a batch of scalars."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def poly_desc(W, b):
    """'y = +1.23 x^1 -0.50 x^2 ... +0.70' from the weights and the bias."""
    terms = " ".join(f"{w:+.2f} x^{i}" for i, w in enumerate(W.view(-1).tolist(), 1))
    return f"y = {terms} {b.view(-1).tolist()[0]:+.2f}"


class Target:
    """The polynomial to find, drawn from a seed, and batches of its values at random points."""

    def __init__(self, seed, device):
        self.rng = np.random.default_rng(seed)
        self.device = device
        self.W = torch.from_numpy(self.rng.standard_normal((POLY_DEGREE, 1)).astype(np.float32) * 5).to(device)
        self.b = torch.from_numpy(self.rng.standard_normal(1).astype(np.float32) * 5).to(device)

    def f(self, x):
        return x.mm(self.W) + self.b.item()

    def get_batch(self, batch_size):
        random = torch.from_numpy(self.rng.standard_normal(batch_size).astype(np.float32)).to(self.device)
        x = make_features(random)
        return x, self.f(x)


def parse_args(argv):
    parser = argparse.ArgumentParser(description="fit a random polynomial",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=32, help="points per step")
    parser.add_argument("--steps", type=int, default=20000, help="give up after this many steps")
    parser.add_argument("--epochs", type=int, default=1, help="ignored: the data is drawn afresh each step")
    parser.add_argument("--lr", type=float, default=0.1, help="step size")
    parser.add_argument("--tol", type=float, default=1e-3, help="stop once a step's loss is below this")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--seed", type=int, default=0, help="draws the polynomial and the points")
    return parser.parse_args(argv)


def main(argv=None, init=None):
    """Fit; ``init(name, params)``, if given, may set the layer's initial parameters in place."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    target = Target(args.seed, device)

    fc = nn.Linear(POLY_DEGREE, 1).to(device)
    if init is not None:
        init("fc", dict(fc.named_parameters()))
    losses = []
    for batch_idx in range(1, args.steps + 1):
        batch_x, batch_y = target.get_batch(args.batch_size)
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        with torch.no_grad():
            for param in fc.parameters():
                param.add_(-args.lr * param.grad)
        losses.append(loss)
        if loss < args.tol:
            break

    print(f"Loss: {loss:.6f} after {batch_idx} batches")
    print("==> Learned function:\t" + poly_desc(fc.weight, fc.bias))
    print("==> Actual function:\t" + poly_desc(target.W, target.b))
    return losses


if __name__ == "__main__":
    main()
