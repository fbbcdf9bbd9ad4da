"""PyTorch's CUDA-graph API (minifused.cuda.CUDAGraph, graph, graph_pool_handle): its documented recipes run
unchanged and replay what eager steps compute; misuse raises clear errors and leaves nothing half-captured."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import backend, nn, optim


@pytest.mark.skipif(backend.cuda_available(), reason="the behaviour without a CUDA device")
def test_without_cuda_the_graph_api_says_so():
    for make in (mf.cuda.CUDAGraph, mf.cuda.graph_pool_handle):
        with pytest.raises(RuntimeError, match="CUDA graphs need a CUDA device"):
            make()


def test_graph_takes_only_a_cuda_graph():
    with pytest.raises(TypeError, match="expected a CUDAGraph, got int"):
        mf.cuda.graph(3)


def _model(device):
    mf.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8 * 8 * 8, 10)).to(device)


def _batches(count, device="cuda"):
    rng = np.random.default_rng(1)
    return [(mf.tensor(rng.standard_normal((16, 3, 8, 8)), dtype=mf.float32, device=device),
             mf.tensor(rng.integers(0, 10, 16), device=device)) for _ in range(count)]


_OPTIMIZERS = {"sgd": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4),
               "adam": lambda ps: optim.Adam(ps, lr=1e-2)}


def _state(model):
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


@pytest.mark.gpu
@pytest.mark.parametrize("opt_name", sorted(_OPTIMIZERS))
def test_whole_network_recipe_replays_eager_training(opt_name):
    """PyTorch's "whole network capture" recipe, word for word: warm-up on a side stream, capture forward,
    backward and the optimizer step, then copy each batch into the static input and replay."""
    batches, warmup = _batches(8), 3
    ref = _model("cuda")
    ref_opt = _OPTIMIZERS[opt_name](ref.parameters())
    ref_losses = []
    for x, y in batches:
        ref_opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ref(x), y)
        loss.backward()
        ref_opt.step()
        ref_losses.append(loss.item())

    model = _model("cuda")
    opt = _OPTIMIZERS[opt_name](model.parameters())
    static_x, static_y = mf.zeros(16, 3, 8, 8, device="cuda"), mf.zeros(16, dtype=mf.int64, device="cuda")
    losses = []
    s = mf.cuda.Stream()
    s.wait_stream(mf.cuda.current_stream())
    with mf.cuda.stream(s):
        for x, y in batches[:warmup]:
            static_x.copy_(x)
            static_y.copy_(y)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(static_x), static_y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    mf.cuda.current_stream().wait_stream(s)

    g = mf.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with mf.cuda.graph(g):
        assert mf.cuda.is_current_stream_capturing()
        static_loss = F.cross_entropy(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    assert not mf.cuda.is_current_stream_capturing()
    for x, y in batches[warmup:]:
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        losses.append(static_loss.item())

    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    want, got = _state(ref), _state(model)
    assert want.keys() == got.keys()
    for k in want:  # weights, and BatchNorm's running statistics and batch count, moved by every replay
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.gpu
def test_inference_capture_and_a_shared_pool():
    """A forward captured under no_grad replays for new inputs; a second graph on the first one's pool reads
    the first one's output."""
    model = _model("cuda").eval()
    xs = [x for x, _ in _batches(4)]
    static_x = mf.zeros(16, 3, 8, 8, device="cuda")
    with mf.no_grad():
        s = mf.cuda.Stream()
        s.wait_stream(mf.cuda.current_stream())
        with mf.cuda.stream(s):
            model(static_x)  # warm-up
        mf.cuda.current_stream().wait_stream(s)
        g1, g2 = mf.cuda.CUDAGraph(), mf.cuda.CUDAGraph()
        with mf.cuda.graph(g1):
            static_out = model(static_x)
        with mf.cuda.graph(g2, pool=g1.pool()):
            static_prob = F.softmax(static_out, dim=1) * 2.0
        for x in xs:
            static_x.copy_(x)
            g1.replay()
            g2.replay()
            want = model(x)
            np.testing.assert_allclose(static_out.cpu().numpy(), want.cpu().numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(static_prob.cpu().numpy(), (F.softmax(want, dim=1) * 2.0).cpu().numpy(),
                                       rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_a_host_sync_inside_the_block_is_named_and_leaves_no_capture():
    x = mf.randn(32, device="cuda")
    (x * 2).sum()  # warm-up
    g = mf.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"Tensor.item\(\)"):
        with mf.cuda.graph(g):
            (x * 2).sum().item()
    assert not mf.cuda.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()
    assert abs((x * 3).sum().item() - 3 * float(x.cpu().numpy().astype(np.float64).sum())) < 1e-4
    with mf.cuda.graph(g):  # the same graph captures afresh
        y = x * 2
    x.copy_(mf.ones(32, device="cuda"))
    g.replay()
    np.testing.assert_array_equal(y.cpu().numpy(), np.full(32, 2.0, np.float32))


@pytest.mark.gpu
def test_misuse_of_capture_begin_end_replay():
    g = mf.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()
    with pytest.raises(RuntimeError, match="no capture in progress"):
        g.capture_end()
    with pytest.raises(RuntimeError, match="no pool before"):
        g.pool()
    with pytest.raises(RuntimeError, match="other than the default one"):
        with mf.cuda.stream(mf.cuda.default_stream()):
            g.capture_begin()
    with pytest.raises(ValueError, match="capture_error_mode must be one of"):
        mf.cuda.graph(g, capture_error_mode="loose").__enter__()
    with pytest.raises(TypeError, match="pool must come from graph_pool_handle"):
        mf.cuda.graph(g, pool=object()).__enter__()
    assert not mf.cuda.is_current_stream_capturing()
    x = mf.ones(8, device="cuda")
    with mf.cuda.graph(g, pool=mf.cuda.graph_pool_handle()):
        y = x + 1
    with pytest.raises(RuntimeError, match="already holds a capture"):
        mf.cuda.graph(g).__enter__()
    assert not mf.cuda.is_current_stream_capturing()
    g.replay()
    np.testing.assert_array_equal(y.cpu().numpy(), np.full(8, 2.0, np.float32))
    g.reset()
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()
