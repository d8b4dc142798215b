"""Distributions: which rank owns each tile of a tensor (``numtile.distribution``).

A distribution maps a tile index ``(i, j, ...)`` to a rank, or to ``ALL`` (replicated: every
rank holds the tile and computes the tasks that write it). The owner runs the tasks writing
its tiles; the runtime moves tiles that other ranks read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from numtile.runtime.distributed.front import ALL


def _current_nranks() -> int:
    from numtile.runtime.distributed import nranks

    return nranks()


class Distribution:
    """Base class: ``owner(index)`` for one tile index, checked against the ranks running."""

    def owner(self, index: tuple[int, ...]) -> int:
        raise NotImplementedError

    def owners(self, indices: Sequence[tuple[int, ...]], nranks: int) -> list[int]:
        """The owner of each tile; ``ValueError`` for a rank outside ``0 .. nranks - 1``."""
        owners = []
        for index in indices:
            owner = self.owner(tuple(index))
            if owner != ALL and not (isinstance(owner, int) and 0 <= owner < nranks):
                raise ValueError(
                    f"{self!r} gives tile {tuple(index)} to rank {owner!r}, but the ranks "
                    f"running are 0 .. {nranks - 1}"
                )
            owners.append(owner)
        return owners


class BlockCyclic(Distribution):
    """ScaLAPACK's 2-D block-cyclic distribution over a ``(p, q)`` process grid.

    Tile ``(..., i, j)`` goes to rank ``(i % p) * q + j % q`` (leading axes, such as a batch,
    do not count); a 1-D tensor's tile ``i`` to ``i % (p * q)``.

    >>> BlockCyclic((2, 2), nranks=4).owner((3, 1)), BlockCyclic((2, 2), nranks=4).owner((5,))
    (3, 1)
    """

    def __init__(self, grid: Sequence[int] | None = None, nranks: int | None = None) -> None:
        nranks = _current_nranks() if nranks is None else nranks
        if grid is None:  # the squarest p x q = nranks, p <= q
            p = max(d for d in range(1, math.isqrt(nranks) + 1) if nranks % d == 0)
            grid = (p, nranks // p)
        grid = tuple(int(g) for g in grid)
        if len(grid) != 2 or min(grid) < 1:
            raise ValueError(
                f"block_cyclic needs a process grid (p, q) of positive ints, got {grid}"
            )
        if grid[0] * grid[1] > nranks:
            raise ValueError(
                f"block_cyclic grid {grid} names {grid[0] * grid[1]} ranks, but only {nranks} "
                f"run (mpiexec -n {nranks})"
            )
        self.grid = grid

    def owner(self, index: tuple[int, ...]) -> int:
        p, q = self.grid
        if len(index) == 0:
            return 0
        if len(index) == 1:
            return index[0] % (p * q)
        return (index[-2] % p) * q + index[-1] % q

    def __repr__(self) -> str:
        return f"block_cyclic({self.grid})"


class ByAxis(Distribution):
    """Tiles spread round-robin over the ranks along one axis (e.g. batch tiles).

    >>> ByAxis(0, nranks=3).owner((4, 7))
    1
    """

    def __init__(self, axis: int, nranks: int | None = None) -> None:
        self.axis = int(axis)
        self.nranks = _current_nranks() if nranks is None else nranks

    def owner(self, index: tuple[int, ...]) -> int:
        if not -len(index) <= self.axis < len(index):
            raise ValueError(f"by_axis({self.axis}) on a tensor with {len(index)} axes")
        return index[self.axis] % self.nranks

    def __repr__(self) -> str:
        return f"by_axis({self.axis})"


class Replicated(Distribution):
    """Every rank holds every tile (and computes what writes it).

    >>> Replicated().owner((0, 0)) == ALL
    True
    """

    def owner(self, index: tuple[int, ...]) -> int:
        return ALL

    def __repr__(self) -> str:
        return "replicated"


class FromFunction(Distribution):
    """A user function ``tile index -> rank``.

    >>> FromFunction(lambda index: sum(index) % 2).owner((1, 2))
    1
    """

    def __init__(self, function: Callable[[tuple[int, ...]], int]) -> None:
        self.function = function

    def owner(self, index: tuple[int, ...]) -> int:
        return self.function(index)

    def __repr__(self) -> str:
        return f"distribution({getattr(self.function, '__name__', self.function)!r})"


class TileTable(Distribution):
    """Owners listed tile by tile (``{tile index: rank}``): those of another tensor's tiles,
    such as a gradient given its parameter's owners. An index not listed cannot be placed.

    >>> TileTable({(0, 0): 1, (0, 1): 0}).owner((0, 1))
    0
    """

    def __init__(self, owners: dict[tuple[int, ...], int]) -> None:
        self.table = dict(owners)

    def owner(self, index: tuple[int, ...]) -> int:
        if index not in self.table:
            raise ValueError(f"{self!r} does not list tile {index}")
        return self.table[index]

    def __repr__(self) -> str:
        return f"tile_table({len(self.table)} tiles)"


def as_distribution(value) -> Distribution:
    """A ``Distribution`` from one, or from a function ``tile index -> rank``."""
    if isinstance(value, Distribution):
        return value
    if callable(value):
        return FromFunction(value)
    raise TypeError(
        f"distribution must be a numtile.distribution (block_cyclic, by_axis, replicated) or "
        f"a function tile index -> rank, got {value!r}"
    )
