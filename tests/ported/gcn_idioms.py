"""A two-layer graph convolutional network (Kipf & Welling) on a small random graph, written as PyTorch users
write it without a graph library: the symmetric-normalized adjacency ``D^-1/2 (A + I) D^-1/2`` built from an
edge index with ``index_put_(..., accumulate=True)``, ``sum(1).pow(-0.5)`` and ``torch.diag`` for the first
layer (dense ``mm``); the second layer as message passing over the edges (``scatter_add_`` degrees,
``index_add_`` of the messages); full-batch node classification with the loss on a boolean ``train_mask``,
Adam with weight decay on the first layer only (parameter groups), accuracy with ``argmax`` on the validation
mask. The graph is a stochastic block model drawn with NumPy from ``--seed``. Only the imports name the
framework.

    python gcn_idioms.py --steps 30

``main`` returns the training loss of every step."""
import argparse

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F


def block_graph(nodes=60, classes=3, features=16, p_in=0.2, p_out=0.02, seed=0):
    """An undirected stochastic block model: the edge index (both directions), noisy features, labels."""
    rs = np.random.RandomState(seed)
    labels = rs.randint(0, classes, nodes)
    p = np.where(labels[:, None] == labels[None, :], p_in, p_out)
    upper = np.triu(rs.rand(nodes, nodes) < p, k=1)
    row, col = np.nonzero(upper | upper.T)
    x = 0.6 * np.eye(classes, features)[labels] + rs.randn(nodes, features)
    return np.stack([row, col]), x.astype(np.float32), labels


def normalized_adjacency(edge_index, n):
    """``D^-1/2 (A + I) D^-1/2`` as a dense (n, n) matrix; a repeated edge counts once per copy."""
    loops = torch.arange(n, device=edge_index.device)
    row = torch.cat([edge_index[0], loops])
    col = torch.cat([edge_index[1], loops])
    adj = torch.zeros(n, n, device=edge_index.device)
    adj.index_put_((row, col), torch.ones(row.numel(), device=edge_index.device), accumulate=True)
    d_inv_sqrt = adj.sum(1).pow(-0.5)
    d_inv_sqrt[torch.isinf(d_inv_sqrt)] = 0.0
    return torch.diag(d_inv_sqrt) @ adj @ torch.diag(d_inv_sqrt)


class DenseGCNConv(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x, a_hat):
        return torch.mm(a_hat, self.linear(x)) + self.bias


class MessagePassingGCNConv(nn.Module):
    """The same layer as gathers and scatters over the edge list, with self-loops."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x, edge_index):
        n = x.size(0)
        loops = torch.arange(n, device=x.device)
        row, col = torch.cat([edge_index[0], loops]), torch.cat([edge_index[1], loops])
        deg = torch.zeros(n, device=x.device).scatter_add_(0, col, torch.ones(col.numel(), device=x.device))
        d_inv_sqrt = deg.pow(-0.5)
        norm = d_inv_sqrt[row] * d_inv_sqrt[col]
        h = x @ self.linear.weight.t()  # the bias is added once per node, after the sum
        out = torch.zeros(n, h.size(1), device=x.device).index_add_(0, col, h[row] * norm.unsqueeze(1))
        return out + self.linear.bias


class GCN(nn.Module):
    def __init__(self, in_features, hidden, classes, dropout=0.5):
        super().__init__()
        self.conv1 = DenseGCNConv(in_features, hidden)
        self.conv2 = MessagePassingGCNConv(hidden, classes)
        self.dropout = dropout

    def forward(self, x, a_hat, edge_index):
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = F.relu(self.conv1(x, a_hat))
        x = F.dropout(x, p=self.dropout, training=self.training)
        return self.conv2(x, edge_index)


def accuracy(logits, labels, mask):
    return (logits.argmax(dim=1)[mask] == labels[mask]).float().mean().item()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--weight-decay", type=float, default=5e-4, help="on the first layer only")
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    edges, features, labels = block_graph(seed=args.seed)
    edge_index = torch.from_numpy(edges).long().to(device)
    x = torch.from_numpy(features).to(device)
    y = torch.from_numpy(labels).to(device)
    n = x.size(0)
    train_mask = torch.zeros(n, dtype=torch.bool, device=device)
    train_mask[: n // 2] = True
    val_mask = ~train_mask

    a_hat = normalized_adjacency(edge_index, n)
    model = GCN(x.size(1), args.hidden, int(y.max()) + 1, dropout=args.dropout).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    optimizer = torch.optim.Adam([dict(params=model.conv1.parameters(), weight_decay=args.weight_decay),
                                  dict(params=model.conv2.parameters(), weight_decay=0.0)], lr=args.lr)
    losses = []
    for _ in range(args.steps):
        model.train()
        optimizer.zero_grad()
        out = model(x, a_hat, edge_index)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        out = model(x, a_hat, edge_index)
    print(f"train accuracy {accuracy(out, y, train_mask):.2f}, validation accuracy {accuracy(out, y, val_mask):.2f}")
    return losses


if __name__ == "__main__":
    print(main())
