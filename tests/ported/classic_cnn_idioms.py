"""A classic image-classification recipe in the shape of torchvision's ``references/classification/train.py`` and
PyTorch's ImageNet example, on a tiny VGG: the network built from a ``cfgs`` list by ``make_layers`` (``layers +=``
conv / BatchNorm / ``ReLU(inplace=True)`` triples and ``"M"`` max-pools, then ``nn.Sequential(*layers)``) with
torchvision's VGG initialisation; ``set_weight_decay`` walking ``named_children`` with per-key weight decay
(``custom_keys_weight_decay``) and norm classes taken from ``nn.modules``; SGD / RMSprop / AdamW chosen by name;
a per-epoch ``SequentialLR`` of a ``LinearLR`` or ``ConstantLR`` warm-up then ``StepLR``, ``CosineAnnealingLR``
or ``ExponentialLR``; mixup applied in a ``collate_fn`` around ``default_collate`` (its mixing weight drawn by
NumPy), its probability targets taken by ``nn.CrossEntropyLoss(label_smoothing=...).to(device)``; the
``RandomSampler`` / ``SequentialSampler`` pair; ``cudnn.benchmark`` or ``use_deterministic_algorithms``; gradient
clipping, behind an optional ``GradScaler`` (``unscale_`` first); torchvision's ``ExponentialMovingAverage`` (an
``AveragedModel`` subclass with a custom ``avg_fn`` over weights and buffers, its ``n_averaged`` reset during
warm-up); the ``MetricLogger`` / ``SmoothedValue`` pair (``collections.deque`` windows,
``torch.tensor(list(deque)).median()``, ``log_every`` as a generator, ``reduce_across_processes`` outside
``torch.distributed``) and the ImageNet example's ``AverageMeter`` / ``ProgressMeter`` fed 0-dim tensors and
formatted with ``{val:6.2f}``; torchvision's ``accuracy`` (``target[None]``, ``sum(dtype=torch.float32)``, mixed
targets through ``max(dim=1)[1]``) under ``torch.inference_mode()``; ``best_acc1 = max(acc1, best_acc1)`` on
tensors; a checkpoint dict (model, optimizer, lr_scheduler, EMA, epoch, the ``argparse`` namespace, best
accuracy) written each epoch, copied to ``model_best.pth.tar`` by ``shutil.copyfile``, then loaded with
``weights_only=False`` into a freshly built model, optimizer, scheduler and EMA, training resumed from
``checkpoint["epoch"] + 1``. Synthetic 3x16x16 images from NumPy, no downloads. Only the imports name the
framework.

    python classic_cnn_idioms.py --opt adamw --lr 0.004 --model-ema --steps 32

``main`` returns the training loss of every step."""
import argparse
import copy
import datetime
import math
import os
import shutil
import tempfile
import time
import warnings
from collections import defaultdict, deque
from enum import Enum
from typing import Dict, List, Union, cast

import numpy as np

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler, default_collate

# ------------------------------------------------------------------------------------------------ the model

cfgs: Dict[str, List[Union[str, int]]] = {
    "A": [16, "M", 32, "M", 64, 64, "M"],
    "B": [16, 16, "M", 32, 32, "M", 64, 64, "M"],
}


class VGG(nn.Module):
    def __init__(self, features, num_classes=10, init_weights=True, dropout=0.5):
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(
            nn.Linear(64 * 2 * 2, 128),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(128, 128),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(128, num_classes),
        )
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x


def make_layers(cfg, batch_norm=False):
    layers: List[nn.Module] = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        else:
            v = cast(int, v)
            conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            if batch_norm:
                layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            else:
                layers += [conv2d, nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)


def vgg(cfg, batch_norm, **kwargs):
    return VGG(make_layers(cfgs[cfg], batch_norm=batch_norm), **kwargs)


class ExponentialMovingAverage(torch.optim.swa_utils.AveragedModel):
    """Maintains moving averages of model parameters using an exponential decay.
    ``ema_avg = decay * avg_model_param + (1 - decay) * model_param``"""

    def __init__(self, model, decay, device="cpu"):
        def ema_avg(avg_model_param, model_param, num_averaged):
            return decay * avg_model_param + (1 - decay) * model_param

        super().__init__(model, device, ema_avg, use_buffers=True)


# ------------------------------------------------------------------------------------------------ utils


def is_dist_avail_and_initialized():
    if not dist.is_available():
        return False
    if not dist.is_initialized():
        return False
    return True


def reduce_across_processes(val):
    if not is_dist_avail_and_initialized():
        # nothing to sync, but we still convert to tensor for consistency with the distributed case.
        return torch.tensor(val)
    t = torch.tensor(val, device="cuda")
    dist.barrier()
    dist.all_reduce(t)
    return t


class SmoothedValue:
    """Track a series of values and provide access to smoothed values over a window or the global series
    average."""

    def __init__(self, window_size=20, fmt=None):
        if fmt is None:
            fmt = "{median:.4f} ({global_avg:.4f})"
        self.deque = deque(maxlen=window_size)
        self.total = 0.0
        self.count = 0
        self.fmt = fmt

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    def synchronize_between_processes(self):
        t = reduce_across_processes([self.count, self.total])
        t = t.tolist()
        self.count = int(t[0])
        self.total = t[1]

    @property
    def median(self):
        d = torch.tensor(list(self.deque))
        return d.median().item()

    @property
    def avg(self):
        d = torch.tensor(list(self.deque), dtype=torch.float32)
        return d.mean().item()

    @property
    def global_avg(self):
        return self.total / self.count

    @property
    def max(self):
        return max(self.deque)

    @property
    def value(self):
        return self.deque[-1]

    def __str__(self):
        return self.fmt.format(median=self.median, avg=self.avg, global_avg=self.global_avg, max=self.max,
                               value=self.value)


class MetricLogger:
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v)

    def __getattr__(self, attr):
        if attr in self.meters:
            return self.meters[attr]
        if attr in self.__dict__:
            return self.__dict__[attr]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")

    def __str__(self):
        loss_str = []
        for name, meter in self.meters.items():
            loss_str.append(f"{name}: {str(meter)}")
        return self.delimiter.join(loss_str)

    def synchronize_between_processes(self):
        for meter in self.meters.values():
            meter.synchronize_between_processes()

    def add_meter(self, name, meter):
        self.meters[name] = meter

    def log_every(self, iterable, print_freq, header=None):
        i = 0
        if not header:
            header = ""
        start_time = time.time()
        end = time.time()
        iter_time = SmoothedValue(fmt="{avg:.4f}")
        data_time = SmoothedValue(fmt="{avg:.4f}")
        space_fmt = ":" + str(len(str(len(iterable)))) + "d"
        parts = [header, "[{0" + space_fmt + "}/{1}]", "eta: {eta}", "{meters}", "time: {time}", "data: {data}"]
        if torch.cuda.is_available():
            parts.append("max mem: {memory:.0f}")
        log_msg = self.delimiter.join(parts)
        MB = 1024.0 * 1024.0
        for obj in iterable:
            data_time.update(time.time() - end)
            yield obj
            iter_time.update(time.time() - end)
            if i % print_freq == 0:
                eta_seconds = iter_time.global_avg * (len(iterable) - i)
                eta_string = str(datetime.timedelta(seconds=int(eta_seconds)))
                memory = torch.cuda.max_memory_allocated() / MB if torch.cuda.is_available() else 0
                print(log_msg.format(i, len(iterable), eta=eta_string, meters=str(self), time=str(iter_time),
                                             data=str(data_time), memory=memory))
            i += 1
            end = time.time()
        total_time = time.time() - start_time
        total_time_str = str(datetime.timedelta(seconds=int(total_time)))
        print(f"{header} Total time: {total_time_str}")


class Summary(Enum):
    NONE = 0
    AVERAGE = 1
    SUM = 2
    COUNT = 3


class AverageMeter:
    """Computes and stores the average and current value"""

    def __init__(self, name, fmt=":f", summary_type=Summary.AVERAGE):
        self.name = name
        self.fmt = fmt
        self.summary_type = summary_type
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)

    def summary(self):
        fmtstr = ""
        if self.summary_type is Summary.NONE:
            fmtstr = ""
        elif self.summary_type is Summary.AVERAGE:
            fmtstr = "{name} {avg:.3f}"
        elif self.summary_type is Summary.SUM:
            fmtstr = "{name} {sum:.3f}"
        elif self.summary_type is Summary.COUNT:
            fmtstr = "{name} {count:.3f}"
        else:
            raise ValueError("invalid summary type %r" % self.summary_type)
        return fmtstr.format(**self.__dict__)


class ProgressMeter:
    def __init__(self, num_batches, meters, prefix=""):
        self.batch_fmtstr = self._get_batch_fmtstr(num_batches)
        self.meters = meters
        self.prefix = prefix

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print("\t".join(entries))

    def display_summary(self):
        entries = [" *"]
        entries += [meter.summary() for meter in self.meters]
        print(" ".join(entries))

    def _get_batch_fmtstr(self, num_batches):
        num_digits = len(str(num_batches // 1))
        fmt = "{:" + str(num_digits) + "d}"
        return "[" + fmt + "/" + fmt.format(num_batches) + "]"


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.inference_mode():
        maxk = max(topk)
        batch_size = target.size(0)
        if target.ndim == 2:
            target = target.max(dim=1)[1]

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target[None])

        res = []
        for k in topk:
            correct_k = correct[:k].flatten().sum(dtype=torch.float32)
            res.append(correct_k * (100.0 / batch_size))
        return res


def set_weight_decay(model, weight_decay, norm_weight_decay=None, norm_classes=None, custom_keys_weight_decay=None):
    if not norm_classes:
        norm_classes = [
            nn.modules.batchnorm._BatchNorm,
            nn.LayerNorm,
            nn.GroupNorm,
            nn.modules.instancenorm._InstanceNorm,
            nn.LocalResponseNorm,
        ]
    norm_classes = tuple(norm_classes)

    params = {"other": [], "norm": []}
    params_weight_decay = {"other": weight_decay, "norm": norm_weight_decay}
    custom_keys = []
    if custom_keys_weight_decay is not None:
        for key, weight_decay in custom_keys_weight_decay:
            params[key] = []
            params_weight_decay[key] = weight_decay
            custom_keys.append(key)

    def _add_params(module, prefix=""):
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            is_custom_key = False
            for key in custom_keys:
                target_name = f"{prefix}.{name}" if prefix != "" and "." in key else name
                if key == target_name:
                    params[key].append(p)
                    is_custom_key = True
                    break
            if not is_custom_key:
                if norm_weight_decay is not None and isinstance(module, norm_classes):
                    params["norm"].append(p)
                else:
                    params["other"].append(p)

        for child_name, child_module in module.named_children():
            child_prefix = f"{prefix}.{child_name}" if prefix != "" else child_name
            _add_params(child_module, prefix=child_prefix)

    _add_params(model)

    param_groups = []
    for key in params:
        if len(params[key]) > 0:
            param_groups.append({"params": params[key], "weight_decay": params_weight_decay[key]})
    return param_groups


# ------------------------------------------------------------------------------------------------ data


class SyntheticImages(Dataset):
    """Ten classes of cosine patterns with per-channel gains under noise: (3, size, size) float images."""

    def __init__(self, n, size=16, num_classes=10, seed=0, train=True):
        rs = np.random.RandomState(seed)
        grid = np.linspace(0, 2 * np.pi, size)
        protos = np.stack([np.cos(np.add.outer((c % 4 + 1) * grid, (c // 4 + 1) * grid))[None]
                           * rs.uniform(0.5, 1.5, (3, 1, 1)) for c in range(num_classes)])
        rs = np.random.RandomState(seed + (0 if train else 1000))
        self.labels = rs.randint(0, num_classes, n)
        self.images = (protos[self.labels] + 0.5 * rs.randn(n, 3, size, size)).astype(np.float32)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return torch.from_numpy(self.images[index]), int(self.labels[index])


class RandomMixup:
    """Mixes each batch with itself rolled by one, targets as one-hot probabilities; the weight is drawn by NumPy
    so that two frameworks see the same batches."""

    def __init__(self, num_classes, p=0.5, alpha=1.0, seed=0):
        self.num_classes, self.p, self.alpha = num_classes, p, alpha
        self.rs = np.random.RandomState(seed)

    def __call__(self, batch, target):
        if target.ndim != 1:
            raise ValueError(f"Target ndim should be 1. Got {target.ndim}")
        if not batch.is_floating_point():
            raise TypeError(f"Batch dtype should be a float tensor. Got {batch.dtype}.")
        batch = batch.clone()
        target = F.one_hot(target, num_classes=self.num_classes).to(dtype=batch.dtype)
        if self.rs.rand() >= self.p:
            return batch, target
        batch_rolled = batch.roll(1, 0)
        target_rolled = target.roll(1, 0)
        lambda_param = float(self.rs.beta(self.alpha, self.alpha))
        batch_rolled.mul_(1.0 - lambda_param)
        batch.mul_(lambda_param).add_(batch_rolled)
        target_rolled.mul_(1.0 - lambda_param)
        target.mul_(lambda_param).add_(target_rolled)
        return batch, target


def load_data(args):
    dataset = SyntheticImages(args.train_size, num_classes=args.num_classes, seed=args.seed)
    dataset_test = SyntheticImages(args.test_size, num_classes=args.num_classes, seed=args.seed, train=False)
    if args.no_shuffle:
        train_sampler = SequentialSampler(dataset)
    else:
        train_sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(args.seed))
    test_sampler = SequentialSampler(dataset_test)
    return dataset, dataset_test, train_sampler, test_sampler


# ------------------------------------------------------------------------------------------------ training


def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, losses, model_ema=None,
                    scaler=None):
    model.train()
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter("lr", SmoothedValue(window_size=1, fmt="{value}"))
    metric_logger.add_meter("img/s", SmoothedValue(window_size=10, fmt="{value}"))

    header = f"Epoch: [{epoch}]"
    for i, (image, target) in enumerate(metric_logger.log_every(data_loader, args.print_freq, header)):
        start_time = time.time()
        image, target = image.to(device), target.to(device)
        with torch.autocast(device.type, enabled=scaler is not None):
            output = model(image)
            loss = criterion(output, target)

        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            if args.clip_grad_norm is not None:
                # we should unscale the gradients of optimizer's assigned params if do gradient clipping
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            if args.clip_grad_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
            optimizer.step()

        if model_ema and i % args.model_ema_steps == 0:
            model_ema.update_parameters(model)
            if epoch < args.lr_warmup_epochs:
                # Reset ema buffer to keep copying weights during warmup period
                model_ema.n_averaged.fill_(0)

        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        batch_size = image.shape[0]
        metric_logger.update(loss=loss.item(), lr=optimizer.param_groups[0]["lr"])
        metric_logger.meters["acc1"].update(acc1.item(), n=batch_size)
        metric_logger.meters["acc5"].update(acc5.item(), n=batch_size)
        metric_logger.meters["img/s"].update(batch_size / max(time.time() - start_time, 1e-9))
        losses.append(loss.item())


def evaluate(model, criterion, data_loader, device, print_freq=100, log_suffix=""):
    model.eval()
    metric_logger = MetricLogger(delimiter="  ")
    header = f"Test: {log_suffix}"

    num_processed_samples = 0
    with torch.inference_mode():
        for image, target in metric_logger.log_every(data_loader, print_freq, header):
            image = image.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            output = model(image)
            loss = criterion(output, target)

            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            # FIXME need to take into account that the datasets could have been padded in distributed setup
            batch_size = image.shape[0]
            metric_logger.update(loss=loss.item())
            metric_logger.meters["acc1"].update(acc1.item(), n=batch_size)
            metric_logger.meters["acc5"].update(acc5.item(), n=batch_size)
            num_processed_samples += batch_size
    # gather the stats from all processes

    num_processed_samples = reduce_across_processes(num_processed_samples)
    if (
        hasattr(data_loader.dataset, "__len__")
        and len(data_loader.dataset) != num_processed_samples
        and dist.get_rank() == 0
    ):
        warnings.warn(
            f"It looks like the dataset has {len(data_loader.dataset)} samples, but {num_processed_samples} "
            "samples were used for the validation, which might bias the results."
        )

    metric_logger.synchronize_between_processes()

    print(f"{header} Acc@1 {metric_logger.acc1.global_avg:.3f} Acc@5 {metric_logger.acc5.global_avg:.3f}")
    return metric_logger.acc1.global_avg


def validate(val_loader, model, criterion, device):
    """The ImageNet example's validation: meters fed 0-dim tensors; returns the top-1 average (a tensor)."""

    def run_validate(loader, base_progress=0):
        with torch.no_grad():
            end = time.time()
            for i, (images, target) in enumerate(loader):
                i = base_progress + i
                images = images.to(device, non_blocking=True)
                target = target.to(device, non_blocking=True)

                # compute output
                output = model(images)
                loss = criterion(output, target)

                # measure accuracy and record loss
                acc1, acc5 = accuracy(output, target, topk=(1, 5))
                losses.update(loss.item(), images.size(0))
                top1.update(acc1, images.size(0))
                top5.update(acc5, images.size(0))

                # measure elapsed time
                batch_time.update(time.time() - end)
                end = time.time()

                if i % 10 == 0:
                    progress.display(i + 1)

    batch_time = AverageMeter("Time", ":6.3f", Summary.NONE)
    losses = AverageMeter("Loss", ":.4e", Summary.NONE)
    top1 = AverageMeter("Acc@1", ":6.2f", Summary.AVERAGE)
    top5 = AverageMeter("Acc@5", ":6.2f", Summary.AVERAGE)
    progress = ProgressMeter(len(val_loader), [batch_time, losses, top1, top5], prefix="Test: ")

    # switch to evaluate mode
    model.eval()
    run_validate(val_loader)
    progress.display_summary()
    return top1.avg


def save_checkpoint(state, is_best, filename):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, os.path.join(os.path.dirname(filename), "model_best.pth.tar"))


def build(args, device):
    """The model, its EMA, the optimizer, the LR schedule and the scaler, as the reference script builds them."""
    model = vgg(args.cfg, batch_norm=True, num_classes=args.num_classes, dropout=args.dropout).to(device)
    custom_keys_weight_decay = []
    if args.bias_weight_decay is not None:
        custom_keys_weight_decay.append(("bias", args.bias_weight_decay))
    parameters = set_weight_decay(
        model,
        args.weight_decay,
        norm_weight_decay=args.norm_weight_decay,
        custom_keys_weight_decay=custom_keys_weight_decay if len(custom_keys_weight_decay) > 0 else None,
    )

    opt_name = args.opt.lower()
    if opt_name.startswith("sgd"):
        optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay,
                                    nesterov="nesterov" in opt_name)
    elif opt_name == "rmsprop":
        optimizer = torch.optim.RMSprop(parameters, lr=args.lr, momentum=args.momentum,
                                        weight_decay=args.weight_decay, eps=0.0316, alpha=0.9)
    elif opt_name == "adamw":
        optimizer = torch.optim.AdamW(parameters, lr=args.lr, weight_decay=args.weight_decay)
    else:
        raise RuntimeError(f"Invalid optimizer {args.opt}. Only SGD, RMSprop and AdamW are supported.")

    scaler = torch.amp.GradScaler(device.type) if args.amp else None

    args.lr_scheduler = args.lr_scheduler.lower()
    if args.lr_scheduler == "steplr":
        main_lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_step_size,
                                                            gamma=args.lr_gamma)
    elif args.lr_scheduler == "cosineannealinglr":
        main_lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=max(1, args.epochs - args.lr_warmup_epochs), eta_min=args.lr_min)
    elif args.lr_scheduler == "exponentiallr":
        main_lr_scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=args.lr_gamma)
    else:
        raise RuntimeError(f"Invalid lr scheduler '{args.lr_scheduler}'.")

    if args.lr_warmup_epochs > 0:
        if args.lr_warmup_method == "linear":
            warmup_lr_scheduler = torch.optim.lr_scheduler.LinearLR(
                optimizer, start_factor=args.lr_warmup_decay, total_iters=args.lr_warmup_epochs)
        elif args.lr_warmup_method == "constant":
            warmup_lr_scheduler = torch.optim.lr_scheduler.ConstantLR(
                optimizer, factor=args.lr_warmup_decay, total_iters=args.lr_warmup_epochs)
        else:
            raise RuntimeError(f"Invalid warmup lr method '{args.lr_warmup_method}'.")
        lr_scheduler = torch.optim.lr_scheduler.SequentialLR(
            optimizer, schedulers=[warmup_lr_scheduler, main_lr_scheduler], milestones=[args.lr_warmup_epochs])
    else:
        lr_scheduler = main_lr_scheduler

    model_ema = None
    if args.model_ema:
        # Decay adjustment that aims to keep the decay independent of other hyper-parameters originally proposed
        # at: https://github.com/facebookresearch/pycls/blob/f8cd9627/pycls/core/net.py#L123
        adjust = args.batch_size * args.model_ema_steps / args.epochs
        alpha = 1.0 - args.model_ema_decay
        alpha = min(1.0, alpha * adjust)
        model_ema = ExponentialMovingAverage(model, device=device, decay=1.0 - alpha)
    return model, model_ema, optimizer, lr_scheduler, scaler


def train(args, device, losses, init=None):
    """One run of the reference script's ``main``: build, resume if asked, train epochs up to ``args.stop_epoch``
    saving a checkpoint after each."""
    dataset, dataset_test, train_sampler, test_sampler = load_data(args)
    mixup = RandomMixup(args.num_classes, p=1.0, alpha=args.mixup_alpha, seed=args.seed) if args.mixup_alpha > 0 \
        else None
    collate_fn = None
    if mixup is not None:
        collate_fn = lambda batch: mixup(*default_collate(batch))  # noqa: E731
    data_loader = DataLoader(dataset, batch_size=args.batch_size, sampler=train_sampler, num_workers=0,
                             pin_memory=True, collate_fn=collate_fn)
    data_loader_test = DataLoader(dataset_test, batch_size=args.batch_size, sampler=test_sampler, num_workers=0,
                                  pin_memory=True)

    model, model_ema, optimizer, lr_scheduler, scaler = build(args, device)
    if init is not None:
        init("model", dict(model.named_parameters()))
    model_without_ddp = model
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing).to(device)
    best_acc1 = 0

    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu", weights_only=False)
        model_without_ddp.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        lr_scheduler.load_state_dict(checkpoint["lr_scheduler"])
        args.start_epoch = checkpoint["epoch"] + 1
        best_acc1 = checkpoint["best_acc1"]
        if model_ema:
            model_ema.load_state_dict(checkpoint["model_ema"])
        if scaler:
            scaler.load_state_dict(checkpoint["scaler"])
        assert checkpoint["args"].cfg == args.cfg

    for epoch in range(args.start_epoch, args.stop_epoch):
        train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, losses, model_ema, scaler)
        lr_scheduler.step()
        evaluate(model, criterion, data_loader_test, device=device)
        if model_ema:
            evaluate(model_ema, criterion, data_loader_test, device=device, log_suffix="EMA")
        acc1 = validate(data_loader_test, model, criterion, device)
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        checkpoint = {
            "model": model_without_ddp.state_dict(),
            "optimizer": optimizer.state_dict(),
            "lr_scheduler": lr_scheduler.state_dict(),
            "epoch": epoch,
            "args": args,
            "best_acc1": best_acc1,
        }
        if model_ema:
            checkpoint["model_ema"] = model_ema.state_dict()
        if scaler:
            checkpoint["scaler"] = scaler.state_dict()
        torch.save(checkpoint, os.path.join(args.output_dir, f"model_{epoch}.pth"))
        save_checkpoint(checkpoint, is_best, os.path.join(args.output_dir, "checkpoint.pth"))
    return best_acc1


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=24, help="training steps in all (epochs of train-size images)")
    p.add_argument("--cfg", choices=sorted(cfgs), default="A")
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--train-size", type=int, default=64)
    p.add_argument("--test-size", type=int, default=32)
    p.add_argument("--opt", default="sgd", help="sgd, sgd_nesterov, rmsprop or adamw")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--norm-weight-decay", type=float, default=0.0)
    p.add_argument("--bias-weight-decay", type=float, default=0.0)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--mixup-alpha", type=float, default=0.2, help="0: no mixup")
    p.add_argument("--lr-scheduler", default="cosineannealinglr")
    p.add_argument("--lr-warmup-epochs", type=int, default=1)
    p.add_argument("--lr-warmup-method", default="linear")
    p.add_argument("--lr-warmup-decay", type=float, default=0.1)
    p.add_argument("--lr-step-size", type=int, default=2)
    p.add_argument("--lr-gamma", type=float, default=0.5)
    p.add_argument("--lr-min", type=float, default=0.0)
    p.add_argument("--clip-grad-norm", type=float, default=2.0)
    p.add_argument("--model-ema", action="store_true")
    p.add_argument("--model-ema-steps", type=int, default=2)
    p.add_argument("--model-ema-decay", type=float, default=0.99)
    p.add_argument("--amp", action="store_true", help="autocast and a GradScaler")
    p.add_argument("--dropout", type=float, default=0.5, help="the classifier's dropout (0 for parity runs)")
    p.add_argument("--no-shuffle", action="store_true", help="a SequentialSampler for training too")
    p.add_argument("--resume-epoch", type=int, default=2, help="stop after this many epochs, then resume")
    p.add_argument("--use-deterministic-algorithms", action="store_true")
    p.add_argument("--print-freq", type=int, default=2)
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.use_deterministic_algorithms:
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True)
    else:
        torch.backends.cudnn.benchmark = True
    args.epochs = math.ceil(args.steps / math.ceil(args.train_size / args.batch_size))
    losses = []
    with tempfile.TemporaryDirectory() as output_dir:
        args.output_dir = output_dir
        first = copy.copy(args)
        first.start_epoch, first.stop_epoch, first.resume = 0, min(args.resume_epoch, args.epochs), ""
        train(first, device, losses, init=init)
        if args.resume_epoch < args.epochs:  # a fresh process: everything rebuilt, then loaded from the checkpoint
            second = copy.copy(args)
            second.start_epoch, second.stop_epoch = 0, args.epochs
            second.resume = os.path.join(output_dir, "checkpoint.pth")
            best_acc1 = train(second, device, losses)
            print(f"best Acc@1 {best_acc1:.2f}")
    return losses[:args.steps]


if __name__ == "__main__":
    print(main())
