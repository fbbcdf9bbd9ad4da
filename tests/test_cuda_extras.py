"""torch.cuda's remaining everyday API on minifused.cuda: set_stream / StreamContext / ExternalStream, device_of,
init / is_initialized, is_tf32_supported, can_device_access_peer, the nvtx and profiler namespaces, and
make_graphed_callables (its argument checks here; its graphs, against the eager module, on the GPU)."""
import sys

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import backend, nn, optim

no_cuda = pytest.mark.skipif(backend.cuda_available(), reason="the behaviour without a CUDA device")


# ---------------------------------------------------------------- without a device
@no_cuda
def test_without_cuda_device_functions_raise_naming_themselves():
    c = mf.cuda
    for call, name in ((c.init, "init"), (lambda: c.can_device_access_peer(0, 1), "can_device_access_peer"),
                       (lambda: c.ExternalStream(1234), "ExternalStream"),
                       (c.profiler.start, "profiler.start"), (c.profiler.stop, "profiler.stop"),
                       (lambda: c.profiler.profile().__enter__(), "profiler.start")):
        with pytest.raises(RuntimeError, match=rf"minifused\.cuda\.{name}: no usable CUDA device"):
            call()
    assert c.is_initialized() is False and c.is_tf32_supported() is False


@no_cuda
def test_without_cuda_stream_contexts_are_no_ops():
    ctx = mf.cuda.stream(None)
    assert isinstance(ctx, mf.cuda.StreamContext) and ctx.stream is None
    with ctx as entered:
        assert entered is None
    assert mf.cuda.set_stream(None) is None


def test_device_of_a_cpu_tensor_does_nothing():
    ctx = mf.cuda.device_of(mf.ones(2, device="cpu"))
    assert isinstance(ctx, mf.cuda.device) and ctx.idx == -1
    with ctx:
        pass


def test_streams_take_only_streams():
    for call, name in ((mf.cuda.stream, "stream"), (mf.cuda.StreamContext, "stream"),
                       (mf.cuda.set_stream, "set_stream")):
        with pytest.raises(TypeError, match=rf"minifused\.cuda\.{name}: expected a minifused\.cuda\.Stream or None, "
                                            r"got str"):
            call("side")


# ---------------------------------------------------------------- nvtx and profiler
def test_nvtx_and_profiler_are_importable_submodules():
    import minifused.cuda.nvtx
    import minifused.cuda.profiler
    from minifused.cuda import nvtx, profiler

    assert sys.modules["minifused.cuda.nvtx"] is nvtx is mf.cuda.nvtx is minifused.cuda.nvtx
    assert sys.modules["minifused.cuda.profiler"] is profiler is mf.cuda.profiler is minifused.cuda.profiler


def _cupy_nvtx():
    if backend.cupy is None:
        return None
    from cupy.cuda import nvtx

    return nvtx if nvtx.available else None


def test_nvtx_forwards_each_call_to_cupys_nvtx(monkeypatch):
    nvtx = mf.cuda.nvtx
    cupy_nvtx = _cupy_nvtx()
    if cupy_nvtx is None:
        with pytest.raises(RuntimeError, match=r"minifused\.cuda\.nvtx\.range_push: NVTX is not available"):
            nvtx.range_push("x")
        return
    calls = []
    for name in ("RangePush", "RangePop", "Mark", "RangeEnd"):
        monkeypatch.setattr(cupy_nvtx, name, lambda *a, name=name: calls.append((name, *a)))
    monkeypatch.setattr(cupy_nvtx, "RangeStart", lambda msg, color: calls.append(("RangeStart", msg)) or 41)
    assert nvtx.range_push("fwd") is None and nvtx.range_pop() is None
    assert nvtx.range_start("io") == 41
    nvtx.range_end(41)
    nvtx.mark("here")
    with nvtx.range("step {} of {n}", 3, n=5):
        calls.append("body")

    @nvtx.range("decorated")
    def f(a):
        return a + 1

    assert f(1) == 2
    with pytest.raises(KeyError):  # the range is closed when the block raises, and the error goes on
        with nvtx.range("failing"):
            raise KeyError("boom")
    assert calls == [("RangePush", "fwd"), ("RangePop",), ("RangeStart", "io"), ("RangeEnd", 41), ("Mark", "here"),
                     ("RangePush", "step 3 of 5"), "body", ("RangePop",), ("RangePush", "decorated"), ("RangePop",),
                     ("RangePush", "failing"), ("RangePop",)]


def test_nvtx_without_a_profiler_attached_runs():
    """NVTX records nothing while no profiler listens, a GPU or not (as PyTorch's)."""
    if _cupy_nvtx() is None:
        pytest.skip("CuPy's NVTX is not available here")
    nvtx = mf.cuda.nvtx
    nvtx.range_push("outer")
    nvtx.mark("m")
    nvtx.range_pop()
    nvtx.range_end(nvtx.range_start("r"))
    with nvtx.range("block"):
        pass


def test_profiler_profile_stops_also_when_the_block_raises(monkeypatch):
    calls = []
    monkeypatch.setattr(mf.cuda.profiler, "start", lambda: calls.append("start"))
    monkeypatch.setattr(mf.cuda.profiler, "stop", lambda: calls.append("stop"))
    with pytest.raises(ValueError):
        with mf.cuda.profiler.profile():
            calls.append("body")
            raise ValueError("x")
    assert calls == ["start", "body", "stop"]


# ---------------------------------------------------------------- make_graphed_callables: argument checks
def _mlp(device="cpu", seed=0):
    mf.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 10)).to(device)


def test_graphed_callables_refuse_bad_arguments_as_pytorch():
    mgc = mf.cuda.make_graphed_callables
    x = mf.randn(4, 32)
    hooked = _mlp()
    hooked.register_forward_hook(lambda m, a, out: None)
    with pytest.raises(AssertionError, match="Modules must not have hooks registered"):
        mgc(hooked, (x,))
    trained_buffer = _mlp()
    trained_buffer.register_buffer("scale", mf.ones(3, requires_grad=True))
    with pytest.raises(AssertionError, match="only parameters may be trainable"):
        mgc(trained_buffer, (x,))
    with pytest.raises(AssertionError, match="sample_args for each callable must contain only Tensors"):
        mgc(_mlp(), (x, 3))
    with pytest.raises(AssertionError, match="sample_args for each callable must contain only Tensors"):
        mgc((_mlp(), _mlp()), ((x,), ([x, "y"],)))  # nested leaves are checked too
    with pytest.raises(TypeError, match=r"make_graphed_callables: sample_args must be a tuple of tensors per "
                                        r"callable, got Tensor"):
        mgc(_mlp(), x)
    with pytest.raises(TypeError, match="sample_args must be a tuple of tensors .* got Tensor"):
        mgc((_mlp(),), x)
    with pytest.raises(ValueError, match="got 2 callables and sample_args for 1"):
        mgc((_mlp(), _mlp()), ((x,),))
    with pytest.raises(TypeError, match="expected a Module or a function, got int"):
        mgc((3,), ((x,),))
    with pytest.raises(ValueError, match="num_warmup_iters must be an int >= 0, got -1"):
        mgc(_mlp(), (x,), num_warmup_iters=-1)
    with pytest.raises(NotImplementedError, match="enable_annotations=True"):
        mgc(_mlp(), (x,), enable_annotations=True)


@no_cuda
def test_graphed_callables_need_cuda_and_leave_the_module_as_it_was():
    model = _mlp()
    forward = model.forward
    with pytest.raises(RuntimeError, match="make_graphed_callables: CUDA graphs need a CUDA device"):
        mf.cuda.make_graphed_callables(model, (mf.randn(4, 32),))
    assert model.forward == forward and "forward" not in model.__dict__


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_stream_context_set_stream_and_device_of_on_the_gpu():
    c = mf.cuda
    c.init()
    assert c.is_initialized()
    before = c.current_stream()
    side = c.Stream()
    ctx = c.stream(side)
    assert isinstance(ctx, c.StreamContext)
    with ctx as entered:
        assert entered is None and c.current_stream() == side
        with c.stream(None):
            assert c.current_stream() == side
        inner = c.Stream()
        with c.stream(inner):
            assert c.current_stream() == inner
        assert c.current_stream() == side
    assert c.current_stream() == before
    c.set_stream(side)
    try:
        assert c.current_stream() == side
        y = mf.ones(1000, device="cuda") * 3
    finally:
        c.set_stream(before)
    side.synchronize()
    assert c.current_stream() == before and float(y.sum().item()) == 3000.0
    x = mf.ones(2, device="cuda")
    with c.device_of(x) as d:
        assert d.idx == x.get_device() == c.current_device()


@pytest.mark.gpu
def test_device_queries_match_pytorch(torch):
    c = mf.cuda
    assert c.is_tf32_supported() == torch.cuda.is_tf32_supported()
    def answer(fn, *args):
        try:
            return fn(*args)
        except RuntimeError:  # (CUDA's answer for a device and itself: the same error from both, if any)
            return "raises"

    n = c.device_count()
    for d in range(n):
        for p in range(n):
            assert answer(c.can_device_access_peer, d, p) == answer(torch.cuda.can_device_access_peer, d, p)
    with pytest.raises(AssertionError, match="Invalid device id"):
        c.can_device_access_peer(n, 0)
    with pytest.raises(AssertionError, match="Invalid peer device id"):
        c.can_device_access_peer(0, n)


@pytest.mark.gpu
def test_external_stream_runs_work_on_a_pytorch_stream(torch):
    ts = torch.cuda.Stream()
    ext = mf.cuda.ExternalStream(ts.cuda_stream)
    assert ext.cuda_stream == ts.cuda_stream and ext.device_index == mf.cuda.current_device()
    ext.wait_stream(mf.cuda.current_stream())
    with mf.cuda.stream(ext):
        assert mf.cuda.current_stream().cuda_stream == ts.cuda_stream
        y = mf.arange(1000, device="cuda", dtype=mf.float32) * 2
    ts.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), np.arange(1000, dtype=np.float32) * 2)


@pytest.mark.gpu
def test_profiler_and_nvtx_on_the_gpu():
    with mf.cuda.profiler.profile(), mf.cuda.nvtx.range("profiled {}", 1):
        (mf.ones(8, device="cuda") + 1).sum()
    mf.cuda.synchronize()


def _batches(count, n=16, seed=1):
    rng = np.random.default_rng(seed)
    return [(mf.tensor(rng.standard_normal((n, 32)), dtype=mf.float32, device="cuda"),
             mf.tensor(rng.integers(0, 10, n), device="cuda")) for _ in range(count)]


def _close(got, want, what):
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().cpu().numpy(), rtol=1e-4, atol=1e-5,
                               err_msg=what)


@pytest.mark.gpu
@pytest.mark.parametrize("input_requires_grad", [False, True])
def test_graphed_mlp_trains_as_the_eager_one(input_requires_grad):
    """Outputs, losses, input and parameter gradients and the weights after SGD steps of a graphed MLP equal those
    of the same MLP run eagerly; in eval mode the original forward runs (any batch size)."""
    eager, model = _mlp("cuda"), _mlp("cuda")
    sample = mf.randn(16, 32, device="cuda", requires_grad=input_requires_grad)
    assert mf.cuda.make_graphed_callables(model, (sample,)) is model
    opts = [optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (eager, model)]
    for step, (x, y) in enumerate(_batches(5)):
        xs = [x.clone().requires_grad_(input_requires_grad) for _ in range(2)]
        outs, losses = [], []
        for m, opt, xi in zip((eager, model), opts, xs):
            opt.zero_grad(set_to_none=True)
            out = m(xi)
            loss = F.cross_entropy(out, y)
            loss.backward()
            outs.append(out)
            losses.append(loss)
        _close(outs[1], outs[0], f"output, step {step}")
        _close(losses[1], losses[0], f"loss, step {step}")
        if input_requires_grad:
            _close(xs[1].grad, xs[0].grad, f"input grad, step {step}")
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            _close(p.grad, q.grad, f"{name}.grad, step {step}")
        for opt in opts:
            opt.step()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        _close(p, q, name)
    model.eval()
    eager.eval()
    x = mf.randn(5, 32, device="cuda")  # another batch size: only the original forward can take it
    _close(model(x), eager(x), "eval output")
    model.train()
    with pytest.raises(ValueError, match=r"argument 0 must match its sample arg \(shape \(16, 32\)"):
        model(x)


@pytest.mark.gpu
def test_graphed_gradients_accumulate_into_grad():
    """Two backwards without zeroing: .grad holds their sum, as eagerly (a .grad never shares the graph's
    buffers, which the second replay rewrites)."""
    eager, model = _mlp("cuda"), _mlp("cuda")
    mf.cuda.make_graphed_callables(model, (mf.randn(16, 32, device="cuda"),), num_warmup_iters=2)
    for x, y in _batches(3):
        for m in (eager, model):
            F.cross_entropy(m(x), y).backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        _close(p.grad, q.grad, name)


@pytest.mark.gpu
def test_a_tuple_of_callables_shares_one_pool_and_chains():
    """Two modules and a function, graphed together: chained as captured, their outputs and every gradient equal
    the eager chain's; a frozen parameter gets no gradient."""
    def linear(n_in, n_out, seed):
        mf.manual_seed(seed)
        return nn.Linear(n_in, n_out).to("cuda")

    first = [linear(32, 24, 3) for _ in range(2)]  # [eager, graphed], alike
    second = [linear(24, 10, 4) for _ in range(2)]
    for lin in second:
        lin.bias.requires_grad_(False)

    def head(h, scale):
        return (F.relu(h) * scale, h.sum(dim=1))

    g1, g2, g3 = mf.cuda.make_graphed_callables(
        (first[1], second[1], head),
        ((mf.randn(8, 32, device="cuda"),), (mf.randn(8, 24, device="cuda", requires_grad=True),),
         (mf.randn(8, 10, device="cuda", requires_grad=True), mf.randn(10, device="cuda", requires_grad=True))))
    assert g1 is first[1] and g2 is second[1]
    for x, _ in _batches(3, n=8):
        scales = [mf.linspace(0.5, 1.5, 10, device="cuda").requires_grad_(True) for _ in range(2)]
        outs = []
        for lin1, lin2, fn, scale in ((first[0], second[0], head, scales[0]), (g1, g2, g3, scales[1])):
            for lin in (lin1, lin2):
                lin.zero_grad(set_to_none=True)
            a, b = fn(lin2(lin1(x)), scale)
            (a.square().sum() + b.sum()).backward()
            outs.append((a, b))
        _close(outs[1][0], outs[0][0], "first output")
        _close(outs[1][1], outs[0][1], "second output")
        _close(scales[1].grad, scales[0].grad, "scale.grad")
        for got, want in ((first[1], first[0]), (second[1], second[0])):
            _close(got.weight.grad, want.weight.grad, "weight.grad")
        _close(first[1].bias.grad, first[0].bias.grad, "bias.grad")
        assert second[1].bias.grad is None


@pytest.mark.gpu
def test_unused_inputs_need_allow_unused_input():
    def uses_one(a, b):
        return a * 2

    args = (mf.randn(4, device="cuda", requires_grad=True), mf.randn(4, device="cuda", requires_grad=True))
    with pytest.raises(RuntimeError, match="not used to compute the outputs"):
        mf.cuda.make_graphed_callables(uses_one, args)
    graphed = mf.cuda.make_graphed_callables(uses_one, args, allow_unused_input=True)
    a, b = mf.randn(4, device="cuda", requires_grad=True), mf.randn(4, device="cuda", requires_grad=True)
    out = graphed(a, b)
    _close(out, a * 2, "output")
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.cpu().numpy(), np.full(4, 2.0, np.float32))
    assert b.grad is None
    with pytest.raises(RuntimeError, match="argument 0 requires grad but its sample arg did not"):
        mf.cuda.make_graphed_callables(uses_one, (mf.randn(4, device="cuda"), args[1]), allow_unused_input=True)(
            a, b)


@pytest.mark.gpu
def test_graphed_callables_refuse_cpu_samples():
    with pytest.raises(ValueError, match="sample_args must be cuda tensors, got one on cpu"):
        mf.cuda.make_graphed_callables(_mlp("cuda"), (mf.randn(16, 32, device="cpu"),))
