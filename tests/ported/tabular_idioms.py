"""A multi-task MLP on a tabular data set, written as PyTorch users write it without a tabular library.
Preprocessing fitted on the training rows only: missing values found with ``torch.isnan``, column means taken
over the present values (``torch.nan_to_num(x).sum(0) / (~missing).sum(0)``) and put in with ``torch.where``, the
missing-value indicators kept as features; standardization by ``torch.std_mean(x, dim=0, unbiased=False)``, the
regression targets by ``torch.var_mean(y, dim=0, correction=1)``; a skewed column binned at its training
quantiles (``torch.nanquantile`` edges, ``torch.bucketize``, ``F.one_hot`` in the model); categorical columns
encoded by ``torch.unique(..., return_inverse=True)`` on the training rows and by ``torch.searchsorted`` into that
vocabulary on the validation rows (an unseen value goes to index 0, an ``nn.Embedding``'s ``padding_idx``), one
embedding per column in an ``nn.ModuleDict`` keyed by column name. A ``Dataset`` returns nested dicts, which the
``DataLoader``'s default collation batches. The heads: heteroscedastic regression with ``nn.GaussianNLLLoss``
(the variance through ``F.softplus``), a count with ``nn.PoissonNLLLoss(log_input=True)``, a heavy-tailed target
with ``nn.HuberLoss``, two quantiles with a pinball loss written with ``torch.maximum``; a squared weight-norm
penalty on ``parameters_to_vector(model.parameters())``; ``clip_grad_value_``; each epoch a validation pass
(predictions gathered with ``torch.cat`` under ``torch.no_grad()``), ``ReduceLROnPlateau`` with an absolute
threshold, a cooldown and a floor, early stopping with patience that keeps the best weights as a vector and puts
them back with ``vector_to_parameters``, and a running average of the epochs' weight vectors loaded into a
``copy.deepcopy`` of the model. Metrics: ``torch.quantile`` of the absolute errors, the coverage of the quantile
heads' band and of the Gaussian head's interval (``torch.distributions.Normal(...).icdf``).
The table is drawn with NumPy from ``--seed``. Only the imports name the framework.

    python tabular_idioms.py --steps 120

``main`` returns the training loss of every step (fewer than ``--steps`` where early stopping ends the run)."""
import argparse
import copy

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.data import DataLoader, Dataset

NUMERIC = ("age", "income", "tenure", "balance", "rate")
CATEGORIES = {"region": [3, 8, 15, 21, 42, 57, 64, 90], "product": [100, 200, 300, 400, 500], "channel": [7, 1, 4]}
BINNED = "income"
QUANTILES = (0.1, 0.9)


def make_table(n, seed=0, missing=0.15, valid_from=None, unseen=0.05):
    """Columns of NumPy arrays: numeric columns with NaNs at random, categorical columns of integer codes (from
    row ``valid_from`` on some codes no earlier row has), and three targets from a known function plus noise."""
    rs = np.random.RandomState(seed)
    z = rs.randn(n, len(NUMERIC))
    table = {"age": 40 + 12 * z[:, 0], "income": np.exp(10 + 0.6 * z[:, 1]), "tenure": 5 + 3 * z[:, 2],
             "balance": 200 + 1000 * z[:, 3], "rate": 0.05 + 0.01 * z[:, 4]}
    for name in NUMERIC:
        table[name] = np.where(rs.rand(n) < missing, np.nan, table[name]).astype(np.float32)
    index = {}
    for name, codes in CATEGORIES.items():
        index[name] = rs.randint(0, len(codes), n)
        table[name] = np.asarray(codes)[index[name]]
        if valid_from is not None:
            table[name][valid_from:][rs.rand(n - valid_from) < unseen] = 999
    region, product, channel = (rs.randn(len(c)) * 0.5 for c in CATEGORIES.values())
    sigma = 0.2 + 0.5 / (1 + np.exp(-2 * z[:, 2]))
    table["y"] = (np.sin(z[:, 0]) + 0.5 * z[:, 1] + region[index["region"]] + product[index["product"]]
                  + sigma * rs.randn(n)).astype(np.float32)
    rate = np.exp(0.5 + 0.5 * z[:, 3] + channel[index["channel"]])
    table["count"] = rs.poisson(rate).astype(np.float32)
    table["spend"] = (0.8 * z[:, 4] - 0.4 * z[:, 0] + product[index["product"]]
                      + 0.3 * rs.standard_t(2, n)).astype(np.float32)
    return table


def rows(table, start, stop):
    return {k: v[start:stop] for k, v in table.items()}


class TablePreprocessor:
    """Statistics and vocabularies from the training rows, applied unchanged to any other rows."""

    def __init__(self, n_bins=4):
        self.n_bins = n_bins

    def fit_transform(self, table):
        x = torch.from_numpy(np.stack([table[c] for c in NUMERIC], axis=1))
        missing = torch.isnan(x)
        self.fill = torch.nan_to_num(x, nan=0.0).sum(0) / (~missing).sum(0)
        self.std, self.mean = torch.std_mean(torch.where(missing, self.fill, x), dim=0, unbiased=False)
        probs = torch.linspace(0, 1, self.n_bins + 1)[1:-1]
        self.edges = torch.nanquantile(x[:, NUMERIC.index(BINNED)], probs)
        targets = torch.from_numpy(np.stack([table["y"], table["spend"]], axis=1))
        var, self.target_mean = torch.var_mean(targets, dim=0, correction=1)
        self.target_std = var.sqrt()
        self.vocab, categorical = {}, {}
        for name in CATEGORIES:
            self.vocab[name], inverse = torch.unique(torch.from_numpy(table[name]), sorted=True, return_inverse=True)
            categorical[name] = inverse + 1  # 0: a value the training rows never had
        return self._encode(table, x, categorical)

    def transform(self, table):
        categorical = {}
        for name, vocab in self.vocab.items():
            values = torch.from_numpy(table[name])
            pos = torch.searchsorted(vocab, values).clamp(max=len(vocab) - 1)
            categorical[name] = torch.where(vocab[pos] == values, pos + 1, 0)
        x = torch.from_numpy(np.stack([table[c] for c in NUMERIC], axis=1))
        return self._encode(table, x, categorical)

    def _encode(self, table, x, categorical):
        missing = torch.isnan(x)
        filled = torch.where(missing, self.fill, x)
        targets = torch.from_numpy(np.stack([table["y"], table["spend"]], axis=1))
        targets = (targets - self.target_mean) / self.target_std
        return {"numeric": (filled - self.mean) / self.std, "missing": missing.float(),
                "bin": torch.bucketize(filled[:, NUMERIC.index(BINNED)].contiguous(), self.edges),
                "categorical": categorical, "y": targets[:, 0], "spend": targets[:, 1],
                "count": torch.from_numpy(table["count"])}


class TabularDataset(Dataset):
    def __init__(self, columns):
        self.columns = columns

    def __len__(self):
        return len(self.columns["y"])

    def __getitem__(self, i):
        return {k: ({name: c[i] for name, c in v.items()} if isinstance(v, dict) else v[i])
                for k, v in self.columns.items()}


def to_device(batch, device):
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch.to(device)


class MultiTaskMLP(nn.Module):
    def __init__(self, n_numeric, n_bins, cardinalities, hidden=64, dropout=0.1, n_quantiles=2):
        super().__init__()
        self.n_bins = n_bins
        self.embeddings = nn.ModuleDict({name: nn.Embedding(card, min(8, (card + 1) // 2), padding_idx=0)
                                         for name, card in cardinalities.items()})
        width = 2 * n_numeric + n_bins + sum(e.embedding_dim for e in self.embeddings.values())
        self.trunk = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout),
                                   nn.Linear(hidden, hidden), nn.ReLU())
        self.gaussian = nn.Linear(hidden, 2)  # mean and raw variance of y
        self.count = nn.Linear(hidden, 1)  # log rate
        self.spend = nn.Linear(hidden, 1)
        self.quantiles = nn.Linear(hidden, n_quantiles)

    def forward(self, batch):
        parts = [batch["numeric"], batch["missing"], F.one_hot(batch["bin"], self.n_bins).float()]
        parts += [emb(batch["categorical"][name]) for name, emb in self.embeddings.items()]
        h = self.trunk(torch.cat(parts, dim=1))
        mean, raw_var = self.gaussian(h).unbind(dim=1)
        return {"mean": mean, "var": F.softplus(raw_var) + 1e-6, "log_rate": self.count(h).squeeze(1),
                "spend": self.spend(h).squeeze(-1), "quantiles": self.quantiles(h)}


def pinball_loss(pred, target, quantiles):
    diff = target.unsqueeze(1) - pred
    return torch.maximum(quantiles * diff, (quantiles - 1) * diff).mean()


class MultiTaskLoss(nn.Module):
    def __init__(self, quantiles, weights=(1.0, 1.0, 1.0, 1.0)):
        super().__init__()
        self.gaussian = nn.GaussianNLLLoss(eps=1e-6)
        self.poisson = nn.PoissonNLLLoss(log_input=True)
        self.huber = nn.HuberLoss(delta=1.0)
        self.register_buffer("quantiles", torch.tensor(quantiles))
        self.weights = weights

    def forward(self, out, batch):
        terms = (self.gaussian(out["mean"], batch["y"], out["var"]),
                 self.poisson(out["log_rate"], batch["count"]),
                 self.huber(out["spend"], batch["spend"]),
                 pinball_loss(out["quantiles"], batch["y"], self.quantiles))
        return sum(w * t for w, t in zip(self.weights, terms))


class EarlyStopping:
    """Stop after ``patience`` epochs without a validation loss ``min_delta`` below the best; keeps the best
    weights as one vector."""

    def __init__(self, patience=3, min_delta=0.0):
        self.patience, self.min_delta = patience, min_delta
        self.best, self.bad_epochs, self.best_params = float("inf"), 0, None

    def step(self, val_loss, model):
        if val_loss < self.best - self.min_delta:
            self.best, self.bad_epochs = val_loss, 0
            self.best_params = parameters_to_vector(model.parameters()).detach().clone()
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


def predict(model, loader, device):
    """The model's outputs and the targets over the whole loader, concatenated."""
    model.eval()
    outs, targets = [], []
    with torch.no_grad():
        for batch in loader:
            batch = to_device(batch, device)
            outs.append(model(batch))
            targets.append({k: batch[k] for k in ("y", "spend", "count")})
    model.train()
    return ({k: torch.cat([o[k] for o in outs]) for k in outs[0]},
            {k: torch.cat([t[k] for t in targets]) for k in targets[0]})


def evaluate(model, loader, criterion, device):
    out, target = predict(model, loader, device)
    loss = criterion(out, target).item()
    abs_err = (out["mean"] - target["y"]).abs()
    p50, p90 = torch.quantile(abs_err, torch.tensor([0.5, 0.9], device=device)).tolist()
    lo, hi = out["quantiles"].unbind(dim=1)
    coverage = ((target["y"] >= lo) & (target["y"] <= hi)).float().mean().item()
    normal = torch.distributions.Normal(out["mean"], out["var"].sqrt())  # the Gaussian head's own 80 % interval
    lo, hi = normal.icdf(torch.full_like(lo, QUANTILES[0])), normal.icdf(torch.full_like(hi, QUANTILES[1]))
    gaussian_coverage = ((target["y"] >= lo) & (target["y"] <= hi)).float().mean().item()
    return loss, {"median_abs_err": p50, "p90_abs_err": p90, "coverage": coverage,
                  "gaussian_coverage": gaussian_coverage}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--train-size", type=int, default=256)
    p.add_argument("--valid-size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--bins", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-norm", type=float, default=1e-4, help="weight of the squared weight-norm penalty")
    p.add_argument("--clip", type=float, default=1.0, help="clip_grad_value_'s bound")
    p.add_argument("--patience", type=int, default=4, help="epochs without improvement before stopping")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    n = args.train_size + args.valid_size
    table = make_table(n, seed=args.seed, valid_from=args.train_size)
    prep = TablePreprocessor(args.bins)
    train_set = TabularDataset(prep.fit_transform(rows(table, 0, args.train_size)))
    valid_set = TabularDataset(prep.transform(rows(table, args.train_size, n)))
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=not args.no_shuffle, drop_last=True)
    valid_loader = DataLoader(valid_set, batch_size=64)

    cardinalities = {name: len(vocab) + 1 for name, vocab in prep.vocab.items()}
    model = MultiTaskMLP(len(NUMERIC), args.bins, cardinalities, args.hidden, args.dropout, len(QUANTILES)).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    criterion = MultiTaskLoss(QUANTILES).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=1,
                                                           threshold=1e-3, threshold_mode="abs", cooldown=1,
                                                           min_lr=1e-4)
    stopper = EarlyStopping(patience=args.patience)
    average, averaged_epochs = None, 0

    losses, step, epoch = [], 0, 0
    model.train()
    while step < args.steps:
        for batch in train_loader:
            batch = to_device(batch, device)
            loss = criterion(model(batch), batch)
            loss = loss + args.weight_norm * parameters_to_vector(model.parameters()).pow(2).sum()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_value_(model.parameters(), clip_value=args.clip)
            optimizer.step()
            losses.append(loss.item())
            step += 1
            if step == args.steps:
                break
        epoch += 1
        val_loss, _ = evaluate(model, valid_loader, criterion, device)
        scheduler.step(val_loss)
        with torch.no_grad():
            vec = parameters_to_vector(model.parameters())
            average = vec.clone() if average is None else average + (vec - average) / (averaged_epochs + 1)
            averaged_epochs += 1
        print(f"epoch {epoch} val loss {val_loss:.4f} lr {optimizer.param_groups[0]['lr']:.2g}")
        if stopper.step(val_loss, model):
            print(f"early stop after epoch {epoch}")
            break

    vector_to_parameters(stopper.best_params, model.parameters())
    averaged = copy.deepcopy(model)
    vector_to_parameters(average, averaged.parameters())
    for what, m in (("best", model), ("averaged", averaged)):
        val_loss, metrics = evaluate(m, valid_loader, criterion, device)
        print(f"{what}: val loss {val_loss:.4f}, " + ", ".join(f"{k} {v:.3f}" for k, v in metrics.items()))
    return losses


if __name__ == "__main__":
    print(main())
