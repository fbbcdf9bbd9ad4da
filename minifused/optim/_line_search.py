"""LBFGS's strong Wolfe line search with cubic interpolation (``torch.optim.lbfgs``'s algorithm, after minFunc).

Scalars keep PyTorch's types: what is a 0-d tensor there (a dot product, a gradient's norm) is a 0-d array
of the parameters' dtype here, what is a Python float there (a loss, an initial step) is one here, so that
NumPy/CuPy promotion (NEP 50: Python scalars are weak) rounds each expression as PyTorch does.
"""
from __future__ import annotations

from .. import backend


def _sqrt(x):
    return backend.array_module(x).sqrt(x) if hasattr(x, "dtype") else x ** 0.5


def cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clamped to ``bounds``
    (default: between x1 and x2); their midpoint when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if not d2_square >= 0:
        return (lo + hi) / 2.0
    d2 = _sqrt(d2_square)
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


class _Point:
    """One evaluation along the search direction: step ``t``, loss ``f``, flat gradient ``g``, slope ``gtd``."""
    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step ``t`` along ``d`` from ``x`` (loss ``f``, gradient ``g``, slope ``gtd``) meeting the strong Wolfe
    conditions, within ``max_ls`` evaluations of ``obj_func(x, t, d) -> (loss, flat gradient)``; returns
    (loss, flat gradient, t, evaluations). Flat gradients are fresh arrays that nothing writes into, so they
    are kept without PyTorch's clones."""
    d_norm = abs(d).max()
    f_new, g_new = obj_func(x, t, d)
    evals, ls_iter, done = 1, 0, False
    new = _Point(t, f_new, g_new, g_new.dot(d))
    prev = _Point(0, f, g, gtd)
    bracket = None
    # bracketing phase: grow the step until an interval holds a point meeting the conditions
    while ls_iter < max_ls:
        if new.f > (f + c1 * new.t * gtd) or (ls_iter > 1 and new.f >= prev.f):
            bracket = [prev, new]
            break
        if abs(new.gtd) <= -c2 * gtd:
            bracket, done = [new], True
            break
        if new.gtd >= 0:
            bracket = [prev, new]
            break
        t = cubic_interpolate(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd,
                              bounds=(new.t + 0.01 * (new.t - prev.t), new.t * 10))
        prev = new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        new = _Point(t, f_new, g_new, g_new.dot(d))
        ls_iter += 1
    if ls_iter >= max_ls:  # out of evaluations: the interval from the start to the last step
        bracket = [_Point(0, f, g, None), _Point(new.t, new.f, new.g, None)]
    if done:
        return new.f, new.g, new.t, evals
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    insufficient = False
    # zoom phase: shrink the interval around a point meeting the conditions
    while not done and ls_iter < max_ls:
        if abs(bracket[1].t - bracket[0].t) * d_norm < tolerance_change:
            break
        a, b = bracket
        t = cubic_interpolate(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        t_max, t_min = max(a.t, b.t), min(a.t, b.t)
        eps = 0.1 * (t_max - t_min)
        if min(t_max - t, t - t_min) < eps:  # too close to an end: step away from it, unless progress was good
            if insufficient or t >= t_max or t <= t_min:
                t = t_max - eps if abs(t - t_max) < abs(t - t_min) else t_min + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        ls_iter += 1
        new = _Point(t, f_new, g_new, g_new.dot(d))
        if new.f > (f + c1 * t * gtd) or new.f >= bracket[low].f:
            bracket[high] = new
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(new.gtd) <= -c2 * gtd:
                done = True
            elif new.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = new
    best = bracket[low]
    return best.f, best.g, best.t, evals
