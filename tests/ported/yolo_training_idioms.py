"""YOLOv5-style detector training as people copy it from ultralytics' ``models/``, ``utils/torch_utils.py``,
``utils/loss.py`` and ``train.py``, on a tiny CSP detector and synthetic images.

- The model: built by ``parse_model`` from a YOLOv5s-like spec (``eval`` of the module names, depth and width
  multiples, ``make_divisible``, each layer tagged with ``.i`` / ``.f`` / ``.type`` / ``.np`` and a ``save`` list of
  the outputs later layers read); ``Conv`` blocks (``Conv2d(bias=False)``, ``BatchNorm2d``, a class-level shared
  ``nn.SiLU()``, ``autopad``), ``C3`` of ``Bottleneck`` s (shortcut add, ``torch.cat``), ``SPPF`` (one
  ``nn.MaxPool2d(5, 1, 2)`` applied three times), ``nn.Upsample(None, 2, "nearest")``, ``Concat`` and a ``Detect``
  head (per-level 1x1 convs, ``view(bs, na, no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()``, grids from
  ``torch.meshgrid(..., indexing="ij")`` and ``torch.stack`` in eval, anchors a registered buffer divided in place by
  the strides a forward of zeros measured); ``initialize_weights`` over ``modules()`` (BatchNorm's eps 1e-3 and
  momentum 0.03, ``inplace = True`` on the activations); the objectness and class priors added to the detect convs'
  biases through ``.view(na, -1)`` and ``b.data[:, 4] +=``.
- ``smart_optimizer``: three parameter groups from ``named_modules()`` (biases by ``hasattr`` / ``isinstance(v.bias,
  nn.Parameter)``, BatchNorm weights without decay, other weights with decay), ``SGD(nesterov=True)`` then
  ``add_param_group``; the weight decay scaled by the nominal batch size.
- The loop: warmup by ``np.interp`` over iterations writing ``lr`` and ``momentum`` of every ``param_groups`` entry
  (the bias group's lr falling from ``warmup_bias_lr``), ``LambdaLR`` with the one-cycle cosine, gradient
  accumulation up to the nominal batch size (``accumulate`` steps, ``last_opt_step``), ``GradScaler(enabled=False)``,
  ``clip_grad_norm_(max_norm=10.0)``, ``ModelEMA`` (``deepcopy(de_parallel(model)).eval()``, the decay ramp
  ``1 - exp(-updates / tau)``, in-place ``v *= d; v += (1 - d) * msd[k].detach()`` over the floating-point
  ``state_dict`` entries, ``update_attr`` by ``copy_attr``), a running mean of the loss items.
- ``ComputeLoss``: ``BCEWithLogitsLoss(pos_weight=torch.tensor([1.0]))`` for objectness and classes, a CIoU written by
  hand (``torch.atan``, ``torch.pow``, ``alpha`` under ``torch.no_grad()``, ``clamp(0)``), targets assigned by the
  anchor ratio ``torch.max(r, 1 / r).max(2)[0] < anchor_t`` and to the two neighbouring cells (``gxy % 1 < g``,
  ``.T`` unpacking, ``repeat`` and a boolean mask), index tuples ``pi[b, a, gj, gi]``, objectness targets
  ``tobj[b, a, gj, gi] = iou.detach().clamp(0).type(tobj.dtype)``, class targets by ``t[range(n), tcls[i]]``, the
  per-level balance, ``loss * bs`` and ``torch.cat((lbox, lobj, lcls)).detach()``.
- After training: a checkpoint dict (``deepcopy(de_parallel(model)).half()``, the EMA's half copy, ``updates``, the
  optimizer's ``state_dict()``) through ``torch.save`` into an ``io.BytesIO`` and ``torch.load(weights_only=False)``,
  ``.float()`` and ``load_state_dict``; ``fuse_conv_and_bn`` by hand (``nn.Conv2d(...).requires_grad_(False)``,
  ``torch.mm`` with ``torch.diag``, ``copy_``) applied by ``model.fuse()`` (``delattr``, ``m.forward =
  m.forward_fuse``), its eval output checked against the unfused one; a confidence filter and ``process_batch``
  (``box_iou``, ``torch.where``) counting the labels found.

The images (uint8, coloured rectangles on noise) and their boxes come from NumPy seeded by ``--seed``; the batches
from a ``DataLoader`` with YOLOv5's ``collate_fn`` (image index written into each label row), shuffled unless
``--no-shuffle``. Only the imports name the framework.

    python yolo_training_idioms.py --steps 20

``main`` returns the training loss of every step."""
import argparse
import contextlib
import io
import math
import warnings
from copy import deepcopy

import numpy as np

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

NAMES = ("red", "green", "blue")
COLOURS = np.array([[230, 40, 40], [40, 230, 40], [40, 40, 230]], np.float32)

# ------------------------------------------------------------------------------------------------ data


def rectangle_images(n, size, rs):
    """``n`` uint8 images (N, 3, size, size) with 1 to 3 rectangles each; per image a (G, 5) array of YOLO labels
    (class, x centre, y centre, width, height), normalised to [0, 1]."""
    images = np.clip(110 + 30 * rs.randn(n, 3, size, size), 0, 255)
    labels = []
    for i in range(n):
        count = rs.randint(1, 4)
        lb = np.empty((count, 5), np.float32)
        for j in range(count):
            c = rs.randint(0, len(NAMES))
            w, h = rs.randint(size // 8, size // 2, 2)
            x1, y1 = rs.randint(0, size - w + 1), rs.randint(0, size - h + 1)
            images[i, :, y1:y1 + h, x1:x1 + w] = COLOURS[c][:, None, None] + 15 * rs.randn(3, h, w)
            lb[j] = (c, (x1 + w / 2) / size, (y1 + h / 2) / size, w / size, h / size)
        labels.append(lb)
    return np.clip(images, 0, 255).astype(np.uint8), labels


class LoadImagesAndLabels(Dataset):
    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        labels = self.labels[index]
        nl = len(labels)
        labels_out = torch.zeros((nl, 6))
        if nl:
            labels_out[:, 1:] = torch.from_numpy(labels)
        return torch.from_numpy(np.ascontiguousarray(self.images[index])), labels_out, f"im{index}.jpg", None

    @staticmethod
    def collate_fn(batch):
        im, label, path, shapes = zip(*batch)
        for i, lb in enumerate(label):
            lb[:, 0] = i  # the target image index, for build_targets()
        return torch.stack(im, 0), torch.cat(label, 0), path, shapes


def labels_to_class_weights(labels, nc=80):
    """Inverse class frequencies of the training labels."""
    labels = np.concatenate(labels, 0)
    classes = labels[:, 0].astype(int)
    weights = np.bincount(classes, minlength=nc)
    weights[weights == 0] = 1
    weights = 1 / weights
    weights /= weights.sum()
    return torch.from_numpy(weights).float()


# ------------------------------------------------------------------------------------------------ the model


def autopad(k, p=None, d=1):
    """Pad to 'same' shape outputs."""
    if d > 1:
        k = d * (k - 1) + 1 if isinstance(k, int) else [d * (x - 1) + 1 for x in k]
    if p is None:
        p = k // 2 if isinstance(k, int) else [x // 2 for x in k]
    return p


class Conv(nn.Module):
    default_act = nn.SiLU()  # one module shared by every Conv, as YOLOv5's

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, d=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p, d), groups=g, dilation=d, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = self.default_act if act is True else act if isinstance(act, nn.Module) else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))

    def forward_fuse(self, x):
        return self.act(self.conv(x))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_, c2, 3, 1, g=g)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, g, e=1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        x = self.cv1(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class Concat(nn.Module):
    def __init__(self, dimension=1):
        super().__init__()
        self.d = dimension

    def forward(self, x):
        return torch.cat(x, self.d)


class Detect(nn.Module):
    stride = None  # measured when the model is built
    dynamic = False

    def __init__(self, nc=80, anchors=(), ch=(), inplace=True):
        super().__init__()
        self.nc = nc
        self.no = nc + 5  # outputs per anchor
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        self.grid = [torch.empty(0) for _ in range(self.nl)]
        self.anchor_grid = [torch.empty(0) for _ in range(self.nl)]
        self.register_buffer("anchors", torch.tensor(anchors).float().view(self.nl, -1, 2))  # shape(nl,na,2)
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)
        self.inplace = inplace

    def forward(self, x):
        z = []
        for i in range(self.nl):
            x[i] = self.m[i](x[i])
            bs, _, ny, nx = x[i].shape  # x(bs,255,20,20) to x(bs,3,20,20,85)
            x[i] = x[i].view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            if not self.training:
                if self.dynamic or self.grid[i].shape[2:4] != x[i].shape[2:4]:
                    self.grid[i], self.anchor_grid[i] = self._make_grid(nx, ny, i)
                xy, wh, conf = x[i].sigmoid().split((2, 2, self.nc + 1), 4)
                xy = (xy * 2 + self.grid[i]) * self.stride[i]
                wh = (wh * 2) ** 2 * self.anchor_grid[i]
                y = torch.cat((xy, wh, conf), 4)
                z.append(y.view(bs, self.na * nx * ny, self.no))
        return x if self.training else (torch.cat(z, 1), x)

    def _make_grid(self, nx=20, ny=20, i=0):
        d = self.anchors[i].device
        t = self.anchors[i].dtype
        shape = 1, self.na, ny, nx, 2
        y, x = torch.arange(ny, device=d, dtype=t), torch.arange(nx, device=d, dtype=t)
        yv, xv = torch.meshgrid(y, x, indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(shape) - 0.5  # add grid offset, i.e. y = 2.0 * x - 0.5
        anchor_grid = (self.anchors[i] * self.stride[i]).view((1, self.na, 1, 1, 2)).expand(shape)
        return grid, anchor_grid


def make_divisible(x, divisor):
    return math.ceil(x / divisor) * divisor


def parse_model(d, ch):
    anchors, nc, gd, gw = d["anchors"], d["nc"], d["depth_multiple"], d["width_multiple"]
    na = (len(anchors[0]) // 2) if isinstance(anchors, list) else anchors
    no = na * (nc + 5)
    layers, save, c2 = [], [], ch[-1]
    for i, (f, n, m, args) in enumerate(d["backbone"] + d["head"]):  # from, number, module, args
        m = eval(m) if isinstance(m, str) else m  # noqa: S307 - the spec's module names
        for j, a in enumerate(args):
            with contextlib.suppress(NameError):
                args[j] = eval(a) if isinstance(a, str) else a  # noqa: S307 - "nc", "anchors", "None"
        n = max(round(n * gd), 1) if n > 1 else n  # depth gain
        if m in {Conv, Bottleneck, SPPF, C3}:
            c1, c2 = ch[f], args[0]
            if c2 != no:
                c2 = make_divisible(c2 * gw, 8)
            args = [c1, c2, *args[1:]]
            if m is C3:
                args.insert(2, n)
                n = 1
        elif m is Concat:
            c2 = sum(ch[x] for x in f)
        elif m is Detect:
            args.append([ch[x] for x in f])
        else:
            c2 = ch[f]
        m_ = nn.Sequential(*(m(*args) for _ in range(n))) if n > 1 else m(*args)
        t = str(m)[8:-2].replace("__main__.", "")  # module type
        n_p = sum(x.numel() for x in m_.parameters())
        m_.i, m_.f, m_.type, m_.np = i, f, t, n_p  # index, 'from' index, type, number of params
        save.extend(x % i for x in ([f] if isinstance(f, int) else f) if x != -1)
        layers.append(m_)
        if i == 0:
            ch = []
        ch.append(c2)
    return nn.Sequential(*layers), sorted(save)


def yolo_spec(nc, depth_multiple, width_multiple):
    """YOLOv5s's layout; the anchors sized for 64-pixel images."""
    return {
        "nc": nc, "depth_multiple": depth_multiple, "width_multiple": width_multiple,
        "anchors": [[4, 5, 8, 4, 6, 9], [10, 12, 16, 9, 12, 18], [20, 16, 18, 26, 28, 24]],
        "backbone": [
            [-1, 1, "Conv", [64, 6, 2, 2]],  # 0-P1/2
            [-1, 1, "Conv", [128, 3, 2]],  # 1-P2/4
            [-1, 3, "C3", [128]],
            [-1, 1, "Conv", [256, 3, 2]],  # 3-P3/8
            [-1, 6, "C3", [256]],
            [-1, 1, "Conv", [512, 3, 2]],  # 5-P4/16
            [-1, 9, "C3", [512]],
            [-1, 1, "Conv", [1024, 3, 2]],  # 7-P5/32
            [-1, 3, "C3", [1024]],
            [-1, 1, "SPPF", [1024, 5]],  # 9
        ],
        "head": [
            [-1, 1, "Conv", [512, 1, 1]],
            [-1, 1, "nn.Upsample", ["None", 2, "nearest"]],
            [[-1, 6], 1, "Concat", [1]],  # cat backbone P4
            [-1, 3, "C3", [512, False]],  # 13
            [-1, 1, "Conv", [256, 1, 1]],
            [-1, 1, "nn.Upsample", ["None", 2, "nearest"]],
            [[-1, 4], 1, "Concat", [1]],  # cat backbone P3
            [-1, 3, "C3", [256, False]],  # 17 (P3/8-small)
            [-1, 1, "Conv", [256, 3, 2]],
            [[-1, 14], 1, "Concat", [1]],  # cat head P4
            [-1, 3, "C3", [512, False]],  # 20 (P4/16-medium)
            [-1, 1, "Conv", [512, 3, 2]],
            [[-1, 10], 1, "Concat", [1]],  # cat head P5
            [-1, 3, "C3", [1024, False]],  # 23 (P5/32-large)
            [[17, 20, 23], 1, "Detect", ["nc", "anchors"]],  # Detect(P3, P4, P5)
        ],
    }


def check_anchor_order(m):
    """Anchors in the order of the strides, flipped if not."""
    a = m.anchors.prod(-1).mean(-1).view(-1)  # mean anchor area per output layer
    da = a[-1] - a[0]
    ds = m.stride[-1] - m.stride[0]
    if da and (da.sign() != ds.sign()):
        m.anchors[:] = m.anchors.flip(0)


def initialize_weights(model):
    for m in model.modules():
        t = type(m)
        if t is nn.Conv2d:
            pass  # PyTorch's default init
        elif t is nn.BatchNorm2d:
            m.eps = 1e-3
            m.momentum = 0.03
        elif t in [nn.Hardswish, nn.LeakyReLU, nn.ReLU, nn.ReLU6, nn.SiLU]:
            m.inplace = True


class DetectionModel(nn.Module):
    def __init__(self, cfg, ch=3, img_size=64):
        super().__init__()
        self.yaml = deepcopy(cfg)
        self.model, self.save = parse_model(deepcopy(self.yaml), ch=[ch])
        self.names = [str(i) for i in range(self.yaml["nc"])]
        m = self.model[-1]  # Detect()
        s = img_size
        m.stride = torch.tensor([s / x.shape[-2] for x in self.forward(torch.zeros(1, ch, s, s))])
        check_anchor_order(m)
        m.anchors /= m.stride.view(-1, 1, 1)
        self.stride = m.stride
        self._initialize_biases(img_size)
        initialize_weights(self)

    def forward(self, x):
        y = []  # outputs
        for m in self.model:
            if m.f != -1:  # if not from previous layer
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if m.i in self.save else None)
        return x

    def _initialize_biases(self, img_size, cf=None):
        """Objectness and class priors: about 8 objects per image, classes balanced (arXiv:1708.02002 3.3)."""
        m = self.model[-1]
        for mi, s in zip(m.m, m.stride):
            b = mi.bias.view(m.na, -1)  # conv.bias(255) to (3,85)
            b.data[:, 4] += math.log(8 / (img_size / s) ** 2)  # obj (8 objects per img_size image)
            b.data[:, 5:5 + m.nc] += math.log(0.6 / (m.nc - 0.99999)) if cf is None else torch.log(cf / cf.sum())
            mi.bias = torch.nn.Parameter(b.view(-1), requires_grad=True)

    def fuse(self):
        for m in self.model.modules():
            if isinstance(m, Conv) and hasattr(m, "bn"):
                m.conv = fuse_conv_and_bn(m.conv, m.bn)  # update conv
                delattr(m, "bn")  # remove batchnorm
                m.forward = m.forward_fuse  # update forward
        return self


def fuse_conv_and_bn(conv, bn):
    """A Conv2d computing conv then bn (in eval), https://tehnokv.com/posts/fusing-batchnorm-and-conv/."""
    fusedconv = (
        nn.Conv2d(conv.in_channels, conv.out_channels, kernel_size=conv.kernel_size, stride=conv.stride,
                  padding=conv.padding, dilation=conv.dilation, groups=conv.groups, bias=True)
        .requires_grad_(False)
        .to(conv.weight.device)
    )
    w_conv = conv.weight.clone().view(conv.out_channels, -1)
    w_bn = torch.diag(bn.weight.div(torch.sqrt(bn.eps + bn.running_var)))
    fusedconv.weight.copy_(torch.mm(w_bn, w_conv).view(fusedconv.weight.shape))
    b_conv = torch.zeros(conv.weight.shape[0], device=conv.weight.device) if conv.bias is None else conv.bias
    b_bn = bn.bias - bn.weight.mul(bn.running_mean).div(torch.sqrt(bn.running_var + bn.eps))
    fusedconv.bias.copy_(torch.mm(w_bn, b_conv.reshape(-1, 1)).reshape(-1) + b_bn)
    return fusedconv


# ------------------------------------------------------------------------------------------------ torch_utils


def is_parallel(model):
    return type(model) in (nn.parallel.DataParallel, nn.parallel.DistributedDataParallel)


def de_parallel(model):
    return model.module if is_parallel(model) else model


def copy_attr(a, b, include=(), exclude=()):
    """Copy attributes from b to a, options to only include [...] and to exclude [...]."""
    for k, v in b.__dict__.items():
        if (len(include) and k not in include) or k.startswith("_") or k in exclude:
            continue
        else:
            setattr(a, k, v)


class ModelEMA:
    """Updated Exponential Moving Average (EMA) from https://github.com/rwightman/pytorch-image-models."""

    def __init__(self, model, decay=0.9999, tau=2000, updates=0):
        self.ema = deepcopy(de_parallel(model)).eval()  # FP32 EMA
        self.updates = updates  # number of EMA updates
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))  # decay exponential ramp (to help early epochs)
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        self.updates += 1
        d = self.decay(self.updates)
        msd = de_parallel(model).state_dict()  # model state_dict
        for k, v in self.ema.state_dict().items():
            if v.dtype.is_floating_point:  # true for FP16 and FP32
                v *= d
                v += (1 - d) * msd[k].detach()

    def update_attr(self, model, include=(), exclude=("process_group", "reducer")):
        copy_attr(self.ema, model, include, exclude)


def smart_optimizer(model, name="SGD", lr=0.001, momentum=0.9, decay=1e-5):
    """Three groups: biases (no decay), weights (decay), BatchNorm weights (no decay)."""
    g_bias, g_weight, g_bn = [], [], []
    for k, v in model.named_modules():
        if hasattr(v, "bias") and isinstance(v.bias, nn.Parameter):
            g_bias.append(v.bias)
        if isinstance(v, nn.BatchNorm2d):
            g_bn.append(v.weight)
        elif hasattr(v, "weight") and isinstance(v.weight, nn.Parameter):
            g_weight.append(v.weight)
    if name == "Adam":
        optimizer = torch.optim.Adam(g_bias, lr=lr, betas=(momentum, 0.999))  # adjust beta1 to momentum
    elif name == "AdamW":
        optimizer = torch.optim.AdamW(g_bias, lr=lr, betas=(momentum, 0.999), weight_decay=0.0)
    else:
        optimizer = torch.optim.SGD(g_bias, lr=lr, momentum=momentum, nesterov=True)
    optimizer.add_param_group({"params": g_weight, "weight_decay": decay})  # add g_weight with weight_decay
    optimizer.add_param_group({"params": g_bn, "weight_decay": 0.0})  # add g_bn (BatchNorm2d weights)
    return optimizer


def one_cycle(y1=0.0, y2=1.0, steps=100):
    """Sinusoidal ramp from y1 to y2, https://arxiv.org/pdf/1812.01187.pdf."""
    return lambda x: ((1 - math.cos(x * math.pi / steps)) / 2) * (y2 - y1) + y1


# ------------------------------------------------------------------------------------------------ loss


def bbox_iou(box1, box2, xywh=True, GIoU=False, DIoU=False, CIoU=False, eps=1e-7):
    """IoU of box1 (1, 4) or (n, 4) and box2 (n, 4), or its GIoU / DIoU / CIoU."""
    if xywh:  # transform from xywh to xyxy
        (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
        w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
        b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
        b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
    else:
        b1_x1, b1_y1, b1_x2, b1_y2 = box1.chunk(4, -1)
        b2_x1, b2_y1, b2_x2, b2_y2 = box2.chunk(4, -1)
        w1, h1 = b1_x2 - b1_x1, (b1_y2 - b1_y1).clamp(eps)
        w2, h2 = b2_x2 - b2_x1, (b2_y2 - b2_y1).clamp(eps)
    inter = (b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp(0) * (
        b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)
    ).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    if CIoU or DIoU or GIoU:
        cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)  # convex (smallest enclosing box) width
        ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)  # convex height
        if CIoU or DIoU:  # Distance or Complete IoU https://arxiv.org/abs/1911.08287v1
            c2 = cw**2 + ch**2 + eps  # convex diagonal squared
            rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4
            if CIoU:
                v = (4 / math.pi**2) * torch.pow(torch.atan(w2 / h2) - torch.atan(w1 / h1), 2)
                with torch.no_grad():
                    alpha = v / (v - iou + (1 + eps))
                return iou - (rho2 / c2 + v * alpha)
            return iou - rho2 / c2
        c_area = cw * ch + eps  # convex area
        return iou - (c_area - union) / c_area  # GIoU https://arxiv.org/pdf/1902.09630.pdf
    return iou


def smooth_BCE(eps=0.1):
    return 1.0 - 0.5 * eps, 0.5 * eps  # positive, negative label smoothing BCE targets


class ComputeLoss:
    sort_obj_iou = False

    def __init__(self, model, autobalance=False):
        device = next(model.parameters()).device
        h = model.hyp
        BCEcls = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([h["cls_pw"]], device=device))
        BCEobj = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([h["obj_pw"]], device=device))
        self.cp, self.cn = smooth_BCE(eps=h.get("label_smoothing", 0.0))
        m = de_parallel(model).model[-1]  # Detect() module
        self.balance = {3: [4.0, 1.0, 0.4]}.get(m.nl, [4.0, 1.0, 0.25, 0.06, 0.02])  # P3-P7
        self.ssi = list(m.stride).index(16) if autobalance else 0  # stride 16 index
        self.BCEcls, self.BCEobj, self.gr, self.hyp, self.autobalance = BCEcls, BCEobj, 1.0, h, autobalance
        self.na = m.na
        self.nc = m.nc
        self.nl = m.nl
        self.anchors = m.anchors
        self.device = device

    def __call__(self, p, targets):  # predictions, targets
        lcls = torch.zeros(1, device=self.device)
        lbox = torch.zeros(1, device=self.device)
        lobj = torch.zeros(1, device=self.device)
        tcls, tbox, indices, anchors = self.build_targets(p, targets)
        for i, pi in enumerate(p):  # layer index, layer predictions
            b, a, gj, gi = indices[i]  # image, anchor, gridy, gridx
            tobj = torch.zeros(pi.shape[:4], dtype=pi.dtype, device=self.device)  # target obj
            n = b.shape[0]  # number of targets
            if n:
                pxy, pwh, _, pcls = pi[b, a, gj, gi].split((2, 2, 1, self.nc), 1)  # subset of predictions
                pxy = pxy.sigmoid() * 2 - 0.5
                pwh = (pwh.sigmoid() * 2) ** 2 * anchors[i]
                pbox = torch.cat((pxy, pwh), 1)  # predicted box
                iou = bbox_iou(pbox, tbox[i], CIoU=True).squeeze()  # iou(prediction, target)
                lbox += (1.0 - iou).mean()  # iou loss
                iou = iou.detach().clamp(0).type(tobj.dtype)
                if self.sort_obj_iou:
                    j = iou.argsort()
                    b, a, gj, gi, iou = b[j], a[j], gj[j], gi[j], iou[j]
                if self.gr < 1:
                    iou = (1.0 - self.gr) + self.gr * iou
                tobj[b, a, gj, gi] = iou  # iou ratio
                if self.nc > 1:  # cls loss (only if multiple classes)
                    t = torch.full_like(pcls, self.cn, device=self.device)  # targets
                    t[range(n), tcls[i]] = self.cp
                    lcls += self.BCEcls(pcls, t)  # BCE
            obji = self.BCEobj(pi[..., 4], tobj)
            lobj += obji * self.balance[i]  # obj loss
            if self.autobalance:
                self.balance[i] = self.balance[i] * 0.9999 + 0.0001 / obji.detach().item()
        if self.autobalance:
            self.balance = [x / self.balance[self.ssi] for x in self.balance]
        lbox *= self.hyp["box"]
        lobj *= self.hyp["obj"]
        lcls *= self.hyp["cls"]
        bs = tobj.shape[0]  # batch size
        return (lbox + lobj + lcls) * bs, torch.cat((lbox, lobj, lcls)).detach()

    def build_targets(self, p, targets):
        """Targets (image, class, x, y, w, h) matched to anchors of every level and to up to two neighbouring
        cells."""
        na, nt = self.na, targets.shape[0]  # number of anchors, targets
        tcls, tbox, indices, anch = [], [], [], []
        gain = torch.ones(7, device=self.device)  # normalized to gridspace gain
        ai = torch.arange(na, device=self.device).float().view(na, 1).repeat(1, nt)  # same as .repeat_interleave(nt)
        targets = torch.cat((targets.repeat(na, 1, 1), ai[..., None]), 2)  # append anchor indices
        g = 0.5  # bias
        off = torch.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]], device=self.device).float() * g  # offsets
        for i in range(self.nl):
            anchors, shape = self.anchors[i], p[i].shape
            gain[2:6] = torch.tensor(shape)[[3, 2, 3, 2]]  # xyxy gain
            t = targets * gain  # shape(3,n,7)
            if nt:
                r = t[..., 4:6] / anchors[:, None]  # wh ratio
                j = torch.max(r, 1 / r).max(2)[0] < self.hyp["anchor_t"]  # compare
                t = t[j]  # filter
                gxy = t[:, 2:4]  # grid xy
                gxi = gain[[2, 3]] - gxy  # inverse
                j, k = ((gxy % 1 < g) & (gxy > 1)).T
                l, m = ((gxi % 1 < g) & (gxi > 1)).T
                j = torch.stack((torch.ones_like(j), j, k, l, m))
                t = t.repeat((5, 1, 1))[j]
                offsets = (torch.zeros_like(gxy)[None] + off[:, None])[j]
            else:
                t = targets[0]
                offsets = 0
            bc, gxy, gwh, a = t.chunk(4, 1)  # (image, class), grid xy, grid wh, anchors
            a, (b, c) = a.long().view(-1), bc.long().T  # anchors, image, class
            gij = (gxy - offsets).long()
            gi, gj = gij.T  # grid indices
            indices.append((b, a, gj.clamp_(0, shape[2] - 1), gi.clamp_(0, shape[3] - 1)))
            tbox.append(torch.cat((gxy - gij, gwh), 1))  # box
            anch.append(anchors[a])  # anchors
            tcls.append(c)  # class
        return tcls, tbox, indices, anch


# ------------------------------------------------------------------------------------------------ validation


def xywh2xyxy(x):
    y = x.clone() if isinstance(x, torch.Tensor) else np.copy(x)
    y[..., 0] = x[..., 0] - x[..., 2] / 2  # top left x
    y[..., 1] = x[..., 1] - x[..., 3] / 2  # top left y
    y[..., 2] = x[..., 0] + x[..., 2] / 2  # bottom right x
    y[..., 3] = x[..., 1] + x[..., 3] / 2  # bottom right y
    return y


def box_iou(box1, box2, eps=1e-7):
    (a1, a2), (b1, b2) = box1.unsqueeze(1).chunk(2, 2), box2.unsqueeze(0).chunk(2, 2)
    inter = (torch.min(a2, b2) - torch.max(a1, b1)).clamp(0).prod(2)
    return inter / ((a2 - a1).prod(2) + (b2 - b1).prod(2) - inter + eps)


def filter_detections(prediction, conf_thres=0.001, max_det=30):  # val.py's threshold
    """Per image (n, 6) detections (xyxy, conf, cls) above ``conf_thres``, best first (no NMS)."""
    output = []
    for x in prediction:
        x = x[x[:, 4] > conf_thres]
        x[:, 5:] *= x[:, 4:5]  # conf = obj_conf * cls_conf
        box = xywh2xyxy(x[:, :4])
        conf, j = x[:, 5:].max(1, keepdim=True)
        x = torch.cat((box, conf, j.float()), 1)[conf.view(-1) > conf_thres]
        output.append(x[x[:, 4].argsort(descending=True)[:max_det]])
    return output


def process_batch(detections, labels, iouv):
    """Per detection and IoU threshold, whether it matches a label of its class (YOLOv5's val.py)."""
    correct = np.zeros((detections.shape[0], iouv.shape[0])).astype(bool)
    iou = box_iou(labels[:, 1:], detections[:, :4])
    correct_class = labels[:, 0:1] == detections[:, 5]
    for i in range(len(iouv)):
        x = torch.where((iou >= iouv[i]) & correct_class)  # IoU > threshold and classes match
        if x[0].shape[0]:
            matches = torch.cat((torch.stack(x, 1), iou[x[0], x[1]][:, None]), 1).cpu().numpy()  # [label, det, iou]
            if x[0].shape[0] > 1:
                matches = matches[matches[:, 2].argsort()[::-1]]
                matches = matches[np.unique(matches[:, 1], return_index=True)[1]]
                matches = matches[np.unique(matches[:, 0], return_index=True)[1]]
            correct[matches[:, 1].astype(int), i] = True
    return torch.tensor(correct, dtype=torch.bool, device=iouv.device)


def validate(model, loader, device, size):
    iouv = torch.linspace(0.5, 0.95, 10, device=device)
    found = total = 0
    model.eval()
    with torch.no_grad():
        for im, targets, _, _ in loader:
            im = im.to(device).float() / 255
            targets = targets.to(device)
            targets[:, 2:] *= torch.tensor((size, size, size, size), device=device)  # to pixels
            preds, _ = model(im)
            for si, pred in enumerate(filter_detections(preds)):
                labels = targets[targets[:, 0] == si, 1:]
                labelsn = torch.cat((labels[:, 0:1], xywh2xyxy(labels[:, 1:5])), 1)  # native-space labels
                if len(pred):
                    found += process_batch(pred, labelsn, iouv)[:, 0].sum().item()
                total += len(labels)
    return found / max(total, 1)


# ------------------------------------------------------------------------------------------------ training


HYP = {"lr0": 0.01, "lrf": 0.01, "momentum": 0.937, "weight_decay": 0.0005, "warmup_epochs": 2.0,
       "warmup_momentum": 0.8, "warmup_bias_lr": 0.1, "box": 0.05, "cls": 0.5, "cls_pw": 1.0, "obj": 1.0,
       "obj_pw": 1.0, "anchor_t": 4.0, "label_smoothing": 0.0}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20, help="training iterations")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--nbs", type=int, default=16, help="nominal batch size: gradients accumulate up to it")
    p.add_argument("--img-size", type=int, default=64)
    p.add_argument("--train-size", type=int, default=32)
    p.add_argument("--val-size", type=int, default=16)
    p.add_argument("--depth-multiple", type=float, default=0.33)
    p.add_argument("--width-multiple", type=float, default=0.125)
    p.add_argument("--optimizer", choices=("SGD", "Adam", "AdamW"), default="SGD")
    p.add_argument("--lr0", type=float, default=HYP["lr0"])
    p.add_argument("--warmup-bias-lr", type=float, default=HYP["warmup_bias_lr"])
    p.add_argument("--ema-tau", type=float, default=20.0, help="updates over which the EMA's decay ramps up")
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rs = np.random.RandomState(args.seed)
    hyp = dict(HYP, lr0=args.lr0, warmup_bias_lr=args.warmup_bias_lr)
    batch_size, nbs, imgsz = args.batch_size, args.nbs, args.img_size
    train_images, train_labels = rectangle_images(args.train_size, imgsz, rs)
    val_images, val_labels = rectangle_images(args.val_size, imgsz, rs)
    dataset = LoadImagesAndLabels(train_images, train_labels)
    train_loader = DataLoader(dataset, batch_size=batch_size, shuffle=not args.no_shuffle, drop_last=True,
                              collate_fn=LoadImagesAndLabels.collate_fn)
    val_loader = DataLoader(LoadImagesAndLabels(val_images, val_labels), batch_size=batch_size,
                            collate_fn=LoadImagesAndLabels.collate_fn)
    nc = len(NAMES)

    model = DetectionModel(yolo_spec(nc, args.depth_multiple, args.width_multiple), ch=3, img_size=imgsz).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    nl = de_parallel(model).model[-1].nl  # number of detection layers (to scale hyps)
    hyp["box"] *= 3 / nl
    hyp["cls"] *= nc / 80 * 3 / nl
    hyp["obj"] *= (imgsz / 640) ** 2 * 3 / nl
    model.nc = nc  # attach number of classes to model
    model.hyp = hyp  # attach hyperparameters to model
    model.class_weights = labels_to_class_weights(train_labels, nc).to(device) * nc  # attach class weights
    model.names = list(NAMES)

    accumulate = max(round(nbs / batch_size), 1)  # accumulate loss before optimizing
    hyp["weight_decay"] *= batch_size * accumulate / nbs  # scale weight_decay
    optimizer = smart_optimizer(model, args.optimizer, hyp["lr0"], hyp["momentum"], hyp["weight_decay"])
    nb = len(train_loader)  # number of batches
    epochs = math.ceil(args.steps / nb)
    lf = one_cycle(1, hyp["lrf"], epochs)  # cosine 1->hyp['lrf']
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lf)
    ema = ModelEMA(model, tau=args.ema_tau)
    start_epoch = 0
    scheduler.last_epoch = start_epoch - 1  # do not move
    nw = max(round(hyp["warmup_epochs"] * nb), 3)  # number of warmup iterations
    last_opt_step = -1
    scaler = torch.amp.GradScaler(device.type, enabled=False)
    compute_loss = ComputeLoss(model)

    losses = []
    for epoch in range(start_epoch, epochs):
        model.train()
        mloss = torch.zeros(3, device=device)  # mean losses
        optimizer.zero_grad()
        for i, (imgs, targets, paths, _) in enumerate(train_loader):
            ni = i + nb * epoch  # number integrated batches (since train start)
            if ni == args.steps:
                break
            imgs = imgs.to(device, non_blocking=True).float() / 255  # uint8 to float32, 0-255 to 0.0-1.0
            if ni <= nw:  # warmup
                xi = [0, nw]  # x interp
                accumulate = max(1, np.interp(ni, xi, [1, nbs / batch_size]).round())
                for j, x in enumerate(optimizer.param_groups):
                    # bias lr falls from 0.1 to lr0, all other lrs rise from 0.0 to lr0
                    x["lr"] = np.interp(ni, xi, [hyp["warmup_bias_lr"] if j == 0 else 0.0, x["initial_lr"] * lf(epoch)])
                    if "momentum" in x:
                        x["momentum"] = np.interp(ni, xi, [hyp["warmup_momentum"], hyp["momentum"]])
            pred = model(imgs)  # forward
            loss, loss_items = compute_loss(pred, targets.to(device))  # loss scaled by batch_size
            scaler.scale(loss).backward()
            if ni - last_opt_step >= accumulate:
                scaler.unscale_(optimizer)  # unscale gradients
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)  # clip gradients
                scaler.step(optimizer)  # optimizer.step
                scaler.update()
                optimizer.zero_grad()
                ema.update(model)
                last_opt_step = ni
            mloss = (mloss * i + loss_items) / (i + 1)  # update mean losses
            losses.append(loss.item())
        lr = [x["lr"] for x in optimizer.param_groups]  # for loggers
        scheduler.step()
        ema.update_attr(model, include=["yaml", "nc", "hyp", "names", "stride", "class_weights"])
        print(f"epoch {epoch}: box {mloss[0]:.4f} obj {mloss[1]:.4f} cls {mloss[2]:.4f} lr {lr[0]:.5f}")

    # a checkpoint as train.py writes it, read back as val.py / resuming does
    ckpt = {"epoch": epoch, "best_fitness": None, "model": deepcopy(de_parallel(model)).half(),
            "ema": deepcopy(ema.ema).half(), "updates": ema.updates, "optimizer": optimizer.state_dict(),
            "opt": vars(args)}
    buffer = io.BytesIO()
    torch.save(ckpt, buffer)
    buffer.seek(0)
    ckpt = torch.load(buffer, map_location="cpu", weights_only=False)
    restored = ckpt["ema"].float().to(device)
    resumed = DetectionModel(yolo_spec(nc, args.depth_multiple, args.width_multiple), ch=3, img_size=imgsz).to(device)
    resumed.load_state_dict(ckpt["model"].float().state_dict())
    optimizer_resumed = smart_optimizer(resumed, args.optimizer, hyp["lr0"], hyp["momentum"], hyp["weight_decay"])
    optimizer_resumed.load_state_dict(ckpt["optimizer"])
    half_error = max((a - b).abs().max().item() for a, b in zip(restored.state_dict().values(),
                                                               ema.ema.state_dict().values()))
    print(f"checkpoint: epoch {ckpt['epoch']}, {ckpt['updates']} EMA updates, fp16 round trip error {half_error:.2e}")

    # fuse the EMA's convolutions and batch norms for inference; the fused model must compute the same
    im = next(iter(val_loader))[0].to(device).float() / 255
    with torch.no_grad():
        y = restored.eval()(im)[0]
        fused = deepcopy(restored).fuse()
        y_fused = fused(im)[0]
    print(f"fused: {sum(isinstance(m, nn.BatchNorm2d) for m in fused.modules())} BatchNorm2d left, "
          f"max |fused - unfused| {(y_fused - y).abs().max().item():.2e}")
    print(f"labels found at IoU 0.5: EMA {validate(fused, val_loader, device, imgsz):.2f}, "
          f"model {validate(model, val_loader, device, imgsz):.2f}")
    return losses


if __name__ == "__main__":
    print(main())
