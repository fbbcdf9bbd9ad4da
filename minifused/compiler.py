"""``torch.compiler``: the queries and decorators that model code written for ``torch.compile`` calls (libraries
branch on ``torch.compiler.is_compiling()`` and mark helpers ``@torch.compiler.disable``). minifused never traces
or compiles Python: :func:`minifused.compile` returns what it is given, its layers already run fused kernels and a
whole training step runs as one CUDA graph through :func:`minifused.capture_step`. So the queries answer False, the
decorators return what they decorate (checked callable) and the state functions change nothing."""
from __future__ import annotations

import functools
import types

from .backend import InputTypeError
from .graphs import compile as _compile

__all__ = ["compile", "allow_in_graph", "assume_constant_result", "cudagraph_mark_step_begin", "disable",
           "is_compiling", "is_dynamo_compiling", "is_exporting", "list_backends", "nested_compile_region", "reset",
           "substitute_in_graph"]

#: The backend names ``list_backends`` gives: PyTorch's for CUDA, and the debugging ones it lists when asked for
#: all (``exclude_tags=None``). minifused.compile takes any name and ignores it.
_BACKENDS = ("cudagraphs", "inductor")
_DEBUG_BACKENDS = ("aot_eager", "eager")


def _callable(op, fn, what="fn"):
    if not callable(fn):
        raise InputTypeError(f"compiler.{op}: {what} must be callable, got {type(fn).__name__}")
    return fn


def compile(*args, **kwargs):  # noqa: A001 - PyTorch's name
    """:func:`minifused.compile` (``torch.compiler.compile`` is ``torch.compile``): the module or function given
    comes back as it is; with none, a decorator that does the same."""
    return _compile(*args, **kwargs)


def is_compiling() -> bool:
    """False: no code here runs under a compiler's tracing."""
    return False


def is_dynamo_compiling() -> bool:
    """False: there is no Dynamo tracing here."""
    return False


def is_exporting() -> bool:
    """False: nothing here is traced for export."""
    return False


def disable(fn=None, recursive=True, *, reason=None):
    """``fn`` as it is (it already runs uncompiled); with no ``fn``, a decorator that does the same."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    return _callable("disable", fn)


def allow_in_graph(fn):
    """``fn`` as it is (a list or tuple of functions: a list of them, as PyTorch's): there is no graph to write it
    into."""
    if isinstance(fn, (list, tuple)):
        return [allow_in_graph(f) for f in fn]
    return _callable("allow_in_graph", fn)


def assume_constant_result(fn):
    """``fn`` as it is: its result is computed at each call, as nothing is compiled."""
    return _callable("assume_constant_result", fn)


def substitute_in_graph(original_fn, *, can_constant_fold_through=False, skip_signature_check=False):
    """A decorator registering a traceable stand-in for ``original_fn`` with PyTorch's compiler; as in PyTorch's
    eager mode, the function it returns calls ``original_fn`` (the stand-in is only ever traced). Both must be
    functions, as PyTorch requires; their signatures are not compared."""
    function_types = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                      types.WrapperDescriptorType)
    if not isinstance(original_fn, function_types):
        raise InputTypeError(f"substitute_in_graph expects a function but got {type(original_fn)!r}")

    def wrapper(traceable_fn):
        if not isinstance(traceable_fn, function_types):
            raise InputTypeError(f"@substitute_in_graph(...) expects a function but got {type(traceable_fn)!r}")

        @functools.wraps(traceable_fn)
        def wrapped(*args, **kwargs):
            return original_fn(*args, **kwargs)

        return wrapped

    return wrapper


def nested_compile_region(fn=None, *, options=None, max_reuse_entries=8, reuse_hash_fn=None):
    """``fn`` as it is (outside a compiled region PyTorch's is a no-op too); with no ``fn``, a decorator."""
    if fn is None:
        return lambda f: _callable("nested_compile_region", f)
    return _callable("nested_compile_region", fn)


def reset() -> None:
    """Nothing to clear: minifused keeps no compiled code (CUDA graphs of :func:`minifused.capture_step` are
    dropped by its ``reset()``)."""


def cudagraph_mark_step_begin():
    """Nothing to mark: no compiled CUDA graph here frees a previous step's outputs."""


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names PyTorch lists for CUDA, ``['cudagraphs', 'inductor']``, with its debugging ones
    (``'aot_eager'``, ``'eager'``) unless ``exclude_tags`` names ``'debug'``. :func:`minifused.compile` accepts
    them, and any other name, and compiles nothing."""
    try:
        excluded = set(exclude_tags or ())
    except TypeError:
        raise InputTypeError(f"compiler.list_backends: exclude_tags must be a tuple of tags or None, got "
                             f"{type(exclude_tags).__name__}") from None
    return sorted(_BACKENDS if "debug" in excluded else _BACKENDS + _DEBUG_BACKENDS)
