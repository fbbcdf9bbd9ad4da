"""Semi-supervised and robust training of a small CNN as PyTorch users write it, on a few labelled and more
unlabelled synthetic images. The network: a WideResNet-style stack of pre-activation blocks (``BatchNorm2d``,
``LeakyReLU(0.1)``, ``Conv2d``, an optional ``Dropout``, a 1x1 ``Conv2d`` shortcut where the shape changes),
``MaxPool2d`` between the blocks and ``AdaptiveAvgPool2d`` before the classifier, initialised over ``modules()``.
``--method`` picks the recipe:

- ``fixmatch``: weak augmentation (``torch.flip`` of a boolean-masked subset, translation by ``F.pad(...,
  mode="reflect")`` and slicing) and strong augmentation (plus per-image brightness and contrast by broadcast
  tensor ops, ``torch.roll`` and cutout by index assignment of zeros); pseudo-labels from the weak view's detached
  softmax kept where their confidence passes ``ge(threshold)``, the masked per-sample cross-entropy of the strong
  view; the labelled and both unlabelled batches through one forward (``torch.cat``, interleaved as FixMatch does,
  split back by slicing and ``chunk``); SGD with nesterov momentum and no weight decay on BatchNorm and biases,
  FixMatch's cosine ``LambdaLR``; an EMA of the weights (``mul_`` / ``add_(alpha=...)`` under ``torch.no_grad``)
  with the buffers copied, evaluated at the end.
- ``meanteacher``: a teacher (``copy.deepcopy`` of the student, ``requires_grad_(False)``, the student's EMA) sees
  another augmentation of each unlabelled image; ``F.mse_loss`` between the two softmax outputs weighted by a
  sigmoid ramp-up; Adam, ``torch.split`` of the labelled and unlabelled rows.
- ``robust``: training labels flipped at random (symmetric noise), adversarial examples by FGSM or a hand-written
  PGD (``requires_grad_(True)`` on a detached copy, ``torch.autograd.grad``, ``grad.sign()``, the eps-ball
  projection by ``torch.min`` / ``torch.max`` and ``clamp(0, 1)``, the model in ``eval()`` during the attack,
  under ``torch.enable_grad()`` so that the final FGSM evaluation runs it inside ``torch.no_grad()``), the
  symmetric cross-entropy (reverse term on a clamped ``F.one_hot``) plus a TRADES-style ``F.kl_div`` of
  ``F.log_softmax`` between the adversarial and the clean outputs; ``clip_grad_value_``.

Every augmentation choice (which images flip, the offsets, the cutout boxes, the PGD start) and the noisy labels
come from NumPy seeded by ``--seed``; the batches from ``DataLoader`` s over a ``RandomSampler`` (the
framework's generator), or with ``--no-shuffle`` a ``SequentialSampler``; ``--dropout 0`` turns the dropout
off. Only the imports name the framework.

    python semisupervised_idioms.py --method fixmatch --steps 20

``main`` returns the training loss of every step."""
import argparse
import copy
import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset

CLASSES, SIZE = 4, 16

# ------------------------------------------------------------------------------------------------ data


def make_images(n, rs):
    """``n`` RGB images in [0, 1] of four classes: horizontal stripes, vertical stripes, a blob, a checkerboard,
    each at a random phase, position and tint, plus noise."""
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
        tint = rs.uniform(0.5, 1.0, 3)[:, None, None]
        images[k] = 0.5 + 0.35 * tint * pattern + 0.08 * rs.randn(3, SIZE, SIZE)
    return np.clip(images, 0.0, 1.0).astype(np.float32), labels.astype(np.int64)


class Augment:
    """Batch augmentations on tensors whose random choices all come from one NumPy generator."""

    def __init__(self, seed, pad=2, cutout=6):
        self.rs = np.random.RandomState(seed)
        self.pad, self.cutout = pad, cutout

    def weak(self, x):
        n, _, h, w = x.shape
        flip = torch.from_numpy(self.rs.rand(n) < 0.5).to(x.device)
        x = x.clone()
        x[flip] = torch.flip(x[flip], dims=[3])
        padded = F.pad(x, (self.pad,) * 4, mode="reflect")
        offsets = self.rs.randint(0, 2 * self.pad + 1, (n, 2))
        return torch.stack([padded[k, :, i:i + h, j:j + w] for k, (i, j) in enumerate(offsets)])

    def strong(self, x):
        x = self.weak(x)
        n, _, h, w = x.shape
        brightness = torch.from_numpy(self.rs.uniform(0.7, 1.3, n).astype(np.float32)).to(x.device)
        contrast = torch.from_numpy(self.rs.uniform(0.6, 1.4, n).astype(np.float32)).to(x.device)
        x = x * brightness.view(-1, 1, 1, 1)
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        x = ((x - mean) * contrast[:, None, None, None] + mean).clamp(0, 1)
        dy, dx = (int(v) for v in self.rs.randint(-3, 4, 2))
        x = torch.roll(x, shifts=(dy, dx), dims=(2, 3))
        for k, (cy, cx) in enumerate(self.rs.randint(0, h, (n, 2))):
            y0, y1 = max(cy - self.cutout // 2, 0), min(cy + self.cutout // 2, h)
            x0, x1 = max(cx - self.cutout // 2, 0), min(cx + self.cutout // 2, w)
            x[k, :, y0:y1, x0:x1] = 0
        return x

    def noise(self, x, std=0.05):
        return x + torch.from_numpy((std * self.rs.randn(*x.shape)).astype(np.float32)).to(x.device)


def loader(dataset, batch_size, shuffle):
    sampler = RandomSampler(dataset) if shuffle else SequentialSampler(dataset)
    return DataLoader(dataset, sampler=sampler, batch_size=batch_size, drop_last=True)


def forever(data_loader, device):
    """The loader's batches on ``device``, epoch after epoch (as FixMatch restarts its iterators)."""
    while True:
        for batch in data_loader:
            yield [t.to(device) for t in batch]


# ------------------------------------------------------------------------------------------------ the model


class BasicBlock(nn.Module):
    """WideResNet's pre-activation block; ``activate_before_residual`` runs the first BN-activation on the
    shortcut's input too, as FixMatch's first block does."""

    def __init__(self, in_planes, out_planes, stride, drop_rate=0.0, activate_before_residual=False):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.relu1 = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.conv1 = nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_planes)
        self.relu2 = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.conv2 = nn.Conv2d(out_planes, out_planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.drop_rate = drop_rate
        self.equal_in_out = in_planes == out_planes and stride == 1
        self.conv_shortcut = None if self.equal_in_out else nn.Conv2d(in_planes, out_planes, kernel_size=1,
                                                                      stride=stride, padding=0, bias=False)
        self.activate_before_residual = activate_before_residual

    def forward(self, x):
        if not self.equal_in_out and self.activate_before_residual:
            x = self.relu1(self.bn1(x))
        else:
            out = self.relu1(self.bn1(x))
        out = self.relu2(self.bn2(self.conv1(out if self.equal_in_out else x)))
        if self.drop_rate > 0:
            out = F.dropout(out, p=self.drop_rate, training=self.training)
        out = self.conv2(out)
        return torch.add(x if self.equal_in_out else self.conv_shortcut(x), out)


class WideResNet(nn.Module):
    def __init__(self, num_classes, widths=(8, 16, 32), drop_rate=0.0):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], kernel_size=3, stride=1, padding=1, bias=False)
        self.block1 = BasicBlock(widths[0], widths[1], 1, drop_rate, activate_before_residual=True)
        self.pool = nn.MaxPool2d(2)
        self.block2 = BasicBlock(widths[1], widths[1], 1, drop_rate)
        self.block3 = BasicBlock(widths[1], widths[2], 2, drop_rate)
        self.bn1 = nn.BatchNorm2d(widths[2])
        self.relu = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[2], num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="leaky_relu")
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                m.bias.data.zero_()

    def forward(self, x):
        out = self.block3(self.block2(self.pool(self.block1(self.conv1(x)))))
        out = self.avgpool(self.relu(self.bn1(out)))
        return self.fc(torch.flatten(out, 1))


class ModelEMA:
    """An exponential moving average of a model's weights; its buffers (BatchNorm's statistics) copied as they
    are."""

    def __init__(self, model, decay):
        self.ema = copy.deepcopy(model)
        self.ema.eval()
        self.decay = decay
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        with torch.no_grad():
            for ema_p, p in zip(self.ema.parameters(), model.parameters()):
                ema_p.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)
            for ema_b, b in zip(self.ema.buffers(), model.buffers()):
                ema_b.copy_(b)


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=7.0 / 16.0):
    def _lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        no_progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, math.cos(math.pi * num_cycles * no_progress))
    return LambdaLR(optimizer, _lr_lambda)


def interleave(x, size):
    s = list(x.shape)
    return x.reshape([-1, size] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def de_interleave(x, size):
    s = list(x.shape)
    return x.reshape([size, -1] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


# ------------------------------------------------------------------------------------------------ the recipes


def fixmatch_step(model, batch_x, batch_u, augment, args):
    (inputs_x, targets_x), (inputs_u, _) = batch_x, batch_u
    batch_size = inputs_x.shape[0]
    ratio = 2 * args.mu + 1
    inputs = interleave(torch.cat((augment.weak(inputs_x), augment.weak(inputs_u), augment.strong(inputs_u))),
                        ratio)
    logits = de_interleave(model(inputs), ratio)
    logits_x = logits[:batch_size]
    logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
    del logits
    loss_x = F.cross_entropy(logits_x, targets_x, reduction="mean")
    pseudo_label = torch.softmax(logits_u_w.detach() / args.T, dim=-1)
    max_probs, targets_u = pseudo_label.max(dim=-1)
    mask = max_probs.ge(args.threshold).float()
    loss_u = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
    return loss_x + args.lambda_u * loss_u


def sigmoid_rampup(current, rampup_length):
    """Laine and Aila's exp(-5 (1 - t)^2) ramp-up, t the fraction of ``rampup_length`` done."""
    if rampup_length == 0:
        return 1.0
    phase = 1.0 - np.clip(current, 0.0, rampup_length) / rampup_length
    return float(np.exp(-5.0 * phase * phase))


def softmax_mse_loss(input_logits, target_logits):
    """Mean Teacher's consistency: the squared distance of the two softmax outputs, summed over the classes."""
    input_softmax = F.softmax(input_logits, dim=1)
    target_softmax = F.softmax(target_logits, dim=1)
    return F.mse_loss(input_softmax, target_softmax, reduction="sum") / input_logits.size(0)


def meanteacher_step(student, teacher, batch_x, batch_u, augment, step, args):
    (inputs_x, targets_x), (inputs_u, _) = batch_x, batch_u
    student_input = augment.noise(augment.weak(torch.cat([inputs_x, inputs_u])))
    teacher_input = augment.noise(augment.weak(torch.cat([inputs_x, inputs_u])))
    with torch.no_grad():
        teacher_logits = teacher(teacher_input)
    logits = student(student_input)
    logits_x, _ = torch.split(logits, [inputs_x.size(0), inputs_u.size(0)])
    class_loss = F.cross_entropy(logits_x, targets_x)
    weight = args.consistency * sigmoid_rampup(step, args.rampup)
    return class_loss + weight * softmax_mse_loss(logits, teacher_logits)


def update_teacher(student, teacher, alpha, step):
    # the true average until 1 / (step + 1) drops below 1 - alpha
    alpha = min(1 - 1 / (step + 1), alpha)
    with torch.no_grad():
        for ema_param, param in zip(teacher.parameters(), student.parameters()):
            ema_param.mul_(alpha).add_(param, alpha=1 - alpha)


def attack(model, x, y, eps, alpha, steps, start):
    """FGSM (``steps`` 1, no random start) or PGD within the L-inf ball of radius ``eps`` around ``x``; with
    gradients on even when called under ``torch.no_grad()`` (an evaluation loop)."""
    was_training = model.training
    model.eval()
    x_adv = torch.clamp(x + start, 0, 1) if start is not None else x
    with torch.enable_grad():
        for _ in range(steps):
            x_adv = x_adv.clone().detach().requires_grad_(True)
            loss = F.cross_entropy(model(x_adv), y)
            grad = torch.autograd.grad(loss, x_adv)[0]
            x_adv = x_adv.detach() + alpha * grad.sign()
            x_adv = torch.min(torch.max(x_adv, x - eps), x + eps).clamp(0, 1)
    model.train(was_training)
    return x_adv.detach()


def symmetric_cross_entropy(logits, targets, alpha=0.1, beta=1.0):
    """Wang et al.'s SCE: cross-entropy plus the reverse cross-entropy, log 0 clamped to log 1e-4."""
    ce = F.cross_entropy(logits, targets)
    pred = F.softmax(logits, dim=1).clamp(min=1e-7, max=1.0)
    label_one_hot = F.one_hot(targets, CLASSES).float().clamp(min=1e-4, max=1.0)
    rce = -torch.sum(pred * torch.log(label_one_hot), dim=1)
    return alpha * ce + beta * rce.mean()


def robust_step(model, batch_x, augment, args):
    x, y = batch_x
    if args.attack == "fgsm":
        x_adv = attack(model, x, y, args.eps, args.eps, 1, None)
    else:
        start = torch.from_numpy(augment.rs.uniform(-args.eps, args.eps, x.shape).astype(np.float32)).to(x.device)
        x_adv = attack(model, x, y, args.eps, args.eps / 2, args.pgd_steps, start)
    logits_clean, logits_adv = model(x), model(x_adv)
    kl = F.kl_div(F.log_softmax(logits_adv, dim=1), F.softmax(logits_clean, dim=1), reduction="batchmean")
    return symmetric_cross_entropy(logits_clean, y) + args.beta * kl


# ------------------------------------------------------------------------------------------------ training


def evaluate(model, x, y, batch_size=64, eps=0.0):
    """Accuracy on (``x``, ``y``); with ``eps``, on FGSM examples made from them."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for inputs, targets in zip(x.split(batch_size), y.split(batch_size)):
            if eps:
                inputs = attack(model, inputs, targets, eps, eps, 1, None)
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return correct / len(y)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", choices=("fixmatch", "meanteacher", "robust"), default="fixmatch")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16, help="labelled images per step")
    p.add_argument("--mu", type=int, default=2, help="unlabelled images per labelled one")
    p.add_argument("--lr", type=float, default=None, help="default: 0.03 (SGD), 0.003 (Adam), 0.01 (robust)")
    p.add_argument("--wdecay", type=float, default=5e-4)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--labelled", type=int, default=64)
    p.add_argument("--unlabelled", type=int, default=256)
    p.add_argument("--T", type=float, default=1.0, help="pseudo-label temperature")
    p.add_argument("--threshold", type=float, default=0.8, help="pseudo-label confidence threshold")
    p.add_argument("--lambda-u", type=float, default=1.0)
    p.add_argument("--ema-decay", type=float, default=0.9)
    p.add_argument("--consistency", type=float, default=10.0)
    p.add_argument("--rampup", type=int, default=10, help="steps of the consistency weight's ramp-up")
    p.add_argument("--attack", choices=("fgsm", "pgd"), default="pgd")
    p.add_argument("--pgd-steps", type=int, default=2)
    p.add_argument("--eps", type=float, default=4 / 255)
    p.add_argument("--beta", type=float, default=1.0, help="weight of the adversarial KL term")
    p.add_argument("--noise-rate", type=float, default=0.2, help="fraction of training labels flipped")
    p.add_argument("--clip", type=float, default=1.0, help="clip_grad_value_'s bound")
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.lr is None:
        args.lr = {"fixmatch": 0.03, "meanteacher": 0.003, "robust": 0.01}[args.method]
    return args


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rs = np.random.RandomState(args.seed)
    x_l, y_l = make_images(args.labelled, rs)
    x_u, y_u = make_images(args.unlabelled, rs)
    x_test, y_test = make_images(128, rs)
    if args.method == "robust":  # symmetric label noise: a flipped label is any other class
        flip = rs.rand(len(y_l)) < args.noise_rate
        y_l = np.where(flip, (y_l + rs.randint(1, CLASSES, len(y_l))) % CLASSES, y_l)
    labelled = TensorDataset(torch.from_numpy(x_l), torch.from_numpy(y_l))
    unlabelled = TensorDataset(torch.from_numpy(x_u), torch.from_numpy(y_u))
    labelled_batches = forever(loader(labelled, args.batch_size, not args.no_shuffle), device)
    unlabelled_batches = forever(loader(unlabelled, args.batch_size * args.mu, not args.no_shuffle), device)
    augment = Augment(args.seed + 1)

    model = WideResNet(CLASSES, drop_rate=args.dropout).to(device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    no_decay = ["bias", "bn"]
    grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": args.wdecay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    if args.method == "meanteacher":
        optimizer = torch.optim.Adam(grouped_parameters, lr=args.lr)
        teacher = copy.deepcopy(model)
        teacher.requires_grad_(False)
    else:
        optimizer = torch.optim.SGD(grouped_parameters, lr=args.lr, momentum=0.9, nesterov=True)
    scheduler = get_cosine_schedule_with_warmup(optimizer, 0, args.steps)
    ema_model = ModelEMA(model, args.ema_decay)

    losses = []
    model.train()
    for step in range(args.steps):
        batch_x = next(labelled_batches)
        if args.method == "fixmatch":
            loss = fixmatch_step(model, batch_x, next(unlabelled_batches), augment, args)
        elif args.method == "meanteacher":
            teacher.train()
            loss = meanteacher_step(model, teacher, batch_x, next(unlabelled_batches), augment, step, args)
        else:
            loss = robust_step(model, batch_x, augment, args)
        optimizer.zero_grad()
        loss.backward()
        if args.method == "robust":
            torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=args.clip)
        optimizer.step()
        scheduler.step()
        if args.method == "meanteacher":
            update_teacher(model, teacher, args.ema_decay, step)
        ema_model.update(model)
        losses.append(loss.item())

    x_test, y_test = torch.from_numpy(x_test).to(device), torch.from_numpy(y_test).to(device)
    print(f"{args.method}: accuracy {evaluate(model, x_test, y_test):.2f}, "
          f"EMA {evaluate(ema_model.ema, x_test, y_test):.2f}")
    if args.method == "robust":
        print(f"FGSM accuracy {evaluate(model, x_test, y_test, eps=args.eps):.2f}")
    return losses


if __name__ == "__main__":
    print(main())
