"""The registry of tile operations: one ``Codelet`` per op, the only place backends meet."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Codelet:
    """One tile operation with its implementations and cost model.

    ``cpu(*buffers, *args)`` receives the task's tiles (NumPy arrays, in the order the task
    named its handles) followed by the task's scalar arguments. ``flops(*shapes, *args)``
    returns the floating-point operations of one call, given the tiles' shapes.

    >>> import numpy as np
    >>> double = Codelet("double", cpu=lambda x, y: np.multiply(x, 2, out=y))
    >>> double.name
    'double'
    """

    name: str
    cpu: Callable[..., Any] | None = None
    cuda: Callable[..., Any] | None = None
    flops: Callable[..., float] | None = None
    calls: int = field(default=0, repr=False)
    seconds: float = field(default=0.0, repr=False)
    total_flops: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        if self.cpu is None and self.cuda is None:
            raise ValueError(f"codelet {self.name!r} needs at least one implementation")
        REGISTRY[self.name] = self  # a redefinition (tests, notebooks) replaces the entry


REGISTRY: dict[str, Codelet] = {}
