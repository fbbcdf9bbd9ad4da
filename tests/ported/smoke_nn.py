"""PyTorch-API snippets for the torch.nn, torch.optim, torch.utils.data, torch.cuda, torch.backends and torch.amp
names of tests/data/torch_names.txt: ``nn_table(m)`` maps each name to a small call of it as training code writes
it, through the module ``m`` (``torch`` or ``minifused``)."""
import math

from .smoke_tensor import Lazy, ok


def nn_table(m):
    """{torch name: a call of it through ``m``} for the modules, losses, optimizers, schedulers and data."""
    nn, F, init, optim = Lazy(m, "nn"), Lazy(m, "nn.functional"), Lazy(m, "nn.init"), Lazy(m, "optim")
    sched, data, cuda = Lazy(m, "optim.lr_scheduler"), Lazy(m, "utils.data"), Lazy(m, "cuda")
    utils = Lazy(m, "nn.utils")
    dist = Lazy(m, "distributions")

    def r(*shape):
        return m.randn(*shape)

    def idx(values):
        return m.tensor(values)  # int64, as PyTorch makes it from Python ints

    def if_cuda(fn):  # GPU-only calls run where a GPU is
        return fn() if cuda.is_available() else None

    def is_shape(t, *shape):
        return ok(tuple(t.shape) == shape, f"shape {tuple(t.shape)}, expected {shape}")

    def close(a, b):
        return ok(math.isclose(a, b, rel_tol=1e-6), f"{a} != {b}")

    def labels():  # targets of a (4, 5) batch of logits
        return idx([0, 1, 2, 4])

    def probs(*shape):
        return F.softmax(r(*shape), dim=1)

    def mlp():
        return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))

    def trained(fn):  # a model whose parameters carry gradients, handed to fn
        model = mlp()
        model(r(5, 3)).pow(2).sum().backward()
        return fn(model)

    def custom_module():
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)

            def forward(self, x):
                return F.relu(self.fc(x))

        net = Net()
        ok(len(list(net.parameters())) == 2)
        return net(r(4, 3))

    def register_buffer():
        layer = nn.Linear(2, 2)
        layer.register_buffer("running", m.zeros(2))
        ok("running" in layer.state_dict())

    def apply():
        def init_weights(mod):
            if isinstance(mod, nn.Linear):
                init.zeros_(mod.bias)
        model = mlp().apply(init_weights)
        ok(model[0].bias.tolist() == [0.0] * 4)

    def load_state_dict():
        a, b = mlp(), mlp()
        b.load_state_dict(a.state_dict())
        ok(b[0].weight.tolist() == a[0].weight.tolist())

    def dataset():
        class Squares(data.Dataset):
            def __len__(self):
                return 5

            def __getitem__(self, i):
                return m.tensor([float(i)]), i * i

        batches = list(data.DataLoader(Squares(), batch_size=2))
        ok(len(batches) == 3 and batches[0][1].tolist() == [0, 1])

    def pairs():
        return data.TensorDataset(r(6, 2), m.arange(6))

    def stepped(make_opt):
        p = nn.Parameter(r(3))
        opt = make_opt([p])
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
        return opt

    def sgd(params):
        return optim.SGD(params, lr=0.1, momentum=0.9)

    def optimizer_state():
        opt = stepped(sgd)
        again = sgd(opt.param_groups[0]["params"])
        again.load_state_dict(opt.state_dict())
        ok(again.state_dict()["param_groups"][0]["lr"] == 0.1)

    def scheduled(make, metric=None):
        opt = stepped(lambda params: optim.SGD(params, lr=0.1))
        s = make(opt)
        for _ in range(3):
            opt.step()
            s.step() if metric is None else s.step(metric)
        return opt.param_groups[0]["lr"]

    def scheduler_state():
        opt = stepped(sgd)
        s = sched.StepLR(opt, step_size=1, gamma=0.5)
        opt.step()
        s.step()
        ok(math.isclose(s.get_last_lr()[0], 0.05) and s.state_dict()["last_epoch"] == 1)

    def clipped_scaled_step():  # PyTorch's recipe for clipping with a GradScaler
        p = nn.Parameter(r(3))
        opt, scaler = optim.SGD([p], lr=0.1), m.amp.GradScaler("cpu", init_scale=4.0)
        scaler.scale((p * p).sum()).backward()
        scaler.unscale_(opt)
        ok(math.isclose(p.grad.norm().item(), 2 * p.norm().item(), rel_tol=1e-5))
        utils.clip_grad_norm_([p], 1.0)
        scaler.step(opt)
        scaler.update()

    def ema():
        model = mlp()
        avg = m.optim.swa_utils.AveragedModel(model, multi_avg_fn=m.optim.swa_utils.get_ema_multi_avg_fn(0.9))
        avg.update_parameters(model)
        ok(avg.n_averaged.item() == 1 and avg(r(2, 3)).shape == (2, 2))

    def update_bn():
        model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
        m.optim.swa_utils.update_bn([r(8, 3), r(8, 3)], model)
        ok(model[1].num_batches_tracked.item() == 2)

    def stn_sample():
        theta = m.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
        grid = F.affine_grid(theta, (1, 1, 3, 4), align_corners=False)
        x = r(1, 1, 3, 4)
        is_shape(grid, 1, 3, 4, 2)
        ok(F.grid_sample(x, grid, align_corners=False).sub(x).abs().max().item() < 1e-5)  # the identity map

    def timed():  # a benchmark's timing, with CUDA events
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        x = m.randn(64, 64, device="cuda")
        start.record()
        x @ x
        end.record()
        end.synchronize()
        ok(start.elapsed_time(end) >= 0)

    def on_side_stream():
        side = cuda.Stream()
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            y = m.ones(8, device="cuda") * 2
        cuda.current_stream().wait_stream(side)
        ok(y.sum().item() == 16)

    def causal(n):
        return nn.Transformer.generate_square_subsequent_mask(n)

    def self_attention():
        x = r(5, 2, 8)
        out, weights = nn.MultiheadAttention(8, 2)(x, x, x, key_padding_mask=m.zeros(2, 5, dtype=m.bool))
        is_shape(out, 5, 2, 8)
        is_shape(weights, 2, 5, 5)

    def switch(ns, name):
        old = getattr(ns, name)
        setattr(ns, name, True)
        setattr(ns, name, old)

    return {
        # torch.nn: modules and containers
        "torch.nn.Module": custom_module,
        "torch.nn.Parameter": lambda: ok(nn.Parameter(m.zeros(3)).requires_grad),
        "torch.nn.Sequential": lambda: ok(mlp()(r(5, 3)).shape == (5, 2)),
        "torch.nn.ModuleList": lambda: ok(len(nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])) == 3),
        "torch.nn.ModuleDict": lambda: nn.ModuleDict({"head": nn.Linear(2, 2)})["head"](r(1, 2)),
        "torch.nn.Identity": lambda: nn.Identity()(r(2)),
        "torch.nn.Flatten": lambda: ok(nn.Flatten()(r(2, 3, 4)).shape == (2, 12)),
        "torch.nn.Unflatten": lambda: ok(nn.Unflatten(1, (2, 3))(r(4, 6)).shape == (4, 2, 3)),
        "torch.nn.Module.forward": lambda: mlp().forward(r(5, 3)),
        "torch.nn.Module.parameters": lambda: ok(len(list(mlp().parameters())) == 4),
        "torch.nn.Module.named_parameters": lambda: ok("0.weight" in dict(mlp().named_parameters())),
        "torch.nn.Module.children": lambda: ok(len(list(mlp().children())) == 3),
        "torch.nn.Module.named_children": lambda: ok([n for n, _ in mlp().named_children()] == ["0", "1", "2"]),
        "torch.nn.Module.modules": lambda: ok(len(list(mlp().modules())) == 4),
        "torch.nn.Module.named_modules": lambda: ok("2" in dict(mlp().named_modules())),
        "torch.nn.Module.register_buffer": register_buffer,
        "torch.nn.Module.add_module": lambda: mlp().add_module("extra", nn.ReLU()),
        "torch.nn.Module.apply": apply,
        "torch.nn.Module.train": lambda: ok(mlp().train().training),
        "torch.nn.Module.eval": lambda: ok(not mlp().eval().training),
        "torch.nn.Module.zero_grad": lambda: trained(lambda model: model.zero_grad()),
        "torch.nn.Module.requires_grad_":
            lambda: ok(not any(p.requires_grad for p in mlp().requires_grad_(False).parameters())),
        "torch.nn.Module.to": lambda: ok(mlp().to(m.float64)[0].weight.dtype == m.float64),
        "torch.nn.Module.cpu": lambda: mlp().cpu(),
        "torch.nn.Module.cuda": lambda: if_cuda(lambda: mlp().cuda()),
        "torch.nn.Module.float": lambda: mlp().float(),
        "torch.nn.Module.half": lambda: ok(mlp().half()[0].weight.dtype == m.float16),
        "torch.nn.Module.state_dict":
            lambda: ok(list(mlp().state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]),
        "torch.nn.Module.load_state_dict": load_state_dict,
        # torch.nn: layers
        "torch.nn.Linear": lambda: ok(nn.Linear(3, 2)(r(4, 3)).shape == (4, 2)),
        "torch.nn.Conv2d": lambda: ok(nn.Conv2d(1, 4, 3, padding=1)(r(2, 1, 8, 8)).shape == (2, 4, 8, 8)),
        "torch.nn.ConvTranspose2d":
            lambda: is_shape(nn.ConvTranspose2d(4, 2, 4, stride=2, padding=1)(r(1, 4, 5, 5)), 1, 2, 10, 10),
        "torch.nn.MaxPool2d": lambda: ok(nn.MaxPool2d(2)(r(1, 2, 4, 4)).shape == (1, 2, 2, 2)),
        "torch.nn.AvgPool2d": lambda: nn.AvgPool2d(2, stride=2)(r(1, 2, 4, 4)),
        "torch.nn.AdaptiveAvgPool2d": lambda: ok(nn.AdaptiveAvgPool2d(1)(r(2, 3, 5, 5)).shape == (2, 3, 1, 1)),
        "torch.nn.BatchNorm1d": lambda: nn.BatchNorm1d(3)(r(4, 3)),
        "torch.nn.BatchNorm2d": lambda: nn.BatchNorm2d(3)(r(2, 3, 4, 4)),
        "torch.nn.LayerNorm": lambda: nn.LayerNorm(5)(r(2, 5)),
        "torch.nn.GroupNorm": lambda: nn.GroupNorm(2, 4)(r(2, 4, 3, 3)),
        "torch.nn.Dropout": lambda: nn.Dropout(0.5)(r(4, 4)),
        "torch.nn.Dropout2d": lambda: nn.Dropout2d(0.5)(r(2, 3, 4, 4)),
        "torch.nn.Embedding": lambda: ok(nn.Embedding(10, 3)(idx([[1, 2], [4, 9]])).shape == (2, 2, 3)),
        "torch.nn.Upsample": lambda: is_shape(nn.Upsample(scale_factor=2, mode="nearest")(r(1, 2, 3, 3)), 1, 2, 6, 6),
        # torch.nn: activations
        "torch.nn.ReLU": lambda: nn.ReLU()(r(3)),
        "torch.nn.LeakyReLU": lambda: nn.LeakyReLU(0.2)(r(3)),
        "torch.nn.ELU": lambda: nn.ELU()(r(3)),
        "torch.nn.GELU": lambda: nn.GELU()(r(3)),
        "torch.nn.SiLU": lambda: nn.SiLU()(r(3)),
        "torch.nn.Sigmoid": lambda: nn.Sigmoid()(r(3)),
        "torch.nn.Tanh": lambda: nn.Tanh()(r(3)),
        "torch.nn.Softmax": lambda: nn.Softmax(dim=1)(r(2, 3)),
        "torch.nn.LogSoftmax": lambda: nn.LogSoftmax(dim=1)(r(2, 3)),
        "torch.nn.Softplus": lambda: nn.Softplus()(r(3)),
        # torch.nn: losses
        "torch.nn.CrossEntropyLoss": lambda: nn.CrossEntropyLoss()(r(4, 5), labels()),
        "torch.nn.NLLLoss": lambda: nn.NLLLoss()(F.log_softmax(r(4, 5), dim=1), labels()),
        "torch.nn.MSELoss": lambda: nn.MSELoss()(r(3), r(3)),
        "torch.nn.L1Loss": lambda: nn.L1Loss()(r(3), r(3)),
        "torch.nn.SmoothL1Loss": lambda: nn.SmoothL1Loss()(r(3), r(3)),
        "torch.nn.BCELoss": lambda: nn.BCELoss()(m.rand(4), m.rand(4)),
        "torch.nn.BCEWithLogitsLoss": lambda: nn.BCEWithLogitsLoss()(r(4), m.rand(4)),
        "torch.nn.KLDivLoss": lambda: nn.KLDivLoss(reduction="batchmean")(F.log_softmax(r(2, 3), dim=1), probs(2, 3)),
        # torch.nn.functional
        "torch.nn.functional.relu": lambda: F.relu(r(3)),
        "torch.nn.functional.leaky_relu": lambda: F.leaky_relu(r(3), 0.1),
        "torch.nn.functional.elu": lambda: F.elu(r(3)),
        "torch.nn.functional.gelu": lambda: F.gelu(r(3)),
        "torch.nn.functional.silu": lambda: F.silu(r(3)),
        "torch.nn.functional.sigmoid": lambda: F.sigmoid(r(3)),
        "torch.nn.functional.tanh": lambda: F.tanh(r(3)),
        "torch.nn.functional.softplus": lambda: F.softplus(r(3)),
        "torch.nn.functional.softmax": lambda: F.softmax(r(2, 3), dim=1),
        "torch.nn.functional.log_softmax": lambda: F.log_softmax(r(2, 3), dim=1),
        "torch.nn.functional.dropout": lambda: F.dropout(r(4, 4), p=0.5, training=True),
        "torch.nn.functional.dropout2d": lambda: F.dropout2d(r(2, 3, 4, 4), 0.5),
        "torch.nn.functional.linear": lambda: F.linear(r(4, 3), r(2, 3), r(2)),
        "torch.nn.functional.conv2d": lambda: is_shape(F.conv2d(r(1, 2, 5, 5), r(3, 2, 3, 3), padding=1), 1, 3, 5, 5),
        "torch.nn.functional.conv_transpose2d":
            lambda: is_shape(F.conv_transpose2d(r(1, 3, 4, 4), r(3, 2, 3, 3), stride=2), 1, 2, 9, 9),
        "torch.nn.functional.max_pool2d": lambda: F.max_pool2d(r(1, 1, 4, 4), 2),
        "torch.nn.functional.avg_pool2d": lambda: F.avg_pool2d(r(1, 1, 4, 4), 2),
        "torch.nn.functional.adaptive_avg_pool2d":
            lambda: is_shape(F.adaptive_avg_pool2d(r(1, 2, 5, 5), (1, 1)), 1, 2, 1, 1),
        "torch.nn.functional.batch_norm": lambda: F.batch_norm(r(4, 3), m.zeros(3), m.ones(3), training=True),
        "torch.nn.functional.layer_norm": lambda: F.layer_norm(r(2, 5), (5,)),
        "torch.nn.functional.group_norm": lambda: F.group_norm(r(2, 4, 3, 3), 2),
        "torch.nn.functional.pad": lambda: ok(F.pad(r(1, 1, 3, 3), (1, 1, 2, 2)).shape == (1, 1, 7, 5)),
        "torch.nn.functional.interpolate":
            lambda: is_shape(F.interpolate(r(1, 1, 3, 3), scale_factor=2, mode="nearest"), 1, 1, 6, 6),
        "torch.nn.functional.one_hot":
            lambda: ok(F.one_hot(idx([0, 2, 1]), num_classes=3).tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]),
        "torch.nn.functional.normalize": lambda: F.normalize(r(2, 3), dim=1),
        "torch.nn.functional.cosine_similarity": lambda: F.cosine_similarity(r(2, 3), r(2, 3), dim=1),
        "torch.nn.functional.cross_entropy": lambda: F.cross_entropy(r(4, 5), labels()),
        "torch.nn.functional.nll_loss": lambda: F.nll_loss(F.log_softmax(r(4, 5), dim=1), labels(), reduction="sum"),
        "torch.nn.functional.mse_loss": lambda: F.mse_loss(r(3), r(3)),
        "torch.nn.functional.l1_loss": lambda: F.l1_loss(r(3), r(3)),
        "torch.nn.functional.smooth_l1_loss": lambda: F.smooth_l1_loss(r(3), r(3)),
        "torch.nn.functional.binary_cross_entropy": lambda: F.binary_cross_entropy(m.rand(4), m.rand(4)),
        "torch.nn.functional.binary_cross_entropy_with_logits":
            lambda: F.binary_cross_entropy_with_logits(r(4), m.rand(4)),
        "torch.nn.functional.kl_div":
            lambda: F.kl_div(F.log_softmax(r(2, 3), dim=1), probs(2, 3), reduction="batchmean"),
        # torch.nn.init and torch.nn.utils
        "torch.nn.init.calculate_gain": lambda: ok(math.isclose(init.calculate_gain("relu"), math.sqrt(2))),
        "torch.nn.init.uniform_": lambda: init.uniform_(m.empty(3, 4), -0.1, 0.1),
        "torch.nn.init.normal_": lambda: init.normal_(m.empty(3, 4), 0.0, 0.02),
        "torch.nn.init.constant_": lambda: init.constant_(m.empty(3), 0.5),
        "torch.nn.init.zeros_": lambda: init.zeros_(m.empty(3)),
        "torch.nn.init.ones_": lambda: init.ones_(m.empty(3)),
        "torch.nn.init.xavier_uniform_": lambda: init.xavier_uniform_(m.empty(3, 4)),
        "torch.nn.init.xavier_normal_": lambda: init.xavier_normal_(m.empty(3, 4)),
        "torch.nn.init.kaiming_uniform_": lambda: init.kaiming_uniform_(m.empty(3, 4), a=math.sqrt(5)),
        "torch.nn.init.kaiming_normal_":
            lambda: init.kaiming_normal_(m.empty(3, 4), mode="fan_out", nonlinearity="relu"),
        "torch.nn.utils.clip_grad_norm_":
            lambda: trained(lambda model: utils.clip_grad_norm_(model.parameters(), max_norm=1.0)),
        "torch.nn.utils.clip_grad_value_":
            lambda: trained(lambda model: utils.clip_grad_value_(model.parameters(), 0.5)),
        # torch.optim
        "torch.optim.Optimizer": lambda: ok(isinstance(sgd([nn.Parameter(r(2))]), optim.Optimizer)),
        "torch.optim.SGD": lambda: stepped(sgd),
        "torch.optim.Adam": lambda: stepped(lambda params: optim.Adam(params, lr=1e-3)),
        "torch.optim.AdamW": lambda: stepped(lambda params: optim.AdamW(params, lr=1e-3, weight_decay=0.01)),
        "torch.optim.RMSprop": lambda: stepped(lambda params: optim.RMSprop(params, lr=0.01)),
        "torch.optim.Adagrad": lambda: stepped(lambda params: optim.Adagrad(params, lr=0.01)),
        "torch.optim.Adadelta": lambda: stepped(lambda params: optim.Adadelta(params, lr=1.0)),
        "torch.optim.Adamax": lambda: stepped(lambda params: optim.Adamax(params, lr=2e-3)),
        "torch.optim.NAdam": lambda: stepped(lambda params: optim.NAdam(params, lr=2e-3)),
        "torch.optim.RAdam": lambda: stepped(lambda params: optim.RAdam(params, lr=1e-3)),
        "torch.optim.Optimizer.zero_grad": lambda: stepped(sgd).zero_grad(),
        "torch.optim.Optimizer.step": lambda: stepped(sgd).step(),
        "torch.optim.Optimizer.state_dict": optimizer_state,
        "torch.optim.Optimizer.load_state_dict": optimizer_state,
        # torch.optim.lr_scheduler
        "torch.optim.lr_scheduler.LRScheduler": lambda: ok(issubclass(sched.StepLR, sched.LRScheduler)),
        "torch.optim.lr_scheduler.StepLR":
            lambda: close(scheduled(lambda o: sched.StepLR(o, step_size=1, gamma=0.7)), 0.1 * 0.7 ** 3),
        "torch.optim.lr_scheduler.MultiStepLR":
            lambda: close(scheduled(lambda o: sched.MultiStepLR(o, milestones=[1, 2], gamma=0.1)), 1e-3),
        "torch.optim.lr_scheduler.ExponentialLR":
            lambda: close(scheduled(lambda o: sched.ExponentialLR(o, gamma=0.9)), 0.1 * 0.9 ** 3),
        "torch.optim.lr_scheduler.CosineAnnealingLR": lambda: scheduled(lambda o: sched.CosineAnnealingLR(o, T_max=10)),
        "torch.optim.lr_scheduler.CosineAnnealingWarmRestarts":
            lambda: scheduled(lambda o: sched.CosineAnnealingWarmRestarts(o, T_0=2)),
        "torch.optim.lr_scheduler.LambdaLR":
            lambda: close(scheduled(lambda o: sched.LambdaLR(o, lambda epoch: 0.5 ** epoch)), 0.1 / 8),
        "torch.optim.lr_scheduler.LinearLR":
            lambda: scheduled(lambda o: sched.LinearLR(o, start_factor=0.5, total_iters=4)),
        "torch.optim.lr_scheduler.OneCycleLR":
            lambda: scheduled(lambda o: sched.OneCycleLR(o, max_lr=0.1, total_steps=10)),
        "torch.optim.lr_scheduler.SequentialLR": lambda: scheduled(lambda o: sched.SequentialLR(
            o, [sched.LinearLR(o, start_factor=0.5, total_iters=2), sched.ExponentialLR(o, gamma=0.9)],
            milestones=[2])),
        "torch.optim.lr_scheduler.ReduceLROnPlateau":
            lambda: close(scheduled(lambda o: sched.ReduceLROnPlateau(o, patience=0), metric=1.0), 0.1 * 0.1 ** 2),
        "torch.optim.lr_scheduler.LRScheduler.step": scheduler_state,
        "torch.optim.lr_scheduler.LRScheduler.get_last_lr": scheduler_state,
        "torch.optim.lr_scheduler.LRScheduler.state_dict": scheduler_state,
        # torch.utils.data
        "torch.utils.data.Dataset": dataset,
        "torch.utils.data.TensorDataset": lambda: ok(len(pairs()) == 6 and pairs()[2][1].item() == 2),
        "torch.utils.data.DataLoader":
            lambda: ok([len(y) for _, y in data.DataLoader(pairs(), batch_size=4, shuffle=True)] == [4, 2]),
        "torch.utils.data.random_split":
            lambda: ok(sorted(len(part) for part in data.random_split(pairs(), [4, 2])) == [2, 4]),
        "torch.utils.data.Subset": lambda: ok(data.Subset(pairs(), [0, 3])[1][1].item() == 3),
        # torch.cuda, torch.backends, torch.amp
        "torch.cuda.is_available": lambda: ok(isinstance(cuda.is_available(), bool)),
        "torch.cuda.device_count": lambda: ok(cuda.device_count() >= 0),
        "torch.cuda.manual_seed": lambda: cuda.manual_seed(0),
        "torch.cuda.manual_seed_all": lambda: cuda.manual_seed_all(0),
        "torch.cuda.synchronize": lambda: if_cuda(lambda: cuda.synchronize()),
        "torch.cuda.empty_cache": lambda: cuda.empty_cache(),
        "torch.cuda.current_device": lambda: if_cuda(lambda: ok(cuda.current_device() >= 0)),
        "torch.cuda.get_device_name": lambda: if_cuda(lambda: ok(isinstance(cuda.get_device_name(0), str))),
        "torch.cuda.memory_allocated": lambda: if_cuda(lambda: ok(cuda.memory_allocated() >= 0)),
        "torch.cuda.max_memory_allocated": lambda: if_cuda(lambda: ok(cuda.max_memory_allocated() >= 0)),
        "torch.backends.cudnn.benchmark": lambda: switch(m.backends.cudnn, "benchmark"),
        "torch.backends.cudnn.deterministic": lambda: switch(m.backends.cudnn, "deterministic"),
        "torch.backends.cudnn.allow_tf32": lambda: switch(m.backends.cudnn, "allow_tf32"),
        "torch.backends.cuda.matmul.allow_tf32": lambda: switch(m.backends.cuda.matmul, "allow_tf32"),
        "torch.amp.GradScaler": lambda: m.amp.GradScaler().scale(r(2).sum()),
        "torch.GradScaler": lambda: ok(m.GradScaler("cpu", init_scale=4.0).scale(r(2).sum() * 0 + 1).item() == 4.0),
        "torch.amp.GradScaler.unscale_": clipped_scaled_step,
        "torch.cuda.Event": lambda: if_cuda(timed),
        "torch.cuda.Stream": lambda: if_cuda(on_side_stream),
        "torch.cuda.stream": lambda: if_cuda(on_side_stream),
        "torch.cuda.current_stream": lambda: if_cuda(lambda: cuda.current_stream().synchronize()),
        # further names of CNN training code
        "torch.optim.lr_scheduler.CyclicLR":
            lambda: close(scheduled(lambda o: sched.CyclicLR(o, 0.01, 0.1, step_size_up=2)), 0.055),
        "torch.optim.swa_utils.AveragedModel": ema,
        "torch.optim.swa_utils.get_ema_multi_avg_fn": ema,
        "torch.optim.swa_utils.update_bn": update_bn,
        "torch.utils.data.WeightedRandomSampler":
            lambda: ok(set(data.WeightedRandomSampler([0.0, 1.0, 0.0], 5)) == {1}),
        "torch.nn.MaxPool1d": lambda: is_shape(nn.MaxPool1d(2)(r(2, 3, 8)), 2, 3, 4),
        "torch.nn.functional.affine_grid": stn_sample,
        "torch.nn.functional.grid_sample": stn_sample,
        "torch.nn.utils.parametrizations.weight_norm": lambda: is_shape(
            m.nn.utils.parametrizations.weight_norm(nn.Linear(3, 2))(r(4, 3)), 4, 2),
        "torch.nn.utils.parametrizations.spectral_norm": lambda: is_shape(
            m.nn.utils.parametrizations.spectral_norm(nn.Conv2d(2, 4, 3))(r(1, 2, 5, 5)), 1, 4, 3, 3),
        "torch.nn.TripletMarginLoss": lambda: is_shape(nn.TripletMarginLoss()(r(4, 5), r(4, 5), r(4, 5))),
        # attention and Transformer layers (batch_first encoders: PyTorch warns about nested tensors otherwise)
        "torch.nn.MultiheadAttention": self_attention,
        "torch.nn.TransformerEncoderLayer": lambda: is_shape(nn.TransformerEncoderLayer(8, 2, 16)(r(5, 2, 8)), 5, 2, 8),
        "torch.nn.TransformerEncoder": lambda: is_shape(nn.TransformerEncoder(
            nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2)(r(2, 5, 8), is_causal=True,
                                                                       mask=causal(5)), 2, 5, 8),
        "torch.nn.TransformerDecoderLayer":
            lambda: is_shape(nn.TransformerDecoderLayer(8, 2, 16)(r(3, 2, 8), r(5, 2, 8)), 3, 2, 8),
        "torch.nn.TransformerDecoder": lambda: is_shape(nn.TransformerDecoder(
            nn.TransformerDecoderLayer(8, 2, 16), 2)(r(3, 2, 8), r(5, 2, 8), tgt_mask=causal(3)), 3, 2, 8),
        "torch.nn.Transformer": lambda: is_shape(nn.Transformer(8, 2, 1, 1, 16, batch_first=True)(
            r(2, 5, 8), r(2, 3, 8), tgt_mask=causal(3)), 2, 3, 8),
        "torch.nn.Transformer.generate_square_subsequent_mask":
            lambda: ok(causal(2).tolist() == [[0.0, -math.inf], [0.0, 0.0]]),
        "torch.nn.functional.scaled_dot_product_attention": lambda: is_shape(
            F.scaled_dot_product_attention(r(2, 4, 3, 8), r(2, 4, 5, 8), r(2, 4, 5, 8), is_causal=True), 2, 4, 3, 8),
        "torch.nn.functional.multi_head_attention_forward": lambda: is_shape(F.multi_head_attention_forward(
            *[r(3, 2, 8)] * 3, 8, 2, r(24, 8), r(24), None, None, False, 0.0, r(8, 8), r(8), need_weights=False)[0],
            3, 2, 8),
        # torch.distributions
        "torch.distributions.Normal": lambda: is_shape(dist.Normal(r(3), m.ones(3)).log_prob(r(3)), 3),
        "torch.distributions.Categorical": lambda: is_shape(dist.Categorical(logits=r(4, 5)).sample(), 4),
        "torch.distributions.Bernoulli": lambda: is_shape(dist.Bernoulli(logits=r(4)).entropy(), 4),
        "torch.distributions.Uniform": lambda: ok(bool((dist.Uniform(0.0, 2.0).sample((10,)) < 2).all())),
        "torch.distributions.MultivariateNormal":
            lambda: is_shape(dist.MultivariateNormal(m.zeros(3), m.eye(3)).rsample((2,)), 2, 3),
        "torch.distributions.Independent":
            lambda: is_shape(dist.Independent(dist.Normal(m.zeros(4, 3), 1.0), 1).log_prob(r(4, 3)), 4),
        "torch.distributions.kl_divergence":
            lambda: close(dist.kl_divergence(dist.Normal(0.0, 1.0), dist.Normal(1.0, 1.0)).item(), 0.5),
    }
