"""Reverse-mode autograd over TileTensors: a tape of ``Function`` nodes.

Importing this package fills the tensor op table (``numtile.tiletensor.dispatch``) with the
gradient rules of ``rules.py``'s classes (``import numtile`` does).
"""

from numtile.autograd import (
    distribution,
    elementwise,
    elementwise_math,
    factorizations,
    indexing,
    linalg,
    logic,
    manipulation,
    reduction,
    rules,
    spectral,
    statistics,
)
from numtile.autograd.rules import NoGradientError
from numtile.autograd.tape import (
    Context,
    Function,
    backward,
    enable_grad,
    is_grad_enabled,
    no_grad,
)

rules.install(backward)

__all__ = [
    "Context",
    "Function",
    "NoGradientError",
    "backward",
    "distribution",
    "elementwise",
    "elementwise_math",
    "enable_grad",
    "factorizations",
    "indexing",
    "is_grad_enabled",
    "linalg",
    "logic",
    "manipulation",
    "no_grad",
    "reduction",
    "rules",
    "spectral",
    "statistics",
]
