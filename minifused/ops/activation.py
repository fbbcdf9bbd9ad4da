"""Activations beyond ReLU/GELU, ``normalize`` and the elementwise losses, one ``Function`` each.

Every forward saves only what its backward needs: the input (or, for the piecewise-linear
activations, a bool mask of where the gradient passes, taken before an in-place form overwrites
the input); the losses keep their inputs, never intermediates. float16 and bfloat16 are computed
in float32 and rounded once, as PyTorch's kernels do. Arguments are checked by the functional
layer (``minifused/functional/activation.py``); these assume valid input.

Under ``create_graph`` (see :mod:`minifused.autograd.higher`) the piecewise-linear activations pass the gradient
through their kept mask with an op that is its own gradient (:class:`_Passing`); the others, ``normalize`` and the
losses write their gradient with recorded tensor ops on the graph's inputs, masks and signs as constants.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from ..autograd import Function
from ..kernels import elementwise as K
from ..kernels import loss_reduce as R
from ..tensor import Tensor
from ._common import unbroadcast, unbroadcast_graph
from .elementwise import where, zero_linked

__all__ = []  # PyTorch has none of these at top level beyond mf.sigmoid / mf.tanh (elementwise.py)
METHODS = {}  # nor as Tensor methods

_HALF = (backend.float16, backend.bfloat16)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _xp(a):
    return backend.array_module(a)


def _up(a):
    """``a`` in its compute dtype: the 16-bit floats in float32, others as they are."""
    return a.astype(np.float32) if a is not None and a.dtype in _HALF else a


def _emit(y, dtype, out=None):
    """``y`` rounded to ``dtype``, written into ``out`` when given (in place)."""
    y = y.astype(dtype, copy=False)
    if out is None:
        return y
    out[...] = y
    return out


def _sigmoid(xp, x):
    e = xp.exp(-xp.abs(x))  # exp of a non-positive number: no overflow
    return backend.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _passed(xp, g, keep):
    """``g`` where ``keep``, else 0: selected, not multiplied, so an inf or NaN gradient is cut where the
    activation cuts it (as PyTorch's)."""
    return backend.where(keep, g, g.dtype.type(0))


def _softplus(xp, x):
    """log(1 + exp(x)) without overflow."""
    return xp.logaddexp(x.dtype.type(0), x)


# ---------------------------------------------------------------- for backward_graph (create_graph=True)
def _wide(t):
    """Tensor ``t`` in its compute dtype, as :func:`_up` (a recorded cast)."""
    return t.float() if t.dtype in _HALF else t


def _const(a):
    """Array ``a`` (a mask, a sign: piecewise constant) as a tensor the graph does not differentiate."""
    return None if a is None else Tensor._from_array(a, False)


def _softplus_graph(x):
    """softplus of tensor ``x``, recorded: -logsigmoid(-x), whose gradient graph is all smooth ops."""
    return -LogSigmoid.apply(-x)


class _Passing(Function):
    """The input gradient of a piecewise-linear activation, ``g`` passed, scaled or cut as its kept mask says (the
    activation's own array backward, fused or not): linear in ``g`` with a constant mask, so it is its own
    gradient, to any order."""

    @staticmethod
    def forward(ctx, g, unary, kept, fused, p):
        ctx.unary, ctx.fused, ctx.p = unary, fused, p
        ctx.save_for_backward(kept)
        return unary.backward(ctx, g)

    @staticmethod
    def backward(ctx, g):
        return ctx.unary.backward(ctx, g), None, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        return _Passing.apply(g, ctx.unary, ctx.saved_tensors[0], ctx.fused, ctx.p), None, None, None, None


# ---------------------------------------------------------------- activations
class _Unary(Function):
    """``y = f(x)``; ``out`` may be ``x`` (the in-place forms, through ``Function.apply_``).

    ``keep`` is what the backward needs (the input by default: a copy when it is about to be
    overwritten), ``grad`` the input gradient from it and the upstream gradient.

    ``fused``: the activation's name in the CUDA kernels (kernels/elementwise.py), which take float32 and 16-bit
    CuPy arrays in one pass each way (the array library's functions take a pass per step of ``f`` and ``grad``);
    ``numbers(**p)`` its parameters there. The piecewise ones (KEEP_ACTIVATIONS) keep the same bool as their
    ``keep``, and their gradient is ``g * scale`` where it passes, else ``g * cut`` (``cut`` None: 0), with
    ``(scale, cut) = passing(**p)``.
    """

    fused = None
    numbers = staticmethod(lambda **p: ())
    passing = staticmethod(lambda **p: (1.0, None))
    #: ``grad_graph(g, x, **p)``: ``grad`` written with recorded tensor ops (for ``create_graph``); None for the
    #: piecewise-linear ones, whose kept mask (fused or not) is all their gradient needs (see :class:`_Passing`)
    grad_graph = None

    @classmethod
    def forward(cls, ctx, x, out=None, **p):
        ctx.fused = cls.fused is not None and K.fuses_activation(x)
        if ctx.fused:
            return cls._fused_forward(ctx, x, out, p)
        xu = _up(x)
        if ctx.recording:
            ctx.save_for_backward(cls.keep(x, xu, out is x, **p))
            ctx.p = p
        return _emit(cls.f(_xp(x), xu, **p), x.dtype, out)

    @classmethod
    def _fused_forward(cls, ctx, x, out, p):
        if ctx.recording:
            ctx.p = p
        if cls.fused in K.KEEP_ACTIVATIONS:
            y, passes = K.activation_keep_forward(cls.fused, x, cls.numbers(**p), out, keep=ctx.recording)
            if ctx.recording:
                ctx.save_for_backward(passes)
            return y
        if ctx.recording:
            ctx.save_for_backward(cls.keep(x, None, out is x, **p))
        return K.activation_forward(cls.fused, x, cls.numbers(**p), out)

    @classmethod
    def backward(cls, ctx, g):
        (kept,) = ctx.saved_tensors
        if ctx.fused and cls.fused in K.KEEP_ACTIVATIONS and K.fuses_activation(g):
            return K.keep_backward(g, kept, *cls.passing(**ctx.p))
        if ctx.fused and K.fuses_activation(g, kept):
            return K.activation_backward(cls.fused, g, kept, cls.numbers(**ctx.p))
        return _emit(cls.grad(_xp(g), _up(g), _up(kept), **ctx.p), g.dtype)

    @classmethod
    def backward_graph(cls, ctx, g):
        (kept,) = ctx.saved_tensors
        if cls.grad_graph is None:
            return zero_linked(_Passing.apply(g, cls, kept, ctx.fused, ctx.p), ctx, 0, kept)
        return cls.grad_graph(_wide(g), _wide(ctx.graph_input(0, kept)), **ctx.p)

    @staticmethod
    def keep(x, xu, inplace, **p):
        return backend.copy(x) if inplace else x


class LeakyRelu(_Unary):
    fused = "leaky_relu"
    numbers = staticmethod(lambda slope: (slope,))
    passing = staticmethod(lambda slope: (1.0, slope))
    f = staticmethod(lambda xp, x, slope: backend.where(x > 0, x, x * slope))
    keep = staticmethod(lambda x, xu, inplace, slope: x > 0)  # a bool mask, 1 byte per element
    grad = staticmethod(lambda xp, g, keep, slope: backend.where(keep, g, g * slope))

    # PyTorch's leaky_relu_ backward reads the result, whose sign a negative slope flips: it refuses that
    @classmethod
    def forward(cls, ctx, x, out=None, **p):
        ctx.in_place = out is x
        return super().forward(ctx, x, out, **p)

    @staticmethod
    def _refuse(ctx):
        if getattr(ctx, "in_place", False) and ctx.p["slope"] < 0:
            raise RuntimeError("In-place leakyReLu backward calculation is triggered with a negative slope which is "
                               "not supported. This is caused by calling in-place forward function with a negative "
                               "slope, please call out-of-place version instead.")

    @classmethod
    def backward(cls, ctx, g):
        cls._refuse(ctx)
        return super().backward(ctx, g)

    @classmethod
    def backward_graph(cls, ctx, g):
        cls._refuse(ctx)
        return super().backward_graph(ctx, g)


class Hardtanh(_Unary):
    """Also ReLU6 (0, 6). The gradient passes but at and outside lo and hi (NaN's too), as in PyTorch."""

    fused = "hardtanh"
    numbers = staticmethod(lambda lo, hi: (lo, hi))

    f = staticmethod(lambda xp, x, lo, hi: xp.clip(x, lo, hi))
    keep = staticmethod(lambda x, xu, inplace, lo, hi: ~((x <= lo) | (x >= hi)))
    grad = staticmethod(lambda xp, g, keep, lo, hi: _passed(xp, g, keep))


# PyTorch's hardsigmoid backward multiplies by the float literal 1.0f / 6.0f in every dtype (float64 too)
_ONE_SIXTH = float(np.float32(1 / 6))


class Hardsigmoid(_Unary):
    fused = "hardsigmoid"
    passing = staticmethod(lambda: (_ONE_SIXTH, None))
    f = staticmethod(lambda xp, x: xp.clip(x + 3, 0, 6) / 6)
    keep = staticmethod(lambda x, xu, inplace: (x > -3) & (x < 3))
    grad = staticmethod(lambda xp, g, keep: _passed(xp, g * g.dtype.type(_ONE_SIXTH), keep))


class Elu(_Unary):
    """ELU, SELU and CELU: ``scale * x`` for x > 0, else ``scale * alpha * (exp(x * input_scale) - 1)`` (a NaN
    input's gradient takes the ``scale`` side, as PyTorch's)."""

    fused = "elu"
    numbers = staticmethod(lambda alpha, scale, input_scale: (alpha, scale, input_scale))

    @staticmethod
    def f(xp, x, alpha, scale, input_scale):
        return backend.where(x > 0, x * scale, xp.expm1(xp.minimum(x, 0) * input_scale) * (alpha * scale))

    @staticmethod
    def grad(xp, g, x, alpha, scale, input_scale):
        return g * backend.where(x <= 0, xp.exp(xp.minimum(x, 0) * input_scale) * (alpha * scale * input_scale), scale)

    @staticmethod
    def grad_graph(g, x, alpha, scale, input_scale):
        # the slope at x = 0 is the exp side's, a constant there: PyTorch's second derivative takes x < 0 only
        # (min(x, 0) as a selection: the exp never overflows where its gradient is cut)
        neg, coef = x < 0, alpha * scale * input_scale
        return g * where(x <= 0, where(neg, (where(neg, x, 0) * input_scale).exp() * coef, coef), scale)

    # In place (elu_, selu_, celu_), PyTorch's backward reads the result ``y`` (rounded to x's dtype), not the
    # input: ``g * input_scale * (y + alpha * scale)`` where ``y <= 0``. The fused CUDA path keeps the input.
    @classmethod
    def forward(cls, ctx, x, out=None, **p):
        ctx.result = out is x and ctx.recording and not (cls.fused and K.fuses_activation(x))
        if not ctx.result:
            return super().forward(ctx, x, out, **p)
        ctx.fused, ctx.p = False, p
        y = _emit(cls.f(_xp(x), _up(x), **p), x.dtype, out)
        ctx.save_for_backward(backend.copy(y))  # (a copy, as the input's was: a view's write-back bumps x's version)
        return y

    @classmethod
    def backward(cls, ctx, g):
        if not ctx.result:
            return super().backward(ctx, g)
        (y,) = ctx.saved_tensors
        alpha, scale, input_scale = ctx.p["alpha"], ctx.p["scale"], ctx.p["input_scale"]
        if alpha < 0:
            raise RuntimeError("In-place elu backward calculation is triggered with a negative slope which is not "
                               "supported. This is caused by calling in-place forward function with a negative "
                               "slope, please call out-of-place version instead.")
        yu, gu = _up(y), _up(g)
        t = yu.dtype.type  # (the coefficients in the compute dtype, as PyTorch's kernel takes them)
        d = backend.where(yu <= 0, gu * t(input_scale) * (yu + t(alpha) * t(scale)), gu * t(scale))
        return _emit(d, g.dtype)

    @classmethod
    def backward_graph(cls, ctx, g):
        if not ctx.result:
            return super().backward_graph(ctx, g)
        if ctx.p["alpha"] < 0:
            return cls.backward(ctx, g._data)  # (raises)
        alpha, scale, input_scale = ctx.p["alpha"], ctx.p["scale"], ctx.p["input_scale"]
        y = _wide(ctx.graph_output(ctx.saved_tensors[0]))
        neg = y < 0  # (PyTorch's second derivative masks with result < 0)
        return _wide(g) * where(y <= 0, where(neg, (y + alpha * scale) * input_scale, alpha * scale * input_scale),
                                scale)


class Silu(_Unary):
    fused = "silu"
    f = staticmethod(lambda xp, x: x * _sigmoid(xp, x))

    @staticmethod
    def grad(xp, g, x):
        s = _sigmoid(xp, x)
        return g * s * (1 + x * (1 - s))

    @staticmethod
    def grad_graph(g, x):
        s = x.sigmoid()
        return g * s * (1 + x * (1 - s))


class Mish(_Unary):
    fused = "mish"
    f = staticmethod(lambda xp, x: x * xp.tanh(_softplus(xp, x)))

    @staticmethod
    def grad(xp, g, x):
        t = xp.tanh(_softplus(xp, x))
        return g * (t + x * _sigmoid(xp, x) * (1 - t * t))

    @staticmethod
    def grad_graph(g, x):
        t = _softplus_graph(x).tanh()
        return g * (t + x * x.sigmoid() * (1 - t * t))


class Hardswish(_Unary):
    fused = "hardswish"
    f = staticmethod(lambda xp, x: x * xp.clip(x + 3, 0, 6) / 6)

    @staticmethod
    def grad(xp, g, x):
        return g * backend.where(x <= -3, 0, backend.where(x < 3, x / 3 + 0.5, 1)).astype(g.dtype, copy=False)

    @staticmethod
    def grad_graph(g, x):
        return g * where(x <= -3, 0, where(x < 3, x / 3 + 0.5, 1))


class Softplus(_Unary):
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold``."""

    fused = "softplus"
    numbers = staticmethod(lambda beta, threshold: (beta, threshold))

    @staticmethod
    def f(xp, x, beta, threshold):
        bx = x * beta
        return backend.where(bx > threshold, x, _softplus(xp, bx) / beta)

    @staticmethod
    def grad(xp, g, x, beta, threshold):
        # PyTorch's g * z / (z + 1), z = exp(beta x), for its rounding; g (the limit) where z overflows, there NaN
        bx = x * beta
        with np.errstate(over="ignore", invalid="ignore"):
            z = xp.exp(bx)
            d = g * z / (z + 1)
        return backend.where(bx > threshold, g, backend.where(xp.isinf(z), g, d))

    @staticmethod
    def grad_graph(g, x, beta, threshold):
        bx = x * beta
        return where(bx > threshold, g, g * bx.sigmoid())


class LogSigmoid(_Unary):
    f = staticmethod(lambda xp, x: -_softplus(xp, -x))
    grad_graph = staticmethod(lambda g, x: g * (-x).sigmoid())

    @classmethod
    def backward(cls, ctx, g):
        # sigmoid(-x) as PyTorch's CPU kernel writes it, from its forward's buffer exp(-|x|) kept in x's dtype (a
        # 16-bit one rounds it: the gradient reads the rounded value)
        (x,) = ctx.saved_tensors
        xp, xu = _xp(x), _up(x)
        b = _up(xp.exp(-xp.abs(xu)).astype(x.dtype, copy=False))
        s = b / (1 + b)
        return _emit(backend.where(xu < 0, 1 - s, s) * _up(g), g.dtype)


class RRelu(_Unary):
    """``noise * x`` where ``x <= 0``, else ``x`` (``noise``: the training mode's random slopes); the gradient at 0
    takes the slope, as PyTorch's."""

    f = staticmethod(lambda xp, x, noise: backend.where(x <= 0, x * noise, x))
    keep = staticmethod(lambda x, xu, inplace, noise: ~(x <= 0))
    grad = staticmethod(lambda xp, g, keep, noise: backend.where(keep, g, g * noise))


class Threshold(_Unary):
    """``value`` where ``x <= threshold``, else ``x`` (NaN stays NaN); the gradient passes where not replaced."""

    fused = "threshold"
    numbers = staticmethod(lambda threshold, value: (threshold, value))

    f = staticmethod(lambda xp, x, threshold, value: backend.where(x <= threshold, value, x))
    keep = staticmethod(lambda x, xu, inplace, threshold, value: ~(x <= threshold))
    grad = staticmethod(lambda xp, g, keep, threshold, value: _passed(xp, g, keep))


class Shrink(_Unary):
    """Hardshrink (``soft=False``: 0 where ``|x| <= lambd``, else ``x``) and Softshrink (``x`` moved ``lambd``
    towards 0 there); the gradient passes where not zeroed (NaN's too, as PyTorch's)."""

    @staticmethod
    def f(xp, x, lambd, soft):
        return backend.where(xp.abs(x) <= lambd, 0, x - xp.sign(x) * lambd if soft else x)

    keep = staticmethod(lambda x, xu, inplace, lambd, soft: ~(_xp(xu).abs(xu) <= lambd))
    grad = staticmethod(lambda xp, g, keep, lambd, soft: _passed(xp, g, keep))


class Glu(Function):
    """``a * sigmoid(b)`` of ``x``'s halves along ``dim`` in one pass, as PyTorch's kernel: ``a / (1 + exp(-b))``,
    in float32 for the 16-bit floats and rounded once. Its backward reads ``sigmoid(b)`` rounded to x's dtype (PyTorch
    writes it into the gradient's buffer first) and scales ``g`` by it."""

    @staticmethod
    def forward(ctx, x, dim):
        xp = _xp(x)
        a, b = xp.split(_up(x), 2, axis=dim)
        with np.errstate(over="ignore"):  # (exp(-b) = inf for b << 0: the gate is 0)
            y = a * (1 / (1 + xp.exp(-b)))
        ctx.save_for_backward(x)
        ctx.dim = dim
        return _emit(y, x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xp, gu = _xp(g), _up(g)
        a, b = xp.split(_up(x), 2, axis=ctx.dim)
        s = _up(_sigmoid(xp, b).astype(x.dtype, copy=False))
        return _emit(xp.concatenate([s * gu, (1 - s) * s * a * gu], axis=ctx.dim), g.dtype), None

    @staticmethod
    def backward_graph(ctx, g):
        from .shape import cat

        (x,) = ctx.saved_tensors
        a, b = _wide(ctx.graph_input(0, x)).chunk(2, ctx.dim)
        s, g = b.sigmoid(), _wide(g)
        return cat([s * g, (1 - s) * s * a * g], ctx.dim), None


def unary(fn, x, **p):
    return fn.apply(x, **p)


def unary_(fn, op, x, **p):
    """The in-place form: written into ``x`` (returned), see ``Function.apply_``."""
    return fn.apply_(op, x, **p)


# ---------------------------------------------------------------- normalize
def _norm(xp, x, p, dim):
    a = xp.abs(x)
    if p == 2:
        return xp.sqrt((x * x).sum(dim, keepdims=True))
    if p == 1:
        return a.sum(dim, keepdims=True)
    if p == np.inf:
        return a.max(dim, keepdims=True)
    if p == 0:
        return (x != 0).sum(dim, keepdims=True).astype(x.dtype)
    return (a ** p).sum(dim, keepdims=True) ** (1 / p)


class Normalize(Function):
    """``x / max(||x||_p, eps)`` along ``dim``; keeps the input and the (reduced) norms."""

    @staticmethod
    def forward(ctx, x, p, dim, eps):
        xp, xu = _xp(x), _up(x)
        if x.shape[dim] or p != np.inf:
            n = _norm(xp, xu, p, dim)
        else:  # the max of nothing: an empty dim has norm 0
            n = xp.zeros(xu.shape[:dim] + (1,) + xu.shape[dim + 1:], xu.dtype)
        if x.dtype in _HALF:  # PyTorch's norm and its clamp are tensors of x's dtype: eps=1e-12 is 0 in float16
            n = n.astype(x.dtype).astype(xu.dtype)
            eps = float(np.float32(eps).astype(x.dtype))
        ctx.save_for_backward(x, n)
        ctx.args = (p, dim, eps)
        return _emit(xu / xp.maximum(n, eps), x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, n = ctx.saved_tensors
        p, dim, eps = ctx.args
        xp, xu, gu = _xp(g), _up(x), _up(g)
        d = xp.maximum(n, eps)
        # the norm's own gradient reaches x only where it is not clamped to eps (there n >= eps > 0)
        s = backend.where(n >= eps, (gu * xu).sum(dim, keepdims=True) / (d * d), 0)
        safe = backend.where(n > 0, n, 1)
        if p == 2:
            dn = xu / safe
        elif p == 1:
            dn = xp.sign(xu)
        elif p == np.inf:  # ties share the gradient evenly, as PyTorch's max-norm backward
            hit = xp.abs(xu) == n
            dn = xp.sign(xu) * hit / xp.maximum(hit.sum(dim, keepdims=True), 1)
        elif p == 0:
            dn = xp.zeros_like(xu)
        else:  # (a zero element's term is 0, as PyTorch's: for p < 1 its power would be 0 ** negative)
            mag = xp.abs(xu) / safe
            dn = xp.sign(xu) * backend.where(mag > 0, mag, 1) ** (p - 1)
        return _emit(gu / d - s * dn, g.dtype)

    @staticmethod
    def backward_graph(ctx, g):
        """``backward`` with the norm recomputed from the graph's ``x`` (its derivative ``dn`` too: the second
        derivative runs through both); where the norm is 0 it is 1 in the graph, so no 0/0 reaches it."""
        x, n = ctx.saved_tensors
        p, dim, eps = ctx.args
        xu, nu = _up(x), _up(n)
        xt, g = _wide(ctx.graph_input(0, x)), _wide(g)
        pos, sgn = _const(nu > 0), _const(_xp(xu).sign(xu))
        if p == np.inf:  # (ties share the norm's derivative, as in backward)
            hit = _xp(xu).abs(xu) == nu
            sgn = _const(_xp(xu).sign(xu) * hit / _xp(xu).maximum(hit.sum(dim, keepdims=True), 1))
        if p == 0:  # (a count: a constant)
            safe = _const(backend.where(nu > 0, nu, 1))
        elif p == 2:
            safe = where(pos, (xt * xt).sum(dim, keepdim=True), 1).sqrt()
        elif p == 1 or p == np.inf:
            safe = where(pos, (xt * sgn).sum(dim, keepdim=True), 1)
        else:
            safe = where(pos, ((xt * sgn) ** p).sum(dim, keepdim=True), 1) ** (1 / p)
        if x.dtype in _HALF:  # (the forward's norm is rounded to x's dtype)
            safe = safe.to(x.dtype).float()
        unclamped = nu >= eps
        d = where(_const(unclamped & (nu > 0)), safe, eps)
        if p == 0:
            return g / d
        dn = xt / safe if p == 2 else sgn if p in (1, np.inf) else sgn * (xt * sgn / safe) ** (p - 1)
        return g / d - where(_const(unclamped), (g * xt).sum(dim, keepdim=True) / (d * d), 0) * dn


# ---------------------------------------------------------------- losses (elementwise; reduced by the caller)
_BCE_EPS = 9.999999960041972e-13  # PyTorch's EPSILON clamping x (1 - x) in the gradient: 1e-12 as a float32


class BinaryCrossEntropy(Function):
    """``-w (t log x + (1 - t) log(1 - x))``, each log clamped to >= -100 as in PyTorch."""

    @staticmethod
    def _logs(xp, x):
        with np.errstate(divide="ignore"):
            return xp.maximum(xp.log(x), -100), xp.maximum(xp.log1p(-x), -100)

    @staticmethod
    def forward(ctx, x, t, w):
        xp, xu, tu, wu = _xp(x), _up(x), _up(t), _up(w)
        lx, l1x = BinaryCrossEntropy._logs(xp, xu)
        loss = (tu - 1) * l1x - tu * lx
        ctx.save_for_backward(x, t, w)
        return _emit(loss if w is None else loss * wu, x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, t, w = ctx.saved_tensors
        xp, xu, tu, gu = _xp(g), _up(x), _up(t), _up(g)
        if w is not None:
            gu = gu * _up(w)
        gx = gt = None
        if ctx.needs_input_grad[0]:
            gx = _emit(gu * (xu - tu) / xp.maximum((1 - xu) * xu, _BCE_EPS), x.dtype)
        if ctx.needs_input_grad[1]:  # (the logs unclamped, as PyTorch's target gradient: inf at x = 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                gt = _emit(gu * (xp.log1p(-xu) - xp.log(xu)), t.dtype)
        return gx, gt, None

    @staticmethod
    def backward_graph(ctx, g):
        x, t, w = ctx.saved_tensors
        xu, g = _up(x), _wide(g)
        xt, tt = _wide(ctx.graph_input(0, x)), _wide(ctx.graph_input(1, t))
        if w is not None:  # (a constant: the loss has no gradient for it)
            g = g * _const(_up(w))
        gx = gt = None
        if ctx.needs_input_grad[0]:
            gx = g * (xt - tt) / where(_const((1 - xu) * xu > _BCE_EPS), (1 - xt) * xt, _BCE_EPS)
        if ctx.needs_input_grad[1]:
            gt = g * ((-xt).log1p() - xt.log())
        return gx, gt, None


class BinaryCrossEntropyWithLogits(Function):
    """``w ((1 - t) x + (1 + (pos_weight - 1) t) softplus(-x))``, stable for any ``x``; keeps the inputs only."""

    @staticmethod
    def forward(ctx, x, t, w, pw):
        xp, xu, tu = _xp(x), _up(x), _up(t)
        lw = 1 if pw is None else 1 + (_up(pw) - 1) * tu
        loss = (1 - tu) * xu + lw * _softplus(xp, -xu)
        ctx.save_for_backward(x, t, w, pw)
        return _emit(loss if w is None else loss * _up(w), x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, t, w, pw = ctx.saved_tensors
        xp, xu, tu, gu = _xp(g), _up(x), _up(t), _up(g)
        if w is not None:
            gu = gu * _up(w)
        gx = gt = None
        if ctx.needs_input_grad[0]:
            s = _sigmoid(xp, xu)
            d = s - tu if pw is None else (1 + (_up(pw) - 1) * tu) * s - _up(pw) * tu
            gx = _emit(unbroadcast(gu * d, x.shape), x.dtype)
        if ctx.needs_input_grad[1]:
            # pw softplus(-x) - softplus(x): finite pieces at x = -inf (inf there, as PyTorch's)
            d = -xu if pw is None else _up(pw) * _softplus(xp, -xu) - _softplus(xp, xu)
            gt = _emit(unbroadcast(gu * d, t.shape), t.dtype)
        return gx, gt, None, None

    @staticmethod
    def backward_graph(ctx, g):
        x, t, w, pw = ctx.saved_tensors
        xt, tt, g = _wide(ctx.graph_input(0, x)), _wide(ctx.graph_input(1, t)), _wide(g)
        pw = _const(_up(pw))  # (the weights are constants: the loss has no gradient for them)
        if w is not None:
            g = g * _const(_up(w))
        gx = gt = None
        if ctx.needs_input_grad[0]:
            s = xt.sigmoid()
            d = s - tt if pw is None else (1 + (pw - 1) * tt) * s - pw * tt
            gx = unbroadcast_graph(g * d, x.shape)
        if ctx.needs_input_grad[1]:
            d = -xt if pw is None else pw * _softplus_graph(-xt) - _softplus_graph(xt)
            gt = unbroadcast_graph(g * d, t.shape)
        return gx, gt, None, None


class SmoothL1(Function):
    """Smooth L1 (``huber=False``: ``0.5 d^2 / beta`` inside ``|d| < beta``, ``|d| - beta/2`` outside) and
    Huber (``0.5 d^2`` inside ``|d| < beta``, ``beta (|d| - beta/2)`` outside), ``d = x - t`` broadcast."""

    @staticmethod
    def forward(ctx, x, t, beta, huber):
        xp = _xp(x)
        d = _up(x) - _up(t)
        ad = xp.abs(d)
        if huber:
            loss = backend.where(ad < beta, 0.5 * d * d, beta * (ad - 0.5 * beta))
        elif beta == 0:
            loss = ad
        else:
            loss = backend.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta)
        ctx.save_for_backward(x, t)
        ctx.args = (beta, huber)
        return _emit(loss, x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        beta, huber = ctx.args
        xp, gu = _xp(g), _up(g)
        d = _up(x) - _up(t)
        inside = xp.abs(d) < beta
        if huber:
            gd = gu * backend.where(inside, d, beta * xp.sign(d))
        else:
            gd = gu * backend.where(inside, d / (beta or 1), xp.sign(d))
        na, nb = ctx.needs_input_grad[:2]
        return (_emit(unbroadcast(gd, x.shape), x.dtype) if na else None,
                _emit(unbroadcast(-gd, t.shape), t.dtype) if nb else None, None, None)

    @staticmethod
    def backward_graph(ctx, g):
        x, t = ctx.saved_tensors
        beta, huber = ctx.args
        du = _up(x) - _up(t)
        d = _wide(ctx.graph_input(0, x)) - _wide(ctx.graph_input(1, t))
        inside, sgn = _const(_xp(du).abs(du) < beta), _const(_xp(du).sign(du))
        gd = _wide(g) * (where(inside, d, sgn * beta) if huber else where(inside, d / (beta or 1), sgn))
        na, nb = ctx.needs_input_grad[:2]
        return (unbroadcast_graph(gd, x.shape) if na else None, unbroadcast_graph(-gd, t.shape) if nb else None,
                None, None)


class MseLoss(Function):
    """``mse_loss`` of one shape and dtype reduced by 'mean' (``mean``) or 'sum', fused: the loss in one pass and
    its gradients ``norm * (x - t) * g`` in another (``kernels.loss_reduce``), where composing it records three ops
    (a difference, a square, a reduction) and launches more."""

    @staticmethod
    def forward(ctx, x, t, mean):
        ctx.save_for_backward(x, t)
        ctx.mean = mean
        return R.squared_error(x, t, mean)

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        na, nb = ctx.needs_input_grad[:2]
        return (*R.squared_error_backward(x, t, g, ctx.mean, na, nb), None)

    @staticmethod
    def backward_graph(ctx, g):
        x, t = ctx.saved_tensors
        norm = 2.0 / x.size if ctx.mean else 2.0
        d = _wide(ctx.graph_input(0, x)) - _wide(ctx.graph_input(1, t))
        gd = d * norm * _wide(g)
        na, nb = ctx.needs_input_grad[:2]
        return (gd.to(x.dtype) if na else None), ((-gd).to(x.dtype) if nb else None), None


class KLDiv(Function):
    """Pointwise KL divergence: ``t (log t - x)`` (0 where t == 0), or ``exp(t) (t - x)`` for log targets."""

    @staticmethod
    def forward(ctx, x, t, log_target):
        xp, xu, tu = _xp(x), _up(x), _up(t)
        if log_target:
            loss = xp.exp(tu) * (tu - xu)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                loss = backend.where(tu == 0, 0, tu * xp.log(tu)) - tu * xu  # xlogy(t, t): NaN for t < 0
        ctx.save_for_backward(x, t)
        ctx.log_target = log_target
        return _emit(loss, x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        xp, xu, tu, gu = _xp(g), _up(x), _up(t), _up(g)
        gx = gt = None
        if ctx.needs_input_grad[0]:
            gx = _emit(unbroadcast(-gu * (xp.exp(tu) if ctx.log_target else tu), x.shape), x.dtype)
        if ctx.needs_input_grad[1]:
            with np.errstate(divide="ignore", invalid="ignore"):  # (t / t: NaN at t = 0, as PyTorch's)
                d = xp.exp(tu) * (tu - xu + 1) if ctx.log_target else xp.log(tu) + tu / tu - xu
            gt = _emit(unbroadcast(gu * d, t.shape), t.dtype)
        return gx, gt, None

    @staticmethod
    def backward_graph(ctx, g):
        x, t = ctx.saved_tensors
        xt, tt, g = _wide(ctx.graph_input(0, x)), _wide(ctx.graph_input(1, t)), _wide(g)
        gx = gt = None
        if ctx.needs_input_grad[0]:
            gx = unbroadcast_graph(-g * (tt.exp() if ctx.log_target else tt), x.shape)
        if ctx.needs_input_grad[1]:
            d = tt.exp() * (tt - xt + 1) if ctx.log_target else tt.log() + tt / tt - xt
            gt = unbroadcast_graph(g * d, t.shape)
        return gx, gt, None
