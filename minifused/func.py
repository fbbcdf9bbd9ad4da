"""``torch.func``'s stateless call: :func:`functional_call` (the transforms ``grad``, ``vmap``, ``jvp`` ... are
not part of minifused)."""
from __future__ import annotations

from .nn.stateless import functional_call as _functional_call

__all__ = ["functional_call"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """``torch.func.functional_call``: :func:`minifused.nn.utils.stateless.functional_call`, whose tensors may
    also come as a sequence of dicts (merged; a name in two of them is a ValueError)."""
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, (list, tuple)):
        merged, seen = {}, set()
        repeated = []
        for d in parameter_and_buffer_dicts:
            if not isinstance(d, dict):
                raise TypeError(f"functional_call: expected a dict or a sequence of dicts, got an element of type "
                                f"{type(d).__name__}")
            repeated += [k for k in d if k in seen]
            seen.update(d)
            merged.update(d)
        if repeated:
            raise ValueError(f"{sorted(set(repeated))} appeared in multiple dictionaries; behavior of functional "
                             f"call is ambiguous")
    else:
        raise TypeError(f"functional_call: expected a dict or a sequence of dicts, got "
                        f"{type(parameter_and_buffer_dicts).__name__}")
    return _functional_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)
