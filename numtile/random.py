"""``numtile.random``: random tensors independent of the tiling."""

from numtile.tiletensor.random import normal, random, seed, uniform

__all__ = ["normal", "random", "seed", "uniform"]
