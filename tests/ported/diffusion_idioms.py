"""A denoising diffusion model (DDPM) trained on small synthetic images as PyTorch users write it, after
lucidrains' denoising-diffusion-pytorch, the annotated diffusion tutorial and diffusers' training scripts.

- The noise schedule: ``torch.linspace`` betas in float64 (``--beta-schedule linear``) or the cosine schedule
  (``torch.cos`` of ``linspace`` steps, ``torch.clip``); ``alphas_cumprod`` by ``torch.cumprod(alphas, dim=0)``,
  ``alphas_cumprod_prev`` by ``F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)``, the posterior's coefficients and
  the min-SNR loss weights, all registered as float32 buffers by a ``register_buffer`` lambda; values per
  timestep read by ``extract(a, t, x_shape)`` (``a.gather(-1, t).reshape(b, *((1,) * (len(x_shape) - 1)))``).
- The UNet: a sinusoidal time embedding (``torch.exp(torch.arange(half) * -emb)`` times the long timesteps,
  ``torch.cat((emb.sin(), emb.cos()), dim=-1)``) and its MLP with ``nn.GELU``; ResNet blocks of weight-standardized
  convs (an ``nn.Conv2d`` subclass whose ``forward`` standardizes ``self.weight`` by ``mean`` / ``torch.var(...,
  unbiased=False)`` / ``rsqrt`` over ``dim=[1, 2, 3]`` and calls ``F.conv2d`` with ``self.stride``, ``self.padding``
  ...), ``nn.GroupNorm`` and ``nn.SiLU`` whose first block takes a scale and shift from the time (and class) embedding
  (``.view(b, -1, 1, 1)``, ``chunk(2, dim=1)``, ``x * (scale + 1) + shift``), a 1x1 ``nn.Conv2d`` or an
  ``nn.Identity`` on the residual path; an RMS norm by ``F.normalize(x, dim=1)`` before each attention (the
  ``PreNorm`` / ``Residual`` wrappers); linear attention at every level and full self-attention in the middle
  (qkv by a 1x1 conv, ``chunk(3, dim=1)``, heads by ``reshape``, ``torch.einsum("b h d i, b h d j -> b h i j")``,
  ``sim.amax(dim=-1, keepdim=True).detach()`` subtracted, ``softmax(dim=-1)``); downsampling by a stride-2
  ``nn.Conv2d``, upsampling by ``nn.Upsample(scale_factor=2, mode="nearest")`` and a conv; skip connections by
  ``torch.cat`` of the popped ``h`` list; the final conv zero-initialised (``p.detach().zero_()``, as
  guided-diffusion's ``zero_module``).
- ``--num-classes``: class conditioning as DiT's label embedder: an ``nn.Embedding`` with one extra (null) class,
  the labels of a NumPy-chosen subset replaced by ``torch.where(drop_ids, num_classes, labels)`` (classifier-free
  guidance's label dropout), the class embedding concatenated to the time embedding; sampling mixes the
  conditional and the null prediction by ``--cond-scale``.
- ``--self-condition``: lucidrains' self-conditioning: the UNet takes ``torch.cat((x_self_cond, x), dim=1)``
  (``torch.zeros_like(x)`` when there is none); on a NumPy-chosen half of the steps the model's own x0 estimate,
  made under ``torch.no_grad()`` and ``detach_()``-ed, is that input; the samplers feed back their last estimate.
- Training: the timesteps (long) and the noise from NumPy by ``torch.from_numpy``, a horizontal flip of a
  NumPy-chosen subset by ``torch.where``, ``--offset-noise`` (``noise += strength * offset[..., None, None]``),
  ``q_sample``; ``--objective eps`` (predict the noise) or ``v`` (predict
  ``v = sqrt(a) * noise - sqrt(1 - a) * x0``); ``F.mse_loss(..., reduction="none").mean(dim=[1, 2, 3])`` weighted
  per timestep by min-SNR: ``--weighting buffer`` (lucidrains' ``loss_weight`` buffer through ``extract``) or
  ``snr`` (diffusers' ``compute_snr`` and ``torch.stack([snr, gamma * torch.ones_like(t)], dim=1).min(dim=1)[0]``);
  AdamW, ``clip_grad_norm_``, a linear warm-up ``LambdaLR``; batches from a ``DataLoader`` cycled forever.
- An EMA of the model as ema-pytorch keeps it: an ``nn.Module`` holding a ``copy.deepcopy`` of the model with
  ``requires_grad_(False)``, a long ``step`` and a bool ``initted`` buffer, the decay warmed up by tensor ops
  (``clamp(min=0.)`` of the long step, ``** -power``, ``.item()``); the update walks ``ema.state_dict()``:
  floating-point entries (``v.dtype.is_floating_point``) by ``v.mul_(decay).add_(msd[k].detach(), alpha=1 -
  decay)``, the buffers copied.
- At the end the EMA model samples (not part of the returned losses): DDIM (``torch.linspace`` time pairs,
  ``.int().tolist()``, ``torch.full(..., dtype=torch.long)``, x0 clipped by ``partial(torch.clamp, min=-1.,
  max=1.)``, a ``namedtuple`` of predictions) under ``torch.no_grad()``, and DDPM's ancestral steps from
  partly noised images (SDEdit) under ``@torch.inference_mode()``; the samples' ``clamp(-1, 1)``-ed mean and std
  are printed.

The images, timesteps, noise, flips and dropped labels come from NumPy seeded by ``--seed``; the batches from a
``DataLoader`` (the framework's generator shuffles; ``--no-shuffle`` does not); ``--dropout 0`` (the default)
keeps the framework's generator out of training. Only the imports name the framework.

    python diffusion_idioms.py --objective v --beta-schedule cosine --steps 20

``main`` returns the training loss of every step."""
import argparse
import copy
import math
from collections import namedtuple
from functools import partial

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, TensorDataset

CLASSES, SIZE = 4, 16

ModelPrediction = namedtuple("ModelPrediction", ["pred_noise", "pred_x_start"])

# ------------------------------------------------------------------------------------------------ data


def make_images(n, channels, rs):
    """``n`` images in [0, 1] of four classes: horizontal stripes, vertical stripes, a blob, a checkerboard, each
    at a random phase, position and tint."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    labels = rs.randint(0, CLASSES, n)
    images = np.empty((n, channels, SIZE, SIZE), np.float32)
    for k, c in enumerate(labels):
        period, phase = rs.uniform(4.0, 8.0), rs.uniform(0, 2 * np.pi)
        if c == 0:
            pattern = np.sin(2 * np.pi * yy / period + phase)
        elif c == 1:
            pattern = np.sin(2 * np.pi * xx / period + phase)
        elif c == 2:
            cy, cx = rs.uniform(4, SIZE - 4, 2)
            pattern = 2 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 12.0) - 1
        else:
            pattern = np.sign(np.sin(2 * np.pi * xx / period + phase) * np.sin(2 * np.pi * yy / period + phase))
        tint = rs.uniform(0.6, 1.0, channels)[:, None, None]
        images[k] = 0.5 + 0.45 * tint * pattern
    return np.clip(images, 0.0, 1.0).astype(np.float32), labels.astype(np.int64)


def cycle(dl):
    while True:
        for data in dl:
            yield data


def normalize_to_neg_one_to_one(img):
    return img * 2 - 1


def unnormalize_to_zero_to_one(t):
    return (t + 1) * 0.5


# ------------------------------------------------------------------------------------------------ schedules


def linear_beta_schedule(timesteps):
    """DDPM's schedule, scaled so that any number of timesteps spans the same noise levels as 1000."""
    scale = 1000 / timesteps
    beta_start = scale * 0.0001
    beta_end = scale * 0.02
    return torch.linspace(beta_start, beta_end, timesteps, dtype=torch.float64)


def cosine_beta_schedule(timesteps, s=0.008):
    """Nichol and Dhariwal's cosine schedule."""
    steps = timesteps + 1
    t = torch.linspace(0, timesteps, steps, dtype=torch.float64) / timesteps
    alphas_cumprod = torch.cos((t + s) / (1 + s) * math.pi * 0.5) ** 2
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
    betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
    return torch.clip(betas, 0, 0.999)


def extract(a, t, x_shape):
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * (len(x_shape) - 1)))


# ------------------------------------------------------------------------------------------------ the UNet


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, *args, **kwargs):
        return self.fn(x, *args, **kwargs) + x


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.g = nn.Parameter(torch.ones(1, dim, 1, 1))

    def forward(self, x):
        return F.normalize(x, dim=1) * self.g * (x.shape[1] ** 0.5)


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.fn = fn
        self.norm = RMSNorm(dim)

    def forward(self, x):
        return self.fn(self.norm(x))


def Upsample(dim, dim_out=None):
    return nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(dim, dim_out or dim, 3, padding=1))


def Downsample(dim, dim_out=None):
    return nn.Conv2d(dim, dim_out or dim, 4, stride=2, padding=1)


class SinusoidalPosEmb(nn.Module):
    def __init__(self, dim, theta=10000):
        super().__init__()
        self.dim = dim
        self.theta = theta

    def forward(self, x):
        device = x.device
        half_dim = self.dim // 2
        emb = math.log(self.theta) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, device=device) * -emb)
        emb = x[:, None] * emb[None, :]
        emb = torch.cat((emb.sin(), emb.cos()), dim=-1)
        return emb


class WeightStandardizedConv2d(nn.Conv2d):
    """A conv whose weight is standardized per output channel before use (weight standardization works with
    group normalization, as the annotated diffusion tutorial's blocks have it)."""

    def forward(self, x):
        eps = 1e-5 if x.dtype == torch.float32 else 1e-3
        weight = self.weight
        mean = weight.mean(dim=[1, 2, 3], keepdim=True)
        var = torch.var(weight, dim=[1, 2, 3], keepdim=True, unbiased=False)
        normalized_weight = (weight - mean) * (var + eps).rsqrt()
        return F.conv2d(x, normalized_weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Block(nn.Module):
    def __init__(self, dim, dim_out, groups=4, dropout=0.0):
        super().__init__()
        self.proj = WeightStandardizedConv2d(dim, dim_out, 3, padding=1)
        self.norm = nn.GroupNorm(groups, dim_out)
        self.act = nn.SiLU()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, scale_shift=None):
        x = self.proj(x)
        x = self.norm(x)
        if scale_shift is not None:
            scale, shift = scale_shift
            x = x * (scale + 1) + shift
        x = self.act(x)
        return self.dropout(x)


class ResnetBlock(nn.Module):
    def __init__(self, dim, dim_out, *, time_emb_dim=None, groups=4, dropout=0.0):
        super().__init__()
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2)) if time_emb_dim else None
        self.block1 = Block(dim, dim_out, groups=groups, dropout=dropout)
        self.block2 = Block(dim_out, dim_out, groups=groups)
        self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

    def forward(self, x, time_emb=None):
        scale_shift = None
        if self.mlp is not None and time_emb is not None:
            time_emb = self.mlp(time_emb)
            time_emb = time_emb.view(time_emb.shape[0], -1, 1, 1)
            scale_shift = time_emb.chunk(2, dim=1)
        h = self.block1(x, scale_shift=scale_shift)
        h = self.block2(h)
        return h + self.res_conv(x)


class LinearAttention(nn.Module):
    def __init__(self, dim, heads=2, dim_head=8):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.heads = heads
        hidden_dim = dim_head * heads
        self.to_qkv = nn.Conv2d(dim, hidden_dim * 3, 1, bias=False)
        self.to_out = nn.Sequential(nn.Conv2d(hidden_dim, dim, 1), RMSNorm(dim))

    def forward(self, x):
        b, c, h, w = x.shape
        qkv = self.to_qkv(x).chunk(3, dim=1)
        q, k, v = map(lambda t: t.reshape(b, self.heads, -1, h * w), qkv)
        q = q.softmax(dim=-2)
        k = k.softmax(dim=-1)
        q = q * self.scale
        context = torch.einsum("b h d n, b h e n -> b h d e", k, v)
        out = torch.einsum("b h d e, b h d n -> b h e n", context, q)
        out = out.reshape(b, -1, h, w)
        return self.to_out(out)


class Attention(nn.Module):
    def __init__(self, dim, heads=2, dim_head=8):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.heads = heads
        hidden_dim = dim_head * heads
        self.to_qkv = nn.Conv2d(dim, hidden_dim * 3, 1, bias=False)
        self.to_out = nn.Conv2d(hidden_dim, dim, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        qkv = self.to_qkv(x).chunk(3, dim=1)
        q, k, v = (t.reshape(b, self.heads, -1, h * w) for t in qkv)
        q = q * self.scale
        sim = torch.einsum("b h d i, b h d j -> b h i j", q, k)
        sim = sim - sim.amax(dim=-1, keepdim=True).detach()
        attn = sim.softmax(dim=-1)
        out = torch.einsum("b h i j, b h d j -> b h i d", attn, v)
        out = out.permute(0, 1, 3, 2).reshape(b, -1, h, w)
        return self.to_out(out)


class Unet(nn.Module):
    def __init__(self, dim, dim_mults=(1, 2), channels=1, num_classes=0, self_condition=False, groups=4,
                 dropout=0.0):
        super().__init__()
        self.channels = channels
        self.num_classes = num_classes
        self.self_condition = self_condition
        input_channels = channels * (2 if self_condition else 1)
        init_dim = dim
        self.init_conv = nn.Conv2d(input_channels, init_dim, 7, padding=3)
        dims = [init_dim, *map(lambda m: dim * m, dim_mults)]
        in_out = list(zip(dims[:-1], dims[1:]))

        time_dim = dim * 4
        self.time_mlp = nn.Sequential(SinusoidalPosEmb(dim), nn.Linear(dim, time_dim), nn.GELU(),
                                      nn.Linear(time_dim, time_dim))
        cond_dim = time_dim
        if num_classes:
            # one more row than classes: the null class that classifier-free guidance's dropped labels take
            self.classes_emb = nn.Embedding(num_classes + 1, dim)
            self.classes_mlp = nn.Sequential(nn.Linear(dim, time_dim), nn.GELU(), nn.Linear(time_dim, time_dim))
            cond_dim += time_dim
        block_klass = partial(ResnetBlock, time_emb_dim=cond_dim, groups=groups, dropout=dropout)

        self.downs = nn.ModuleList([])
        self.ups = nn.ModuleList([])
        num_resolutions = len(in_out)
        for ind, (dim_in, dim_out) in enumerate(in_out):
            is_last = ind >= (num_resolutions - 1)
            self.downs.append(nn.ModuleList([
                block_klass(dim_in, dim_in),
                block_klass(dim_in, dim_in),
                Residual(PreNorm(dim_in, LinearAttention(dim_in))),
                Downsample(dim_in, dim_out) if not is_last else nn.Conv2d(dim_in, dim_out, 3, padding=1),
            ]))
        mid_dim = dims[-1]
        self.mid_block1 = block_klass(mid_dim, mid_dim)
        self.mid_attn = Residual(PreNorm(mid_dim, Attention(mid_dim)))
        self.mid_block2 = block_klass(mid_dim, mid_dim)
        for ind, (dim_in, dim_out) in enumerate(reversed(in_out)):
            is_last = ind == (len(in_out) - 1)
            self.ups.append(nn.ModuleList([
                block_klass(dim_out + dim_in, dim_out),
                block_klass(dim_out + dim_in, dim_out),
                Residual(PreNorm(dim_out, LinearAttention(dim_out))),
                Upsample(dim_out, dim_in) if not is_last else nn.Conv2d(dim_out, dim_in, 3, padding=1),
            ]))
        self.final_res_block = block_klass(dim * 2, dim)
        self.final_conv = zero_module(nn.Conv2d(dim, channels, 1))

    def forward(self, x, time, classes=None, drop_ids=None, x_self_cond=None):
        if self.self_condition:
            x_self_cond = x_self_cond if x_self_cond is not None else torch.zeros_like(x)
            x = torch.cat((x_self_cond, x), dim=1)
        x = self.init_conv(x)
        r = x.clone()
        t = self.time_mlp(time)
        if self.num_classes:
            if drop_ids is not None:
                classes = torch.where(drop_ids, self.num_classes, classes)
            c = self.classes_mlp(self.classes_emb(classes))
            t = torch.cat((t, c), dim=-1)

        h = []
        for block1, block2, attn, downsample in self.downs:
            x = block1(x, t)
            h.append(x)
            x = block2(x, t)
            x = attn(x)
            h.append(x)
            x = downsample(x)
        x = self.mid_block1(x, t)
        x = self.mid_attn(x)
        x = self.mid_block2(x, t)
        for block1, block2, attn, upsample in self.ups:
            x = torch.cat((x, h.pop()), dim=1)
            x = block1(x, t)
            x = torch.cat((x, h.pop()), dim=1)
            x = block2(x, t)
            x = attn(x)
            x = upsample(x)
        x = torch.cat((x, r), dim=1)
        x = self.final_res_block(x, t)
        return self.final_conv(x)

    def forward_with_cond_scale(self, x, time, classes, cond_scale=1.0, x_self_cond=None):
        """Classifier-free guidance: the null-class prediction moved ``cond_scale`` times towards the
        conditional one."""
        logits = self.forward(x, time, classes, x_self_cond=x_self_cond)
        if cond_scale == 1 or not self.num_classes:
            return logits
        null_logits = self.forward(x, time, torch.full_like(classes, self.num_classes), x_self_cond=x_self_cond)
        return null_logits + (logits - null_logits) * cond_scale


def zero_module(module):
    for p in module.parameters():
        p.detach().zero_()
    return module


# ------------------------------------------------------------------------------------------------ diffusion


class GaussianDiffusion(nn.Module):
    def __init__(self, model, *, timesteps=100, objective="eps", beta_schedule="linear", min_snr_gamma=5.0,
                 weighting="buffer"):
        super().__init__()
        self.model = model
        self.channels = model.channels
        self.self_condition = model.self_condition
        self.objective = objective
        self.weighting = weighting
        self.min_snr_gamma = min_snr_gamma
        betas = linear_beta_schedule(timesteps) if beta_schedule == "linear" else cosine_beta_schedule(timesteps)
        alphas = 1.0 - betas
        alphas_cumprod = torch.cumprod(alphas, dim=0)
        alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
        (timesteps,) = betas.shape
        self.num_timesteps = int(timesteps)

        # the schedule in float64, kept as float32 buffers
        register_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))  # noqa: E731
        register_buffer("betas", betas)
        register_buffer("alphas_cumprod", alphas_cumprod)
        register_buffer("alphas_cumprod_prev", alphas_cumprod_prev)
        register_buffer("sqrt_alphas_cumprod", torch.sqrt(alphas_cumprod))
        register_buffer("sqrt_one_minus_alphas_cumprod", torch.sqrt(1.0 - alphas_cumprod))
        register_buffer("sqrt_recip_alphas_cumprod", torch.sqrt(1.0 / alphas_cumprod))
        register_buffer("sqrt_recipm1_alphas_cumprod", torch.sqrt(1.0 / alphas_cumprod - 1))
        posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
        register_buffer("posterior_variance", posterior_variance)
        register_buffer("posterior_log_variance_clipped", torch.log(posterior_variance.clamp(min=1e-20)))
        register_buffer("posterior_mean_coef1", betas * torch.sqrt(alphas_cumprod_prev) / (1.0 - alphas_cumprod))
        register_buffer("posterior_mean_coef2", (1.0 - alphas_cumprod_prev) * torch.sqrt(alphas)
                        / (1.0 - alphas_cumprod))
        # min-SNR weighting (Hang et al.): the loss of each objective expressed as a weighted loss on x0
        snr = alphas_cumprod / (1 - alphas_cumprod)
        maybe_clipped_snr = snr.clone()
        maybe_clipped_snr.clamp_(max=min_snr_gamma)
        register_buffer("loss_weight", maybe_clipped_snr / snr if objective == "eps" else maybe_clipped_snr / (snr + 1))

    @property
    def device(self):
        return self.betas.device

    def predict_start_from_noise(self, x_t, t, noise):
        return (extract(self.sqrt_recip_alphas_cumprod, t, x_t.shape) * x_t
                - extract(self.sqrt_recipm1_alphas_cumprod, t, x_t.shape) * noise)

    def predict_noise_from_start(self, x_t, t, x0):
        return ((extract(self.sqrt_recip_alphas_cumprod, t, x_t.shape) * x_t - x0)
                / extract(self.sqrt_recipm1_alphas_cumprod, t, x_t.shape))

    def predict_v(self, x_start, t, noise):
        return (extract(self.sqrt_alphas_cumprod, t, x_start.shape) * noise
                - extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * x_start)

    def predict_start_from_v(self, x_t, t, v):
        return (extract(self.sqrt_alphas_cumprod, t, x_t.shape) * x_t
                - extract(self.sqrt_one_minus_alphas_cumprod, t, x_t.shape) * v)

    def q_posterior(self, x_start, x_t, t):
        posterior_mean = (extract(self.posterior_mean_coef1, t, x_t.shape) * x_start
                          + extract(self.posterior_mean_coef2, t, x_t.shape) * x_t)
        posterior_variance = extract(self.posterior_variance, t, x_t.shape)
        posterior_log_variance_clipped = extract(self.posterior_log_variance_clipped, t, x_t.shape)
        return posterior_mean, posterior_variance, posterior_log_variance_clipped

    def model_predictions(self, x, t, classes=None, cond_scale=1.0, clip_x_start=False, x_self_cond=None,
                          drop_ids=None):
        if drop_ids is not None:  # training: the labels dropped as the step's
            model_output = self.model(x, t, classes, drop_ids, x_self_cond)
        else:
            model_output = self.model.forward_with_cond_scale(x, t, classes, cond_scale, x_self_cond)
        maybe_clip = partial(torch.clamp, min=-1.0, max=1.0) if clip_x_start else (lambda v: v)
        if self.objective == "eps":
            pred_noise = model_output
            x_start = maybe_clip(self.predict_start_from_noise(x, t, pred_noise))
            if clip_x_start:
                pred_noise = self.predict_noise_from_start(x, t, x_start)
        else:
            x_start = maybe_clip(self.predict_start_from_v(x, t, model_output))
            pred_noise = self.predict_noise_from_start(x, t, x_start)
        return ModelPrediction(pred_noise, x_start)

    def p_mean_variance(self, x, t, classes=None, cond_scale=1.0, x_self_cond=None):
        preds = self.model_predictions(x, t, classes, cond_scale, clip_x_start=True, x_self_cond=x_self_cond)
        model_mean, posterior_variance, posterior_log_variance = self.q_posterior(preds.pred_x_start, x, t)
        return model_mean, posterior_variance, posterior_log_variance, preds.pred_x_start

    @torch.inference_mode()
    def p_sample(self, x, t: int, noise, classes=None, cond_scale=1.0, x_self_cond=None):
        b, *_, device = *x.shape, self.device
        batched_times = torch.full((b,), t, device=device, dtype=torch.long)
        model_mean, _, model_log_variance, x_start = self.p_mean_variance(x, batched_times, classes, cond_scale,
                                                                          x_self_cond)
        noise = noise if t > 0 else 0.0  # no noise when t == 0
        pred_img = model_mean + (0.5 * model_log_variance).exp() * noise
        return pred_img, x_start

    @torch.no_grad()
    def ddim_sample(self, shape, noise_fn, sampling_timesteps, classes=None, cond_scale=1.0, eta=0.0):
        batch, device, total_timesteps = shape[0], self.device, self.num_timesteps
        # [-1, 0, 1, 2, ..., T-1] when sampling_timesteps == total_timesteps
        times = torch.linspace(-1, total_timesteps - 1, steps=sampling_timesteps + 1)
        times = list(reversed(times.int().tolist()))
        time_pairs = list(zip(times[:-1], times[1:]))
        img = noise_fn(shape)
        x_start = None
        for time, time_next in time_pairs:
            time_cond = torch.full((batch,), time, device=device, dtype=torch.long)
            self_cond = x_start if self.self_condition else None
            pred_noise, x_start = self.model_predictions(img, time_cond, classes, cond_scale, clip_x_start=True,
                                                         x_self_cond=self_cond)
            if time_next < 0:
                img = x_start
                continue
            alpha = self.alphas_cumprod[time]
            alpha_next = self.alphas_cumprod[time_next]
            sigma = eta * ((1 - alpha / alpha_next) * (1 - alpha_next) / (1 - alpha)).sqrt()
            c = (1 - alpha_next - sigma ** 2).sqrt()
            img = x_start * alpha_next.sqrt() + c * pred_noise + sigma * noise_fn(shape)
        return unnormalize_to_zero_to_one(img)

    def q_sample(self, x_start, t, noise):
        return (extract(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
                + extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise)

    def compute_snr(self, timesteps):
        """diffusers' ``compute_snr``: the signal-to-noise ratio at each of ``timesteps``."""
        alphas_cumprod = self.alphas_cumprod
        sqrt_alphas_cumprod = alphas_cumprod ** 0.5
        sqrt_one_minus_alphas_cumprod = (1.0 - alphas_cumprod) ** 0.5
        sqrt_alphas_cumprod = sqrt_alphas_cumprod.to(device=timesteps.device)[timesteps].float()
        while len(sqrt_alphas_cumprod.shape) < len(timesteps.shape):
            sqrt_alphas_cumprod = sqrt_alphas_cumprod[..., None]
        alpha = sqrt_alphas_cumprod.expand(timesteps.shape)
        sqrt_one_minus_alphas_cumprod = sqrt_one_minus_alphas_cumprod.to(device=timesteps.device)[timesteps].float()
        while len(sqrt_one_minus_alphas_cumprod.shape) < len(timesteps.shape):
            sqrt_one_minus_alphas_cumprod = sqrt_one_minus_alphas_cumprod[..., None]
        sigma = sqrt_one_minus_alphas_cumprod.expand(timesteps.shape)
        return (alpha / sigma) ** 2

    def p_losses(self, x_start, t, noise, classes=None, drop_ids=None, self_cond=False):
        x = self.q_sample(x_start=x_start, t=t, noise=noise)
        # self-conditioning (Chen et al.): half the time, the model's own x0 estimate, without gradients, as input
        x_self_cond = None
        if self.self_condition and self_cond:
            with torch.no_grad():
                x_self_cond = self.model_predictions(x, t, classes, drop_ids=drop_ids).pred_x_start
                x_self_cond.detach_()
        model_out = self.model(x, t, classes, drop_ids, x_self_cond)
        target = noise if self.objective == "eps" else self.predict_v(x_start, t, noise)
        loss = F.mse_loss(model_out, target, reduction="none")
        loss = loss.mean(dim=[1, 2, 3])
        if self.weighting == "buffer":
            loss = loss * extract(self.loss_weight, t, loss.shape)
        else:
            snr = self.compute_snr(t)
            mse_loss_weights = torch.stack([snr, self.min_snr_gamma * torch.ones_like(t)], dim=1).min(dim=1)[0]
            mse_loss_weights = mse_loss_weights / snr if self.objective == "eps" else mse_loss_weights / (snr + 1)
            loss = loss * mse_loss_weights
        return loss.mean()

    def forward(self, img, t, noise, classes=None, drop_ids=None, self_cond=False):
        b, c, h, w = img.shape
        assert h == SIZE and w == SIZE, f"height and width of image must be {SIZE}"
        img = normalize_to_neg_one_to_one(img)
        return self.p_losses(img, t, noise, classes, drop_ids, self_cond)


# ------------------------------------------------------------------------------------------------ EMA


class EMA(nn.Module):
    """ema-pytorch's EMA: a deep copy of the model whose weights follow the model's with a warmed-up decay
    (``1 - (1 + step / inv_gamma) ** -power``, at most ``beta``); buffers are copied."""

    def __init__(self, model, beta=0.9999, update_after_step=0, update_every=1, inv_gamma=1.0, power=2 / 3,
                 min_value=0.0):
        super().__init__()
        self.beta = beta
        self.online_model = [model]  # a list: not a submodule, not in this module's state_dict
        self.ema_model = copy.deepcopy(model)
        self.ema_model.requires_grad_(False)
        self.update_every, self.update_after_step = update_every, update_after_step
        self.inv_gamma, self.power, self.min_value = inv_gamma, power, min_value
        self.register_buffer("initted", torch.tensor(False))
        self.register_buffer("step", torch.tensor(0))

    @property
    def model(self):
        return self.online_model[0]

    def copy_params_from_model_to_ema(self):
        for ma_params, current_params in zip(self.ema_model.parameters(), self.model.parameters()):
            ma_params.data.copy_(current_params.data)
        for ma_buffers, current_buffers in zip(self.ema_model.buffers(), self.model.buffers()):
            ma_buffers.data.copy_(current_buffers.data)

    def get_current_decay(self):
        epoch = (self.step - self.update_after_step - 1).clamp(min=0.0)
        value = 1 - (1 + epoch / self.inv_gamma) ** -self.power
        if epoch.item() <= 0:
            return 0.0
        return value.clamp(min=self.min_value, max=self.beta).item()

    def update(self):
        step = self.step.item()
        self.step += 1
        if (step % self.update_every) != 0:
            return
        if step <= self.update_after_step:
            self.copy_params_from_model_to_ema()
            return
        if not self.initted.item():
            self.copy_params_from_model_to_ema()
            self.initted.data.copy_(torch.ones_like(self.initted))
        self.update_moving_average(self.ema_model, self.model)

    @torch.no_grad()
    def update_moving_average(self, ma_model, current_model):
        decay = self.get_current_decay()
        msd = current_model.state_dict()
        buffers = {name for name, _ in current_model.named_buffers()}
        for k, v in ma_model.state_dict().items():
            if v.dtype.is_floating_point and k not in buffers:
                v.mul_(decay).add_(msd[k].detach(), alpha=1 - decay)
            else:
                v.copy_(msd[k])

    def __call__(self, *args, **kwargs):
        return self.ema_model(*args, **kwargs)


# ------------------------------------------------------------------------------------------------ training


def get_constant_schedule_with_warmup(optimizer, num_warmup_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step + 1) / float(max(1.0, num_warmup_steps))
        return 1.0
    return LambdaLR(optimizer, lr_lambda)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--objective", choices=("eps", "v"), default="eps")
    p.add_argument("--beta-schedule", choices=("linear", "cosine"), default="linear")
    p.add_argument("--weighting", choices=("buffer", "snr"), default="buffer",
                   help="min-SNR weights from the registered buffer (lucidrains) or compute_snr (diffusers)")
    p.add_argument("--min-snr-gamma", type=float, default=5.0)
    p.add_argument("--timesteps", type=int, default=100)
    p.add_argument("--num-classes", type=int, default=0, help="0: unconditional; else class-conditional")
    p.add_argument("--cond-drop-prob", type=float, default=0.2, help="labels dropped to the null class")
    p.add_argument("--cond-scale", type=float, default=3.0, help="classifier-free guidance scale when sampling")
    p.add_argument("--self-condition", action="store_true")
    p.add_argument("--offset-noise", type=float, default=0.0, help="strength of per-channel offset noise")
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--train-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--weight-decay", type=float, default=1e-2)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--ema-decay", type=float, default=0.995)
    p.add_argument("--sampling-steps", type=int, default=5, help="DDIM steps at the end")
    p.add_argument("--ddpm-steps", type=int, default=5, help="DDPM steps from partly noised images at the end")
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def sample(diffusion, ema, x_real, labels, rs, args):
    """DDIM from pure noise, and DDPM's last ``--ddpm-steps`` steps from ``x_real`` noised that far; the noise
    from NumPy. Prints the samples' statistics."""
    device = x_real.device

    def noise_fn(shape):
        return torch.from_numpy(rs.randn(*shape).astype(np.float32)).to(device)

    ema.ema_model.eval()
    classes = labels if args.num_classes else None
    imgs = ema.ema_model.ddim_sample(tuple(x_real.shape), noise_fn, args.sampling_steps, classes, args.cond_scale)
    print(f"DDIM ({args.sampling_steps} steps): mean {imgs.mean().item():.3f}, std {imgs.std().item():.3f}")

    with torch.inference_mode():
        k = min(args.ddpm_steps, diffusion.num_timesteps)
        t = torch.full((x_real.shape[0],), k - 1, device=device, dtype=torch.long)
        img = ema.ema_model.q_sample(normalize_to_neg_one_to_one(x_real), t, noise_fn(x_real.shape))
        x_start = None
        for step in reversed(range(k)):
            self_cond = x_start if args.self_condition else None
            img, x_start = ema.ema_model.p_sample(img, step, noise_fn(img.shape), classes, args.cond_scale,
                                                  self_cond)
        img = img.clamp(-1, 1)
    print(f"DDPM ({k} steps from t={k - 1}): mean {img.mean().item():.3f}, std {img.std().item():.3f}, "
          f"error {(img - normalize_to_neg_one_to_one(x_real)).abs().mean().item():.3f}")


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rs = np.random.RandomState(args.seed)
    images, labels = make_images(args.train_size, args.channels, rs)
    dataset = TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
    dl = cycle(DataLoader(dataset, batch_size=args.batch_size, shuffle=not args.no_shuffle, drop_last=True))

    model = Unet(args.dim, channels=args.channels, num_classes=args.num_classes, self_condition=args.self_condition,
                 dropout=args.dropout)
    diffusion = GaussianDiffusion(model, timesteps=args.timesteps, objective=args.objective,
                                  beta_schedule=args.beta_schedule, min_snr_gamma=args.min_snr_gamma,
                                  weighting=args.weighting).to(device)
    if init is not None:
        init("model", dict(diffusion.named_parameters()))
    ema = EMA(diffusion, beta=args.ema_decay).to(device)
    optimizer = torch.optim.AdamW(diffusion.parameters(), lr=args.lr, betas=(0.9, 0.99),
                                  weight_decay=args.weight_decay)
    scheduler = get_constant_schedule_with_warmup(optimizer, args.warmup_steps)

    losses = []
    diffusion.train()
    for step in range(args.steps):
        img, classes = next(dl)
        img, classes = img.to(device), classes.to(device)
        b = img.shape[0]
        flip = torch.from_numpy(rs.rand(b) < 0.5).to(device)
        img = torch.where(flip[:, None, None, None], img.flip(3), img)
        t = torch.from_numpy(rs.randint(0, diffusion.num_timesteps, (b,)).astype(np.int64)).to(device)
        noise = torch.from_numpy(rs.randn(*img.shape).astype(np.float32)).to(device)
        if args.offset_noise:  # a constant offset per image and channel, so that the model learns the mean too
            offset = torch.from_numpy(rs.randn(b, img.shape[1]).astype(np.float32)).to(device)
            noise += args.offset_noise * offset[..., None, None]
        self_cond = args.self_condition and rs.rand() < 0.5
        drop_ids = None
        if args.num_classes:
            drop_ids = torch.from_numpy(rs.rand(b) < args.cond_drop_prob).to(device)
        loss = diffusion(img, t, noise, classes if args.num_classes else None, drop_ids, self_cond)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(diffusion.parameters(), args.max_grad_norm)
        optimizer.step()
        scheduler.step()
        ema.update()
        losses.append(loss.item())

    x_real, y_real = (torch.from_numpy(a[:8]).to(device) for a in make_images(8, args.channels, rs))
    sample(diffusion, ema, x_real, y_real, rs, args)
    return losses


if __name__ == "__main__":
    print(main())
