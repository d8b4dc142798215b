"""Sorting: ``sort`` and ``argsort`` as a parallel tiled merge sort.

Along the sorted axis (moved last when it is not), each tile is sorted on its own (one task
per tile: a stable radix sort of every row); then sorted runs are merged pairwise, one task
per pair, until two runs are left; the last merge runs as one task per output tile, each
finding where its slice of the merged order starts (a binary search, the "merge path") and
merging only that slice, so the widest level is as parallel as the first. Merges are stable
(ties: the earlier run first) and NaNs sort last (first when ``descending``), as NumPy and the
array API order them.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np

from numtile.runtime import Access, DataHandle, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import int64
from numtile.tiletensor.manipulation import permute_dims
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


def check_sortable(x, name: str) -> None:
    """Raise unless ``x`` is a TileTensor of a real dtype with at least one axis."""
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} expects a TileTensor, got {type(x).__name__}")
    if x.dtype.kind == "c":
        raise TypeError(f"{name} is defined for real dtypes, not {x.dtype.name}")
    if x.ndim == 0:
        raise ValueError(f"{name} needs a tensor with at least one axis, got a 0-d tensor")


def _axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for a tensor with {ndim} axes")
    return axis % ndim


class _Run:
    """A sorted run: values (and indices) of a block of whole rows, one handle each."""

    __slots__ = ("values", "indices", "length")

    def __init__(self, values, indices, length) -> None:
        self.values, self.indices, self.length = values, indices, length


def _merge_pair(runtime, a: _Run, b: _Run, lead, dtype, descending, with_indices) -> _Run:
    """One task merging runs ``a`` and ``b`` into a new run."""
    length = a.length + b.length
    values = DataHandle((*lead, length), dtype)
    if with_indices:
        indices = DataHandle((*lead, length), int64)
        accesses = [(a.values, R), (a.indices, R), (b.values, R), (b.indices, R)]
        accesses += [(values, W), (indices, W)]
        runtime.submit(codelets.sorting.merge_runs, accesses, (0, descending))
        return _Run(values, indices, length)
    accesses = [(a.values, R), (b.values, R), (values, W)]
    runtime.submit(codelets.sorting.merge_values, accesses, (0, descending))
    return _Run(values, None, length)


def _sort_last_axis(x: TileTensor, descending: bool, with_indices: bool):
    """(values, indices or None) of ``x`` sorted along its last axis, tiled like ``x``."""
    runtime = get_runtime()
    layout = x.layout
    values_out = TileTensor(layout, x.dtype)
    indices_out = TileTensor(layout, int64) if with_indices else None
    grid = layout.grid
    starts = layout.starts[-1]
    for lead_index in itertools.product(*(range(g) for g in grid[:-1])):
        tiles = [lead_index + (k,) for k in range(grid[-1])]
        lead = layout.tile_shape_at(tiles[0])[:-1]
        final = len(tiles) == 1
        runs = []
        for k, index in enumerate(tiles):
            src = x.tile(index)
            length = src.shape[-1]
            values = values_out.tile(index) if final else DataHandle(src.shape, x.dtype)
            if with_indices:
                indices = indices_out.tile(index) if final else DataHandle(src.shape, int64)
                runtime.submit(
                    codelets.sorting.sort_runs,
                    [(src, R), (values, W), (indices, W)],
                    (starts[k], descending),
                )
            else:
                indices = None
                runtime.submit(codelets.sorting.sort_values, [(src, R), (values, W)], (descending,))
            runs.append(_Run(values, indices, length))
        if final:
            continue
        while len(runs) > 2:
            merged = [
                _merge_pair(runtime, a, b, lead, x.dtype, descending, with_indices)
                for a, b in zip(runs[0::2], runs[1::2])
            ]
            runs = merged + runs[len(merged) * 2 :]
        a, b = runs
        for k, index in enumerate(tiles):  # the last merge: one task per output tile
            if with_indices:
                accesses = [(a.values, R), (a.indices, R), (b.values, R), (b.indices, R)]
                accesses += [(values_out.tile(index), W), (indices_out.tile(index), W)]
                runtime.submit(codelets.sorting.merge_runs, accesses, (starts[k], descending))
            else:
                accesses = [(a.values, R), (b.values, R), (values_out.tile(index), W)]
                runtime.submit(codelets.sorting.merge_values, accesses, (starts[k], descending))
    return values_out, indices_out


def sorted_with_indices(x: TileTensor, axis: int = -1, descending: bool = False, indices=True):
    """(values, indices) of ``x`` stably sorted along ``axis`` (indices None unless asked)."""
    axis = _axis(axis, x.ndim)
    last = x.ndim - 1
    if axis != last:
        order = [a for a in range(x.ndim) if a != axis] + [axis]
        back = tuple(int(i) for i in np.argsort(order))
        values, positions = sorted_with_indices(permute_dims(x, order), -1, descending, indices)
        values = permute_dims(values, back)
        return values, (permute_dims(positions, back) if indices else None)
    if x.size == 0:
        return TileTensor(x.layout, x.dtype), (TileTensor(x.layout, int64) if indices else None)
    return _sort_last_axis(x, bool(descending), indices)


@dispatched
def sort(
    x: TileTensor, /, *, axis: int = -1, descending: bool = False, stable: bool = True
) -> TileTensor:
    """``x`` sorted along ``axis`` (always stable; NaNs last, first when ``descending``).

    A parallel tiled merge sort: one task sorts each tile, merges of sorted runs are tasks.

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.array([3.0, np.nan, -1.0, 2.0, 0.5]), tile_shape=2)
    >>> nt.sort(x).to_numpy().tolist()[:4], nt.sort(x, descending=True).to_numpy().tolist()[1:]
    ([-1.0, 0.5, 2.0, 3.0], [3.0, 2.0, 0.5, -1.0])
    """
    check_sortable(x, "sort")
    return sorted_with_indices(x, axis, descending, indices=False)[0]


@dispatched
def argsort(
    x: TileTensor, /, *, axis: int = -1, descending: bool = False, stable: bool = True
) -> TileTensor:
    """The int64 indices that sort ``x`` along ``axis`` (always stable: equal elements keep
    their order, also when ``descending``).

    >>> import numtile as nt
    >>> nt.argsort(nt.from_numpy([2, 1, 2, 0], tile_shape=3)).to_numpy().tolist()
    [3, 1, 0, 2]
    """
    check_sortable(x, "argsort")
    return sorted_with_indices(x, axis, descending, indices=True)[1]
