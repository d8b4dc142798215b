"""Rearranging elements (array API): flip, roll, moveaxis, broadcast_arrays.

``flip`` and ``roll`` are tile copies with negative or wrapped source positions
(``copying.copy_parts``); ``moveaxis`` and ``broadcast_arrays`` are ``permute_dims`` and
``broadcast_to``.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np

from numtile.tiletensor.copying import copy_parts, normalize_axis
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.manipulation import broadcast_to, permute_dims, reshape
from numtile.tiletensor.tensor import TileTensor


def normalize_axes(axis, ndim: int, *, unique: bool = True) -> tuple[int, ...]:
    """``axis`` (None: every axis; an int; a sequence) as a tuple of axes in [0, ndim)."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) or hasattr(axis, "__index__") else tuple(axis)
    axes = tuple(normalize_axis(a, ndim) for a in axes)
    if unique and len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis in {axis!r}")
    return axes


@dispatched
def flip(x: TileTensor, /, *, axis=None) -> TileTensor:
    """``x`` with the order of elements reversed along ``axis`` (every axis when None).

    >>> import numtile as nt
    >>> nt.flip(nt.arange(5, tile_shape=2)).to_numpy().tolist()
    [4, 3, 2, 1, 0]
    """
    axes = normalize_axes(axis, x.ndim)
    out = TileTensor(x.layout, x.dtype)
    axis_map = [(k, n - 1, -1) if k in axes else (k, 0, 1) for k, n in enumerate(x.shape)]
    return copy_parts(out, [(x, axis_map, None)])


@dispatched
def roll(x: TileTensor, /, shift, *, axis=None) -> TileTensor:
    """``x`` with elements shifted by ``shift`` along ``axis``, those pushed past the end
    coming back at the start (``x`` flattened when ``axis`` is None).

    >>> import numtile as nt
    >>> nt.roll(nt.arange(5, tile_shape=2), 2).to_numpy().tolist()
    [3, 4, 0, 1, 2]
    """
    if axis is None:
        if not isinstance(shift, int) and not hasattr(shift, "__index__"):
            raise ValueError(f"shift must be an int when axis is None, got {shift!r}")
        flat = roll(reshape(x, (-1,)), shift, axis=0)
        return reshape(flat, x.shape) if x.ndim != 1 else flat
    axes = normalize_axes(axis, x.ndim, unique=False)
    shifts = (shift,) if isinstance(shift, int) or hasattr(shift, "__index__") else tuple(shift)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(shifts) != len(axes):
        raise ValueError(f"shift {shift!r} and axis {axis!r} must have the same length")
    total = [0] * x.ndim
    for a, s in zip(axes, shifts):
        total[a] += operator.index(s)  # NumPy sums the shifts of a repeated axis
    segments = []
    for k, n in enumerate(x.shape):
        s = total[k] % n if n else 0
        if s == 0:
            segments.append([((0, n), 0)])
        else:  # out [0, s) reads the last s elements, out [s, n) the first n - s
            segments.append([((0, s), n - s), ((s, n), -s)])
    out = TileTensor(x.layout, x.dtype)
    parts = []
    for combination in itertools.product(*segments):
        axis_map = [(k, start, 1) for k, (_, start) in enumerate(combination)]
        parts.append((x, axis_map, tuple(region for region, _ in combination)))
    return copy_parts(out, parts)


@dispatched
def moveaxis(x: TileTensor, source, destination, /) -> TileTensor:
    """``x`` with axes ``source`` moved to positions ``destination`` (ints or tuples), the
    other axes keeping their order.

    >>> import numtile as nt
    >>> nt.moveaxis(nt.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    sources = normalize_axes(source, x.ndim)
    destinations = normalize_axes(destination, x.ndim)
    if len(sources) != len(destinations):
        raise ValueError(
            "`source` and `destination` arguments must have the same number of elements, "
            f"got {source!r} and {destination!r}"
        )
    order = [a for a in range(x.ndim) if a not in sources]
    for d, s in sorted(zip(destinations, sources)):
        order.insert(d, s)
    return permute_dims(x, tuple(order))


@dispatched
def broadcast_arrays(*arrays: TileTensor) -> list[TileTensor]:
    """The ``arrays`` broadcast against each other to one shape.

    >>> import numtile as nt
    >>> [t.shape for t in nt.broadcast_arrays(nt.ones((2, 1)), nt.ones(3))]
    [(2, 3), (2, 3)]
    """
    for i, a in enumerate(arrays):
        if not isinstance(a, TileTensor):
            raise TypeError(f"broadcast_arrays: the argument at index {i} is a {type(a).__name__}")
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return [broadcast_to(a, shape) for a in arrays]
