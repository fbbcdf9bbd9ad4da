"""``torch.jit``'s decorators and queries, for model code written to be scriptable (torchvision's and timm's
layers mark methods ``@torch.jit.unused`` and branch on ``torch.jit.is_scripting()``): the decorators return
what they decorate, the queries answer False. minifused runs Python; it has no TorchScript compiler, so
``script``, ``trace``, ``save`` and ``load`` refuse, naming what to use instead."""
from __future__ import annotations

from typing import Final  # noqa: F401 - torch.jit.Final, the annotation scriptable modules use

__all__ = ["Final", "annotate", "export", "ignore", "is_scripting", "is_tracing", "load", "save", "script",
           "trace", "unused"]


def is_scripting() -> bool:
    """False: code here runs as Python, never as TorchScript."""
    return False


def is_tracing() -> bool:
    """False: nothing is traced here."""
    return False


def annotate(the_type, the_value):
    """``the_value``: the type is a hint to TorchScript's compiler only."""
    return the_value


def unused(fn):
    """``fn`` as it is (TorchScript would leave it out of a compiled module)."""
    return fn


def export(fn):
    """``fn`` as it is (TorchScript would compile it as an entry point)."""
    return fn


def ignore(drop=False, **kwargs):
    """``@ignore`` or ``@ignore(drop=...)``: the function as it is (TorchScript would call it in Python)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def _refuse(what):
    def refused(*args, **kwargs):
        raise NotImplementedError(f"jit.{what}: minifused has no TorchScript compiler; run the module as "
                                  f"it is (minifused.compile(...) is accepted and changes nothing), and save "
                                  f"its weights with minifused.save(model.state_dict(), path)")
    refused.__name__ = refused.__qualname__ = what
    return refused


script, trace, save, load = (_refuse(name) for name in ("script", "trace", "save", "load"))
