"""minifused.fft and minifused.stft against float64 DFT sums written out (no FFT in the reference), PyTorch's
dtypes and errors."""
import numpy as np
import pytest

import minifused as mf

RNG = np.random.default_rng(0)


def dft(x, axis=-1, inverse=False):
    """The DFT along ``axis`` as a float64 matrix product: sum_n x[n] exp(-+2 pi i k n / N)."""
    x = np.moveaxis(np.asarray(x, np.complex128), axis, -1)
    n = x.shape[-1]
    sign = 1 if inverse else -1
    m = np.exp(sign * 2j * np.pi * np.outer(np.arange(n), np.arange(n)) / n)
    return np.moveaxis(x @ m.T / (n if inverse else 1), -1, axis)


def test_fft_ifft_and_norms():
    x = RNG.standard_normal((3, 10)).astype(np.float32)
    got = mf.fft.fft(mf.tensor(x))
    assert got.dtype == mf.complex64 and got.shape == (3, 10)
    np.testing.assert_allclose(got.numpy(), dft(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mf.fft.fft(mf.tensor(x), norm="ortho").numpy(), dft(x) / np.sqrt(10), atol=1e-5)
    np.testing.assert_allclose(mf.fft.fft(mf.tensor(x), norm="forward").numpy(), dft(x) / 10, atol=1e-6)
    np.testing.assert_allclose(mf.fft.ifft(got).numpy(), x, atol=1e-6)
    # n crops or zero-pads; dim picks the axis
    np.testing.assert_allclose(mf.fft.fft(mf.tensor(x), n=4, dim=0).numpy(),
                               dft(np.concatenate([x, np.zeros((1, 10), np.float32)]), axis=0), atol=1e-5)
    np.testing.assert_allclose(mf.fft.fft(mf.tensor(x), n=6).numpy(), dft(x[:, :6]), atol=1e-5)


def test_rfft_irfft_dtypes():
    x = RNG.standard_normal((2, 9))
    got = mf.fft.rfft(mf.tensor(x))
    assert got.dtype == mf.complex128 and got.shape == (2, 5)
    np.testing.assert_allclose(got.numpy(), dft(x)[:, :5], atol=1e-12)
    back = mf.fft.irfft(got, n=9)
    assert back.dtype == mf.float64
    np.testing.assert_allclose(back.numpy(), x, atol=1e-12)
    assert mf.fft.irfft(got).shape == (2, 8)  # 2 * (5 - 1) points by default
    ints = mf.fft.rfft(mf.arange(6))  # integers (and bools) as the default float dtype
    assert ints.dtype == mf.complex64
    np.testing.assert_allclose(ints.numpy(), dft(np.arange(6.0))[:4], atol=1e-5)


def test_frequencies_and_shifts():
    np.testing.assert_allclose(mf.fft.fftfreq(5, d=0.5).numpy(), [0, 0.4, 0.8, -0.8, -0.4], atol=1e-7)
    np.testing.assert_allclose(mf.fft.rfftfreq(6, d=0.25).numpy(), [0, 2 / 3, 4 / 3, 2], atol=1e-6)
    assert mf.fft.fftfreq(4).dtype == mf.float32
    f = mf.fft.fftfreq(5)
    np.testing.assert_allclose(mf.fft.fftshift(f).numpy(), [-0.4, -0.2, 0, 0.2, 0.4], atol=1e-7)
    np.testing.assert_array_equal(mf.fft.ifftshift(mf.fft.fftshift(f)).numpy(), f.numpy())
    grid = mf.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(mf.fft.fftshift(grid, dim=1).numpy(), np.roll(np.arange(12).reshape(3, 4), 2, 1))


def stft_reference(x, n_fft, hop, window, center, onesided=True, normalized=False):
    """Frame by frame: frame t is x[t * hop : t * hop + n_fft] (reflect-padded by n_fft // 2 when centered)
    times the window, then its DFT."""
    if center:
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)], mode="reflect")
    frames = [x[..., t:t + n_fft] * window for t in range(0, x.shape[-1] - n_fft + 1, hop)]
    spec = dft(np.stack(frames, axis=-2))  # (..., frames, freq)
    if onesided:
        spec = spec[..., :n_fft // 2 + 1]
    return np.swapaxes(spec, -1, -2) / (np.sqrt(n_fft) if normalized else 1)


@pytest.mark.parametrize("center", [True, False])
def test_stft_batch_with_a_window(center):
    x = RNG.standard_normal((2, 40)).astype(np.float32)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(8) / 8)  # periodic Hann
    got = mf.stft(mf.tensor(x), 8, hop_length=3, window=mf.hann_window(8), center=center, return_complex=True)
    assert got.dtype == mf.complex64
    want = stft_reference(x, 8, 3, window, center)
    assert got.shape == want.shape == (2, 5, 1 + (40 + (8 if center else 0) - 8) // 3)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_stft_defaults_short_window_two_sided_and_real_parts():
    x = RNG.standard_normal(33)
    got = mf.stft(mf.tensor(x), 16, return_complex=True)  # hop n_fft // 4, a window of ones
    np.testing.assert_allclose(got.numpy(), stft_reference(x, 16, 4, np.ones(16), True), atol=1e-12)
    # a window of 6 points sits in the middle of the 8 (1 zero on the left, 1 on the right)
    window = np.arange(1.0, 7.0)
    got = mf.stft(mf.tensor(x), 8, hop_length=2, win_length=6, window=mf.tensor(window), onesided=False,
                  normalized=True, return_complex=True)
    want = stft_reference(x, 8, 2, np.pad(window, (1, 1)), True, onesided=False, normalized=True)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
    parts = mf.stft(mf.tensor(x), 16, return_complex=False)
    assert parts.dtype == mf.float64 and parts.shape == (9, 9, 2)
    ref = stft_reference(x, 16, 4, np.ones(16), True)
    np.testing.assert_allclose(parts.numpy(), np.stack([ref.real, ref.imag], -1), atol=1e-12)


def test_spectrogram_features_feed_a_model():
    x = mf.tensor(RNG.standard_normal((4, 64)).astype(np.float32))
    spec = mf.stft(x, 16, hop_length=8, window=mf.hann_window(16), return_complex=True).abs().pow(2)
    features = mf.log(spec + 1e-6)
    assert features.dtype == mf.float32 and features.shape == (4, 9, 9)
    layer = mf.nn.Conv1d(9, 3, 3)
    layer(features).sum().backward()
    assert layer.weight.grad is not None


def test_refusals():
    x = mf.randn(10, requires_grad=True)
    with pytest.raises(TypeError, match=r"fft_rfft: its result is complex and minifused's autograd has no complex"):
        mf.fft.rfft(x)
    with pytest.raises(TypeError, match="stft: its result is complex"):
        mf.stft(x, 4, return_complex=True)
    with mf.no_grad():
        assert mf.fft.rfft(x).shape == (6,)
    y = x.detach()
    with pytest.raises(RuntimeError, match="Unsupported dtype Half"):
        mf.fft.fft(y.half())
    with pytest.raises(RuntimeError, match="rfft expects a real input tensor, but got"):
        mf.fft.rfft(mf.fft.fft(y))
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\)"):
        mf.fft.fft(y, n=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        mf.fft.fft(y, dim=1)
    with pytest.raises(RuntimeError, match="Invalid normalization mode"):
        mf.fft.fft(y, norm="bad")
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        mf.fft.fft(np.ones(4))
    with pytest.raises(RuntimeError, match="stft requires the return_complex parameter"):
        mf.stft(y, 4)
    with pytest.raises(RuntimeError, match="expected a 1D or 2D tensor"):
        mf.stft(y.reshape(1, 2, 5), 4, return_complex=True)
    with pytest.raises(RuntimeError, match=r"expected 0 < n_fft <= 10, but got n_fft=16"):
        mf.stft(y, 16, center=False, return_complex=True)
    with pytest.raises(RuntimeError, match="window tensor of size equal to win_length=4"):
        mf.stft(y, 4, window=mf.ones(5), return_complex=True)
    with pytest.raises(RuntimeError, match="expected 0 < win_length <= n_fft"):
        mf.stft(y, 4, win_length=6, return_complex=True)


@pytest.mark.gpu
def test_cuda_as_cpu():
    x = RNG.standard_normal((2, 48)).astype(np.float32)
    for f in (lambda t: mf.fft.rfft(t, norm="ortho"), lambda t: mf.fft.ifft(mf.fft.fft(t, n=50)),
              lambda t: mf.stft(t, 16, hop_length=4, window=mf.hann_window(16, device=t.device), return_complex=True)):
        on_gpu = f(mf.tensor(x, device="cuda"))
        assert on_gpu.device.type == "cuda"
        np.testing.assert_allclose(on_gpu.cpu().numpy(), f(mf.tensor(x, device="cpu")).numpy(), rtol=1e-4, atol=1e-4)
    assert mf.fft.rfftfreq(8, device="cuda").device.type == "cuda"
