"""Sorting: ``sort`` and ``argsort`` as a parallel tiled merge sort.

Along the sorted axis (moved last when it is not), each group of consecutive tiles is
sorted as one run (one task per group; as many groups as keep every CPU worker busy, one
tile per group at the least); then sorted runs are merged pairwise, one task per pair, until
two runs are left; the last merge runs as one task per output tile, each
finding where its slice of the merged order starts (a binary search, the "merge path") and
merging only that slice, so the widest level is as parallel as the first. Merges are stable
(ties: the earlier run first) and NaNs sort last (first when ``descending``), as NumPy and the
array API order them; on a CPU, values alone (no indices) of 32 and 64 bits merge compared as
numbers (``ops_cpu.merge_values``), other merges by order-preserving integer keys.
``argsort`` of a long 1-D tensor on 2 or more CPU workers, and ``sort`` of one on 4 or more,
run a value-split (sample) sort instead (``sorting_split.py``): no merge pass.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from numtile.runtime import Access, DataHandle, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.copying import normalize_axis
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import float32, int64, is_narrow_floating
from numtile.tiletensor.elementwise_core import astype
from numtile.tiletensor.manipulation import permute_dims
from numtile.tiletensor.sorting_split import split_sort
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


def _groups(tiles: int, rows: int, workers: int) -> list[range]:
    """Split a row of ``tiles`` tiles into consecutive groups sorted as one run each: as few
    as keep every worker busy (rows of tiles are sorted in parallel already)."""
    count = max(1, min(tiles, -(-workers // max(rows, 1))))
    bounds = [tiles * g // count for g in range(count + 1)]
    return [range(bounds[g], bounds[g + 1]) for g in range(count)]


def _sort_last_axis(x: TileTensor, descending: bool, with_indices: bool):
    """(values, indices or None) of ``x`` sorted along its last axis, tiled like ``x``."""
    runtime = get_runtime()
    layout = x.layout
    values_out = TileTensor(layout, x.dtype)
    indices_out = TileTensor(layout, int64) if with_indices else None
    grid = layout.grid
    starts = layout.starts[-1]
    leads = list(itertools.product(*(range(g) for g in grid[:-1])))
    for lead_index in leads:
        tiles = [lead_index + (k,) for k in range(grid[-1])]
        lead = layout.tile_shape_at(tiles[0])[:-1]
        groups = _groups(len(tiles), len(leads), runtime.config.ncpu)
        runs = []
        for group in groups:
            length = starts[group.stop] - starts[group.start]
            if len(tiles) == 1:
                values, indices = values_out.tile(tiles[0]), None
                indices = indices_out.tile(tiles[0]) if with_indices else None
            else:
                values = DataHandle((*lead, length), x.dtype)
                indices = DataHandle((*lead, length), int64) if with_indices else None
            accesses = [(x.tile(tiles[k]), R) for k in group] + [(values, W)]
            accesses += [(indices, W)] if with_indices else []
            args = (len(group), starts[group.start], descending, with_indices)
            runtime.submit(codelets.sorting.sort_group, accesses, args)
            runs.append(_Run(values, indices, length))
        if len(tiles) == 1:
            continue
        while len(runs) > 2:
            merged = [
                _merge_pair(runtime, a, b, lead, x.dtype, descending, with_indices)
                for a, b in zip(runs[0::2], runs[1::2])
            ]
            runs = merged + runs[len(merged) * 2 :]
        if len(runs) == 1:  # one run: cut it into the output tiles
            (run,) = runs
            for k, index in enumerate(tiles):
                _copy_columns(runtime, run.values, values_out.tile(index), starts[k])
                if with_indices:
                    _copy_columns(runtime, run.indices, indices_out.tile(index), starts[k])
            continue
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


def _copy_columns(runtime, run: DataHandle, tile: DataHandle, first: int) -> None:
    """Copy columns [first, first + tile width) of the rows of ``run`` into ``tile``."""
    rows, width, total = math.prod(tile.shape[:-1]), tile.shape[-1], run.shape[-1]
    args = (
        first,
        np.array([total, 1], np.int64),
        0,
        np.array([width, 1], np.int64),
        np.array([rows, width], np.int64),
    )
    runtime.submit(codelets.copy.copy_strided, [(run, R), (tile, W)], args)


def sorted_with_indices(
    x: TileTensor, axis: int = -1, descending: bool = False, indices=True, values=True
):
    """(values, indices) of ``x`` stably sorted along ``axis`` (indices None unless asked;
    values may be None when not asked)."""
    if is_narrow_floating(x.dtype) and not indices:
        # values alone: float32 copies sorted by NumPy's SIMD sort take a fifth of the time of
        # the radix sort of 16-bit keys here; with indices, the keys are the tiles' own bits
        values, _ = sorted_with_indices(astype(x, float32), axis, descending, False)
        return astype(values, x.dtype), None
    axis = normalize_axis(axis, x.ndim)
    last = x.ndim - 1
    if axis != last:
        order = [a for a in range(x.ndim) if a != axis] + [axis]
        back = tuple(int(i) for i in np.argsort(order))
        ordered, positions = sorted_with_indices(permute_dims(x, order), -1, descending, indices)
        ordered = permute_dims(ordered, back)
        return ordered, (permute_dims(positions, back) if indices else None)
    if x.size == 0:
        return TileTensor(x.layout, x.dtype), (TileTensor(x.layout, int64) if indices else None)
    split = split_sort(x, bool(descending), values, indices)
    if split is not None:
        return split
    return _sort_last_axis(x, bool(descending), indices)


@dispatched
def sort(
    x: TileTensor, /, *, axis: int = -1, descending: bool = False, stable: bool = True
) -> TileTensor:
    """``x`` sorted along ``axis`` (always stable; NaNs last, first when ``descending``).

    A parallel tiled merge sort: one task sorts each group of tiles (NumPy's SIMD sort on a
    CPU), merges of sorted runs are tasks. A 1-D tensor of at least ``sorting_split.MIN_SIZE``
    elements on 4 or more CPU workers is sorted by value ranges instead (a sample sort: waits
    for ``x`` and for one count per tile and bucket), unless a sample shows many equal values.

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

    Tiled as ``sort`` is: a merge sort, or for a long 1-D tensor on 2 or more CPU workers a
    sample sort (waits for ``x`` and for one count per tile and bucket).

    >>> import numtile as nt
    >>> nt.argsort(nt.from_numpy([2, 1, 2, 0], tile_shape=3)).to_numpy().tolist()
    [3, 1, 0, 2]
    """
    check_sortable(x, "argsort")
    return sorted_with_indices(x, axis, descending, indices=True, values=False)[1]
