"""Metric learning as PyTorch users write it: one embedding net shared by the anchor, positive and negative
branches of a siamese / triplet setup, trained on the sum of ``TripletMarginLoss``, ``CosineEmbeddingLoss``,
a hand-written contrastive loss (``F.pairwise_distance``, ``torch.clamp(margin - d, min=0).pow(2)``) and a
batch-hard triplet loss mined from ``torch.cdist`` of ``F.normalize``-d embeddings (``masked_fill`` with a
``torch.eye(n, dtype=torch.bool)`` diagonal, ``topk`` for the hardest positive, ``argmin`` for the hardest
negative); RMSprop or Adadelta with a ``StepLR`` decay; nearest-neighbour recall@1 at the end. The points
are Gaussian clusters drawn with NumPy from ``--seed``, so every framework sees the same batches. Only the
imports name the framework.

    python siamese_idioms.py --steps 12 --optimizer adadelta

``main`` returns the training loss of every optimizer step."""
import argparse

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR


class EmbeddingNet(nn.Module):
    def __init__(self, features=16, hidden=32, dim=8):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.LayerNorm(hidden), nn.ReLU(),
                                  nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, dim))

    def forward(self, x):
        return self.body(x)


class Siamese(nn.Module):
    """Three branches, one set of weights."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, anchor, positive, negative):
        return self.embedding(anchor), self.embedding(positive), self.embedding(negative)


def contrastive_loss(x1, x2, same, margin=1.0):
    """Pulls pairs of one class together and pushes others at least ``margin`` apart."""
    d = F.pairwise_distance(x1, x2)
    return torch.mean(same * d.pow(2) + (1 - same) * torch.clamp(margin - d, min=0).pow(2))


def batch_hard_loss(emb, labels, margin=0.3):
    """Each anchor against its farthest positive and nearest negative in the batch."""
    z = F.normalize(emb, dim=1)
    dist = torch.cdist(z, z)
    n = labels.size(0)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    eye = torch.eye(n, dtype=torch.bool, device=emb.device)
    hardest_pos, _ = dist.masked_fill(~same | eye, float("-inf")).topk(1, dim=1)
    hardest_neg = dist.masked_fill(same, float("inf")).argmin(dim=1)
    d_neg = dist.gather(1, hardest_neg.unsqueeze(1))
    return F.relu(hardest_pos - d_neg + margin).mean()


class Clusters:
    """Gaussian clusters; triplets and labelled batches drawn from a NumPy generator."""

    def __init__(self, classes=5, per_class=40, features=16, spread=0.9, seed=0):
        rs = np.random.RandomState(seed)
        centers = rs.randn(classes, features) * 1.5
        self.labels = np.repeat(np.arange(classes), per_class)
        self.points = (centers[self.labels] + spread * rs.randn(len(self.labels), features)).astype(np.float32)
        self.by_class = [np.flatnonzero(self.labels == c) for c in range(classes)]
        self.classes = classes
        self.rs = rs

    def triplets(self, n):
        cls = self.rs.randint(0, self.classes, n)
        other = (cls + self.rs.randint(1, self.classes, n)) % self.classes
        a = np.array([self.rs.choice(self.by_class[c]) for c in cls])
        p = np.array([self.rs.choice(self.by_class[c]) for c in cls])
        q = np.array([self.rs.choice(self.by_class[c]) for c in other])
        return self.points[a], self.points[p], self.points[q]

    def batch(self, n):
        idx = self.rs.choice(len(self.labels), n, replace=False)
        return self.points[idx], self.labels[idx]


def recall_at_1(model, points, labels):
    """How often a point's nearest other point has its class."""
    model.eval()
    with torch.no_grad():
        emb = model(points)
        dist = torch.cdist(emb, emb)
        dist.fill_diagonal_(float("inf"))
        nearest = dist.argmin(dim=1)
    return (labels[nearest] == labels).float().mean().item()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=12, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=16, help="triplets (and labelled points) per step")
    p.add_argument("--optimizer", choices=("rmsprop", "adadelta"), default="rmsprop")
    p.add_argument("--lr", type=float, default=None, help="RMSprop 3e-3, Adadelta 1.0 unless given")
    p.add_argument("--step-size", type=int, default=5, help="StepLR's period")
    p.add_argument("--gamma", type=float, default=0.7)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    data = Clusters(seed=args.seed)

    model = Siamese(EmbeddingNet()).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    if args.optimizer == "rmsprop":
        optimizer = torch.optim.RMSprop(model.parameters(), lr=args.lr or 3e-3, alpha=0.9, momentum=0.5)
    else:
        optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr or 1.0, rho=0.9)
    scheduler = StepLR(optimizer, step_size=args.step_size, gamma=args.gamma)
    triplet = nn.TripletMarginLoss(margin=1.0, p=2)
    cosine = nn.CosineEmbeddingLoss(margin=0.2)

    losses = []
    for _ in range(args.steps):
        model.train()
        anchor, positive, negative = (torch.from_numpy(a).to(device) for a in data.triplets(args.batch_size))
        points, labels = data.batch(args.batch_size)
        points, labels = torch.from_numpy(points).to(device), torch.from_numpy(labels).to(device)

        ea, ep, en = model(anchor, positive, negative)
        pairs_target = torch.cat([torch.ones(len(ea)), -torch.ones(len(ea))]).to(device)
        same = torch.cat([torch.ones(len(ea)), torch.zeros(len(ea))]).to(device)
        loss = (triplet(ea, ep, en)
                + cosine(torch.cat([ea, ea]), torch.cat([ep, en]), pairs_target)
                + contrastive_loss(torch.cat([ea, ea]), torch.cat([ep, en]), same)
                + batch_hard_loss(model.embedding(points), labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())

    points = torch.from_numpy(data.points).to(device)
    labels = torch.from_numpy(data.labels).to(device)
    print(f"recall@1 {recall_at_1(model.embedding, points, labels):.3f}, lr {scheduler.get_last_lr()[0]:.2e}")
    return losses


if __name__ == "__main__":
    print(main())
