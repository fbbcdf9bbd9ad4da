"""Coordinate-field and density-estimation MLPs as PyTorch users write them, on synthetic NumPy data; ``--arch``
picks the model:

- ``nerf``: a tiny NeRF on a 2-D scene of coloured Gaussian blobs seen along rays: positional encoding
  (``2.0 ** torch.arange(L)`` frequencies, sin / cos of ``x[..., None] * freqs`` concatenated and flattened), a
  coarse and a fine MLP with a skip connection (``torch.cat`` of the encoding into a middle layer) and a view
  direction branch, stratified samples along each ray (``torch.linspace`` plus NumPy jitter), volume rendering
  (``alpha = 1 - exp(-relu(sigma) * delta)``, transmittance by a shifted ``torch.cumprod``, weights summed over
  the samples), hierarchical resampling of the fine samples by inverse-transform sampling of the coarse weights
  (``torch.searchsorted(cdf, u, right=True)``, ``clamp``, ``torch.gather``, ``torch.sort``); MSE losses, PSNR by
  ``-10 * log10(mse)``, Adam with an ``ExponentialLR``;
- ``siren``: a SIREN (``sin(omega_0 * linear(x))`` layers initialised in place under ``torch.no_grad()`` with
  ``weight.uniform_(-b, b)``) fitting an image on a ``torch.meshgrid`` of coordinates, with its spatial gradient
  from ``torch.autograd.grad(out, coords, grad_outputs=torch.ones_like(out), create_graph=True)`` supervised too;
  with ``--inner-steps``, meta-learned as MetaSDF: inner SGD steps by ``torch.func.grad`` of a
  ``torch.func.functional_call`` over the parameter dict, the outer loss differentiated through them;
- ``flow``: a RealNVP on two-moons points: affine coupling layers with alternating binary masks registered as
  buffers, ``tanh``-bounded log-scales, the log-determinant as ``s.sum(dim=1)`` summed in place over the layers;
  ActNorm layers initialised from the first batch (a flag buffer); Glow's invertible linear map, LU-decomposed by
  ``torch.linalg.lu`` (permutation and signs as buffers, ``torch.inverse`` for the inverse pass, checked against
  ``torch.linalg.slogdet``); a weight-normalised Linear (``nn.utils.parametrizations.weight_norm``) and a
  ``BatchNorm1d`` in the coupling nets; the negative log-likelihood under a ``MultivariateNormal(zeros, eye)``
  base (an independent ``Normal``'s ``log_prob(...).sum(-1)`` for the evaluation), samples by the inverse pass
  under ``torch.no_grad()`` in evaluation mode (BatchNorm's running statistics).

Every random draw the two frameworks cannot share (rays, jitter, resampling uniforms, pixel batches, latent
samples) comes from NumPy seeded by ``--seed``. Only the imports name the framework.

    python mlp_fields_idioms.py --arch nerf --steps 30

``main`` returns the training loss of every step."""
import argparse
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import MultivariateNormal, Normal

# ---------------------------------------------------------------- NeRF on a 2-D scene

BLOBS = np.array([[0.3, -0.2, 0.25, 8.0], [-0.35, 0.25, 0.2, 12.0], [0.0, 0.45, 0.15, 6.0]])  # x, y, radius, peak
BLOB_RGB = np.array([[0.9, 0.2, 0.1], [0.1, 0.7, 0.3], [0.2, 0.3, 0.95]])
NEAR, FAR = 1.0, 3.0


def scene(points):
    """The true density and colour at NumPy points (..., 2)."""
    d2 = ((points[..., None, :] - BLOBS[:, :2]) ** 2).sum(-1)
    g = BLOBS[:, 3] * np.exp(-d2 / (2 * BLOBS[:, 2] ** 2))
    sigma = g.sum(-1)
    rgb = (g[..., None] * BLOB_RGB).sum(-2) / (sigma[..., None] + 1e-8)
    return sigma, rgb


def make_rays(rs, n):
    """Rays from a circle of radius 2 towards points of the central square, with their true colours (white
    background), rendered by NumPy on a fine quadrature."""
    angle = rs.uniform(0, 2 * np.pi, n)
    origins = 2.0 * np.stack([np.cos(angle), np.sin(angle)], -1)
    dirs = rs.uniform(-0.5, 0.5, (n, 2)) - origins
    dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
    t = np.linspace(NEAR, FAR, 257)
    mid = 0.5 * (t[1:] + t[:-1])
    sigma, rgb = scene(origins[:, None] + mid[:, None] * dirs[:, None])
    alpha = 1 - np.exp(-sigma * np.diff(t))
    trans = np.cumprod(np.concatenate([np.ones((n, 1)), 1 - alpha[:, :-1]], -1), -1)
    weights = alpha * trans
    color = (weights[..., None] * rgb).sum(-2) + (1 - weights.sum(-1, keepdims=True))
    return origins.astype(np.float32), dirs.astype(np.float32), color.astype(np.float32)


class PositionalEncoding(nn.Module):
    def __init__(self, num_freqs, include_input=True):
        super().__init__()
        self.register_buffer("freqs", 2.0 ** torch.arange(num_freqs) * math.pi, persistent=False)
        self.include_input = include_input

    def out_dim(self, in_dim):
        return in_dim * (2 * len(self.freqs) + int(self.include_input))

    def forward(self, x):
        xb = x[..., None] * self.freqs  # (..., D, L)
        enc = torch.cat([torch.sin(xb), torch.cos(xb)], dim=-1).flatten(-2)
        return torch.cat([x, enc], dim=-1) if self.include_input else enc


class NeRF(nn.Module):
    def __init__(self, width=64, depth=4, skip=2, pos_freqs=6, dir_freqs=2):
        super().__init__()
        self.pos_enc, self.dir_enc = PositionalEncoding(pos_freqs), PositionalEncoding(dir_freqs)
        in_dim, dir_dim = self.pos_enc.out_dim(2), self.dir_enc.out_dim(2)
        self.skip = skip
        self.layers = nn.ModuleList(
            [nn.Linear(in_dim, width)]
            + [nn.Linear(width + (in_dim if i == skip else 0), width) for i in range(1, depth)])
        self.sigma = nn.Linear(width, 1)
        self.feature = nn.Linear(width, width)
        self.rgb = nn.Sequential(nn.Linear(width + dir_dim, width // 2), nn.ReLU(), nn.Linear(width // 2, 3))

    def forward(self, points, dirs):
        enc = self.pos_enc(points)
        h = enc
        for i, layer in enumerate(self.layers):
            if i == self.skip:
                h = torch.cat([enc, h], -1)
            h = F.relu(layer(h))
        sigma = self.sigma(h).squeeze(-1)
        rgb = torch.sigmoid(self.rgb(torch.cat([self.feature(h), self.dir_enc(dirs)], -1)))
        return sigma, rgb


def render(model, rays_o, rays_d, z_vals):
    """Volume rendering of ``model`` at the depths ``z_vals`` (rays, samples) on a white background: the colours,
    and the weights the fine samples are drawn from."""
    points = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    dirs = rays_d[..., None, :].expand(points.shape)
    sigma, rgb = model(points, dirs)
    delta = z_vals[..., 1:] - z_vals[..., :-1]
    delta = torch.cat([delta, torch.tensor([1e10], device=delta.device).expand(delta[..., :1].shape)], -1)
    delta = delta * torch.norm(rays_d[..., None, :], dim=-1)
    alpha = 1.0 - torch.exp(-F.relu(sigma) * delta)
    trans = torch.cumprod(1.0 - alpha + 1e-10, dim=-1)
    trans = torch.cat([torch.ones_like(trans[..., :1]), trans[..., :-1]], dim=-1)
    weights = alpha * trans
    rgb_map = (weights[..., None] * rgb).sum(dim=-2)
    acc = weights.sum(-1)
    return rgb_map + (1.0 - acc[..., None]), weights


def sample_pdf(bins, weights, u):
    """Inverse-transform samples of the piecewise-constant density ``weights`` on the intervals ``bins`` at the
    uniforms ``u`` (rays, n)."""
    weights = weights + 1e-5  # no zero-width steps of the CDF
    pdf = weights / torch.sum(weights, -1, keepdim=True)
    cdf = torch.cumsum(pdf, -1)
    cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
    inds = torch.searchsorted(cdf, u.contiguous(), right=True)
    below = (inds - 1).clamp(min=0)
    above = inds.clamp(max=cdf.shape[-1] - 1)
    inds_g = torch.stack([below, above], -1)  # (rays, n, 2)
    matched = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
    cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched), 2, inds_g)
    bins_g = torch.gather(bins.unsqueeze(1).expand(matched), 2, inds_g)
    denom = cdf_g[..., 1] - cdf_g[..., 0]
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    t = (u - cdf_g[..., 0]) / denom
    return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])


def nerf_step(models, batch, rs, args, device):
    coarse, fine = models
    rays_o, rays_d, target = (torch.from_numpy(a).to(device) for a in batch)
    n_rays = rays_o.shape[0]
    t_vals = torch.linspace(0.0, 1.0, steps=args.samples, device=device)
    z_vals = (NEAR * (1.0 - t_vals) + FAR * t_vals).expand(n_rays, args.samples)
    # stratified: one uniform draw inside each interval between the midpoints
    mids = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
    upper = torch.cat([mids, z_vals[..., -1:]], -1)
    lower = torch.cat([z_vals[..., :1], mids], -1)
    t_rand = torch.from_numpy(rs.rand(n_rays, args.samples).astype(np.float32)).to(device)
    z_vals = lower + (upper - lower) * t_rand
    rgb_coarse, weights = render(coarse, rays_o, rays_d, z_vals)

    z_mids = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
    u = torch.from_numpy(rs.rand(n_rays, args.samples).astype(np.float32)).to(device)
    z_fine = sample_pdf(z_mids, weights[..., 1:-1].detach(), u)
    z_all, _ = torch.sort(torch.cat([z_vals, z_fine.detach()], -1), -1)
    rgb_fine, _ = render(fine, rays_o, rays_d, z_all)
    loss_coarse = F.mse_loss(rgb_coarse, target)
    loss_fine = F.mse_loss(rgb_fine, target)
    return loss_coarse + loss_fine, loss_fine


def train_nerf(args, device, init):
    rs = np.random.RandomState(args.seed)
    models = nn.ModuleList([NeRF(), NeRF()]).to(device)
    if init is not None:
        init("model", dict(models.named_parameters()))
    optimizer = torch.optim.Adam(models.parameters(), lr=args.lr, betas=(0.9, 0.999))
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.1 ** (1 / 500))
    losses = []
    for _ in range(args.steps):
        loss, loss_fine = nerf_step(models, make_rays(rs, args.batch_size), rs, args, device)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    with torch.no_grad():
        _, mse = nerf_step(models, make_rays(rs, 4 * args.batch_size), rs, args, device)
        psnr = -10.0 * torch.log10(mse)
    print(f"held-out rays: fine PSNR {psnr.item():.2f} dB, lr {scheduler.get_last_lr()[0]:.2e}")
    return losses


# ---------------------------------------------------------------- SIREN on an image

class SineLayer(nn.Module):
    def __init__(self, in_features, out_features, is_first=False, omega_0=30.0):
        super().__init__()
        self.omega_0, self.is_first, self.in_features = omega_0, is_first, in_features
        self.linear = nn.Linear(in_features, out_features)
        self.init_weights()

    def init_weights(self):
        with torch.no_grad():
            if self.is_first:
                bound = 1 / self.in_features
            else:
                bound = np.sqrt(6 / self.in_features) / self.omega_0
            self.linear.weight.uniform_(-bound, bound)

    def forward(self, x):
        return torch.sin(self.omega_0 * self.linear(x))


class Siren(nn.Module):
    def __init__(self, in_features=2, hidden=64, layers=3, out_features=1, omega_0=30.0):
        super().__init__()
        net = [SineLayer(in_features, hidden, is_first=True, omega_0=omega_0)]
        net += [SineLayer(hidden, hidden, omega_0=omega_0) for _ in range(layers - 1)]
        final = nn.Linear(hidden, out_features)
        with torch.no_grad():
            bound = np.sqrt(6 / hidden) / omega_0
            final.weight.uniform_(-bound, bound)
        self.net = nn.Sequential(*net, final)

    def forward(self, coords):
        return self.net(coords)


def image_and_gradient(coords):
    """A smooth test image on (N, 2) NumPy coordinates in [-1, 1]^2, and its exact spatial gradient."""
    x, y = coords[:, 0], coords[:, 1]
    bump = np.exp(-((x - 0.3) ** 2 + (y + 0.2) ** 2) / 0.1)
    value = 0.5 * np.sin(3 * x) * np.cos(2 * y) + bump
    dx = 1.5 * np.cos(3 * x) * np.cos(2 * y) - bump * 2 * (x - 0.3) / 0.1
    dy = -np.sin(3 * x) * np.sin(2 * y) - bump * 2 * (y + 0.2) / 0.1
    return value[:, None].astype(np.float32), np.stack([dx, dy], -1).astype(np.float32)


def adapted(model, coords, pixels, steps, inner_lr):
    """MetaSDF's inner loop: ``steps`` SGD steps on the image loss from the shared weights, taken with
    ``torch.func.grad`` over the parameter dict; differentiable, so the outer loss trains the shared weights
    through them (second order, as MAML)."""
    def image_loss(params):
        return F.mse_loss(torch.func.functional_call(model, params, (coords,)), pixels)

    params = dict(model.named_parameters())
    for _ in range(steps):
        grads = torch.func.grad(image_loss)(params)
        params = {name: p - inner_lr * grads[name] for name, p in params.items()}
    return params


def train_siren(args, device, init):
    rs = np.random.RandomState(args.seed)
    side = args.image_size
    axis = torch.linspace(-1, 1, steps=side)
    grid = torch.stack(torch.meshgrid(axis, axis, indexing="ij"), dim=-1).reshape(-1, 2)
    # .cpu(): minifused's factories default to cuda where one is usable (PyTorch's to cpu)
    pixels, grads = (torch.from_numpy(a) for a in image_and_gradient(grid.cpu().numpy().astype(np.float64)))
    grid, pixels, grads = grid.to(device), pixels.to(device), grads.to(device)
    model = Siren().to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    for _ in range(args.steps):
        idx = torch.from_numpy(rs.choice(side * side, args.batch_size, replace=False)).to(device)
        coords = grid[idx].clone().detach().requires_grad_(True)
        if args.inner_steps:
            params = adapted(model, coords.detach(), pixels[idx], args.inner_steps, args.inner_lr)
            out = torch.func.functional_call(model, params, (coords,))
        else:
            out = model(coords)
        grad = torch.autograd.grad(out, coords, grad_outputs=torch.ones_like(out), create_graph=True)[0]
        loss = F.mse_loss(out, pixels[idx]) + args.grad_weight * F.mse_loss(grad, grads[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        mse = F.mse_loss(model(grid), pixels)
    print(f"whole image: PSNR {(-10 * torch.log10(mse)).item():.2f} dB")
    return losses


# ---------------------------------------------------------------- RealNVP on two moons

def two_moons(rs, n, noise=0.08):
    theta = rs.rand(n) * np.pi
    upper = rs.rand(n) < 0.5
    x = np.where(upper, np.cos(theta), 1 - np.cos(theta))
    y = np.where(upper, np.sin(theta), 0.5 - np.sin(theta))
    return (np.stack([x, y], 1) + noise * rs.randn(n, 2)).astype(np.float32)


class ActNorm(nn.Module):
    """Glow's per-feature affine map, its scale and shift set from the first batch it sees."""

    def __init__(self, dim):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(1, dim))
        self.log_scale = nn.Parameter(torch.zeros(1, dim))
        self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

    def forward(self, x):
        if self.initialized.item() == 0:
            with torch.no_grad():
                self.loc.data.copy_(-x.mean(0, keepdim=True))
                self.log_scale.data.copy_(torch.log(1.0 / (x.std(0, keepdim=True) + 1e-6)))
                self.initialized.fill_(1)
        z = (x + self.loc) * torch.exp(self.log_scale)
        return z, self.log_scale.sum().expand(x.size(0))

    def inverse(self, z):
        return z * torch.exp(-self.log_scale) - self.loc


class Coupling(nn.Module):
    def __init__(self, dim, hidden, mask):
        super().__init__()
        self.register_buffer("mask", mask)
        self.s_net = nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Linear(dim, hidden)), nn.LeakyReLU(0.2),
                                   nn.Linear(hidden, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, dim))
        # the norm on the input: after a Linear it would undo the scale of each row reading the one unmasked input,
        # or the shift of each ReLU unit no sample turns off, whose gradients would then be rounding that Adam
        # blows up to full steps
        self.t_net = nn.Sequential(nn.BatchNorm1d(dim), nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                   nn.ReLU(), nn.Linear(hidden, dim))

    def _s_t(self, x_masked):
        s = torch.tanh(self.s_net(x_masked)) * (1 - self.mask)
        t = self.t_net(x_masked) * (1 - self.mask)
        return s, t

    def forward(self, x):
        x_masked = x * self.mask
        s, t = self._s_t(x_masked)
        y = x_masked + (1 - self.mask) * (x * torch.exp(s) + t)
        return y, s.sum(dim=1)

    def inverse(self, y):
        y_masked = y * self.mask
        s, t = self._s_t(y_masked)
        return y_masked + (1 - self.mask) * (y - t) * torch.exp(-s)


class InvertibleLinear(nn.Module):
    """Glow's invertible 1x1 convolution on features, LU-decomposed from a random rotation: the permutation and the
    diagonal's signs are buffers, and log|det W| is the sum of the learned log-diagonal."""

    def __init__(self, dim, rs):
        super().__init__()
        q = torch.from_numpy(np.linalg.qr(rs.randn(dim, dim))[0].astype(np.float32))
        p, lower, upper = torch.linalg.lu(q)
        s = torch.diag(upper)
        self.register_buffer("p", p)
        self.register_buffer("sign_s", torch.sign(s))
        self.register_buffer("l_mask", torch.tril(torch.ones(dim, dim), -1))
        self.register_buffer("eye", torch.eye(dim))
        self.lower = nn.Parameter(lower)
        self.upper = nn.Parameter(torch.triu(upper, 1))
        self.log_s = nn.Parameter(torch.log(torch.abs(s)))

    def weight(self):
        lower = self.lower * self.l_mask + self.eye
        upper = self.upper * self.l_mask.T + torch.diag(self.sign_s * torch.exp(self.log_s))
        return self.p @ lower @ upper

    def forward(self, x):
        return x @ self.weight().T, self.log_s.sum().expand(x.shape[0])

    def inverse(self, z):
        return z @ torch.inverse(self.weight()).T


class RealNVP(nn.Module):
    def __init__(self, dim=2, hidden=32, couplings=4, seed=0):
        super().__init__()
        rs = np.random.RandomState(seed)
        mask = (torch.arange(dim) % 2).float()
        layers = []
        for i in range(couplings):
            layers += [ActNorm(dim), InvertibleLinear(dim, rs), Coupling(dim, hidden, mask if i % 2 == 0 else 1 - mask)]
        self.layers = nn.ModuleList(layers)
        self.register_buffer("base_loc", torch.zeros(dim))
        self.register_buffer("base_cov", torch.eye(dim))

    @property
    def base(self):
        return MultivariateNormal(self.base_loc, self.base_cov)

    def forward(self, x):
        log_det = x.new_zeros(x.shape[0])
        for layer in self.layers:
            x, ld = layer(x)
            log_det += ld
        return x, log_det

    def log_prob(self, x):
        z, log_det = self(x)
        return self.base.log_prob(z) + log_det

    def inverse(self, z):
        for layer in reversed(self.layers):
            z = layer.inverse(z)
        return z


def train_flow(args, device, init):
    rs = np.random.RandomState(args.seed)
    model = RealNVP(seed=args.seed + 1).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    for _ in range(args.steps):
        x = torch.from_numpy(two_moons(rs, args.batch_size)).to(device)
        loss = -model.log_prob(x).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        held_out = torch.from_numpy(two_moons(rs, 512)).to(device)
        z, log_det = model(held_out)
        normal = Normal(torch.zeros(2, device=device), torch.ones(2, device=device))
        nll = -(normal.log_prob(z).sum(-1) + log_det).mean()
        samples = model.inverse(torch.from_numpy(rs.randn(512, 2).astype(np.float32)).to(device))
        mixing = [layer for layer in model.layers if isinstance(layer, InvertibleLinear)]
        log_dets = [(torch.linalg.slogdet(m.weight()).logabsdet - m.log_s.sum()).abs().item() for m in mixing]
    print(f"held-out NLL {nll.item():.3f}, samples' mean {samples.mean(0).tolist()}, "
          f"log|det W| off by {max(log_dets):.1e}")
    return losses


TRAIN = {"nerf": train_nerf, "siren": train_siren, "flow": train_flow}
DEFAULTS = {"nerf": dict(batch_size=64, lr=5e-3), "siren": dict(batch_size=256, lr=1e-3),
            "flow": dict(batch_size=128, lr=1e-2)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=sorted(TRAIN), default="nerf")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=None, help="rays, pixels or points per step")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--samples", type=int, default=16, help="nerf: coarse (and as many fine) samples per ray")
    p.add_argument("--image-size", type=int, default=32, help="siren: the image's side")
    p.add_argument("--grad-weight", type=float, default=0.01, help="siren: weight of the gradient term")
    p.add_argument("--inner-steps", type=int, default=0, help="siren: meta-learning inner SGD steps per batch")
    p.add_argument("--inner-lr", type=float, default=0.01, help="siren: their learning rate")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for k, v in DEFAULTS[args.arch].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    return args


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return TRAIN[args.arch](args, device, init)


if __name__ == "__main__":
    print(main())
