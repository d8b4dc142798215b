"""Joining and splitting tensors (array API): concat, stack, unstack, tile, repeat.

Each is a set of tile copies (``copying.copy_parts``): inputs of any tilings, also
mismatched ones, go straight into the output's tiles without a retile first.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from numtile.tiletensor import dispatch
from numtile.tiletensor.copying import copy_parts, copy_regions, normalize_axis, region_along
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import result_type
from numtile.tiletensor.layout import Layout, current_config
from numtile.tiletensor.manipulation import broadcast_to, expand_dims, reshape
from numtile.tiletensor.tensor import TileTensor


def _tensors(arrays, name: str) -> list[TileTensor]:
    """``arrays`` as a list of TileTensors (a ``TypeError`` names anything else)."""
    if isinstance(arrays, TileTensor) or not isinstance(arrays, Sequence):
        raise TypeError(f"{name} needs a sequence of TileTensors, got {type(arrays).__name__}")
    tensors = list(arrays)
    if not tensors:
        raise ValueError(f"{name} needs at least one array to join")
    for i, value in enumerate(tensors):
        if not isinstance(value, TileTensor):
            raise TypeError(f"{name}: the array at index {i} is a {type(value).__name__}")
    return tensors


def _clip_tiles(tile_shape, shape) -> tuple[int, ...]:
    return tuple(max(1, min(t, s)) for t, s in zip(tile_shape, shape))


@dispatched
def concat(arrays, /, *, axis: int | None = 0) -> TileTensor:
    """Join ``arrays`` along ``axis`` (flattened first when ``axis`` is None), promoted to
    their result type; the output takes the first array's tiling.

    >>> import numtile as nt
    >>> a, b = nt.arange(3, tile_shape=2), nt.arange(4, tile_shape=3)
    >>> nt.concat([a, b]).to_numpy().tolist()
    [0, 1, 2, 0, 1, 2, 3]
    """
    tensors = _tensors(arrays, "concat")
    if axis is None:
        tensors = [reshape(t, (-1,)) for t in tensors]
        axis = 0
    first = tensors[0]
    if first.ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis(axis, first.ndim)
    for i, t in enumerate(tensors[1:], 1):
        if t.ndim != first.ndim:
            raise ValueError(
                f"all the input arrays must have same number of dimensions, but the array at "
                f"index 0 has {first.ndim} dimension(s) and the array at index {i} has "
                f"{t.ndim} dimension(s)"
            )
        for k in range(first.ndim):
            if k != axis and t.shape[k] != first.shape[k]:
                raise ValueError(
                    f"all the input array dimensions except for the concatenation axis must "
                    f"match exactly, but along dimension {k}, the array at index 0 has size "
                    f"{first.shape[k]} and the array at index {i} has size {t.shape[k]}"
                )
    dtype = result_type(*tensors)
    tensors = [t if t.dtype == dtype else dispatch.call("astype", t, dtype) for t in tensors]
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    out = TileTensor(Layout(tuple(shape), _clip_tiles(first.tile_shape, shape)), dtype)
    parts, offset = [], 0
    for t in tensors:
        length = t.shape[axis]
        axis_map = [(k, -offset if k == axis else 0, 1) for k in range(t.ndim)]
        region = region_along(shape, axis, offset, offset + length)
        parts.append((t, axis_map, region))
        offset += length
    return copy_parts(out, parts)


@dispatched
def stack(arrays, /, *, axis: int = 0) -> TileTensor:
    """Join ``arrays`` (all of one shape) along a new axis ``axis``.

    >>> import numtile as nt
    >>> nt.stack([nt.zeros(2), nt.ones(2)], axis=1).to_numpy().tolist()
    [[0.0, 1.0], [0.0, 1.0]]
    """
    tensors = _tensors(arrays, "stack")
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise ValueError(
                f"all input arrays must have the same shape, got {tensors[0].shape} and {t.shape}"
            )
    axis = normalize_axis(axis, tensors[0].ndim + 1)
    if any(t.requires_grad for t in tensors):  # through concat's and expand_dims' rules
        return concat([expand_dims(t, axis) for t in tensors], axis=axis)
    # each input copied once, straight into its slot of the new axis (tiles of 1 along it)
    dtype = result_type(*tensors)
    tensors = [t if t.dtype == dtype else dispatch.call("astype", t, dtype) for t in tensors]
    first = tensors[0]
    shape = (*first.shape[:axis], len(tensors), *first.shape[axis:])
    tiles = (*first.tile_shape[:axis], 1, *first.tile_shape[axis:])
    out = TileTensor(Layout(shape, _clip_tiles(tiles, shape)), dtype)
    axis_map = [(k + (k >= axis), 0, 1) for k in range(first.ndim)]
    parts = [(t, axis_map, region_along(shape, axis, i, i + 1)) for i, t in enumerate(tensors)]
    return copy_parts(out, parts)


def select(x: TileTensor, axis: int, index: int) -> TileTensor:
    """``x`` at position ``index`` of ``axis`` (that axis removed), copied into x's tiling."""
    shape = x.shape[:axis] + x.shape[axis + 1 :]
    tiles = x.tile_shape[:axis] + x.tile_shape[axis + 1 :]
    out = TileTensor(Layout(shape, tiles), x.dtype)
    axis_map = [index if a == axis else (a - (a > axis), 0, 1) for a in range(x.ndim)]
    return copy_regions(x, out, axis_map)


@dispatched
def unstack(x: TileTensor, /, *, axis: int = 0) -> tuple[TileTensor, ...]:
    """The tensors along ``axis``, one per position, as a tuple (the inverse of ``stack``).

    >>> import numtile as nt
    >>> [t.to_numpy().tolist() for t in nt.unstack(nt.arange(4).reshape((2, 2)), axis=1)]
    [[0, 2], [1, 3]]
    """
    if not isinstance(x, TileTensor):
        raise TypeError(f"unstack needs a TileTensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("unstack needs a tensor of at least one dimension, got a 0-d one")
    axis = normalize_axis(axis, x.ndim)
    return tuple(select(x, axis, i) for i in range(x.shape[axis]))


def _interleaved_tiles(x: TileTensor, counts, repeat_first: bool) -> tuple[int, ...]:
    """Tiles of ``x`` broadcast to pairs of axes (count, n) or (n, count) that merge back
    tile by tile: the count axis is cut only where x's axis is whole."""
    edge = current_config().tile
    tiles = []
    for n, t, r in zip(x.shape, x.tile_shape, counts):
        if repeat_first:  # (r, n): merging needs tiles of 1 along r unless n is whole
            tr = max(1, min(r, edge // max(n, 1))) if t >= n else 1
            tiles += [tr, t]
        else:  # (n, r): r stays whole, so any tile of n merges
            tiles += [t, max(1, r)]
    return tuple(tiles)


@dispatched
def tile(x: TileTensor, repetitions, /) -> TileTensor:
    """``x`` repeated ``repetitions[k]`` times along each axis k (leading 1s added to the
    shorter of ``repetitions`` and ``x.shape``), like ``numpy.tile``.

    >>> import numtile as nt
    >>> nt.tile(nt.arange(3), (2,)).to_numpy().tolist()
    [0, 1, 2, 0, 1, 2]
    """
    reps = tuple(operator.index(r) for r in repetitions)
    if any(r < 0 for r in reps):
        raise ValueError(f"repetitions must not be negative, got {reps}")
    ndim = max(len(reps), x.ndim)
    reps = (1,) * (ndim - len(reps)) + reps
    if x.ndim < ndim:
        x = reshape(x, (1,) * (ndim - x.ndim) + x.shape)
    if all(r == 1 for r in reps):
        return x
    shape = tuple(r * n for r, n in zip(reps, x.shape))
    if math.prod(shape) == 0:
        return TileTensor(Layout(shape), x.dtype)
    pairs = tuple(v for r, n in zip(reps, x.shape) for v in (r, n))  # (r0, n0, r1, n1, ...)
    spread = reshape(x, tuple(v for n in x.shape for v in (1, n)))  # (1, n0, 1, n1, ...)
    tiles = _interleaved_tiles(x, reps, repeat_first=True)
    return reshape(broadcast_to(spread, pairs, tiles), shape)


@dispatched
def repeat(x: TileTensor, repeats, /, *, axis: int | None = None) -> TileTensor:
    """Each element of ``x`` repeated along ``axis`` (``x`` flattened first when None):
    ``repeats`` times, or ``repeats[i]`` times for element i when ``repeats`` is a 1-d
    integer array (a TileTensor waits for its values: the output's shape depends on them).

    >>> import numtile as nt
    >>> nt.repeat(nt.arange(3), 2).to_numpy().tolist()
    [0, 0, 1, 1, 2, 2]
    >>> nt.repeat(nt.arange(3), nt.asarray([1, 0, 2])).to_numpy().tolist()
    [0, 2, 2]
    """
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    axis = normalize_axis(axis, x.ndim)
    n = x.shape[axis]
    counts = _repeat_counts(repeats, n)
    if isinstance(counts, int):
        shape = x.shape[:axis] + (n * counts,) + x.shape[axis + 1 :]
        if counts == 1:
            return x
        if math.prod(shape) == 0:
            return TileTensor(Layout(shape), x.dtype)
        pairs = x.shape[: axis + 1] + (counts,) + x.shape[axis + 1 :]  # (..., n, r, ...)
        spread = reshape(x, x.shape[: axis + 1] + (1,) + x.shape[axis + 1 :])
        tiles = list(x.tile_shape)
        tiles.insert(axis + 1, counts)
        return reshape(broadcast_to(spread, pairs, tuple(tiles)), shape)
    shape = x.shape[:axis] + (int(counts.sum()),) + x.shape[axis + 1 :]
    out = TileTensor(Layout(shape, _clip_tiles(x.tile_shape, shape)), x.dtype)
    parts, offset = [], 0
    for i, c in enumerate(counts.tolist()):
        if c:
            # every output position of this part reads source position i (step 0)
            axis_map = [(k, i if k == axis else 0, 0 if k == axis else 1) for k in range(x.ndim)]
            region = region_along(shape, axis, offset, offset + c)
            parts.append((x, axis_map, region))
            offset += c
    return copy_parts(out, parts)


def _repeat_counts(repeats, n: int) -> int | np.ndarray:
    """``repeats`` as one int, or as n non-negative counts (an array of length 1 is one)."""
    if isinstance(repeats, TileTensor):
        if repeats.dtype.kind not in "iu":
            raise TypeError(f"repeats must be integers, got a {repeats.dtype.name} tensor")
        repeats = repeats.to_numpy()
    if isinstance(repeats, (int, np.integer)):
        counts = np.array([operator.index(repeats)])
    else:
        counts = np.asarray(repeats)
        if counts.dtype.kind not in "iu" and counts.size:
            raise TypeError(f"repeats must be an int or integers, got {repeats!r}")
        if counts.ndim != 1:
            raise ValueError(f"repeats must be an int or a 1-d integer array, got {repeats!r}")
        counts = counts.astype(np.int64)
    if (counts < 0).any():
        raise ValueError(f"repeats must not be negative, got {counts.tolist()}")
    if counts.size == 1:
        return int(counts[0])
    if counts.size != n:
        raise ValueError(
            f"operands could not be broadcast together with shape ({n},) (repeats has "
            f"{counts.size} values for an axis of length {n})"
        )
    return counts
