"""How a tensor's tiles are spread over MPI ranks: ``nt.distribution.block_cyclic(grid)``,
``by_axis(axis)``, ``replicated``, or a function ``tile index -> rank``.

>>> import numtile as nt, numpy as np
>>> x = nt.from_numpy(np.ones((4, 4)), tile_shape=(2, 2), distribution=nt.distribution.replicated)
>>> float(x.to_numpy().sum())
16.0
"""

from numtile.runtime.distributed.distribution import (
    ALL,
    BlockCyclic,
    ByAxis,
    Distribution,
    FromFunction,
    Replicated,
    as_distribution,
)
from numtile.tiletensor.redistribution import redistribute

replicated = Replicated()


def block_cyclic(grid=None) -> BlockCyclic:
    """2-D block-cyclic over a ``(p, q)`` process grid, as ScaLAPACK (default: the squarest
    grid of all ranks); ``ValueError`` if ``p * q`` exceeds the ranks running.

    >>> import numtile as nt
    >>> block_cyclic((1, nt.nranks())).grid == (1, nt.nranks())
    True
    """
    return BlockCyclic(grid)


def by_axis(axis: int) -> ByAxis:
    """Tiles round-robin over the ranks along ``axis``.

    >>> by_axis(0).owner((0, 5))
    0
    """
    return ByAxis(axis)


__all__ = [
    "ALL",
    "BlockCyclic",
    "ByAxis",
    "Distribution",
    "FromFunction",
    "Replicated",
    "as_distribution",
    "block_cyclic",
    "by_axis",
    "redistribute",
    "replicated",
]
