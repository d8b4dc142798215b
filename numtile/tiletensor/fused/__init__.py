"""Fused tiled ops of the neural-network layers: each is a tile loop over one fused kernel.

``numtile.nn`` wraps them in autograd Functions; they take and return TileTensors and never
record gradients themselves.
"""

from numtile.tiletensor.fused import (
    activated,
    attention,
    embedding,
    linear,
    loss,
    norm,
    optim,
    rope,
    swiglu,
)

__all__ = [
    "activated",
    "attention",
    "embedding",
    "linear",
    "loss",
    "norm",
    "optim",
    "rope",
    "swiglu",
]
