"""Set functions: ``unique_all``, ``unique_counts``, ``unique_inverse``, ``unique_values``.

Through the tiled sort: the flattened tensor is sorted (with its sorting indices when the
result needs them), a task per tile flags where a group of equal values starts (each NaN is
a group of its own, as the array API says), and the flagged values, positions and indices
are compacted. A complex tensor is sorted in NumPy's complex order by stable sorts of real keys
(``sets_complex.py``). ``unique_values`` and ``unique_counts`` first count integers of a span
at most a quarter of a tile (a count per value in each tile, after a wait for the minimum and
maximum), then try each tile on its own (a sort and group starts per tile): when the tiles
hold few distinct values, their groups are combined on the host; both skip the sort of the
whole tensor. The number of unique
values depends on the data: every function waits for one count per tile.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from numtile.runtime import Access, DataHandle, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import from_numpy
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import bool_, float32, int64, is_narrow_floating
from numtile.tiletensor.elementwise_core import astype
from numtile.tiletensor.indexing import (
    flagged_positions,
    flagged_values,
    flatten,
    put_positions,
    tile_counts,
)
from numtile.tiletensor.manipulation import reshape
from numtile.tiletensor.reduction import max as maximum_of
from numtile.tiletensor.reduction import min as minimum_of
from numtile.tiletensor.sets_complex import sorted_complex
from numtile.tiletensor.sorting import check_sortable, sorted_with_indices
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W
# distinct values per tile, as a share of the elements, up to which they are combined on the
# host rather than through a sort of the whole tensor
_FEW = 1 / 16


class UniqueAllResult(NamedTuple):
    values: TileTensor
    indices: TileTensor
    inverse_indices: TileTensor
    counts: TileTensor


class UniqueCountsResult(NamedTuple):
    values: TileTensor
    counts: TileTensor


class UniqueInverseResult(NamedTuple):
    values: TileTensor
    inverse_indices: TileTensor


def _unique(x: TileTensor, name: str, counts=False, indices=False, inverse=False):
    """(values, first indices, inverse indices, counts), the unasked ones None."""
    if not (isinstance(x, TileTensor) and x.dtype.kind == "c"):  # complex: sets_complex
        check_sortable(x, name) if x.ndim else check_sortable(reshape(x, (1,)), name)
    if is_narrow_floating(x.dtype):  # as float32 (exact both ways), values back in bfloat16
        wide = astype(x, float32)
        unique, first, inverted, counted = _unique(wide, name, counts, indices, inverse)
        return astype(unique, x.dtype), first, inverted, counted
    flat = flatten(x)
    if flat.size and not (indices or inverse) and flat.dtype.kind != "c":
        by_tile = _unique_by_histogram(flat) or _unique_by_tile(flat)
        if by_tile is not None:
            unique, counted = by_tile
            return unique, None, None, counted if counts else None
    if flat.dtype.kind == "c":  # NumPy's complex order, from stable sorts of real keys
        values, order = sorted_complex(flat)
    else:
        values, order = sorted_with_indices(flat, 0, False, indices=indices or inverse)
    runtime = get_runtime()
    flags = TileTensor(values.layout, bool_)
    for i, (tile, out) in enumerate(zip(values.handles, flags.handles)):
        previous = values.handles[i - 1] if i else tile
        runtime.submit(
            codelets.indexing.group_starts, [(tile, R), (previous, R), (out, W)], (i == 0,)
        )
    per_tile = tile_counts(flags)
    total = int(per_tile.sum())

    unique = flagged_values(values, flags, per_tile)
    first = flagged_values(order, flags, per_tile) if indices else None
    counted = None
    if counts:
        begins = flagged_positions(flags, per_tile)
        ends = TileTensor(begins.layout, int64)
        if total:
            ends[:-1] = begins[1:]
            ends[-1] = flat.size
        counted = ends - begins
    inverted = None
    if inverse:
        groups = TileTensor(values.layout, int64)
        offsets = np.concatenate([[0], np.cumsum(per_tile)])
        for i, (tile, out) in enumerate(zip(flags.handles, groups.handles)):
            runtime.submit(
                codelets.indexing.running_count, [(tile, R), (out, W)], (int(offsets[i]),)
            )
        inverted = TileTensor(flat.layout, int64)
        if flat.size:  # the inverse permutation of the sort: waits for its indices
            put_positions(inverted, order.to_numpy(), 0, groups)
        inverted = reshape(inverted, x.shape)
    return unique, first, inverted, counted


def _unique_by_histogram(flat: TileTensor):
    """(values, counts) of 1-D integer ``flat`` whose values span at most a quarter of a
    tile: a count of each value of the span in every tile (a task per tile), summed on the
    host; no sort. Waits for the minimum and maximum first. None for other data."""
    if flat.dtype.kind not in "iu":
        return None
    extremes = minimum_of(flat), maximum_of(flat)  # both submitted, then waited for
    low, high = (int(extreme.to_numpy()) for extreme in extremes)
    span = high - low + 1
    if span > flat.layout.tile_shape[0] // 4:
        return None
    runtime = get_runtime()
    counted = []
    for tile in flat.handles:
        counted.append(DataHandle((span,), int64))
        runtime.submit(codelets.sorting.count_values, [(tile, R), (counted[-1], W)], (low,))
    runtime.wait_handles(counted)
    counts = np.add.reduce([handle.host_array() for handle in counted])
    present = np.flatnonzero(counts)
    # back from offsets, modular in the dtype: exact, as the values fit it
    values = present.astype(flat.dtype) + np.array(low).astype(flat.dtype)
    return from_numpy(values), from_numpy(counts[present])


def _unique_by_tile(flat: TileTensor):
    """(values, counts) of 1-D ``flat`` from each tile's own groups of equal values (a sort, or
    on a CPU a count of integers of a small range, and group starts per tile, all at once),
    combined on the host when they are few (at most ``_FEW`` of the elements, as for data
    drawn from a small set): no merge of the tiles' sorted runs. None when they are many:
    the caller sorts the whole tensor instead (the per-tile work is then lost, waited for
    with one count per tile)."""
    runtime = get_runtime()
    sorted_tiles = TileTensor(flat.layout, flat.dtype)
    flags = TileTensor(flat.layout, bool_)
    for src, tile, flag in zip(flat.handles, sorted_tiles.handles, flags.handles):
        runtime.submit(codelets.sorting.tile_groups, [(src, R), (tile, W), (flag, W)])
    per_tile = tile_counts(flags)
    total = int(per_tile.sum())
    if total > _FEW * flat.size:
        return None
    values = flagged_values(sorted_tiles, flags, per_tile)
    # group starts in flat: a tile's first element starts a group, so the groups' sizes are
    # the differences of the starts (the last one's end: the size of flat)
    begins = flagged_positions(flags, per_tile)
    groups = values.to_numpy()
    sizes = np.diff(np.append(begins.to_numpy(), flat.size))
    order = np.argsort(groups, kind="stable")  # NaNs last, each a group of its own
    groups, sizes = groups[order], sizes[order]
    first = np.flatnonzero(np.append(True, groups[1:] != groups[:-1]))
    counts = np.add.reduceat(sizes, first) if first.size else sizes
    return from_numpy(groups[first]), from_numpy(counts.astype(np.int64))


@dispatched
def unique_values(x: TileTensor, /) -> TileTensor:
    """The sorted distinct values of ``x`` (flattened; every NaN is distinct).

    Waits for one count per tile, for integers also for their minimum and maximum (the
    output's size depends on the data).

    >>> import numtile as nt
    >>> nt.unique_values(nt.from_numpy([3, 1, 3, 2, 1], tile_shape=2)).to_numpy().tolist()
    [1, 2, 3]
    """
    return _unique(x, "unique_values")[0]


@dispatched
def unique_counts(x: TileTensor, /) -> UniqueCountsResult:
    """The distinct values of ``x`` and how often each occurs (waits for one count per tile;
    for integers also for their minimum and maximum).

    >>> import numtile as nt
    >>> result = nt.unique_counts(nt.from_numpy([3, 1, 3, 2, 3], tile_shape=2))
    >>> result.values.to_numpy().tolist(), result.counts.to_numpy().tolist()
    ([1, 2, 3], [1, 1, 3])
    """
    values, _, _, counts = _unique(x, "unique_counts", counts=True)
    return UniqueCountsResult(values, counts)


@dispatched
def unique_inverse(x: TileTensor, /) -> UniqueInverseResult:
    """The distinct values of ``x`` and, in x's shape, the index of each element's value
    among them (waits for one count per tile, and for the sorting indices).

    >>> import numtile as nt
    >>> nt.unique_inverse(nt.from_numpy([3, 1, 3])).inverse_indices.to_numpy().tolist()
    [1, 0, 1]
    """
    values, _, inverse, _ = _unique(x, "unique_inverse", inverse=True)
    return UniqueInverseResult(values, inverse)


@dispatched
def unique_all(x: TileTensor, /) -> UniqueAllResult:
    """The distinct values, the index of each one's first occurrence in the flattened ``x``,
    the inverse indices (in x's shape) and the counts.

    >>> import numtile as nt
    >>> result = nt.unique_all(nt.from_numpy([5, 4, 5, 4, 4], tile_shape=2))
    >>> result.indices.to_numpy().tolist(), result.counts.to_numpy().tolist()
    ([1, 0], [3, 2])
    """
    values, first, inverse, counts = _unique(
        x, "unique_all", counts=True, indices=True, inverse=True
    )
    return UniqueAllResult(values, first, inverse, counts)
