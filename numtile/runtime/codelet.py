"""The registry of tile operations: one ``Codelet`` per op, the only place backends meet."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Codelet:
    """One tile operation with its implementations and cost model.

    ``kernel(ops, *buffers, *args)`` is written once for both backends: ``ops`` is
    ``numtile.ops_cpu`` on a CPU worker and ``numtile.ops_cuda`` with the worker's stream
    bound on a GPU, ``buffers`` the task's tiles (host or device arrays, in the order the
    task named its handles) and ``args`` its scalar arguments. ``cpu(*buffers, *args)`` and
    ``cuda(ops, *buffers, *args)`` give backend-specific implementations instead (a codelet
    with only ``cpu`` never runs on a GPU). ``flops(*shapes, *args)`` returns the
    floating-point operations of one call. A ``control`` codelet receives no tiles, only its
    arguments: the runtime's own bookkeeping tasks (``invalidate``, ``wont_use``).

    >>> import numpy as np
    >>> double = Codelet("double", cpu=lambda x, y: np.multiply(x, 2, out=y))
    >>> double.name
    'double'
    """

    name: str
    cpu: Callable[..., Any] | None = None
    cuda: Callable[..., Any] | None = None
    kernel: Callable[..., Any] | None = field(default=None, repr=False)
    control: bool = False
    flops: Callable[..., float] | None = None
    calls: int = field(default=0, repr=False)
    seconds: float = field(default=0.0, repr=False)
    total_flops: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        if self.kernel is not None:
            if self.cpu is None:
                from numtile import ops_cpu

                self.cpu = functools.partial(self.kernel, ops_cpu)
            if self.cuda is None:
                self.cuda = self.kernel
        if self.cpu is None and self.cuda is None:
            raise ValueError(f"codelet {self.name!r} needs at least one implementation")
        REGISTRY[self.name] = self  # a redefinition (tests, notebooks) replaces the entry


REGISTRY: dict[str, Codelet] = {}
