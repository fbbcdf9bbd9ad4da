"""A small Vision Transformer trained as PyTorch users write one: the patch embedding a strided ``nn.Conv2d``
then ``flatten(2).transpose(1, 2)``; a learnable class token (``nn.Parameter(torch.zeros(1, 1, D))``,
``expand``-ed over the batch and concatenated) and position embeddings initialised by
``nn.init.trunc_normal_(std=0.02)``, the patch kernel by ``xavier_uniform_`` through a ``view`` of its ``.data``
(MAE), the other weights by a timm-style ``self.apply(init_weights)``; the encoder an ``nn.TransformerEncoder``
of pre-norm ``nn.TransformerEncoderLayer`` s (``batch_first=True``, ``norm_first=True``, ``activation="gelu"``).
``--arch attention`` writes the blocks by hand instead: a fused ``qkv`` projection ``reshape``-d and
``permute``-d into heads, attention by ``torch.einsum`` or ``F.scaled_dot_product_attention`` (``--attention``);
``--arch mixer`` is an MLP-Mixer (a token-mixing MLP over the transposed tokens, a channel-mixing MLP,
mean-pooled). Trained with ``CrossEntropyLoss(label_smoothing=0.1)``, AdamW over two parameter groups (no weight
decay for biases, norms, the class token and the position embedding), a ``LambdaLR`` linear warm-up then cosine
decay stepped every batch, and ``clip_grad_norm_`` (its returned norms ``torch.stack``-ed for the log);
``--simclr`` adds SimCLR's NT-Xent loss on two NumPy-augmented views of each batch (``F.normalize``-d
projections, their similarity matrix with its diagonal ``masked_fill``-ed out, cross-entropy towards each view's
twin). The images are random class prototypes plus noise, drawn with NumPy from ``--seed``. Only the imports
name the framework.

    python vit_idioms.py --arch encoder --simclr --steps 15

``main`` returns the training loss of every step."""
import argparse
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

ARCHS = ("encoder", "attention", "mixer")


class PatchEmbed(nn.Module):
    """Non-overlapping patches projected by one strided convolution: (B, C, H, W) -> (B, N, D)."""

    def __init__(self, image_size=16, patch_size=4, in_chans=3, embed_dim=32):
        super().__init__()
        self.num_patches = (image_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim, num_heads, dropout=0.0, use_sdpa=False):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.use_sdpa = use_sdpa
        self.qkv = nn.Linear(dim, dim * 3)
        self.attn_drop = nn.Dropout(dropout)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(dropout)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        if self.use_sdpa:
            x = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.0)
        else:
            attn = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.scale
            attn = self.attn_drop(attn.softmax(dim=-1))
            x = torch.einsum("bhqk,bhkd->bhqd", attn, v)
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features, dropout=0.0):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_features, in_features)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=2.0, dropout=0.0, use_sdpa=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads, dropout, use_sdpa)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), dropout)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return x


class MixerBlock(nn.Module):
    """Token mixing across patches (an MLP over the transposed tokens), then channel mixing."""

    def __init__(self, num_tokens, dim, token_hidden, channel_hidden, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = Mlp(num_tokens, token_hidden, dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = Mlp(dim, channel_hidden, dropout)

    def forward(self, x):
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        x = x + self.channel_mlp(self.norm2(x))
        return x


def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


class VisionTransformer(nn.Module):
    def __init__(self, arch="encoder", image_size=16, patch_size=4, num_classes=10, embed_dim=32, depth=2,
                 num_heads=4, mlp_ratio=2.0, dropout=0.0, use_sdpa=False, proj_dim=16):
        super().__init__()
        self.arch = arch
        self.patch_embed = PatchEmbed(image_size, patch_size, 3, embed_dim)
        num_patches = self.patch_embed.num_patches
        if arch == "mixer":
            self.blocks = nn.Sequential(*[MixerBlock(num_patches, embed_dim, num_patches * 2,
                                                     int(embed_dim * mlp_ratio), dropout) for _ in range(depth)])
        else:
            self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
            self.pos_drop = nn.Dropout(p=dropout)
            if arch == "encoder":
                layer = nn.TransformerEncoderLayer(embed_dim, num_heads, dim_feedforward=int(embed_dim * mlp_ratio),
                                                   dropout=dropout, activation="gelu", batch_first=True,
                                                   norm_first=True)
                self.blocks = nn.TransformerEncoder(layer, num_layers=depth, enable_nested_tensor=False)
            else:
                self.blocks = nn.Sequential(*[Block(embed_dim, num_heads, mlp_ratio, dropout, use_sdpa)
                                              for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)
        # SimCLR's projection head: the contrastive loss reads its output, the classifier the features below it
        self.projector = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.ReLU(inplace=True),
                                       nn.Linear(embed_dim, proj_dim))
        if arch != "mixer":
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            nn.init.trunc_normal_(self.cls_token, std=0.02)
        # MAE's patch embedding init: the kernel as the (out, in * k * k) matrix of a Linear, written through a view
        w = self.patch_embed.proj.weight.data
        nn.init.xavier_uniform_(w.view([w.shape[0], -1]))
        self.apply(init_weights)

    def forward_features(self, x):
        x = self.patch_embed(x)
        if self.arch == "mixer":
            return self.norm(self.blocks(x)).mean(dim=1)
        cls_tokens = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        x = self.pos_drop(x + self.pos_embed)
        x = self.norm(self.blocks(x))
        return x[:, 0]

    def forward(self, x):
        return self.head(self.forward_features(x))


def param_groups(model, weight_decay):
    """AdamW's usual split: weight decay on the matrices and kernels only."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim <= 1 or name.endswith(".bias") or name.endswith(("cls_token", "pos_embed")):
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_cosine(warmup_steps, total_steps, min_ratio=0.05):
    def lr_lambda(step):
        if step < warmup_steps:
            return float(step + 1) / float(max(1, warmup_steps))
        progress = float(step - warmup_steps) / float(max(1, total_steps - warmup_steps))
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr_lambda


def nt_xent(z1, z2, temperature=0.5):
    """SimCLR's normalized-temperature cross-entropy: each of the 2N views has its twin as the positive and the
    other 2N - 2 as negatives."""
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    sim = torch.matmul(z, z.T) / temperature
    self_mask = torch.eye(2 * n, dtype=torch.bool, device=z.device)
    sim = sim.masked_fill(self_mask, float("-inf"))
    targets = torch.arange(2 * n, device=z.device)
    targets = (targets + n) % (2 * n)
    return F.cross_entropy(sim, targets)


def make_data(n, num_classes=10, image_size=16, seed=0):
    """Each class a smooth random prototype image; the samples are prototypes plus noise."""
    rs = np.random.RandomState(seed)
    coarse = rs.randn(num_classes, 3, image_size // 4, image_size // 4)
    prototypes = coarse.repeat(4, axis=2).repeat(4, axis=3)
    labels = rs.randint(0, num_classes, n)
    images = prototypes[labels] + 0.8 * rs.randn(n, 3, image_size, image_size)
    return images.astype(np.float32), labels.astype(np.int64)


def augment(images, rs, pad=2):
    """One SimCLR view in NumPy: a random crop of the padded image, a horizontal flip, a brightness and
    contrast jitter and a little noise, drawn per image."""
    n, _, h, w = images.shape
    padded = np.pad(images, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="reflect")
    out = np.empty_like(images)
    for i in range(n):
        top, left = rs.randint(0, 2 * pad + 1, size=2)
        view = padded[i, :, top:top + h, left:left + w]
        if rs.rand() < 0.5:
            view = view[:, :, ::-1]
        out[i] = view * rs.uniform(0.8, 1.2) + rs.uniform(-0.2, 0.2)
    out += 0.1 * rs.randn(*out.shape).astype(np.float32)
    return np.ascontiguousarray(out, dtype=np.float32)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=ARCHS, default="encoder")
    p.add_argument("--attention", choices=("einsum", "sdpa"), default="einsum", help="with --arch attention")
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--train-size", type=int, default=512)
    p.add_argument("--embed-dim", type=int, default=32)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=3, help="linear warm-up steps before the cosine decay")
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--simclr", action="store_true", help="add NT-Xent on two augmented views")
    p.add_argument("--simclr-weight", type=float, default=0.5)
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    images, labels = make_data(args.train_size + 128, seed=args.seed)
    train_x, train_y = images[:args.train_size], labels[:args.train_size]
    test_x = torch.from_numpy(images[args.train_size:]).to(device)
    test_y = torch.from_numpy(labels[args.train_size:]).to(device)
    rs = np.random.RandomState(args.seed + 1)  # batches and augmentations

    model = VisionTransformer(args.arch, embed_dim=args.embed_dim, depth=args.depth, num_heads=args.heads,
                              dropout=args.dropout, use_sdpa=args.attention == "sdpa").to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr, betas=(0.9, 0.999))
    scheduler = LambdaLR(optimizer, lr_lambda=warmup_cosine(args.warmup, args.steps))

    losses, grad_norms, step = [], [], 0
    model.train()
    while step < args.steps:
        order = np.arange(args.train_size) if args.no_shuffle else rs.permutation(args.train_size)
        for start in range(0, args.train_size - args.batch_size + 1, args.batch_size):
            if step == args.steps:
                break
            idx = order[start:start + args.batch_size]
            y = torch.from_numpy(train_y[idx]).to(device)
            if args.simclr:
                view1 = torch.from_numpy(augment(train_x[idx], rs)).to(device)
                view2 = torch.from_numpy(augment(train_x[idx], rs)).to(device)
                features = model.forward_features(torch.cat([view1, view2]))
                z1, z2 = model.projector(features).chunk(2, dim=0)
                loss = criterion(model.head(features), y.repeat(2))
                loss = loss + args.simclr_weight * nt_xent(z1, z2, args.temperature)
            else:
                x = torch.from_numpy(train_x[idx]).to(device)
                loss = criterion(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=args.clip))
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            step += 1

    model.eval()
    with torch.no_grad():
        accuracy = (model(test_x).argmax(dim=-1) == test_y).float().mean().item()
    mean_norm = torch.stack(grad_norms).mean().item()
    print(f"{args.arch}: final lr {scheduler.get_last_lr()[0]:.2e}, mean gradient norm before clipping "
          f"{mean_norm:.3f}, held-out accuracy {accuracy:.2f}")
    return losses


if __name__ == "__main__":
    print(main())
