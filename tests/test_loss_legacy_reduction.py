"""PyTorch's deprecated ``size_average`` / ``reduce`` loss arguments (functional/_checks.py, _legacy_reduction):
either one given maps to a reduction by PyTorch's legacy rule (a missing one counts as True; reduce and
size_average: 'mean', reduce alone: 'sum', no reduce: 'none'), with PyTorch's UserWarning, and ``reduction`` is
then ignored. Every loss that takes them, functional and module, gives the value of the mapped ``reduction=``
form, checked against NumPy where the loss is a plain elementwise one. No torch needed (the table is
PyTorch 2.13's ``_Reduction.legacy_get_string``)."""
import re
import warnings

import numpy as np
import pytest

import minifused.functional as F
import minifused.nn as nn
from minifused.functional._checks import _legacy_reduction
from tolerances import cpu

# (size_average, reduce) -> the reduction PyTorch maps them to
LEGACY = {(None, True): "mean", (None, False): "none", (True, None): "mean", (True, True): "mean",
          (True, False): "none", (False, None): "sum", (False, True): "sum", (False, False): "none"}
MESSAGE = "size_average and reduce args will be deprecated, please use reduction='{}' instead."

rng = np.random.default_rng(0)
X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
P, Q = 1 / (1 + np.exp(-X)), 1 / (1 + np.exp(-Y))  # probabilities
PROBS = np.exp(Y) / np.exp(Y).sum(1, keepdims=True)
LABELS = np.array([0, 2, 1, 2])
SIGNS = np.array([1.0, -1.0, -1.0, 1.0])


def _logsumexp(a):
    m = a.max(1, keepdims=True)
    return (m + np.log(np.exp(a - m).sum(1, keepdims=True)))[:, 0]


# name -> (call with reduction keywords, NumPy's unreduced loss or None: then only the reduction= form is compared)
LOSSES = {
    "mse_loss": (lambda **kw: F.mse_loss(cpu(X), cpu(Y), **kw), (X - Y) ** 2),
    "l1_loss": (lambda **kw: F.l1_loss(cpu(X), cpu(Y), **kw), np.abs(X - Y)),
    "smooth_l1_loss": (lambda **kw: F.smooth_l1_loss(cpu(X), cpu(Y), **kw),
                       np.where(np.abs(X - Y) < 1, 0.5 * (X - Y) ** 2, np.abs(X - Y) - 0.5)),
    "kl_div": (lambda **kw: F.kl_div(cpu(X), cpu(PROBS), **kw), PROBS * (np.log(PROBS) - X)),
    "binary_cross_entropy": (lambda **kw: F.binary_cross_entropy(cpu(P), cpu(Q), **kw),
                             -(Q * np.log(P) + (1 - Q) * np.log(1 - P))),
    "binary_cross_entropy_with_logits": (lambda **kw: F.binary_cross_entropy_with_logits(cpu(X), cpu(Q), **kw),
                                         np.maximum(X, 0) - X * Q + np.log1p(np.exp(-np.abs(X)))),
    "cross_entropy": (lambda **kw: F.cross_entropy(cpu(X), cpu(LABELS), **kw),
                      _logsumexp(X) - X[np.arange(4), LABELS]),
    "cross_entropy_probabilities": (lambda **kw: F.cross_entropy(cpu(X), cpu(PROBS), **kw),
                                    _logsumexp(X) - (PROBS * X).sum(1)),
    "nll_loss": (lambda **kw: F.nll_loss(cpu(X), cpu(LABELS), **kw), -X[np.arange(4), LABELS]),
    "margin_ranking_loss": (lambda **kw: F.margin_ranking_loss(cpu(X[:, 0]), cpu(Y[:, 0]), cpu(SIGNS), 0.1, **kw),
                            np.maximum(0, -SIGNS * (X[:, 0] - Y[:, 0]) + 0.1)),
    "hinge_embedding_loss": (lambda **kw: F.hinge_embedding_loss(cpu(X[:, 0]), cpu(SIGNS), **kw),
                             np.where(SIGNS == 1, X[:, 0], np.maximum(0, 1 - X[:, 0]))),
    "soft_margin_loss": (lambda **kw: F.soft_margin_loss(cpu(X[:, 0]), cpu(SIGNS), **kw),
                         np.log1p(np.exp(-SIGNS * X[:, 0]))),
    "poisson_nll_loss": (lambda **kw: F.poisson_nll_loss(cpu(X), cpu(np.abs(Y)), **kw), np.exp(X) - np.abs(Y) * X),
    "cosine_embedding_loss": (lambda **kw: F.cosine_embedding_loss(cpu(X), cpu(Y), cpu(SIGNS), **kw), None),
    "multilabel_soft_margin_loss": (lambda **kw: F.multilabel_soft_margin_loss(cpu(X), cpu((Y > 0) * 1.0), **kw),
                                    None),
    "triplet_margin_loss": (lambda **kw: F.triplet_margin_loss(cpu(X), cpu(Y), cpu(X + 0.5), **kw), None),
    "multi_margin_loss": (lambda **kw: F.multi_margin_loss(cpu(X), cpu(LABELS), **kw), None),
    "multilabel_margin_loss": (lambda **kw: F.multilabel_margin_loss(cpu(X), cpu(np.array([[0, -1, 0]] * 4)),
                                                                     **kw), None),
}


def _numpy_reduced(loss, reduction):
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


@pytest.mark.parametrize("legacy,mapped", LEGACY.items())
def test_the_rule_and_warning_are_pytorchs(legacy, mapped):
    with pytest.warns(UserWarning) as record:
        assert _legacy_reduction(*legacy, "bogus") == mapped  # the given reduction is ignored, as in PyTorch
    assert [str(w.message) for w in record] == [MESSAGE.format(mapped)]
    truthy = tuple(None if v is None else int(v) for v in legacy)  # any truthiness, as PyTorch's `if`
    with pytest.warns(UserWarning):
        assert _legacy_reduction(*truthy, "mean") == mapped


def test_no_legacy_arguments_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _legacy_reduction(None, None, "sum") == "sum"
        F.mse_loss(cpu(X), cpu(Y), reduction="none")
        nn.CrossEntropyLoss(reduction="none")


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("legacy,mapped", LEGACY.items())
def test_functional_losses_give_the_mapped_reduction(name, legacy, mapped):
    call, unreduced = LOSSES[name]
    with pytest.warns(UserWarning, match=re.escape(MESSAGE.format(mapped))) as record:
        got = call(size_average=legacy[0], reduce=legacy[1], reduction="bogus").detach().numpy()
    assert all(w.filename == __file__ for w in record)  # the warning names the caller's line
    np.testing.assert_array_equal(got, call(reduction=mapped).detach().numpy())
    if unreduced is not None:
        np.testing.assert_allclose(got, _numpy_reduced(unreduced, mapped), rtol=1e-12, atol=1e-12)


# module -> the inputs of its forward (the functional form with the same reduction is compared)
MODULES = {
    nn.L1Loss: (X, Y), nn.MSELoss: (X, Y), nn.SmoothL1Loss: (X, Y), nn.KLDivLoss: (X, PROBS),
    nn.BCELoss: (P, Q), nn.BCEWithLogitsLoss: (X, Q), nn.CrossEntropyLoss: (X, LABELS), nn.NLLLoss: (X, LABELS),
    nn.MarginRankingLoss: (X[:, 0], Y[:, 0], SIGNS), nn.HingeEmbeddingLoss: (X[:, 0], SIGNS),
    nn.SoftMarginLoss: (X[:, 0], SIGNS), nn.CosineEmbeddingLoss: (X, Y, SIGNS),
    nn.MultiLabelSoftMarginLoss: (X, (Y > 0) * 1.0), nn.TripletMarginLoss: (X, Y, X + 0.5),
    nn.MultiMarginLoss: (X, LABELS), nn.PoissonNLLLoss: (X, np.abs(Y)),
    nn.MultiLabelMarginLoss: (X, np.array([[0, -1, 0]] * 4)),
}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
@pytest.mark.parametrize("legacy,mapped", LEGACY.items())
def test_loss_modules_map_their_reduction(module, legacy, mapped):
    with pytest.warns(UserWarning, match=f"please use reduction='{mapped}' instead"):
        loss = module(size_average=legacy[0], reduce=legacy[1], reduction="bogus")
    assert loss.reduction == mapped
    inputs = [cpu(a) for a in MODULES[module]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the forward passes the mapped reduction: no second warning
        warnings.filterwarnings("ignore", "kl_div: reduction='mean'")  # (but kl_div's own, as PyTorch's)
        got = loss(*inputs).detach().numpy()
    np.testing.assert_array_equal(got, module(reduction=mapped)(*inputs).detach().numpy())


def test_module_forms_as_pytorch_documents():
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.CrossEntropyLoss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.BCELoss(reduce=False).reduction == "none"
    with pytest.warns(FutureWarning, match="NLLLoss2d"), pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.NLLLoss2d(size_average=False).reduction == "sum"
    with pytest.raises(ValueError, match="L1Loss: reduction"):  # without the legacy arguments, still checked
        nn.L1Loss(reduction="bogus")
