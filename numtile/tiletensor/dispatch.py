"""The op table: every public tensor op and operator calls its implementation through it.

``tiletensor`` registers each op's plain tiled implementation here; ``numtile.autograd``,
when it is imported (``import numtile`` does), replaces every entry by one that records a
gradient or refuses an input that requires one. So TileTensor knows nothing about the
tape, and no op can cut the graph silently.

>>> import numtile as nt
>>> dispatch_name(nt.sin), dispatch_name(nt.linalg.cholesky)
('sin', 'cholesky')
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from numtile.tiletensor import placement

PLAIN: dict[str, Callable] = {}  # op name -> the plain tiled implementation
TABLE: dict[str, Callable] = {}  # op name -> what a call runs (plain, or autograd's override)
PUBLIC_NAMES: dict[str, str] = {}  # op name -> the name users call it by, for messages
# op name -> its deferred form (auto_fusion.py, while automatic fusion is on): it returns a
# tensor whose tasks wait to run fused with the ops that use it, or None to run the op now
DEFERRED: dict[str, Callable] = {}
# the tensor classes: TileTensor (set by ``tensor.py``, which imports this module) and the
# traced values ``nt.fuse`` records ops on (``fusion_trace.py``); an op whose first parameter
# is annotated ``TileTensor`` refuses anything else with a ``TypeError``
TENSOR_TYPES: tuple[type, ...] = ()


def _takes_tensor_first(plain: Callable) -> str | None:
    """The name of ``plain``'s first parameter when it is annotated ``TileTensor``, else None."""
    parameters = list(inspect.signature(plain).parameters.values())
    return parameters[0].name if parameters and parameters[0].annotation == "TileTensor" else None


def require_tensor(x, name: str) -> None:
    """Raise ``TypeError`` unless ``x`` is a TileTensor: ops do not convert lists silently.

    >>> import numtile as nt
    >>> require_tensor([1, 2], "sum")
    Traceback (most recent call last):
    TypeError: sum expects a TileTensor, got list (convert it with nt.asarray)
    """
    if not isinstance(x, TENSOR_TYPES):
        raise TypeError(
            f"{name} expects a TileTensor, got {type(x).__name__} (convert it with nt.asarray)"
        )


def dispatched(plain: Callable | None = None, *, name: str | None = None, public=None):
    """Register ``plain`` as an op and return the public function that calls the table.

    ``name`` defaults to the function's name, ``public`` (the name error messages use) to
    ``numtile.<name>``. Usable as ``@dispatched`` or ``dispatched(function, name=...)``.
    """
    if plain is None:
        return functools.partial(dispatched, name=name, public=public)
    key = name or plain.__name__
    if key in PLAIN:
        raise ValueError(f"op {key!r} is registered twice")
    PLAIN[key] = TABLE[key] = plain
    PUBLIC_NAMES[key] = public or f"numtile.{key}"
    first = _takes_tensor_first(plain)

    @functools.wraps(plain)
    def op(*args, **kwargs):
        if first is not None and (args or first in kwargs):
            require_tensor(args[0] if args else kwargs[first], plain.__name__)
        return call(key, *args, **kwargs)

    op.dispatch_name = key
    return op


def call(name: str, *args, **kwargs):
    """Run op ``name`` through the table (TileTensor's operators and methods use this)."""
    if placement.ACTIVE[0]:  # under MPI: new tensors take their inputs' distribution
        return placement.run_placed(TABLE[name], args, kwargs)
    deferred = DEFERRED.get(name)
    if deferred is not None and not kwargs:
        out = deferred(name, args)
        if out is not None:
            return out
    return TABLE[name](*args, **kwargs)


def override(name: str, implementation: Callable) -> None:
    """Make ``implementation`` what op ``name`` runs (autograd installs its rules here)."""
    if name not in PLAIN:
        raise KeyError(f"no op named {name!r} to override")
    TABLE[name] = implementation


def dispatch_name(function: Callable) -> str | None:
    """The op name a public function dispatches on (None for a function that is no op)."""
    return getattr(function, "dispatch_name", None)
