"""Self-supervised and contrastive training of a small CNN as PyTorch users write it, on unlabelled synthetic
images. The encoder: a torchvision-style ResNet (``BasicBlock`` s with ``BatchNorm2d`` and a 1x1 ``downsample``
where the shape changes, ``_make_layer``, ``AdaptiveAvgPool2d``, ``torch.flatten``, initialised over
``modules()``) whose ``fc`` each recipe replaces. Two views of every image come from tensor augmentations whose
random choices are NumPy's: a crop by slicing the ``F.pad``-ded batch, ``torch.flip`` of a boolean-masked subset,
colour jitter by broadcast ops (brightness, contrast, saturation against a grey image, random greyscale by
``torch.where``), a Gaussian blur as a depthwise ``F.conv2d`` (``groups=3``) after a reflect pad, solarization,
the channel normalization. ``--method`` picks the recipe:

- ``simclr``: the encoder's ``fc`` becomes a projection MLP (``nn.Sequential(nn.Linear, nn.ReLU, old fc)``);
  the NT-Xent loss written by hand, ``--loss ntxent`` (``F.normalize``, ``z @ z.T / temperature``, the diagonal
  ``fill_diagonal_``-ed to -inf, labels by ``torch.arange`` and ``torch.cat``, ``F.cross_entropy``) or
  ``--loss infonce`` (the popular variant: a label matrix by ``==`` of ``unsqueeze`` s, the diagonal dropped by
  ``~torch.eye(..., dtype=torch.bool)`` indexing and ``view``, positives and negatives by boolean indexing,
  ``torch.zeros(..., dtype=torch.long)`` labels); SGD with momentum and weight decay, a warm-up then cosine
  ``LambdaLR``.
- ``byol``: the online network (``fc`` an ``nn.Identity``, a projector and a predictor MLP with ``BatchNorm1d``)
  and its target, a ``copy.deepcopy`` with ``requires_grad_(False)`` updated under ``torch.no_grad()`` by
  ``torch._foreach_mul_`` / ``torch._foreach_add_(..., alpha=1 - tau)`` with BYOL's cosine-increasing tau;
  asymmetric views (blur always on one, solarization on the other); the symmetric ``2 - 2 *
  F.cosine_similarity`` loss on the ``.detach()``-ed target projections; Adam and the same ``LambdaLR``.
- ``moco``: MoCo v2 as its reference code has it: a key encoder built beside the query encoder, its weights
  ``copy_``-ed in and ``requires_grad = False``, the momentum update ``param_k.data.mul_(m).add_(param_q.data,
  alpha=1 - m)`` over ``zip`` of the two ``parameters()``; a queue of keys as a registered buffer
  (``F.normalize(torch.randn(...), dim=0)`` reassigned to the buffer's name) with a long ``queue_ptr`` buffer,
  dequeue-and-enqueue by slice assignment in a ``@torch.no_grad()`` method (``--queue-init keys`` fills it with
  the key encoder's outputs before training); the keys' BatchNorm over a batch shuffled by a NumPy permutation
  and restored by ``argsort``; logits by ``torch.einsum("nc,nc->n", [q, k])``
  and ``torch.einsum("nc,ck->nk", [q, queue])``, ``torch.zeros(N, dtype=torch.long)`` labels; SGD whose
  ``param_group["lr"]`` a hand-written cosine ``adjust_learning_rate`` sets every step.
- ``barlow``: Barlow Twins: a projector of bias-free ``nn.Linear`` s, the cross-correlation of the two views'
  ``BatchNorm1d(affine=False)``-ed embeddings (``c.div_``), its diagonal's loss by in-place ops on the
  ``torch.diagonal`` view inside the graph (``add_(-1).pow_(2)``), the off-diagonal elements by the
  ``flatten()[:-1].view(n - 1, n + 1)[:, 1:]`` trick; a hand-written LARS (a ``torch.optim.Optimizer`` subclass
  with a ``@torch.no_grad()`` ``step``, per-parameter ``self.state``, the trust ratio by nested ``torch.where``,
  biases and norms filtered out by ``p.ndim == 1``) over two param groups whose lrs it sets every step.

At the end every recipe evaluates its frozen backbone (``eval()``, features under ``torch.no_grad()``): a kNN
monitor (MoCo's demo: ``torch.mm`` against the feature bank, ``topk``, ``torch.gather`` of the bank's labels, a
one-hot by ``scatter``, weights ``(sim / t).exp()``, ``argsort(descending=True)``) and a linear probe (a
zero-initialised ``nn.Linear`` trained by SGD on the frozen features, accuracy by ``argmax``).

The images, every augmentation choice and MoCo's batch shuffle come from NumPy seeded by ``--seed``; MoCo's queue
starts from the framework's generator. Only the imports name the framework.

    python selfsupervised_idioms.py --method simclr --steps 20

``main`` returns the training loss of every step."""
import argparse
import copy
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

CLASSES, SIZE = 4, 16
MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)

# ------------------------------------------------------------------------------------------------ data


def make_images(n, rs):
    """``n`` RGB images in [0, 1] of four classes (the labels only the evaluation reads): horizontal stripes,
    vertical stripes, a blob, a checkerboard, each at a random phase, position and tint, plus noise."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    labels = rs.randint(0, CLASSES, n)
    images = np.empty((n, 3, SIZE, SIZE), np.float32)
    for k, c in enumerate(labels):
        period, phase = rs.uniform(3.0, 6.0), rs.uniform(0, 2 * np.pi)
        if c == 0:
            pattern = np.sin(2 * np.pi * yy / period + phase)
        elif c == 1:
            pattern = np.sin(2 * np.pi * xx / period + phase)
        elif c == 2:
            cy, cx = rs.uniform(4, SIZE - 4, 2)
            pattern = 2 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 10.0) - 1
        else:
            pattern = np.sin(2 * np.pi * xx / period + phase) * np.sin(2 * np.pi * yy / period + phase)
        tint = rs.uniform(0.4, 1.0, 3)[:, None, None]
        images[k] = 0.5 + 0.35 * tint * pattern + 0.08 * rs.randn(3, SIZE, SIZE)
    return np.clip(images, 0.0, 1.0).astype(np.float32), labels.astype(np.int64)


class Augment:
    """SimCLR / BYOL's view pipeline on batches of tensors; every random choice comes from one NumPy generator."""

    def __init__(self, seed, pad=2, jitter=0.2):
        self.rs = np.random.RandomState(seed)
        self.pad, self.jitter = pad, jitter

    def _per_image(self, low, high, n, device):
        return torch.from_numpy(self.rs.uniform(low, high, n).astype(np.float32)).to(device).view(-1, 1, 1, 1)

    def _mask(self, p, n, device):
        return torch.from_numpy(self.rs.rand(n) < p).to(device)

    def crop_flip(self, x):
        n, _, h, w = x.shape
        padded = F.pad(x, (self.pad,) * 4)
        offsets = self.rs.randint(0, 2 * self.pad + 1, (n, 2))
        x = torch.stack([padded[k, :, i:i + h, j:j + w] for k, (i, j) in enumerate(offsets)])
        flip = self._mask(0.5, n, x.device)
        x[flip] = torch.flip(x[flip], dims=[3])
        return x

    def color_jitter(self, x, p=0.8):
        n, s = x.shape[0], self.jitter
        apply = self._mask(p, n, x.device).view(-1, 1, 1, 1)
        jittered = x * self._per_image(1 - s, 1 + s, n, x.device)
        mean = jittered.mean(dim=(1, 2, 3), keepdim=True)
        jittered = (jittered - mean) * self._per_image(1 - s, 1 + s, n, x.device) + mean
        grey = (jittered * torch.tensor([0.299, 0.587, 0.114], device=x.device).view(1, 3, 1, 1)).sum(1, keepdim=True)
        jittered = grey + (jittered - grey) * self._per_image(1 - s, 1 + s, n, x.device)
        return torch.where(apply, jittered.clamp(0, 1), x)

    def greyscale(self, x, p=0.2):
        grey = (0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1).expand_as(x)
        return torch.where(self._mask(p, x.shape[0], x.device)[:, None, None, None], grey, x)

    def blur(self, x, p, kernel_size=5):
        """One sigma for the whole batch (as a per-batch ``GaussianBlur`` would draw), applied to a random subset."""
        sigma = self.rs.uniform(0.1, 2.0)
        r = np.arange(kernel_size, dtype=np.float32) - kernel_size // 2
        g = np.exp(-r ** 2 / (2 * sigma ** 2))
        g = torch.from_numpy((g / g.sum()).astype(np.float32)).to(x.device)
        kernel = (g[:, None] * g[None, :]).expand(3, 1, kernel_size, kernel_size)
        blurred = F.conv2d(F.pad(x, (kernel_size // 2,) * 4, mode="reflect"), kernel, groups=3)
        return torch.where(self._mask(p, x.shape[0], x.device)[:, None, None, None], blurred, x)

    def solarize(self, x, p):
        return torch.where(self._mask(p, x.shape[0], x.device)[:, None, None, None] & (x >= 0.5), 1 - x, x)

    def normalize(self, x):
        mean = torch.tensor(MEAN, device=x.device)[None, :, None, None]
        return (x - mean) / torch.tensor(STD, device=x.device).view(1, -1, 1, 1)

    def view(self, x, blur=0.5, solarize=0.0):
        x = self.greyscale(self.color_jitter(self.crop_flip(x)))
        if blur:
            x = self.blur(x, blur)
        if solarize:
            x = self.solarize(x, solarize)
        return self.normalize(x)


# ------------------------------------------------------------------------------------------------ the encoder


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """A CIFAR-stem ResNet (3x3 first convolution, no max-pool) at a few channels."""

    def __init__(self, layers=(1, 1, 1), widths=(16, 32, 64), num_classes=128, zero_init_residual=False):
        super().__init__()
        self.inplanes = widths[0]
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(widths[0], layers[0])
        self.layer2 = self._make_layer(widths[1], layers[1], stride=2)
        self.layer3 = self._make_layer(widths[2], layers[2], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[2] * BasicBlock.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * BasicBlock.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * BasicBlock.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * BasicBlock.expansion))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * BasicBlock.expansion
        layers += [BasicBlock(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def mlp(in_dim, hidden_dim, out_dim):
    """BYOL's projector / predictor: Linear, BatchNorm1d, ReLU, Linear."""
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(inplace=True),
                         nn.Linear(hidden_dim, out_dim))


# ------------------------------------------------------------------------------------------------ SimCLR


class SimCLR(nn.Module):
    def __init__(self, out_dim=32):
        super().__init__()
        self.backbone = ResNet(num_classes=out_dim)
        dim_mlp = self.backbone.fc.in_features
        # the projection head: an MLP in place of the classifier, the old fc its last layer
        self.backbone.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.backbone.fc)

    def forward(self, x):
        return self.backbone(x)


def nt_xent(z1, z2, temperature):
    """The 2N x 2N similarities of the normalized projections; each row's positive is the other view of its
    image, its own entry removed by a -inf diagonal."""
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    sim = z @ z.T / temperature
    sim.fill_diagonal_(float("-inf"))
    labels = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
    return F.cross_entropy(sim, labels)


def info_nce_loss(features, batch_size, n_views, temperature, device):
    """The widely copied InfoNCE: positives in column 0 of the logits, the negatives after them."""
    labels = torch.cat([torch.arange(batch_size) for i in range(n_views)], dim=0)
    labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
    labels = labels.to(device)

    features = F.normalize(features, dim=1)
    similarity_matrix = torch.matmul(features, features.T)

    # discard the main diagonal from both the labels and the similarities matrix
    mask = torch.eye(labels.shape[0], dtype=torch.bool).to(device)
    labels = labels[~mask].view(labels.shape[0], -1)
    similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)

    positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
    negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)

    logits = torch.cat([positives, negatives], dim=1)
    labels = torch.zeros(logits.shape[0], dtype=torch.long).to(device)
    logits = logits / temperature
    return logits, labels


def simclr_step(model, images, augment, args):
    x1, x2 = augment.view(images), augment.view(images)
    if args.loss == "ntxent":
        return nt_xent(model(x1), model(x2), args.temperature)
    features = model(torch.cat([x1, x2], dim=0))
    logits, labels = info_nce_loss(features, images.shape[0], 2, args.temperature, images.device)
    return F.cross_entropy(logits, labels)


# ------------------------------------------------------------------------------------------------ BYOL


class BYOL(nn.Module):
    def __init__(self, projection_size=32, hidden_size=64):
        super().__init__()
        backbone = ResNet()
        feat_dim = backbone.fc.in_features
        backbone.fc = nn.Identity()
        self.online_encoder = nn.Sequential(backbone, mlp(feat_dim, hidden_size, projection_size))
        self.online_predictor = mlp(projection_size, hidden_size, projection_size)
        self.target_encoder = None

    @property
    def backbone(self):
        return self.online_encoder[0]

    def make_target(self):
        self.target_encoder = copy.deepcopy(self.online_encoder)
        self.target_encoder.requires_grad_(False)

    @torch.no_grad()
    def update_target(self, tau):
        online, target = list(self.online_encoder.parameters()), list(self.target_encoder.parameters())
        torch._foreach_mul_(target, tau)
        torch._foreach_add_(target, online, alpha=1 - tau)

    def forward(self, x1, x2):
        p1 = self.online_predictor(self.online_encoder(x1))
        p2 = self.online_predictor(self.online_encoder(x2))
        with torch.no_grad():
            z1, z2 = self.target_encoder(x1), self.target_encoder(x2)
        loss = byol_loss(p1, z2.detach()) + byol_loss(p2, z1.detach())
        return loss.mean()


def byol_loss(p, z):
    return 2 - 2 * F.cosine_similarity(p, z, dim=-1)


def byol_tau(step, total_steps, base_tau):
    """BYOL's target decay: from ``base_tau`` up to 1 along a cosine."""
    return 1 - (1 - base_tau) * (math.cos(math.pi * step / total_steps) + 1) / 2


def byol_step(model, images, augment, args):
    # BYOL's asymmetric pair: the first view always blurred, the second rarely blurred and sometimes solarized
    x1 = augment.view(images, blur=1.0)
    x2 = augment.view(images, blur=0.1, solarize=0.2)
    return model(x1, x2)


# ------------------------------------------------------------------------------------------------ MoCo


class MoCo(nn.Module):
    """MoCo v2: a query encoder, a momentum key encoder and a queue of keys."""

    def __init__(self, base_encoder, dim=32, K=256, m=0.99, T=0.2, mlp=True):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)
        if mlp:
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc)
            self.encoder_k.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc)
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False

        self.register_buffer("queue", torch.randn(dim, K))
        self.queue = nn.functional.normalize(self.queue, dim=0)
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @property
    def backbone(self):
        return self.encoder_q

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.mul_(self.m).add_(param_q.data, alpha=1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0  # for simplicity
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K
        self.queue_ptr[0] = ptr

    @torch.no_grad()
    def enqueue_keys(self, im_k):
        self._dequeue_and_enqueue(nn.functional.normalize(self.encoder_k(im_k), dim=1))

    @torch.no_grad()
    def _batch_shuffle(self, x, rs):
        """Shuffle BN on one device: the keys' BatchNorm sees another batch order than the queries'."""
        idx_shuffle = torch.from_numpy(rs.permutation(x.shape[0])).to(x.device)
        idx_unshuffle = torch.argsort(idx_shuffle)
        return x[idx_shuffle], idx_unshuffle

    def forward(self, im_q, im_k, rs):
        q = self.encoder_q(im_q)
        q = nn.functional.normalize(q, dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            im_k, idx_unshuffle = self._batch_shuffle(im_k, rs)
            k = self.encoder_k(im_k)
            k = nn.functional.normalize(k, dim=1)
            k = k[idx_unshuffle]
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1)
        logits /= self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long).to(logits.device)
        self._dequeue_and_enqueue(k)
        return logits, labels


def adjust_learning_rate(optimizer, step, args):
    """MoCo's cosine schedule, written into every param group by hand."""
    lr = args.lr * 0.5 * (1.0 + math.cos(math.pi * step / args.steps))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def moco_step(model, images, augment, criterion):
    logits, labels = model(augment.view(images), augment.view(images), augment.rs)
    return criterion(logits, labels)


# ------------------------------------------------------------------------------------------------ Barlow Twins


def off_diagonal(x):
    """A flattened view of the off-diagonal elements of a square matrix."""
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class BarlowTwins(nn.Module):
    def __init__(self, batch_size, sizes=(64, 128, 128), lambd=0.005):
        super().__init__()
        self.batch_size, self.lambd = batch_size, lambd
        self.backbone = ResNet()
        self.backbone.fc = nn.Identity()
        layers = []
        for i in range(len(sizes) - 2):
            layers.append(nn.Linear(sizes[i], sizes[i + 1], bias=False))
            layers.append(nn.BatchNorm1d(sizes[i + 1]))
            layers.append(nn.ReLU(inplace=True))
        layers.append(nn.Linear(sizes[-2], sizes[-1], bias=False))
        self.projector = nn.Sequential(*layers)
        # normalization layer for the representations z1 and z2
        self.bn = nn.BatchNorm1d(sizes[-1], affine=False)

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))
        # empirical cross-correlation matrix
        c = self.bn(z1).T @ self.bn(z2)
        c.div_(self.batch_size)
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        return on_diag + self.lambd * off_diag


class LARS(torch.optim.Optimizer):
    """Barlow Twins' LARS: SGD with momentum whose update a layer-wise trust ratio scales, biases and norms
    excluded from the decay and the adaptation by the filters."""

    def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001, weight_decay_filter=None,
                 lars_adaptation_filter=None):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta,
                        weight_decay_filter=weight_decay_filter, lars_adaptation_filter=lars_adaptation_filter)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                dp = p.grad
                if dp is None:
                    continue
                if g["weight_decay_filter"] is None or not g["weight_decay_filter"](p):
                    dp = dp.add(p, alpha=g["weight_decay"])
                if g["lars_adaptation_filter"] is None or not g["lars_adaptation_filter"](p):
                    param_norm = torch.norm(p)
                    update_norm = torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0., torch.where(update_norm > 0, (g["eta"] * param_norm / update_norm),
                                                                 one), one)
                    dp = dp.mul(q)
                param_state = self.state[p]
                if "mu" not in param_state:
                    param_state["mu"] = torch.zeros_like(p)
                mu = param_state["mu"]
                mu.mul_(g["momentum"]).add_(dp)
                p.add_(mu, alpha=-g["lr"])


def exclude_bias_and_norm(p):
    return p.ndim == 1


def barlow_optimizer(model, args):
    param_weights, param_biases = [], []
    for param in model.parameters():
        if param.ndim == 1:
            param_biases.append(param)
        else:
            param_weights.append(param)
    parameters = [{"params": param_weights}, {"params": param_biases}]
    return LARS(parameters, lr=0, weight_decay=args.weight_decay, weight_decay_filter=exclude_bias_and_norm,
                lars_adaptation_filter=exclude_bias_and_norm)


def barlow_learning_rate(optimizer, step, args):
    """Barlow Twins' schedule: a linear warm-up, then a cosine to 0.001 of the base; the biases' rate 0.024 / 0.2
    of the weights'."""
    base_lr = args.lr
    if step < args.warmup:
        lr = base_lr * (step + 1) / args.warmup
    else:
        q = 0.5 * (1 + math.cos(math.pi * (step - args.warmup) / max(1, args.steps - args.warmup)))
        lr = base_lr * (q * (1 - 0.001) + 0.001)
    optimizer.param_groups[0]["lr"] = lr
    optimizer.param_groups[1]["lr"] = lr * 0.024 / 0.2


# ------------------------------------------------------------------------------------------------ evaluation


def extract(backbone, x, batch_size=64):
    backbone.eval()
    with torch.no_grad():
        return torch.cat([backbone(chunk) for chunk in x.split(batch_size)])


def knn_predict(feature, feature_bank, feature_labels, classes, knn_k, knn_t):
    """MoCo's kNN monitor: the ``knn_k`` nearest bank features vote for their labels, weighted by exp(sim / t)."""
    sim_matrix = torch.mm(feature, feature_bank)
    sim_weight, sim_indices = sim_matrix.topk(k=knn_k, dim=-1)
    sim_labels = torch.gather(feature_labels.expand(feature.size(0), -1), dim=-1, index=sim_indices)
    sim_weight = (sim_weight / knn_t).exp()
    one_hot_label = torch.zeros(feature.size(0) * knn_k, classes, device=sim_labels.device)
    one_hot_label = one_hot_label.scatter(dim=-1, index=sim_labels.view(-1, 1), value=1.0)
    pred_scores = torch.sum(one_hot_label.view(feature.size(0), -1, classes) * sim_weight.unsqueeze(dim=-1), dim=1)
    return pred_scores.argsort(dim=-1, descending=True)


def knn_accuracy(bank, bank_labels, test, test_labels, knn_k=10, knn_t=0.1):
    bank, test = F.normalize(bank, dim=1), F.normalize(test, dim=1)
    pred_labels = knn_predict(test, bank.t().contiguous(), bank_labels, CLASSES, knn_k, knn_t)
    return (pred_labels[:, 0] == test_labels).float().sum().item() / test.shape[0]


def linear_probe(train_features, train_labels, test_features, test_labels, steps, lr):
    """Logistic regression on frozen, standardized features from a zero start."""
    mean, std = train_features.mean(dim=0), train_features.std(dim=0) + 1e-6
    train_features, test_features = (train_features - mean) / std, (test_features - mean) / std
    classifier = nn.Linear(train_features.shape[1], CLASSES).to(train_features.device)
    classifier.weight.data.zero_()
    classifier.bias.data.zero_()
    optimizer = torch.optim.SGD(classifier.parameters(), lr=lr, momentum=0.9)
    for _ in range(steps):
        loss = F.cross_entropy(classifier(train_features), train_labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return (classifier(test_features).argmax(dim=1) == test_labels).float().mean().item()


# ------------------------------------------------------------------------------------------------ training


def warmup_cosine(warmup_steps, total_steps):
    def lr_lambda(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr_lambda


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", choices=("simclr", "byol", "moco", "barlow"), default="simclr")
    p.add_argument("--loss", choices=("ntxent", "infonce"), default="ntxent", help="SimCLR's loss")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--train-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=None,
                   help="default: SimCLR's 0.3 x batch-size / 256, 3e-3 (byol), 0.06 (moco), 0.2 (barlow)")
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps of the LambdaLR")
    p.add_argument("--temperature", type=float, default=0.2, help="SimCLR's temperature")
    p.add_argument("--moco-t", type=float, default=0.1)
    p.add_argument("--moco-k", type=int, default=256, help="queue length")
    p.add_argument("--moco-m", type=float, default=0.99)
    p.add_argument("--queue-init", choices=("random", "keys"), default="random",
                   help="MoCo's queue: random unit vectors, or the keys of the first moco-k training images")
    p.add_argument("--base-tau", type=float, default=0.99, help="BYOL's initial target decay")
    p.add_argument("--crop-pad", type=int, default=2, help="the crop's translation range, in pixels")
    p.add_argument("--jitter", type=float, default=0.2, help="colour jitter's strength")
    p.add_argument("--probe-steps", type=int, default=50)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.lr is None:
        args.lr = {"simclr": 0.3 * args.batch_size / 256, "byol": 3e-3, "moco": 0.06, "barlow": 0.2}[args.method]
    return args


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rs = np.random.RandomState(args.seed)
    x_train, y_train = make_images(args.train_size, rs)
    x_test, y_test = make_images(128, rs)
    x_train, y_train = torch.from_numpy(x_train).to(device), torch.from_numpy(y_train).to(device)
    x_test, y_test = torch.from_numpy(x_test).to(device), torch.from_numpy(y_test).to(device)
    augment = Augment(args.seed + 1, args.crop_pad, args.jitter)

    if args.method == "simclr":
        model = SimCLR().to(device)
    elif args.method == "byol":
        model = BYOL().to(device)
    elif args.method == "barlow":
        model = BarlowTwins(args.batch_size).to(device)
    else:
        model = MoCo(ResNet, K=args.moco_k, m=args.moco_m, T=args.moco_t).to(device)
    if init is not None:
        # the key encoder's weights are parameters too; the queue, drawn from the framework's generator, comes along
        init("model", {**dict(model.named_parameters()), **({"queue": model.queue} if args.method == "moco" else {})})
    if args.method == "moco" and args.queue_init == "keys":
        # a warm queue, as after moco-k / batch-size steps: the loss then starts where it stays rather than rising
        # while real keys displace the random ones
        for start in range(0, args.moco_k, args.batch_size):
            model.enqueue_keys(augment.view(x_train[start:start + args.batch_size]))
    if args.method == "byol":
        model.make_target()
        # the target's parameters need no optimizer
        optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=args.lr,
                                     weight_decay=args.weight_decay)
    elif args.method == "barlow":
        optimizer = barlow_optimizer(model, args)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=args.weight_decay)
    # MoCo and Barlow Twins set their param groups' lr by hand every step
    scheduler = None
    if args.method in ("simclr", "byol"):
        scheduler = LambdaLR(optimizer, warmup_cosine(args.warmup, args.steps))
    criterion = nn.CrossEntropyLoss().to(device)

    losses = []
    model.train()
    for step in range(args.steps):
        start = step * args.batch_size % (args.train_size - args.batch_size + 1)
        images = x_train[start:start + args.batch_size]
        if args.method == "moco":
            adjust_learning_rate(optimizer, step, args)
            loss = moco_step(model, images, augment, criterion)
        elif args.method == "byol":
            loss = byol_step(model, images, augment, args)
        elif args.method == "barlow":
            barlow_learning_rate(optimizer, step, args)
            loss = model(augment.view(images, blur=1.0), augment.view(images, blur=0.1, solarize=0.2))
        else:
            loss = simclr_step(model, images, augment, args)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        if args.method == "byol":
            model.update_target(byol_tau(step, args.steps, args.base_tau))
        losses.append(loss.item())

    backbone = copy.deepcopy(model.backbone)
    backbone.fc = nn.Identity()
    train_features, test_features = extract(backbone, x_train), extract(backbone, x_test)
    knn = knn_accuracy(train_features, y_train, test_features, y_test)
    probe = linear_probe(train_features, y_train, test_features, y_test, args.probe_steps, lr=0.1)
    print(f"{args.method}: kNN accuracy {knn:.2f}, linear probe accuracy {probe:.2f}")
    return losses


if __name__ == "__main__":
    print(main())
