"""Recommendation models as PyTorch users write them, on implicit feedback drawn with NumPy from ``--seed``: each
user's sequence of items (ids from 1; 0 is the padding item) drawn without replacement from a hidden low-rank
preference plus item popularity, each item often followed by a hidden successor; the last two of each user held
out. ``--arch`` picks the model:

- ``mf``: matrix factorization with ``nn.Embedding`` user and item tables (the item table's ``padding_idx=0``,
  ``max_norm`` on the user table) and per-user / per-item bias embeddings, scored by ``(u * i).sum(-1)``; the BPR
  loss ``-F.logsigmoid(pos - neg).mean()`` (or ``nn.MarginRankingLoss`` with ``--loss margin``) against negatives
  sampled by NumPy, plus an L2 penalty on the batch's embeddings only; with ``--sparse`` the tables' ``sparse=True``
  gradients go to a ``SparseAdam`` of their own, the biases to an ``Adam`` (two optimizers), and the rows the last
  step moved are counted on ``grad.to_dense()``.
- ``ncf``: neural collaborative filtering (NeuMF): a GMF tower (``u * i``, or with ``--score dot`` the plain dot
  product by ``torch.bmm``) and an MLP tower over ``torch.cat`` of the user and item embeddings, joined by
  ``torch.cat`` into one logit per candidate; ``BCEWithLogitsLoss`` over each user's positive and sampled negatives.
- ``seq``: next-item prediction from left-padded item histories (``nn.Embedding(padding_idx=0)``) through a GRU or,
  with ``--encoder mean``, masked mean pooling of each prefix (``masked_fill``, ``mask.unsqueeze(-1)``, sums over
  ``clamp(min=1)`` counts); logits against the item table's weights (``h @ emb.weight.T``), ``F.cross_entropy``
  over all items with ``ignore_index=0`` for the padded targets and ``label_smoothing``.

Each run ends with an evaluation under ``torch.no_grad()``: every user's scores for all items (``user @ item.T``),
the training items masked with ``scatter_`` or ``scores[rows, cols] = -float("inf")``, ``torch.topk``, recall@k
and NDCG@k by broadcast ``==`` and ``torch.log2(torch.arange(2, k + 2).float())``, item popularity by
``torch.bincount`` for a baseline and ``torch.isin``, catalogue coverage by ``torch.unique(return_counts=True)``.
Only the imports name the framework.

    python recsys_idioms.py --arch mf --steps 30

``main`` returns the training loss of every step."""
import argparse

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_interactions(users=96, items=200, rank=4, follow=0.5, seed=0):
    """Each user's items in the order taken, ids 1..items, 8 to 20 of them: after an item, with probability
    ``follow`` its fixed successor (a hidden permutation: the sequential signal), else the user's next choice by a
    low-rank preference plus popularity (Gumbel top-k: a draw without replacement)."""
    rs = np.random.RandomState(seed)
    preference = rs.randn(users, rank) @ rs.randn(rank, items) * 1.5 + rs.randn(items) * 0.7
    successor = rs.permutation(items)
    lengths = rs.randint(8, 21, size=users)
    sequences = []
    for u in range(users):
        choices = iter(np.argsort(-(preference[u] + rs.gumbel(size=items))))
        taken = []
        while len(taken) < lengths[u]:
            nxt = successor[taken[-1]] if taken and rs.rand() < follow else next(choices)
            if nxt not in taken:
                taken.append(nxt)
        sequences.append(np.array(taken) + 1)
    return sequences


def left_pad(sequences, length):
    """The sequences as rows of ``length``, right-aligned after 0s."""
    out = np.zeros((len(sequences), length), np.int64)
    for row, seq in enumerate(sequences):
        out[row, length - len(seq):] = seq
    return out


def sample_negatives(rs, users, seen, count):
    """``count`` items per user, drawn uniformly among those the user has not seen (never the padding item)."""
    neg = rs.randint(1, seen.shape[1], size=(len(users), count))
    bad = seen[users[:, None], neg]
    while bad.any():
        neg[bad] = rs.randint(1, seen.shape[1], size=int(bad.sum()))
        bad = seen[users[:, None], neg]
    return neg


class MF(nn.Module):
    def __init__(self, n_users, n_items, dim, sparse=False, max_norm=None):
        super().__init__()
        self.user = nn.Embedding(n_users, dim, max_norm=max_norm, sparse=sparse)
        self.item = nn.Embedding(n_items, dim, padding_idx=0, sparse=sparse)
        self.user_bias = nn.Embedding(n_users, 1)
        self.item_bias = nn.Embedding(n_items, 1, padding_idx=0)
        for table in (self.user, self.item):
            nn.init.normal_(table.weight, std=0.1)
        nn.init.zeros_(self.user_bias.weight)
        nn.init.zeros_(self.item_bias.weight)
        with torch.no_grad():
            self.item.weight[self.item.padding_idx].fill_(0)  # init.normal_ wrote over the padding row

    def score(self, u, items):
        return (u * self.item(items)).sum(-1) + self.item_bias(items).squeeze(-1)

    def forward(self, users, pos, neg):
        """The positive and negative scores, and the L2 penalty of the embeddings this batch used."""
        u = self.user(users)
        bu = self.user_bias(users).squeeze(-1)
        pos_scores, neg_scores = self.score(u, pos) + bu, self.score(u, neg) + bu
        reg = (u.pow(2).sum() + self.item(pos).pow(2).sum() + self.item(neg).pow(2).sum()) / users.size(0)
        return pos_scores, neg_scores, reg

    def all_scores(self):
        return self.user.weight @ self.item.weight.T + self.item_bias.weight.T + self.user_bias.weight


class NeuMF(nn.Module):
    def __init__(self, n_users, n_items, dim, hidden=(32, 16), dropout=0.2, score="concat"):
        super().__init__()
        self.score = score
        self.user_gmf, self.item_gmf = nn.Embedding(n_users, dim), nn.Embedding(n_items, dim, padding_idx=0)
        self.user_mlp, self.item_mlp = nn.Embedding(n_users, dim), nn.Embedding(n_items, dim, padding_idx=0)
        layers, width = [], 2 * dim
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(dropout)]
            width = size
        self.mlp = nn.Sequential(*layers)
        self.predict = nn.Linear(width if score == "dot" else dim + width, 1)
        for m in self.modules():
            if isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, std=0.1)

    def forward(self, users, items):
        """One logit per (user, candidate): users (B,), items (B, C)."""
        ug, ig = self.user_gmf(users).unsqueeze(1), self.item_gmf(items)
        um = self.user_mlp(users).unsqueeze(1).expand(-1, items.size(1), -1)
        h = self.mlp(torch.cat([um, self.item_mlp(items)], dim=-1))
        if self.score == "dot":
            return torch.bmm(ig, ug.transpose(1, 2)).squeeze(-1) + self.predict(h).squeeze(-1)
        return self.predict(torch.cat([ug * ig, h], dim=-1)).squeeze(-1)


class SeqRec(nn.Module):
    def __init__(self, n_items, dim, encoder="gru", dropout=0.2):
        super().__init__()
        self.encoder = encoder
        self.item = nn.Embedding(n_items, dim, padding_idx=0)
        self.dropout = nn.Dropout(dropout)
        if encoder == "gru":
            self.gru = nn.GRU(dim, dim, batch_first=True)
        else:
            self.proj = nn.Linear(dim, dim)
        self.bias = nn.Parameter(torch.zeros(n_items))

    def forward(self, seq):
        """The state after each position of the left-padded histories: (B, T, dim)."""
        x = self.dropout(self.item(seq))
        if self.encoder == "gru":
            return self.gru(x)[0]
        mask = seq != 0
        x = x.masked_fill(~mask.unsqueeze(-1), 0.0)
        counts = mask.cumsum(dim=1).clamp(min=1).unsqueeze(-1)
        return torch.tanh(self.proj(x.cumsum(dim=1) / counts))

    def logits(self, h):
        return h @ self.item.weight.T + self.bias


def rank_metrics(scores, test_items, k):
    """Mean recall@k and NDCG@k of the held-out items (rows of ``test_items``, 0-padded) in each row's top k."""
    top = torch.topk(scores, k, dim=1).indices
    hits = (top.unsqueeze(-1) == test_items.unsqueeze(1)).any(-1).float()  # (users, k)
    relevant = (test_items > 0).sum(1).clamp(max=k)
    discount = 1.0 / torch.log2(torch.arange(2, k + 2, device=scores.device).float())
    ideal = discount.cumsum(0)[relevant - 1]
    recall = (hits.sum(1) / relevant.float()).mean()
    ndcg = ((hits * discount).sum(1) / ideal).mean()
    return recall.item(), ndcg.item(), top


def report(name, scores, test_items, popularity, k):
    recall, ndcg, top = rank_metrics(scores, test_items, k)
    recommended, counts = torch.unique(top, return_counts=True)
    popular = torch.topk(popularity, k).indices
    share = torch.isin(top, popular).float().mean().item()
    print(f"{name}: recall@{k} {recall:.3f}, NDCG@{k} {ndcg:.3f}, coverage {recommended.numel()} items "
          f"(most recommended {counts.max().item()} times), {share:.2f} of them among the {k} most popular")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=("mf", "ncf", "seq"), default="mf")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=None, help="128 pairs (mf), 64 users (ncf), 32 histories (seq)")
    p.add_argument("--lr", type=float, default=None, help="0.05 (mf, seq), 0.01 (ncf)")
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--loss", choices=("bpr", "margin"), default="bpr", help="mf's ranking loss")
    p.add_argument("--sparse", action="store_true", help="mf: sparse embedding gradients, SparseAdam")
    p.add_argument("--max-norm", type=float, default=0.5, help="mf: of the user embeddings")
    p.add_argument("--reg", type=float, default=1e-3, help="mf: L2 weight on the batch's embeddings")
    p.add_argument("--negatives", type=int, default=4, help="ncf: sampled negatives per positive")
    p.add_argument("--score", choices=("concat", "dot"), default="concat", help="ncf: the GMF tower's form")
    p.add_argument("--encoder", choices=("gru", "mean"), default="gru", help="seq: the history encoder")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def batches(loader):
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rs = np.random.RandomState(args.seed + 1)  # negatives
    sequences = make_interactions(seed=args.seed)
    n_users, n_items = len(sequences), 1 + max(int(s.max()) for s in sequences)
    train, test = [s[:-2] for s in sequences], [s[-2:] for s in sequences]
    seen = np.zeros((n_users, n_items), bool)
    for u, items in enumerate(train):
        seen[u, items] = True
    pair_users = np.concatenate([np.full(len(s), u) for u, s in enumerate(train)])
    pair_items = np.concatenate(train)
    batch_size = args.batch_size or {"mf": 128, "ncf": 64, "seq": 32}[args.arch]
    lr = args.lr or {"mf": 0.05, "ncf": 0.01, "seq": 0.05}[args.arch]

    if args.arch == "mf":
        model = MF(n_users, n_items, args.dim, sparse=args.sparse, max_norm=args.max_norm).to(device)
    elif args.arch == "ncf":
        model = NeuMF(n_users, n_items, args.dim, dropout=args.dropout, score=args.score).to(device)
    else:
        model = SeqRec(n_items, args.dim, encoder=args.encoder, dropout=args.dropout).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    if args.sparse:  # SparseAdam takes the tables' sparse gradients; Adam the dense rest
        tables = [model.user.weight, model.item.weight]
        dense = [p for p in model.parameters() if all(p is not t for t in tables)]
        optimizers = [torch.optim.SparseAdam(tables, lr=lr), torch.optim.Adam(dense, lr=lr)]
    else:
        optimizers = [torch.optim.Adam(model.parameters(), lr=lr)]

    if args.arch == "seq":
        histories = torch.from_numpy(left_pad(train, max(len(s) for s in train)))
        dataset = TensorDataset(histories)
    else:
        dataset = TensorDataset(torch.from_numpy(pair_users), torch.from_numpy(pair_items))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=not args.no_shuffle, drop_last=True)
    margin = nn.MarginRankingLoss(margin=0.5)
    bce = nn.BCEWithLogitsLoss()

    losses = []
    model.train()
    for step, batch in zip(range(args.steps), batches(loader)):
        if args.arch == "seq":
            seq = batch[0].to(device)
            h = model(seq[:, :-1])
            logits = model.logits(h)  # (B, T - 1, items)
            loss = F.cross_entropy(logits.transpose(1, 2), seq[:, 1:], ignore_index=0,
                                   label_smoothing=args.label_smoothing)
        else:
            users, pos = batch
            neg = sample_negatives(rs, users.numpy(), seen, 1 if args.arch == "mf" else args.negatives)
            users, pos, neg = users.to(device), pos.to(device), torch.from_numpy(neg).to(device)
            if args.arch == "mf":
                pos_scores, neg_scores, reg = model(users, pos, neg[:, 0])
                if args.loss == "bpr":
                    loss = -F.logsigmoid(pos_scores - neg_scores).mean()
                else:
                    loss = margin(pos_scores, neg_scores, torch.ones_like(pos_scores))
                loss = loss + args.reg * reg
            else:
                candidates = torch.cat([pos.unsqueeze(1), neg], dim=1)
                labels = torch.zeros(candidates.shape, device=device)
                labels[:, 0] = 1.0
                loss = bce(model(users, candidates), labels)
        for optimizer in optimizers:
            optimizer.zero_grad()
        loss.backward()
        for optimizer in optimizers:
            optimizer.step()
        losses.append(loss.item())

    if args.sparse:  # the rows the last batch's sparse gradient held
        touched = (model.item.weight.grad.to_dense().abs().sum(1) > 0).sum().item()
        print(f"the last step moved {touched} of {n_items} item embeddings")
    model.eval()
    test_items = torch.from_numpy(np.stack(test)).to(device)
    train_items = torch.from_numpy(pair_items).to(device)
    popularity = torch.bincount(train_items, minlength=n_items).float()
    seen_rows, seen_cols = (torch.from_numpy(a).to(device) for a in np.nonzero(seen))
    with torch.no_grad():
        if args.arch == "mf":
            scores = model.all_scores()
        elif args.arch == "ncf":
            everyone = torch.arange(n_users, device=device)
            scores = model(everyone, torch.arange(n_items, device=device).expand(n_users, -1))
        else:
            full = torch.from_numpy(left_pad(train, max(len(s) for s in train))).to(device)
            scores = model.logits(model(full)[:, -1])
        if args.arch == "seq":
            scores[seen_rows, seen_cols] = -float("inf")
            scores[:, 0] = -float("inf")
        else:  # each user's training items as a 0-padded index row: the padding column goes too
            padded = torch.from_numpy(left_pad(train, max(len(s) for s in train))).to(device)
            scores.scatter_(1, padded, -float("inf"))
        report(args.arch, scores, test_items, popularity, args.k)
        baseline = popularity.expand(n_users, -1).clone()
        baseline[seen_rows, seen_cols] = -float("inf")
        baseline[:, 0] = -float("inf")
        report("popularity", baseline, test_items, popularity, args.k)
    return losses


if __name__ == "__main__":
    print(main())
