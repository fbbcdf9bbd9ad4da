"""A variational auto-encoder written with ``torch.distributions``, as a PyTorch user writes one: the encoder
gives a diagonal ``Normal`` posterior (``Independent`` over the latent dimensions), a reparametrized sample
(``rsample``) goes through the decoder to ``Bernoulli`` logits, and the loss is the negative ELBO with the
KL divergence to the standard-normal prior from ``kl_divergence``; Adam; synthetic binary "images" (noisy
copies of a few prototypes). Only the imports name the framework.

``main`` returns the loss (the negative ELBO per example) of every step."""
import argparse

import numpy as np

import torch
import torch.nn as nn
from torch.distributions import Bernoulli, Independent, Normal, kl_divergence


class VAE(nn.Module):
    def __init__(self, pixels, hidden, latent):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(pixels, hidden), nn.ReLU(), nn.Linear(hidden, 2 * latent))
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, pixels))
        self.latent = latent

    def posterior(self, x):
        loc, log_scale = self.encoder(x).chunk(2, dim=-1)
        return Independent(Normal(loc, log_scale.exp()), 1)

    def forward(self, x):
        q = self.posterior(x)
        z = q.rsample()
        likelihood = Independent(Bernoulli(logits=self.decoder(z)), 1)
        prior = Independent(Normal(torch.zeros_like(z), torch.ones_like(z)), 1)
        return -(likelihood.log_prob(x) - kl_divergence(q, prior)).mean()


def dataset(rng, count, pixels, prototypes=4, flip=0.05):
    base = rng.random((prototypes, pixels)) < 0.5
    picks = base[rng.integers(prototypes, size=count)]
    return (picks ^ (rng.random((count, pixels)) < flip)).astype(np.float32)


def parse_args(argv):
    p = argparse.ArgumentParser(description="a VAE with torch.distributions on synthetic binary images")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(args.seed)
    data = torch.from_numpy(dataset(rng, 1024, 64)).to(device)
    model = VAE(64, 128, 8).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    for step in range(args.steps):
        batch = data[torch.randint(0, data.size(0), (args.batch_size,), device=device)]
        loss = model(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    print(f"negative ELBO {losses[0]:.2f} -> {losses[-1]:.2f} in {len(losses)} steps")
    return losses


if __name__ == "__main__":
    main()
