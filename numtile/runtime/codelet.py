"""The registry of tile operations: one ``Codelet`` per op, with its implementations per kind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Codelet:
    """One tile operation with its implementations and cost model.

    ``kernel(ops, *buffers, *args)`` is written once for every kind of worker: ``ops`` is
    the namespace the backends table gives that kind (``numtile.ops_cpu`` on a CPU worker,
    ``numtile.ops_cuda`` with the worker's stream bound on a GPU), ``buffers`` the task's
    tiles (host or device arrays, in the order the task named its handles) and ``args`` its
    scalar arguments. ``implementations={kind: f}`` gives kind-specific versions with the
    same signature instead of (or on top of) ``kernel``: a codelet without ``kernel`` runs
    only on the kinds it names. ``flops(*shapes, *args)`` returns the floating-point
    operations of one call, times ``complex_flops`` when a tile is complex (4 for the linear
    algebra kernels: a complex multiply-add is 8 real flops to a real one's 2; element-wise
    codelets keep 1). ``scratch(*tiles, *args)`` returns the bytes of working memory
    one call allocates beside its tiles (a gathered copy, LAPACK's workspace), given the
    task's tiles as handles (``shape``, ``dtype``, ``nbytes``): where memory is limited the
    manager makes room for them before the task starts and gives it back when it ends
    (``runtime/memory.py``); without ``scratch=``, a kernel's own ``scratch`` attribute
    (set by a wrapper that allocates, as ``narrow.through_float32``) is used. A ``control``
    codelet receives no tiles, only its arguments: the runtime's own bookkeeping tasks
    (``invalidate``, ``wont_use``), run by the host kind.

    >>> import numpy as np
    >>> double = Codelet(
    ...     "double", implementations={"cpu": lambda ops, x, y: np.multiply(x, 2, out=y)}
    ... )
    >>> double.implementation("cpu") is not None, double.implementation("cuda")
    (True, None)
    """

    name: str
    kernel: Callable[..., Any] | None = field(default=None, repr=False)
    implementations: dict[str, Callable[..., Any]] = field(default_factory=dict, repr=False)
    control: bool = False
    flops: Callable[..., float] | None = None
    complex_flops: float = 1.0
    scratch: Callable[..., int] | None = None
    calls: int = field(default=0, repr=False)
    seconds: float = field(default=0.0, repr=False)
    total_flops: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        if self.kernel is None and not self.implementations:
            raise ValueError(f"codelet {self.name!r} needs at least one implementation")
        self.implementations = dict(self.implementations)
        if self.scratch is None:  # a kernel wrapper may say what it allocates (bfloat16's)
            kernels = (self.kernel, *self.implementations.values())
            self.scratch = next((k.scratch for k in kernels if hasattr(k, "scratch")), None)
        REGISTRY[self.name] = self  # a redefinition (tests, notebooks) replaces the entry

    def task_flops(self, handles, args) -> float:
        """The flops of one call on ``handles`` (``shape``, ``dtype``) with ``args``."""
        flops = self.flops(*[h.shape for h in handles], *args)
        if self.complex_flops != 1 and any(h.dtype.kind == "c" for h in handles):
            return flops * self.complex_flops
        return flops

    def implementation(self, kind: str) -> Callable[..., Any] | None:
        """What a worker of ``kind`` calls: its own implementation, else ``kernel``."""
        return self.implementations.get(kind, self.kernel)


REGISTRY: dict[str, Codelet] = {}
