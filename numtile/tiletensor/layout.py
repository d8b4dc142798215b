"""``Layout``: how a shape is cut into tiles (normalised once, at construction)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

from numtile.config import Config
from numtile.runtime import RuntimeShutdownError, get_runtime


def _as_shape(shape, what: str) -> tuple[int, ...]:
    if isinstance(shape, int) or hasattr(shape, "__index__"):
        shape = (shape,)
    try:
        out = tuple(int(s.__index__()) for s in shape)
    except (TypeError, AttributeError):
        raise TypeError(f"{what} must be a sequence of integers, got {shape!r}") from None
    return out


def current_config() -> Config:
    """The running runtime's configuration (the environment's once the runtime is shut down).

    Read when a tensor is made, so ``nt.init(tile=64)`` applies to the tensors made after.
    """
    try:
        return get_runtime().config
    except RuntimeShutdownError:
        return Config.defaults()


def default_tile_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """The default tiling: the runtime's ``tile`` per axis (``tile_1d`` for 1-D tensors).

    >>> import numtile as nt
    >>> _ = nt.init(tile=64); default_tile_shape((200, 30)), default_tile_shape((10,))
    ((64, 30), (10,))
    >>> _ = nt.init()
    """
    config = current_config()
    edge = config.tile_1d if len(shape) == 1 else config.tile
    return tuple(max(1, min(edge, s)) for s in shape)


def c_strides(shape) -> list[int]:
    """Element strides of a C-ordered array of ``shape``.

    >>> c_strides((2, 3, 4))
    [12, 4, 1]
    """
    strides, step = [0] * len(shape), 1
    for axis in range(len(shape) - 1, -1, -1):
        strides[axis] = step
        step *= shape[axis]
    return strides


class Layout:
    """Shape, tile shape and grid of a tiled tensor; any shape with any tile shape works.

    Tiles are ``tile_shape`` big except the last one along an axis, which holds the rest.
    ``None`` in ``tile_shape`` means the whole axis.

    >>> layout = Layout((5, 4), (2, 4))
    >>> layout.grid, layout.tile_shape_at((2, 0)), layout.tile_bounds((1, 0))
    ((3, 1), (1, 4), ((2, 4), (0, 4)))
    """

    __slots__ = ("shape", "tile_shape", "grid", "ndim", "starts", "_ntiles", "_tile_shapes")

    def __init__(self, shape, tile_shape=None) -> None:
        shape = _as_shape(shape, "shape")
        if any(s < 0 for s in shape):
            raise ValueError(f"shape must not have negative sizes, got {shape}")
        if tile_shape is None:
            tile_shape = default_tile_shape(shape)
        else:
            given = tile_shape
            if isinstance(tile_shape, int) or hasattr(tile_shape, "__index__"):
                tile_shape = (tile_shape,)
            try:
                tile_shape = tuple(
                    max(s, 1) if t is None or t == -1 else t for t, s in zip(tile_shape, shape)
                ) + tuple(tile_shape[len(shape) :])
            except TypeError:
                raise TypeError(
                    f"tile_shape must be a sequence of integers, got {given!r}"
                ) from None
            tile_shape = _as_shape(tile_shape, "tile_shape")
            if len(tile_shape) != len(shape):
                raise ValueError(
                    f"tile_shape {given!r} has rank {len(tile_shape)} but shape {shape} has "
                    f"rank {len(shape)}"
                )
        if any(t <= 0 for t in tile_shape):
            raise ValueError(f"tile sizes must be positive, got tile_shape {tile_shape}")
        self.shape = shape
        self.tile_shape = tile_shape
        self.ndim = len(shape)
        self.grid = tuple(-(-s // t) for s, t in zip(shape, tile_shape))
        self.starts = tuple(
            tuple(range(0, s, t)) + (s,) for s, t in zip(shape, tile_shape)
        )  # per axis: tile start offsets followed by the axis length
        self._ntiles = math.prod(self.grid)
        self._tile_shapes: list[tuple[int, ...]] | None = None

    @property
    def ntiles(self) -> int:
        return self._ntiles

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def tile_bounds(self, index: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """(start, stop) of tile ``index`` along each axis."""
        return tuple((st[i], st[i + 1]) for st, i in zip(self.starts, index))

    def tile_shape_at(self, index: Sequence[int]) -> tuple[int, ...]:
        return tuple(st[i + 1] - st[i] for st, i in zip(self.starts, index))

    def tile_shapes(self) -> list[tuple[int, ...]]:
        """The shape of every tile in C order (computed once per layout)."""
        if self._tile_shapes is None:
            sizes = [self.tile_sizes(axis) for axis in range(self.ndim)]
            self._tile_shapes = list(itertools.product(*sizes))
        return self._tile_shapes

    def indices(self) -> Iterator[tuple[int, ...]]:
        """Every tile index in C order."""
        return itertools.product(*(range(g) for g in self.grid))

    def tile_sizes(self, axis: int) -> tuple[int, ...]:
        """Sizes of the tiles along ``axis`` (like a dask chunks entry)."""
        st = self.starts[axis]
        return tuple(st[i + 1] - st[i] for i in range(len(st) - 1))

    def tile_of(self, axis: int, position: int) -> int:
        """Index of the tile holding element ``position`` along ``axis``."""
        return position // self.tile_shape[axis]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Layout)
            and self.shape == other.shape
            and self.tile_shape == other.tile_shape
        )

    def __hash__(self) -> int:
        return hash((self.shape, self.tile_shape))

    def __repr__(self) -> str:
        return f"Layout(shape={self.shape}, tile_shape={self.tile_shape}, grid={self.grid})"
